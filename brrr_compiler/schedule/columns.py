"""C++ schedules of reductions over outer dims (codegen/cpp_outer_reduce.py): each thread
takes tiles of adjacent columns (of several short rows, where the innermost dim is short)
and streams the reduced rows over them; the schedule picks the tile, the inputs worth
prefetching a few rows ahead and the narrow strided loads copied into tile arrays. Short
columns run in vector lanes instead (codegen/cpp_row_lanes.py, column_lanes).
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.kernel_ir import ARG_FOLDS, Kernel, Phase
from brrr_compiler.schedule.parallel import forks, product, static_sizes, tiles
from brrr_compiler.schedule.rows import (BYTE_TYPES, FLOAT_TYPES, HALF_TYPES, ROW_LANES, lane_rows,
                                         plain_loads)
from brrr_compiler.schedule_ir import PARALLEL_MIN_NUMEL, SPLIT_MIN_RED, CppSchedule
from brrr_compiler.transforms.hoist import column_once
from brrr_compiler.transforms.loops import inner_varying, linear_coeff, loop_dependent

COLUMN_TILE = 256       # the tile when sizes are symbolic, and the narrowest the byte budget asks
MIN_COLUMN_TILE = 64    # the narrowest tile, so that every thread gets columns (256 over 2 threads)
MAX_COLUMN_TILE = 2048
MAX_TILE_BYTES = 96 * 1024   # all tile arrays of a thread, at 8 bytes per element
BLOCK_MAX_WIDTH = 64    # the widest innermost dim whose rows go in blocks (_column_rows)
# less than this stays in the per-core L2: no prefetch (benchmarks/results/notes.md,
# "Column prefetch")
SMALL_BYTES = 1 << 20


def column_prefetch_loads(k: Kernel, phase: Phase, block_rows: int = 1) -> set[tuple]:
    """(buffer, index) of `phase`'s input loads contiguous along the columns that step
    with the one reduced dim: the next rows' pieces of them may be prefetched. With a
    tile of `block_rows` short rows, only loads contiguous over the block too."""
    if len(k.reduction_vars) != 1:
        return set()
    r, inner, allv = k.reduction_vars[0], k.loop_vars[-1], k.all_vars()
    inputs = {b.name for b in k.inputs}
    return {(s.buffer, s.index) for s in phase.body if s.op == "load" and s.buffer in inputs
            and linear_coeff(s.index, inner, allv) == 1 and linear_coeff(s.index, r, allv)
            and (block_rows == 1 or _merges(k, s.index))}


def _merges(k: Kernel, index) -> bool:
    """Whether `index` steps along the dim before the innermost by a whole innermost row:
    a block of those rows is one contiguous piece."""
    return linear_coeff(index, k.loop_vars[-2], k.all_vars()) == sympy.sympify(k.ranges[-1])


def columns(k: Kernel, num_threads: int) -> CppSchedule:
    lanes = lane_columns(k)
    if lanes or _narrow_columns(k):
        red = product(static_sizes(k.reduction_ranges))
        return CppSchedule("rows", num_threads, row_lanes=ROW_LANES, column_lanes=lanes,
                           forks=forks(product(static_sizes(k.ranges)), red, PARALLEL_MIN_NUMEL))
    tile = _column_tile(k, num_threads)
    block = _column_rows(k, tile, num_threads)
    sizes, red = static_sizes(k.ranges), static_sizes(k.reduction_ranges)
    fork, split = None, False
    if sizes is not None and red is not None:
        work = product(sizes[:-1]) * tiles(sizes[-1], tile) if block == 1 else \
            product(sizes[:-2]) * tiles(sizes[-2], block)
        fork = forks(work, product(red) * tile * block, PARALLEL_MIN_NUMEL)
        split = _rows_shared(k, work, product(red) * min(tile, sizes[-1]) * block, num_threads)
        fork = fork or split
    everything = static_sizes(list(k.ranges) + list(k.reduction_ranges))
    numel = product(everything) if everything is not None else None
    size = {b.name: b.dtype.itemsize for b in k.inputs}
    prefetch = {b for p in k.phases for b, _ in column_prefetch_loads(k, p)
                if numel is None or numel * size[b] >= SMALL_BYTES}   # else L2 holds it
    return CppSchedule("columns", num_threads, forks=fork, column_tile=tile,
                       column_rows=block, prefetch=frozenset(prefetch),
                       column_stage=column_staged(k), column_split=split,
                       per_row=column_once(k, block))


def _rows_shared(k: Kernel, work: int, per_item: int, num_threads: int) -> bool:
    """Whether the threads share the rows (codegen/cpp_column_split.py): fewer tiles
    than threads, at least SPLIT_MIN_RED elements to each tile, folds without indices,
    and no staged loads. The channels of a channels-last batch norm's statistics (64
    columns over 25088 rows) were one tile, on one thread."""
    return num_threads > 1 and work < num_threads and per_item >= SPLIT_MIN_RED and \
        not column_staged(k) and \
        not any(s.op == "reduce" and s.value in ARG_FOLDS for s in k.body)


def column_staged(k: Kernel) -> frozenset[str]:
    """The loads of a column walk's loop phases that step along the columns by other than
    0 or 1 element, and its float16 loads contiguous along them (converted as they are
    copied), indexed as byte_loads' are (codegen/cpp_column_stage.py)."""
    inner, allv = k.loop_vars[-1], k.all_vars()
    return frozenset(s.out for p in k.phases if p.loop
                     for s in plain_loads(p.body, BYTE_TYPES | HALF_TYPES | FLOAT_TYPES)
                     if linear_coeff(s.index, inner, allv) not in (0, 1)
                     or (s.dtype is torch.float16 and linear_coeff(s.index, inner, allv) == 1))


