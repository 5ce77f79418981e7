"""Short float32 column sums of the columns schedule in eager's order.

Eager adds a short column (4 to SHORT - 1 rows) of a reduction over an outer dim in float,
in one of two orders by the column's place in the kept inner dim (cpp_accumulators.py):
columns in whole groups of EAGER_CHUNK_WIDTH in chunks of EAGER_CHUNK_ROWS rows, the
others in PARTIALS interleaved partials. The columns schedule follows it where it knows
every column's order: over a multiple of EAGER_CHUNK_WIDTH columns (all grouped, tiles of
any width), or where a tile is a whole row of at least EAGER_NARROW_WIDTH columns (its
first `split` columns grouped, the rest not). Its walk then folds rows in blocks of
EAGER_CHUNK_ROWS; each row's tile loop over the grouped columns adds into c_<r>[b],
folded into the total per block, and a second over the others (`interleaved_rows`) adds
into cq<u>_<r>[b], partial u, folded after the walk, the partials in order. Elsewhere
(tiles that cut a row's last group, rows shared across threads, blocks of short rows,
rows of fewer than EAGER_NARROW_WIDTH columns) short columns add in double, exact.
"""
from __future__ import annotations

import sympy

from brrr_compiler.codegen.cpp_accumulators import (EAGER_CHUNK_WIDTH, PARTIALS,
                                                     adds_in_order, is_short)

# Over fewer columns eager's order is neither (4 columns: in order; 1 and 5-7: others)
EAGER_NARROW_WIDTH = 8


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
    if int(width) < EAGER_NARROW_WIDTH or sched.column_tile != int(width):
        return None
    return str(int(width) // EAGER_CHUNK_WIDTH * EAGER_CHUNK_WIDTH)


def interleaved_rows(indent: str, row, column) -> list[str]:
    """The block's rows [cb, ce): `row(indent, q)` prints one (rr), its tail's sums into
    partial q (cq<q>_<r>). Rows before the column's last whole PARTIALS go PARTIALS at a
    time, row rr + u into partial u (cb is a multiple of PARTIALS), the rest one at a time
    into partial 0, as cpp_accumulators.eager_interleaved assigns them: each partial a
    constant, which gcc keeps in registers over a tile of a few columns (indexed by
    rr & 3 they stayed in memory: a whole row of 24 columns took 1.2x the double's time)."""
    whole = int(column) // PARTIALS * PARTIALS
    inner = indent + "    "
    lines = [f"{indent}for (int64_t rg = cb; rg < ce;) {{",
             f"{indent}  if (rg + {PARTIALS} <= brrr_min_i64(ce, {whole})) {{"]
    for u in range(PARTIALS):
        lines += [f"{indent}    {{", f"{inner}  const int64_t rr = rg{f' + {u}' if u else ''};"]
        lines += row(inner + "  ", u) + [f"{indent}    }}"]
    lines += [f"{indent}    rg += {PARTIALS};", f"{indent}  }} else {{",
              f"{inner}const int64_t rr = rg;"]
    return lines + row(inner, 0) + [f"{indent}    rg += 1;", f"{indent}  }}", f"{indent}}}"]


def interleaved_array(r, tile: int) -> list[str]:
    return [f"float cq{j}_{r.out}[{tile}];" for j in range(PARTIALS)]


def interleaved_reset(r) -> list[str]:
    return [f"cq{j}_{r.out}[b] = 0.0f;" for j in range(PARTIALS)]


def interleaved_total(r) -> str:
    """The partials added in order (eager's), then into the column's total."""
    total = f"cq0_{r.out}[b]"
    for j in range(1, PARTIALS):
        total = f"({total} + cq{j}_{r.out}[b])"
    return f"acc_{r.out}[b] += {total};"
