"""Values of a pointwise kernel that depend on its innermost loop variable alone (or on its
rows alone, "Rows" below), computed once per call into small tables before its loops:
which values, and the kernel that reads them from their tables.

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

Rows. A pointwise kernel computes what its inner loop does not change once per row, before
that loop (transforms/hoist.py), in scalar code: where that calls a transcendental
function, each row pays a scalar call, which for a libm function evaluates one lane of its
16-lane kernel. Generated pattern seed 22 at L2 stores softplus(x) of an x broadcast
along 64-element float16 rows: 992 rows, 38 us kernel alone. Such values (`row_tabled`)
are computed for every row in one vectorized loop before the parallel loop, into a table
over the rows, which each row then reads: 8 us.

The C++ schedule takes the decisions (CppSchedule.tables, row_tables), so that what it
records as computed once per row (CppSchedule.per_row) is read off the kernel the
printer prints; codegen/cpp_invariant.py prints the tables.
"""
from __future__ import annotations

import dataclasses
import math

import sympy
import torch

from brrr_compiler import scalar_ops
from brrr_compiler.kernel_ir import STRUCTURAL, Kernel, Stmt
from brrr_compiler.symbolic import static_sizes
from brrr_compiler.transforms.hoist import closure

MAX_INNER = 4096
MAX_ROW_TABLE = 8192    # rows of a row table (on the stack)
MIN_COST = scalar_ops.DIV
_FLOATS = (torch.float32, torch.float64)


def tabled(k: Kernel, every: bool = False, dims: tuple[int, ...] = ()) -> tuple[str, ...]:
    """The values of `k` computed into tables, in body order; () when nothing pays.
    `every`: table every value of the inner loop alone that the rest reads, loads
    included, whatever it costs (a periodic kernel's parameters: transforms/period.py);
    `dims`: the outer dims its periodic loads read too, which the tables then span."""
    sizes = static_sizes(k.ranges[-1:]) if k.loop_vars else None
    if k.is_reduction or len(k.loop_vars) < 2 or sizes is None or not 1 < sizes[0] <= MAX_INNER:
        return ()
    body, only = k.body, inner_only(k, dims)
    return tuple(s.out for s in body if s.out in only and s.op != "const"
                 and _read_outside(s.out, body, only)
                 and (_reads(s.out, body) if every else (s.dtype in _FLOATS and s.op != "load"
                                                         and _cost(s.out, body) >= MIN_COST)))


def row_tabled(k: Kernel, per_row: frozenset[str]) -> tuple[str, ...]:
    """The values computed once per row (`per_row`, transforms/hoist.py) that are computed
    instead in one vectorized loop over the rows before the parallel loop, into a table
    per value (module note, "rows"): those the rest of the loop reads, where what computes
    them calls a transcendental function and the rows fit a table."""
    sizes = static_sizes(k.ranges[:-1]) if len(k.loop_vars) >= 2 else None
    if k.is_reduction or sizes is None or not 2 <= math.prod(sizes) <= MAX_ROW_TABLE:
        return ()
    body = k.body
    frontier = [s.out for s in body if s.out in per_row and s.op != "const"
                and any(s.out in t.args and t.out not in per_row for t in body)]
    return tuple(v for v in frontier if any(
        scalar_ops.row(t.op).cost >= scalar_ops.TRANSCENDENTAL
        for t in closure(body, [v]) if t.op not in STRUCTURAL))


def rows_kernel(k: Kernel) -> Kernel:
    """`k` over its outer dims alone: its rows, the last outer dim innermost."""
    return dataclasses.replace(k, loop_vars=list(k.loop_vars[:-1]), ranges=list(k.ranges[:-1]))


def row_dims(rows: Kernel) -> tuple[int, ...]:
    """The dims a row table spans besides the last outer one (its loop): every other."""
    return tuple(range(len(rows.loop_vars) - 1))


def from_rows(read: Kernel, k: Kernel) -> Kernel:
    """`read` (a rows_kernel of `k`, rewritten) over `k`'s loops again."""
    return dataclasses.replace(read, loop_vars=k.loop_vars, ranges=k.ranges)


def load_row_tables(k: Kernel, names: tuple[str, ...]) -> Kernel:
    """`k` reading each value of `names` from its row table (`tab_<name>`, indexed by the
    row), without the statements that only fed them."""
    if not names:
        return k
    rows = rows_kernel(k)
    return from_rows(load_tables(rows, names, row_dims(rows)), k)


def inner_only(k: Kernel, dims: tuple[int, ...] = ()) -> set[str]:
    """The SSA values that depend on the innermost loop variable alone (loads of inputs at
    indices in it only, constants, and scalar ops and casts of those); with `dims`, also
    the periodic loads (floor or Mod of the inner variable) at those outer dims."""
    inner, outputs = k.loop_vars[-1], {b.name for b in k.outputs}
    spanned = {inner, *(k.loop_vars[d] for d in dims)}
    only: set[str] = set()
    for s in k.body:
        if s.out is None:
            continue
        if s.op == "load":
            index = sympy.sympify(s.index)
            free = index.free_symbols
            ok = s.buffer not in outputs and (free <= {inner} or (
                free <= spanned and inner in free and index.has(sympy.floor, sympy.Mod)))
        elif s.op == "const":
            ok = True
        elif s.op == "cast" or s.op not in STRUCTURAL:
            ok = all(a in only for a in s.args)
        else:
            ok = False
        if ok:
            only.add(s.out)
    return only


def load_tables(k: Kernel, names: tuple[str, ...], dims: tuple[int, ...] = ()) -> Kernel:
    """`k` reading each value of `names` from its table (`tab_<name>`, indexed by the
    innermost loop variable, after the outer `dims` it spans), without the statements
    that only fed them."""
    if not names:
        return k
    only, tabled_ = inner_only(k, dims), set(names)
    at = table_index(k, dims)
    bodies = [[Stmt(s.out, s.dtype, "load", buffer=f"tab_{s.out}", index=at)
               if s.out in tabled_ else s for s in p.body] for p in k.phases]
    while True:
        used = {a for body in bodies for s in body for a in s.args}
        kept = [[s for s in body if s.out not in only or s.out in tabled_ or s.out in used]
                for body in bodies]
        if kept == bodies:
            break
        bodies = kept
    return dataclasses.replace(k, phases=[dataclasses.replace(p, body=body)
                                          for p, body in zip(k.phases, bodies)])


def table_index(k: Kernel, dims: tuple[int, ...]):
    """Where a table holds the value at the current loop indices: [dims...][inner]."""
    sizes = static_sizes([*(k.ranges[d] for d in dims), k.ranges[-1]])
    at, stride = k.loop_vars[-1], sizes[-1]
    for d, n in zip(reversed(dims), reversed(sizes[:-1])):
        at, stride = at + k.loop_vars[d] * stride, stride * n
    return at


def table_entries(k: Kernel, dims: tuple[int, ...]) -> int:
    return math.prod(static_sizes([*(k.ranges[d] for d in dims), k.ranges[-1]]))


def _read_outside(name: str, body: list[Stmt], only: set[str]) -> bool:
    return any(name in s.args and s.out not in only for s in body)


def _reads(name: str, body: list[Stmt]) -> bool:
    """Whether the value is computed from a load (a value of constants alone is not
    tabled: it stays a loop-invariant value, which an unswitched select may test)."""
    return any(s.op == "load" for s in closure(body, [name]))


def _cost(name: str, body: list[Stmt]) -> float:
    return sum(scalar_ops.row(s.op).cost for s in closure(body, [name])
               if s.op not in STRUCTURAL)