# A reduction over an outer dim whose rows, over the kept inner dim, fit in this many bytes
# of input (a max over the middle dim of (4000, 9, 31)) may run ROW_LANES adjacent columns
# at a time, each column's walk in a vector lane (codegen/cpp_row_lanes.py, column_lanes):
# one register per fold and vector of columns. Over wider rows the tiles of the columns
# schedule stream them; a block of lanes would read one line per row at a row's stride.
LANE_COLUMNS_BYTES = 32 * 1024
LANE_COLUMN_ROWS = 64       # = cpp_columns.BLOCK_ROWS: a float sum adds them in order either way
_SELECTING = frozenset({"max", "min", "any", "all"})
# ... and at any row size where the columns are many and few: a block of 16 columns then
# reads a line from each of at most WIDE_LANE_ROWS rows, streams the prefetcher follows,
# and the overlapping last block repeats a few columns of hundreds. The columns schedule
# made a pass over its tile arrays per row, in double for short columns: x.sum(0) of
# (4, 800000) 479 -> 347 us in lanes (eager 415), (2, 2M) 771 -> 491, amax(0) of
# (16, 200000) 362 -> 298, sum(1) of (256, 12, 4096) 1606 -> 1104, (32, 65536) 234 ->
# 198; over 64 rows lanes were slower (413 -> 469), at 300 columns too (14 -> 18 us),
# and float16 (its loads convert 8 lanes at a time in integer code: 47 -> 73 us over
# (20, 20000); notes.md, "Wide short columns in lanes").
WIDE_LANE_COLUMNS = 1024
WIDE_LANE_ROWS = 32


