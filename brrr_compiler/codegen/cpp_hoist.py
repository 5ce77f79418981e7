"""Indices that a pointwise kernel loads once per row, hoisted out of its inner loop.

Note on why. An embedding (or a gather whose index is broadcast along the innermost
dim) reads its index once per row of the output: the index load, its bounds check and
everything they need do not depend on the innermost loop variable. Left in the `omp
simd` loop, the check's report (an atomic store under a branch, `brrr_in_bounds`) keeps
gcc from vectorizing the loop at all; printed once before it, the loop is a contiguous
copy of one table row with the kernel's arithmetic. Only the statements such a check
needs move; everything else the loop computes stays where the lowering put it.
"""
from __future__ import annotations

import sympy

from brrr_compiler.kernel_ir import Kernel, Stmt


def hoisted(k: Kernel) -> list[Stmt]:
    """The bounds checks of `k`'s body that do not depend on its innermost loop variable,
    with the statements they need, in body order."""
    if not k.loop_vars or k.is_reduction:
        return []
    defs = {s.out: s for s in k.body if s.out is not None}
    inner = str(k.loop_vars[-1])
    memo: dict[str, bool] = {}

    def invariant(name: str) -> bool:
        if name not in memo:
            s = defs[name]
            memo[name] = inner not in _index_names(s) and all(map(invariant, _uses(s, defs)))
        return memo[name]

    needed: set[str] = set()
    todo = [s.out for s in k.body if s.op == "bounded" and invariant(s.out)]
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo += _uses(defs[name], defs)
    return [s for s in k.body if s.out in needed]


def _index_names(s: Stmt) -> set[str]:
    return {v.name for v in sympy.sympify(s.index).free_symbols} if s.index is not None else set()


def _uses(s: Stmt, defs: dict) -> list[str]:
    """The SSA values `s` reads: its arguments and the loaded indices in its index."""
    return list(s.args) + [v for v in _index_names(s) if v in defs]
