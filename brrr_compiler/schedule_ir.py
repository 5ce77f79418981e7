"""How a kernel runs on a target, as a value: the schedule the printers print and the
cost model counts.

The schedule stage (brrr_compiler/schedule/) chooses one per (kernel, target, threads);
codegen prints the (Kernel, Schedule) pair and takes no decision of its own. The types
live here, beside kernel_ir.py, so that every stage may read them (the cost model comes
before lowering in the pipeline, yet counts the pair).
"""
from __future__ import annotations

from dataclasses import dataclass

# below this many elements of work a C++ parallel loop runs on one thread: forking costs
# more than it saves (cost/estimate.py reads it for the kernels it has not lowered yet)
PARALLEL_MIN_NUMEL = 32768
# a row kernel's rows this long are split across the threads when rows are fewer than them
SPLIT_MIN_RED = 65536
# a tiled kernel transposes in blocks of this many elements a side (cpp_prelude.h
# brrr_transpose16); a tile whose inner side is shorter walks it element by element
TRANSPOSE_BLOCK = 16


@dataclass(frozen=True)
class CppSchedule:
    """One C++ kernel's loop nest. `kind`:
      pointwise  tiles of `inner_tile` of the innermost loop handed to threads (cpp.py)
      tiled      2-D tiles over (outer dim `transposed`, innermost) (cpp_tiled.py)
      rows       one row per work item, phases per row (cpp_reduce.py)
      columns    a reduction over outer dims: tiles of `column_tile` columns, rows
                 streamed (cpp_outer_reduce.py)
    """
    kind: str
    threads: int
    min_parallel: int = PARALLEL_MIN_NUMEL    # the parallel loops' `if` clause
    forks: bool | None = None        # constant sizes: does the main parallel loop fork?
    inner_tile: int = 0              # pointwise: innermost-loop tile per work item
    pieces: tuple[tuple[int, int], ...] = ()   # pointwise: the inner loop split (cat)
    replicate: int | None = None     # pointwise: the outer dim only stores step along
    tables: tuple[str, ...] = ()     # pointwise: values of the inner index alone, computed
    #                                  once per call into tables (transforms/tables.py)
    table_dims: tuple[int, ...] = ()  # pointwise: outer dims the tables span too (a
    #                                  periodic kernel's parameters: transforms/period.py)
    row_tables: tuple[str, ...] = ()  # pointwise: values of the rows alone, computed over
    #                                  every row in one vector loop first (tables.py, "Rows")
    per_call: frozenset[str] = frozenset()  # pointwise: what fills those tables (the tabled
    #                                  values and those only they read): once per call
    per_row: frozenset[str] = frozenset()   # pointwise: values the inner loop does not
    #                                  change, computed once per row before it
    #                                  (transforms/hoist.py; the cost model counts them so)
    unswitch: tuple[str, ...] = ()   # pointwise: conditions of selects on an outer index (an
    #                                  outer cat): the inner loop printed per combination
    stream: frozenset[str] = frozenset()       # outputs stored past the caches
    transposed: int | None = None    # tiled: the outer dim read contiguously
    tile: tuple[int, int] = (0, 0)   # tiled: (outer, inner) block
    flat_tile: int = 0               # tiled: the inner dim's length where each tile runs
    #                                  as one flat loop (transforms/flat_tile.py)
    tile_loads: frozenset[tuple[str, str]] = frozenset()   # tiled: the (buffer, index)
    #                                  loads staged transposed into tile arrays
    column_tile: int = 0             # columns: columns per work item
    column_rows: int = 1             # columns: whole rows of a short innermost dim per work
    #                                  item (`column_tile` their width): a block of the dim
    #                                  before it
    prefetch: frozenset[str] = frozenset()     # rows/columns: inputs prefetched ahead
    column_split: bool = False       # columns: fewer tiles than threads, so the threads
    #                                  share the rows (codegen/cpp_column_split.py)
    column_stage: frozenset[str] = frozenset()  # columns: narrow strided loads (their
    #                                  values) copied into tile arrays per row
    #                                  (codegen/cpp_column_stage.py)
    copy_strided: frozenset[str] = frozenset()  # pointwise: inputs read at a stride along
    #                                  the inner loop by a loop that calls libm, copied a
    #                                  chunk at a time before it (codegen/cpp_strided.py)
    gather_rows: tuple[tuple[str, str, int], ...] = ()   # pointwise: gathers within rows
    #                                  that prefetch their next row (schedule/gather.py)
    scratch_rows: tuple[tuple[str, str], ...] = ()   # rows: (scratch, output row holding it)
    online: int | None = None        # rows: first of the two phases folded in one walk
    staged: tuple[tuple[int, int], ...] = ()   # rows: (phase, lane bits) staging byte loads;
    #                                  pointwise: ((0, bits),) for a short row's masks
    #                                  (schedule/cpp.py short_row_masks)
    sum_lanes: tuple[tuple[int, int], ...] = ()   # rows: (phase, lanes) adding its sums in a
    #                                  block of lanes (codegen/cpp_sum_lanes.py)
    split_min_red: int = SPLIT_MIN_RED   # rows: a row this long splits when rows are few
    columns_forks: bool | None = None    # rows: does the column folds' phase fork?
    row_lanes: int = 0               # rows: short rows run this many at a time, one per
    #                                  vector lane (codegen/cpp_row_lanes.py); 0: one by one
    column_lanes: bool = False       # rows: the lanes are adjacent columns of a reduction
    #                                  over an outer dim (cpp_row_lanes.column_lanes)
    flat_phases: tuple[int, ...] = ()   # rows: loop phases walking the reduced dims as one
    #                                  flat run, not in segments (schedule/flat_rows.py)
    period: tuple[int, int] | None = None   # pointwise: (first, rows): dims first.. run as
    #                                  one loop with rows indices of the dim before them,
    #                                  values repeating along it tabled (transforms/period.py)

    @property
    def transposes_blocks(self) -> bool:
        """A tiled kernel that stages its transposed operands in blocks (codegen/cpp_tiled.py);
        one whose inner dim is short (an image's 3 channels) walks whole rows instead."""
        return self.kind == "tiled" and self.tile[1] >= TRANSPOSE_BLOCK

    @property
    def columns(self) -> bool:
        """Folds walk rows over tiles of columns, or over columns in vector lanes (what the
        cost model counts as such: each fold a vector update, no horizontal one)."""
        return self.kind == "columns" or self.column_lanes

    def describe(self) -> str:
        """One line for dumps and explain."""
        parts = [self.kind, f"{self.threads} thread(s)"]
        if self.forks is False:
            parts.append("serial")
        if self.kind == "pointwise":
            parts.append(f"tile {self.inner_tile}")
        if self.pieces:
            parts.append(f"split in {len(self.pieces)} at "
                         + ", ".join(str(lo) for lo, _ in self.pieces[1:]))
        if self.flat_phases:
            parts.append(f"{len(self.flat_phases)} phase(s) walk the reduced dims flat")
        if self.period is not None:
            parts.append(f"dims {self.period[0]}.. flattened, {self.period[1]} rows of the "
                         "dim before them per loop, repeating values tabled"
                         + (f" over dims {', '.join(map(str, self.table_dims))} too"
                            if self.table_dims else ""))
        if self.row_tables:
            parts.append(f"{len(self.row_tables)} value(s) of the rows computed over all rows "
                         "first")
        if self.replicate is not None:
            parts.append(f"values computed once, stored along dim {self.replicate}")
        if self.unswitch:
            parts.append(f"inner loop copied per side of {len(self.unswitch)} outer-index select(s)")
        if self.transposed is not None:
            parts.append(f"{self.tile[0]}x{self.tile[1]} tiles over dim {self.transposed}"
                         + (f", rows of {self.flat_tile} run flat" if self.flat_tile else ""))
        if self.column_tile:
            parts.append(f"{self.column_tile} columns per tile" if self.column_rows == 1 else
                         f"{self.column_rows}x{self.column_tile} columns per tile")
        if self.column_split:
            parts.append("rows shared by the threads")
        if self.online is not None:
            parts.append("max and sum of exps in one walk")
        if self.row_lanes:
            what = "short columns" if self.column_lanes else "short rows"
            parts.append(f"{what} {self.row_lanes} at a time in vector lanes")
        if self.staged:
            bits = sorted({b for _, b in self.staged})
            parts.append(f"masks staged as int{'/int'.join(map(str, bits))} lanes")
        if self.sum_lanes:
            parts.append(f"sums in blocks of {max(n for _, n in self.sum_lanes)} lanes")
        for label, names in (("streams", self.stream), ("prefetches", self.prefetch),
                             ("stages", self.column_stage)):
            if names:
                parts.append(f"{label} {', '.join(sorted(names))}")
        if self.gather_rows:
            parts.append("next rows of gathers " + ", ".join(g[0] for g in self.gather_rows)
                         + " prefetched")
        if self.scratch_rows:
            parts.append("scratch in " + ", ".join(f"{o}" for _, o in self.scratch_rows))
        return ", ".join(parts)


@dataclass(frozen=True)
class TritonSchedule:
    """One Triton kernel's blocks (schedule/triton.py has the rule)."""
    kind: str                   # "pointwise" | "pointwise2d" | "persistent" | "looped"
    xblock: int
    yblock: int = 1
    rblock: int = 1
    num_warps: int = 4
    int64: bool = False
    columns: bool = False       # a reduction over outer dims: blocks of adjacent columns

    def describe(self) -> str:
        blocks = {"pointwise": f"XBLOCK={self.xblock}",
                  "pointwise2d": f"YBLOCK={self.yblock}, XBLOCK={self.xblock}"}.get(
            self.kind, f"XBLOCK={self.xblock}, RBLOCK={self.rblock}")
        width = "int64" if self.int64 else "int32"
        return f"{self.kind}, {blocks}, num_warps={self.num_warps}, {width} indexing"