def lane_columns(k: Kernel) -> bool:
    """Whether a reduction over outer dims runs ROW_LANES adjacent columns at a time, a
    column per vector lane: what lane_rows asks of rows (columns of up to
    LANE_COLUMN_ROWS), one walk over the rows (a second walk waits on the first's result,
    a variance's mean: 0.8x the columns schedule), no value of the row that each lane
    would compute again (a constant, such as a mean's count cast to float, is none),
    a kept inner dim of a width where the lanes pay (`_lane_width_pays`, or wide columns
    few rows long), every load and store contiguous along the kept inner dim or not
    stepping with it, and (but for those wide ones) rows of at
    most LANE_COLUMNS_BYTES."""
    if not lane_rows(k, LANE_COLUMN_ROWS) or sum(1 for p in k.phases if p.loop) != 1:
        return False
    last, inner, allv = int(static_sizes(k.ranges)[-1]), k.loop_vars[-1], k.all_vars()
    varying, variable = inner_varying(k.body, str(inner)), loop_dependent(k.body)
    if any(s.out in variable and s.out not in varying
           for s in k.body if s.op not in ("load", "const", "reduce", "store")):
        return False    # a value of the row each lane would compute again (the columns hoist it)
    wide = last >= WIDE_LANE_COLUMNS and int(k.reduction_ranges[0]) <= WIDE_LANE_ROWS and \
        not any(s.op == "load" and s.dtype is torch.float16 for s in k.body)
    if not (wide or _lane_width_pays(k, last)):
        return False
    red, size = k.reduction_vars[0], {b.name: b.dtype.itemsize for b in k.inputs}
    row_bytes = 0
    for s in k.body:
        if s.op not in ("load", "store"):
            continue
        ci = linear_coeff(s.index, inner, allv)
        if ci not in (0, 1):
            return False
        if s.op == "load" and ci and linear_coeff(s.index, red, allv):
            row_bytes += size.get(s.buffer, 8)
    return wide or row_bytes * last * int(k.reduction_ranges[0]) <= LANE_COLUMNS_BYTES


def _narrow_columns(k: Kernel) -> bool:
    """Whether a reduction over an outer dim whose kept inner dim is narrower than a
    vector runs its columns as rows in vector lanes (codegen/cpp_row_lanes.py, row_lanes):
    each column's few strided values copied into [element][lane] arrays, then ROW_LANES
    columns folded at a time. The columns schedule's tile there is one narrow row of a
    few columns per outer index, its loops a few elements each. That pays for the copies
    where the kernel folds with indices (its update branched on every element: a max with
    indices over the middle dim of (80000, 5, 5) bfloat16 4.0 -> 1.05 ms, eager 3.5,
    Inductor 1.1) or walks the tile more than once (softmax over the middle dim of
    (40000, 8, 5) 1.98 -> 0.99 ms, var of (40000, 9, 6) 0.96 -> 0.85); one walk of plain
    folds does not (amax, sum, mean 1.45-2.6x slower in lanes; benchmarks/results/
    notes.md, "Narrow columns in lanes")."""
    sizes = static_sizes(k.ranges)
    if sizes is None or sizes[-1] >= ROW_LANES or not lane_rows(k):
        return False
    return any(s.op == "reduce" and s.value in ARG_FOLDS for s in k.body) or \
        sum(1 for p in k.phases if p.loop) > 1


