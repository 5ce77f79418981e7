"""Inner loops copied per side of their outer-index selects (CppSchedule.unswitch).

Note on why. A select on an index computation the innermost loop does not change (the
side of a cat along an outer dim: a KV-cache update, a write into some rows) is a
loop-invariant bool, and gcc 12 vectorizes no select on one ("relevant stmt not
supported"): such a loop ran scalar, ~30 cycles an element (a cat of three pieces along
dim 0 of a 100x16384 tensor: 16 ms where eager's ops took 7). gcc would copy the loop per
outcome itself (loop unswitching), but runtime/toolchain.py turns that off for good
reasons, and asked back per function it still declined bodies of that size. So the
printer does it: the conditions are computed once per row before the loop, and the loop
is printed once per combination of their values, each copy declaring the conditions as
constants (shadowing the row's values), which gcc folds before it vectorizes. The
schedule admits at most MAX_CONDITIONS conditions (2^n copies).
"""
from __future__ import annotations

from typing import Callable

from brrr_compiler.transforms.hoist import closure
from brrr_compiler.kernel_ir import Kernel, Stmt


def condition_lines(k: Kernel, conds: list[str], before: set[str],
                    line: Callable[[Stmt], str], indent: str) -> tuple[list[str], set[str]]:
    """The statements computing `conds` (those not in `before`, printed already), as lines
    before the inner loop, and the names they define."""
    stmts = [s for s in closure(k.body, conds) if s.out not in before]
    return [indent + line(s) for s in stmts], {s.out for s in stmts}


def copies(conds: list[str], loop_lines: list[str], indent: str) -> list[str]:
    """`loop_lines` once per combination of the conditions' values, chosen at run time."""
    def branch(i: int, fixed: list[str]) -> list[str]:
        pad = indent + "  " * i
        if i == len(conds):
            return [pad + f"const bool {c} = {v};" for c, v in zip(conds, fixed)] + \
                ["  " * i + ln for ln in loop_lines]
        return ([pad + f"if ({conds[i]}) {{"] + branch(i + 1, fixed + ["true"])
                + [pad + "} else {"] + branch(i + 1, fixed + ["false"]) + [pad + "}"])
    return branch(0, [])
