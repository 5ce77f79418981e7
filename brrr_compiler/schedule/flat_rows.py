"""Loop phases of a row kernel that walk its reduced dims as one flat run.

Note on why. The rows printer walks several reduced dims in segments along the innermost
one (cpp_reduce.segments), so a loop phase may read a value of an outer reduced dim once
per segment: group_norm's normalizing phase reads its weight at the channel, r0, of a
row (C/G, H*W). Where that innermost dim is short, every segment is a loop start and a
remainder: group_norm over (2048, 32, 3, 3) walked each row of 36 elements as four
segments of 9 in each of its three phases, 0.61 ms a call against eager's 0.49. A phase
whose every access steps through the reduced dims as one contiguous run (index = rest +
c * flat position, c the same for all of them) has no use for the segments: it walks
[0, n_red) as one flat variable (codegen/cpp_reduce.py), its sums over the same elements
in the same order. The two sum phases of that group_norm so: 0.61 -> 0.39 ms (by hand,
the normalizing phase left in segments). A load that steps otherwise through the reduced
dims (the weight at r0), from an input and at kept dims whose extents times the row's
make at most MAX_TABLE values (the group's channels: 8 x 36), is copied once per call
into a table laid out [those kept dims][flat row position] (codegen/cpp_flat_tables.py),
and the flat walk reads it there. Only where the innermost reduced extent is shorter
than SHORT_INNER; phases the schedule stages, adds in a block of lanes, pairs in one
walk, or that fold with indices or into columns keep the segments.
"""
from __future__ import annotations

import dataclasses
import math

import sympy

from brrr_compiler.kernel_ir import ARG_FOLDS, Kernel, Phase, Stmt
from brrr_compiler.transforms.loops import linear_coeff

SHORT_INNER = 64
MAX_TABLE = 4096      # values per table (the tables live on the stack)
FLAT = sympy.Symbol("rr", integer=True, nonnegative=True)   # segment_head's flat variable


def flat_phases(k: Kernel, skip: set[int], stream: frozenset = frozenset()) -> tuple[int, ...]:
    """The indices of `k`'s loop phases (none of `skip`, none storing a `stream` buffer)
    that walk flat (module note)."""
    rr = [sympy.sympify(r) for r in k.reduction_ranges]
    if len(rr) < 2 or not (rr[-1].is_Integer and int(rr[-1]) < SHORT_INNER):
        return ()
    return tuple(i for i, p in enumerate(k.phases)
                 if p.per_row_loop and i not in skip and _flat(k, p)
                 and not any(s.op == "store" and s.buffer in stream for s in p.body))


def _flat(k: Kernel, phase: Phase) -> bool:
    if any(s.op == "column_reduce" or (s.op == "reduce" and s.value in ARG_FOLDS)
           for s in phase.body):
        return False
    return all(_reduced(k, s) is None or (s.op in ("load", "store", "index") and (
        _step(k, s.index) is not None or _table_dims(k, s) is not None)) for s in phase.body)


def _reduced(k: Kernel, s: Stmt):
    """`s`'s index where it depends on the reduced vars, else None."""
    if s.index is None or not sympy.sympify(s.index).free_symbols & set(k.reduction_vars):
        return None
    return s.index


def _strides(k: Kernel) -> list:
    rr = k.reduction_ranges
    return [sympy.Mul(*rr[j + 1:]) for j in range(len(rr))]


def _step(k: Kernel, index):
    """c where `index` steps c * the flat strides through the reduced dims, c != 0."""
    coeffs = [linear_coeff(index, v, k.all_vars()) for v in k.reduction_vars]
    c = coeffs[-1]
    if c is None or c == 0 or any(x is None for x in coeffs):
        return None
    return c if all(sympy.expand(x - c * st) == 0
                    for x, st in zip(coeffs, _strides(k))) else None


def _table_dims(k: Kernel, s: Stmt) -> list[tuple] | None:
    """[(kept var, extent)] a tabled load depends on (module note), else None."""
    sizes = [sympy.sympify(r) for r in [*k.ranges, *k.reduction_ranges]]
    inputs = {b.name for b in k.inputs}
    free = sympy.sympify(s.index).free_symbols
    if s.op != "load" or s.buffer not in inputs or not free <= set(k.all_vars()) \
            or not all(n.is_Integer for n in sizes):
        return None
    dims = [(v, int(n)) for v, n in zip(k.loop_vars, k.ranges) if v in free]
    size = math.prod(n for _, n in dims) * math.prod(int(n) for n in k.reduction_ranges)
    return dims if size <= MAX_TABLE else None


def tabled_loads(k: Kernel, phases) -> list[tuple[Stmt, list[tuple]]]:
    """(load, its kept dims) of each load `phases` (flat ones) read from a table."""
    return [(s, _table_dims(k, s)) for i in phases for s in k.phases[i].body
            if _reduced(k, s) is not None and _step(k, s.index) is None]


def table_index(dims: list[tuple], n_red) -> sympy.Expr:
    """The flat position in a table laid out [kept dims][flat row position]."""
    pos = sympy.Integer(0)
    for v, n in dims:
        pos = pos * n + v
    return pos * n_red + FLAT


def flattened(k: Kernel, phase: Phase) -> Phase:
    """`phase` with each reduced index as rest + c * FLAT and each tabled load reading its
    table (a phase flat_phases chose)."""
    n_red = sympy.Mul(*k.reduction_ranges)
    body = []
    for s in phase.body:
        if _reduced(k, s) is not None:
            c = _step(k, s.index)
            if c is None:
                s = dataclasses.replace(s, buffer=f"tab_{s.out}",
                                        index=table_index(_table_dims(k, s), n_red))
            else:
                rest = sympy.expand(s.index).subs({v: 0 for v in k.reduction_vars})
                s = dataclasses.replace(s, index=rest + c * FLAT)
        body.append(s)
    return dataclasses.replace(phase, body=body)