def _lane_width_pays(k: Kernel, last: int) -> bool:
    """Whether `last` kept columns run faster in lanes: at least ROW_LANES (the last block
    overlaps the one before: no masked tail) where the columns schedule leaves a remainder
    to gcc's narrower or scalar epilogues: not a multiple of ROW_LANES, and, unless every
    fold selects, under 2 * ROW_LANES, not a multiple of 8 (whose remainder one 8-wide
    epilogue covers) and not ROW_LANES + 1. Sums and products convert and add the same
    values either way, so the overlap's repeated columns decide: at 24 and 36-100 columns
    the lanes took 1.15-1.4x the columns schedule's time, at 17 (the last block repeats 15
    columns, where the columns schedule adds one scalar column) 1.3-1.5x at 4-64 rows, at
    18-31 other columns 0.4-0.95x (25 over 64 rows 1.2x: left); max, min, any and all
    0.15-0.95x at every such width (benchmarks/results/notes.md, "Short columns in vector
    lanes"). float16 loads convert in integer code 8 lanes at a time, so the columns the
    last block repeats cost more: float16 takes the lanes only where that block repeats
    fewer than half its columns (31 columns: 1.6-2.9x faster; 17 and 20: 1.2-1.8x slower;
    notes.md, "Means in column lanes")."""
    selecting = all(s.value in _SELECTING for s in k.body if s.op == "reduce")
    if last < ROW_LANES or last % ROW_LANES == 0 or \
            (not selecting and (last >= 2 * ROW_LANES or last % 8 == 0 or last == ROW_LANES + 1)):
        return False
    half = any(s.op == "load" and s.dtype is torch.float16 for s in k.body)
    return not (half and last % ROW_LANES < ROW_LANES // 2)

def _column_tile(k: Kernel, num_threads: int) -> int:
    """The widest tile that still gives every thread work and fits the byte budget."""
    *outer, last = [sympy.sympify(r) for r in k.ranges]
    if not (last.is_Integer and all(r.is_Integer for r in outer)):
        return COLUMN_TILE
    nrows = int(sympy.Mul(*outer)) if outer else 1
    # no wider than the columns there are: a max over the middle dim of (40000, 5, 5)
    # kept 2048-wide tile arrays for 5 columns
    return max(1, min(_widest(k, nrows, int(last), num_threads), int(last)))


def _widest(k: Kernel, nrows: int, columns: int, num_threads: int) -> int:
    """The widest tile within the byte budget that leaves no thread without a tile, for
    `nrows` rows of `columns` columns."""
    budget = MAX_TILE_BYTES // (8 * max(1, _array_count(k)))
    tile = MAX_COLUMN_TILE
    while (tile > COLUMN_TILE and tile > budget) or \
            (tile > MIN_COLUMN_TILE and nrows * -(-columns // tile) < num_threads):
        tile //= 2
    return tile


def _column_rows(k: Kernel, tile: int, num_threads: int) -> int:
    """Rows of a short innermost dim per tile (a block of the dim before it): 1 unless
    the innermost dim is static, at most BLOCK_MAX_WIDTH and at most half the tile the
    columns could have, and an input read along it is contiguous over the block too.
    A tile of one short row (64 columns of (32, 31, 32, 64) reduced over dim 0) read
    each streamed row as a piece of a few hundred bytes a row's stride from the next,
    dozens of streams at once: a block of them reads one long run per row, as a wide
    tile does (an amax over dim 1 of that shape with a step-sliced float16 input 330 ->
    180 us; x.sum(0) beside a broadcast over rows of 16, 170 -> 80 us). Over rows of 128
    and more floats the blocks were no faster, up to 15% slower (benchmarks/results/
    notes.md, "Column walks over short rows")."""
    sizes = static_sizes(k.ranges)
    if sizes is None or len(sizes) < 2 or 0 in sizes or tile != sizes[-1] or \
            tile > BLOCK_MAX_WIDTH:
        return 1
    wide = _widest(k, product(sizes[:-2]), sizes[-2] * tile, num_threads)
    block = min(sizes[-2], wide // tile)
    block = -(-sizes[-2] // -(-sizes[-2] // max(1, block)))     # tiles of even rows
    if block < 2 or not any(s.op == "load" and _merges(k, s.index) and
                            linear_coeff(s.index, k.loop_vars[-1], k.all_vars()) == 1
                            for s in k.body):
        return 1
    return block


def _array_count(k: Kernel) -> int:
    """Arrays over the tile the columns printer keeps: each row-level value, and per fold
    its two accumulators."""
    row_level = [s for p in k.phases for s in p.body
                 if s.out and (not p.loop or s.op == "reduce")]
    reds = [s for s in row_level if s.op == "reduce"]
    return len({s.out for s in row_level}) + 2 * len(reds)
