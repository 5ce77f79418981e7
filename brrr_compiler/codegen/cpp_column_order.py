"""Short float32 column sums of the columns schedule in eager's order.

Eager adds a short column (4 to SHORT - 1 rows) of a reduction over an outer dim in float,
in one of two orders by the column's place in the kept inner dim (cpp_accumulators.py):
columns in whole groups of EAGER_CHUNK_WIDTH in chunks of EAGER_CHUNK_ROWS rows, the
others in PARTIALS interleaved partials. The columns schedule follows it where it knows
every column's order: over a multiple of EAGER_CHUNK_WIDTH columns (all grouped, tiles of
any width), or where a tile is a whole row of more columns (its first `split` columns
grouped, the rest not). Its walk then folds rows in blocks of EAGER_CHUNK_ROWS, and per
row runs the tile loop twice: the grouped columns into c_<r>[b], folded into the total
per block; the others into cq_<r>[q][b], partial q of the row (set once per row, a
scalar), folded after the walk, the partials in order. Elsewhere (tiles that cut a row's
last group, rows shared across threads, blocks of short rows, rows narrower than a
group) short columns add in double, exact. A whole row of interleaved columns (24 over
16 rows) took 1.2x the double arrays' time: the partials indexed by q stay in memory,
where gcc keeps a tile of 24 doubles in registers; past a group, a few columns' partials
cost little (benchmarks/results/notes.md, "Float sums over short columns").
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.codegen.cpp_accumulators import (EAGER_CHUNK_WIDTH, PARTIALS,
                                                     adds_in_order, is_short)



def eager_split(k, sched) -> str | None:
    """Where the tile's grouped columns end (a C expression: "bn" for all of them), when
    this kernel's short float32 column sums add in eager's order; None otherwise."""
    column = sympy.Mul(*k.reduction_ranges)
    width = sympy.sympify(k.ranges[-1])
    if not (is_short(column) and not adds_in_order(column) and width.is_Integer):
        return None
    if sched.column_rows > 1 or sched.column_split:
        return None
    if int(width) % EAGER_CHUNK_WIDTH == 0:
        return "bn"
    if int(width) < EAGER_CHUNK_WIDTH or sched.column_tile != int(width):
        return None
    return str(int(width) // EAGER_CHUNK_WIDTH * EAGER_CHUNK_WIDTH)


def follows_eager(r, acc) -> bool:
    """A float32 sum whose lanes add in float: the one kind eager's order applies to."""
    return r.value == "sum" and r.dtype is torch.float32 and acc.total_ctype(r, lanes=True) is None


def row_partial(column: int) -> str:
    """The statement that picks a streamed row's interleaved partial q, as
    cpp_accumulators.eager_interleaved assigns them."""
    whole = column // PARTIALS * PARTIALS
    return f"const int64_t q = rr < {whole} ? (rr & {PARTIALS - 1}) : 0;"


def interleaved_array(r, tile: int) -> str:
    return f"float cq_{r.out}[{PARTIALS}][{tile}];"


def interleaved_reset(r) -> list[str]:
    return [f"cq_{r.out}[{j}][b] = 0.0f;" for j in range(PARTIALS)]


def interleaved_total(r) -> str:
    """The partials added in order (eager's), then into the column's total."""
    total = f"cq_{r.out}[0][b]"
    for j in range(1, PARTIALS):
        total = f"({total} + cq_{r.out}[{j}][b])"
    return f"acc_{r.out}[b] += {total};"
