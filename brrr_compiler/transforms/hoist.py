"""Values of a pointwise kernel that are the same all along its inner loop, computed once per
row before it.

Note on why. A value that does not depend on the innermost loop variable (an input
broadcast along the inner dim, an embedding's row index, whatever is computed from those)
is the same for every element of a row. Left in the `omp simd` loop it costs more than
its own work:
- an index's bounds check reports through an atomic store under a branch
  (`brrr_in_bounds`), which keeps gcc from vectorizing the loop at all;
- a bool mask broadcast along the row is a byte load: next to double (or float) values
  gcc 12 sizes the vector by the byte (64 lanes on AVX-512), and a row shorter than
  that stays scalar (a [16, 16, 31, 32] float64 pointwise kernel ran 3x slower than
  eager's loops);
- a transcendental of a broadcast value is evaluated once per element.
Printed once before the loop (loads not written by the kernel, and everything computed
from them, with the constants they need), the loop reads them as loop-invariant scalars.
Only values every piece of a split loop computes move; stores never do. The C++ schedule
records what moves (CppSchedule.per_row) for the cost model, which counts it once per
row; the printer moves the same values (codegen/cpp.py, cpp_replicate.py).
"""
from __future__ import annotations

import sympy

from brrr_compiler.kernel_ir import Kernel, Stmt
from brrr_compiler.transforms.loops import inner_varying, reads_buffers


def hoisted(k: Kernel, pieces: list[Kernel] = ()) -> list[Stmt]:
    """The statements of `k`'s body that do not depend on its innermost loop variable and
    read memory (directly or through their arguments), with the statements they need, in
    body order; those every kernel of `pieces` computes, when given."""
    if not k.loop_vars or k.is_reduction:
        return []
    defs = {s.out: s for s in k.body if s.out is not None}
    everywhere = set(defs).intersection(*({s.out for s in p.body} for p in pieces))
    return _closure(k.body, defs, [n for n in _movable(k, defs) if n in everywhere])


def column_hoisted(k: Kernel, body: list[Stmt], excluded: set[str],
                   tiled: tuple = ()) -> list[Stmt]:
    """The statements of a column kernel's loop phase `body` that do not depend on the
    column (`k`'s innermost kept variable) and read memory, with the statements they
    need: computed once per streamed row before the loop over the tile's columns
    (cpp_outer_reduce.py) rather than once per column. Values in `excluded` (the tile's
    per-column arrays) and folds never move."""
    defs = {s.out: s for s in body if s.out is not None and s.op != "reduce"}
    return _closure(body, defs, _movable(k, defs, excluded, tiled))


def column_row_level(k: Kernel) -> set[str]:
    """A column kernel's values held per column in tile arrays: its folds and what its
    phases outside the walk compute (cpp_outer_reduce.py)."""
    return {s.out for p in k.phases for s in p.body
            if s.out and (not p.loop or s.op == "reduce")}


def column_once(k: Kernel, block_rows: int) -> frozenset[str]:
    """What a column kernel computes once per streamed row of a tile (column_hoisted over
    its walks): the C++ schedule records it, the printer and the estimate read it."""
    tiled = tuple(k.loop_vars[-2:] if block_rows > 1 else k.loop_vars[-1:])
    level = column_row_level(k)
    return frozenset(s.out for p in k.phases if p.loop
                     for s in column_hoisted(k, p.body, level, tiled))


def _movable(k: Kernel, defs: dict, excluded: set[str] = frozenset(),
             tiled: tuple = ()) -> list[str]:
    """The values of `defs` that do not depend on `k`'s innermost loop variable (nor on
    the others of `tiled`: those a column tile spans), read no buffer `k` writes, are
    computed from `defs` only (none of `excluded`), and read memory (directly or through
    their arguments)."""
    body = list(defs.values())
    moving = reads_buffers(body, {b.name for b in k.outputs})
    for var in tiled or k.loop_vars[-1:]:
        moving |= inner_varying(body, str(var))
    memo: dict[str, bool] = {}

    def invariant(name: str) -> bool:
        if name not in memo:
            s = defs.get(name)
            memo[name] = (s is not None and name not in excluded and name not in moving
                          and all(map(invariant, _uses(s, defs))))
        return memo[name]

    reads: dict[str, bool] = {}

    def reads_memory(name: str) -> bool:
        if name not in reads:
            s = defs[name]
            reads[name] = s.op == "load" or any(map(reads_memory, _uses(s, defs)))
        return reads[name]

    return [n for n in defs if invariant(n) and reads_memory(n)]


def closure(body: list[Stmt], roots: list[str]) -> list[Stmt]:
    """`roots` and the statements of `body` they need, in body order."""
    return _closure(body, {s.out: s for s in body if s.out is not None}, roots)


def _closure(body: list[Stmt], defs: dict, roots: list[str]) -> list[Stmt]:
    """`roots` and the statements they need, in body order."""
    needed: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo += [u for u in _uses(defs[name], defs) if u in defs]
    return [s for s in body if s.out in needed]


def _index_names(s: Stmt) -> set[str]:
    return {v.name for v in sympy.sympify(s.index).free_symbols} if s.index is not None else set()


def _uses(s: Stmt, defs: dict) -> list[str]:
    """The SSA values `s` reads: its arguments and the loaded indices in its index."""
    return list(s.args) + [v for v in _index_names(s) if v in defs]
