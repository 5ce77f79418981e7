"""Values of a pointwise kernel that depend on its innermost loop variable alone, computed
once per call into small tables before its loops.

Note on why. On channels-last data the innermost loop of a kernel after a convolution runs
over the channels, so what is computed from per-channel parameters alone, such as an
inference BatchNorm's 1 / sqrt(var + eps), is the same in every row. Left in the loop it
costs a vector square root and a division per element: the most expensive arithmetic of an
otherwise memory-bound kernel. Each such value that is read by the rest of the loop and
whose computation costs at least MIN_COST flop-equivalents (scalar_ops' costs) is computed
in one loop over the inner extent before the parallel loop, into a table of that extent,
and the main loop loads it from there. The same ops run in the same order, so the values
are bit for bit those the loop computed. Only constant inner extents up to MAX_INNER (the
tables live on the stack) and floating values take this.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from brrr_compiler import scalar_ops
from brrr_compiler.codegen.cpp_types import STORAGE
from brrr_compiler.schedule.parallel import static_sizes
from brrr_compiler.kernel_ir import STRUCTURAL, Kernel, Stmt

MAX_INNER = 4096
MIN_COST = scalar_ops.DIV
_FLOATS = (torch.float32, torch.float64)


def invariant_tables(k: Kernel, stmt_line, every: bool = False) -> tuple[list[str], Kernel]:
    """The lines that fill the tables (before the parallel loop) and `k` with the tabled
    values loaded from them; ([], k) when nothing pays. `every`: table every value of the
    inner loop alone that the rest reads, loads included, whatever it costs (a periodic
    kernel's parameters: transforms/period.py)."""
    sizes = static_sizes(k.ranges[-1:]) if k.loop_vars else None
    if k.is_reduction or len(k.loop_vars) < 2 or sizes is None or not 1 < sizes[0] <= MAX_INNER:
        return [], k
    inner, body = k.loop_vars[-1], k.body
    only = _inner_only(k, inner)
    defs = {s.out: s for s in body if s.out is not None}
    tabled = [s for s in body if s.out in only and s.op != "const"
              and _read_outside(s.out, body, only)
              and (_reads(s.out, defs) if every else (s.dtype in _FLOATS and s.op != "load"
                                                      and _cost(s.out, defs) >= MIN_COST))]
    if not tabled:
        return [], k
    needed = _closure([s.out for s in tabled], defs)
    dtypes = {s.out: s.dtype for s in body if s.out}
    # stored and loaded as a buffer would be (bfloat16 as its bits, bool as a byte), so
    # the loop reads each value exactly as it was computed
    lines = [f"  {STORAGE[s.dtype]} tab_{s.out}[{sizes[0]}];" for s in tabled]
    lines += ["  #pragma omp simd", f"  for (int64_t {inner} = 0; {inner} < {sizes[0]}; ++{inner}) {{"]
    lines += ["    " + stmt_line(s, dtypes) for s in body if s.out in needed]
    lines += ["    " + stmt_line(Stmt(None, s.dtype, "store", (s.out,), f"tab_{s.out}", inner),
                                 dtypes) for s in tabled] + ["  }"]
    return lines, _load_tables(k, {s.out for s in tabled}, only, inner)


def _inner_only(k: Kernel, inner) -> set[str]:
    """The SSA values that depend on `inner` alone (loads of inputs at indices in `inner`
    only, constants, and scalar ops and casts of those)."""
    outputs = {b.name for b in k.outputs}
    only: set[str] = set()
    for s in k.body:
        if s.out is None:
            continue
        if s.op == "load":
            free = sympy.sympify(s.index).free_symbols
            ok = s.buffer not in outputs and free <= {inner}
        elif s.op == "const":
            ok = True
        elif s.op == "cast" or s.op not in STRUCTURAL:
            ok = all(a in only for a in s.args)
        else:
            ok = False
        if ok:
            only.add(s.out)
    return only


def _read_outside(name: str, body: list[Stmt], only: set[str]) -> bool:
    return any(name in s.args and s.out not in only for s in body)


def _closure(names: list[str], defs: dict) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += defs[n].args
    return seen


def _reads(name: str, defs: dict) -> bool:
    """Whether the value is computed from a load (a value of constants alone is not
    tabled: it stays a loop-invariant value, which an unswitched select may test)."""
    return any(defs[n].op == "load" for n in _closure([name], defs))


def _cost(name: str, defs: dict) -> float:
    return sum(scalar_ops.row(defs[n].op).cost for n in _closure([name], defs)
               if defs[n].op not in STRUCTURAL)


def _load_tables(k: Kernel, tabled: set[str], only: set[str], inner) -> Kernel:
    """`k` reading each tabled value from its table, without the statements that only
    fed them."""
    bodies = [[Stmt(s.out, s.dtype, "load", buffer=f"tab_{s.out}", index=inner)
               if s.out in tabled else s for s in p.body] for p in k.phases]
    while True:
        used = {a for body in bodies for s in body for a in s.args}
        kept = [[s for s in body if s.out not in only or s.out in tabled or s.out in used]
                for body in bodies]
        if kept == bodies:
            break
        bodies = kept
    return dataclasses.replace(k, phases=[dataclasses.replace(p, body=body)
                                          for p, body in zip(k.phases, bodies)])
