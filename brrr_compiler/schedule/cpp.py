"""The C++ schedule of a kernel: which loop nest the printer emits, and its parameters.

    reduction over outer dims (transforms/loops.reduces_outer_dim)  -> columns (columns.py)
    other reductions                                                 -> rows    (rows.py)
    pointwise, some input read transposed (contiguous along an outer
    dim, strided along the innermost)                                -> tiled
    other pointwise kernels                                          -> pointwise
      (values computed once, stored along an outer dim only stores step along,
       where they call transcendental functions: codegen/cpp_replicate.py)

A pointwise kernel hands tiles of INNER_TILE elements of its innermost loop to the
threads; that loop splits where a select on it changes side (transforms/split.py: cat's
inputs), and outputs larger than the caches stream past them (stream.py) unless it
splits (its pieces are short runs). A tiled kernel walks TILE_A x TILE_INNER blocks,
staging each transposed operand's block first (codegen/cpp_tiled.py has the note).
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler import scalar_ops
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.schedule import columns, rows
from brrr_compiler.schedule.gather import gathered_rows
from brrr_compiler.schedule.parallel import forks, product, static_sizes, tiles
from brrr_compiler.schedule.stream import ahead_loads, streamed
from brrr_compiler.schedule_ir import PARALLEL_MIN_NUMEL, TRANSPOSE_BLOCK, CppSchedule
from brrr_compiler.transforms.flat_tile import flat_tile, transposed_loads
from brrr_compiler.transforms.loops import (inner_varying, linear_coeff, reads_buffers,
                                         reduces_outer_dim)
from brrr_compiler.transforms.period import choose as choose_period, periodic
from brrr_compiler.transforms.period import table_dims as period_table_dims
from brrr_compiler.transforms.hoist import hoisted
from brrr_compiler.transforms.tables import load_row_tables, load_tables, row_tabled, tabled
from brrr_compiler.transforms.split import specialize, split_bounds

INNER_TILE = 8192          # innermost-loop tile: the unit of work handed to a thread
TILE_A = 128               # a transposed operand's block: rows along the outer dim
TILE_INNER = 64            # ... and along the innermost: four cache lines of floats
SHORT_INNER_ROWS = 1024    # rows of `a` a work item takes when the inner dim is short
REPLICATE_TILE = 1024      # a replicated kernel's tile: its held values stay in L1


def choose_cpp(k: Kernel, num_threads: int, prefetch: bool = False) -> CppSchedule:
    """How the C++ printer runs `k` on `num_threads` threads; `prefetch`: a streaming
    pointwise kernel asks for its input streams ahead (stream.ahead_loads), where the
    machine's calibration measured that paying (DeviceSpec.stream_prefetch)."""
    if k.is_reduction:
        return columns.columns(k, num_threads) if reduces_outer_dim(k) else rows.rows(k, num_threads)
    d = transposed_var(k)
    if d is not None and short_inner(k) and d == len(k.loop_vars) - 2:
        return _tiled(k, d, num_threads, SHORT_INNER_ROWS, int(k.ranges[-1]))
    if d is not None and not _short(k, d):
        return _tiled(k, d, num_threads)
    if d is not None and _float_loads(k):
        return _tiled(k, d, num_threads, int(k.ranges[d]))
    return _pointwise(k, num_threads, prefetch)


def _short(k: Kernel, d: int) -> bool:
    """A transposed dim of static extent shorter than one 16x16 transpose block (a conv
    weight's OIHW -> OHWI copy, d = kh * kw = 9): its tiles span the whole dim and are
    staged 16 x extent at a time (codegen/cpp_tiled.py) where the operands are float;
    element copies for other types cost more than walking the output, which reads the
    few strided values of each line while it is in L1."""
    return _shorter_than_a_block(k.ranges[d])


def _shorter_than_a_block(size) -> bool:
    """A static extent of 1 to 15: an empty dim is no short tile (a tile 0 wide divided
    by zero: linalg.svd and eigh of (0, 0, 0) inputs fell back to ATen)."""
    return bool(getattr(size, "is_Integer", False)) and 0 < int(size) < TRANSPOSE_BLOCK


def short_inner(k: Kernel) -> bool:
    """An innermost dim of static extent shorter than one 16x16 transpose block (an
    image's 3 channels going channels-last). A tile of it is all edge, copied element by
    element: 16x3x224x224 to NHWC ran 0.85x eager. Its tiles are whole rows of the
    outer dim `a` beside it instead, walked along `a` with the inner dim unrolled
    (codegen/cpp_tiled.py): the loads run along `a`, the stores interleave."""
    return _shorter_than_a_block(k.ranges[-1])


def _float_loads(k: Kernel) -> bool:
    return all(s.dtype is torch.float32 for s in k.body if s.op == "load")


def _pointwise(k: Kernel, num_threads: int, prefetch: bool) -> CppSchedule:
    pieces = tuple(split_bounds(k))
    period = None if pieces else choose_period(k)
    dims = ()
    if period is not None:      # the schedule's other choices are the rewritten kernel's
        dims = period_table_dims(k, period[0])
        k = periodic(k, *period)
    rep = None if pieces or period else replicated_var(k)
    # per-channel values, once per call (transforms/tables.py); not where the loop splits
    # or one dim's values are replicated (codegen/cpp_replicate.py prints no tables)
    tables = () if pieces or rep is not None else tabled(k, every=period is not None, dims=dims)
    tabled_k = load_tables(k, tables, dims)
    tile = INNER_TILE if rep is None else REPLICATE_TILE
    sizes = static_sizes(k.ranges) if k.loop_vars else None
    fork = None if k.loop_vars else False      # a 0-d kernel has no loop to fork
    if sizes is not None:
        *outer, inner = sizes
        items = product(n for i, n in enumerate(outer) if i != rep) * tiles(inner, tile)
        stored = min(inner, tile) * (outer[rep] if rep is not None else 1)   # per item
        fork = forks(items, stored, PARALLEL_MIN_NUMEL)
    per_row = _per_row(tabled_k, pieces)
    rows_ = () if pieces or rep is not None or period else row_tabled(tabled_k, per_row)
    plain = not pieces and rep is None
    gather = gathered_rows(k) if plain else ()
    # masks of short rows staged as int lanes (short_row_masks); the staging copies
    # strided loads too, and its loop does not stream
    staged = short_row_masks(k) if plain and not period and not gather else ()
    stream = frozenset(streamed(k, rows_follow=not period)) if plain and not staged \
        else frozenset()
    return CppSchedule("pointwise", num_threads, forks=fork, inner_tile=tile,
                       pieces=pieces, stream=stream, replicate=rep, period=period,
                       tables=tables, table_dims=dims if tables else (),
                       per_call=_per_call(k, tabled_k, tables),
                       per_row=per_row, row_tables=rows_, staged=staged,
                       prefetch=ahead_loads(k) if stream and prefetch else frozenset(),
                       gather_rows=gather,
                       copy_strided=strided_libm_loads(k) if plain and not staged
                       else frozenset(),
                       unswitch=() if rep is not None else
                       outer_select_conditions(load_row_tables(k, rows_)))


def _per_call(k: Kernel, tabled_k: Kernel, tables: tuple[str, ...]) -> frozenset[str]:
    """What fills the tables (once per call, over the inner extent): the tabled values
    and those `tabled_k` no longer computes."""
    kept = {s.out for s in tabled_k.body if s.out is not None} - set(tables)
    return frozenset(s.out for s in k.body if s.out is not None) - kept


def _per_row(k: Kernel, pieces: tuple) -> frozenset[str]:
    """The values the printer computes once per row, before the inner loop (every piece's,
    where the loop splits): transforms/hoist.py."""
    if not k.loop_vars:
        return frozenset()
    inner = k.loop_vars[-1]
    return frozenset(s.out for s in hoisted(k, [specialize(k, inner, lo, hi) for lo, hi in pieces]))


def strided_libm_loads(k: Kernel) -> frozenset[str]:
    """The float inputs (any width) `k` reads at a stride other than 0 or 1 along its
    inner loop, where that loop calls libm: gcc 12 builds each vector of such a load
    element by element, and beside a libm call that cost more than the call (atan2 of a
    (66049, 1024) tensor and a step-sliced bfloat16 row: 56 ms, 34 with the row
    contiguous). codegen/cpp_strided.py copies them a chunk at a time first."""
    if not k.loop_vars:
        return frozenset()
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    if not rows.calls_libm(k.body, dtypes):
        return frozenset()
    return frozenset(s.buffer for s in rows.strided_loads(
        k.body, k.loop_vars[-1], rows.FLOAT_TYPES | rows.HALF_TYPES))


BYTE_VECTOR = 64       # bytes in the widest x86 vector (AVX-512)


def short_row_masks(k: Kernel) -> tuple[tuple[int, int], ...]:
    """((0, lane bits),) where a pointwise kernel's inner loop, over a static extent
    shorter than BYTE_VECTOR, reads or writes bytes (masks) beside a transcendental
    function: its loads are staged as integer lanes before the loop and its bool
    stores after it, as the reduction walks' are (rows._staged, codegen/cpp_staging.py),
    else ().

    gcc sizes a loop's vectors by its narrowest type: with bytes in it a vector holds 32
    (AVX2) or 64 (AVX-512) of them, more than the row has, so gcc fell back to 16 byte
    lanes, 4 float lanes, half of AVX2's, and each libm call went through a 4-lane clone
    widened to the 8-lane kernel. Generated pattern 6 at the L2 size (log1p of a (7, 13,
    8, 31) input beside a (7, 13, 1, 31) bool mask, an isnan | mask stored): its kernel
    alone 98 -> 58 us, one thread, on an AVX2 EPYC; with a multiply-add in place of
    log1p 18.9 -> 17.7 (the copies cost nothing)."""
    if not k.loop_vars or k.is_reduction:
        return ()
    n = sympy.sympify(k.ranges[-1])
    if not (n.is_Integer and 0 < int(n) < BYTE_VECTOR):
        return ()
    body = k.body
    if not (rows.byte_loads(body) or rows.bool_stores(body)):
        return ()
    if not any(s.op in scalar_ops.TABLE and scalar_ops.TABLE[s.op].cost >=
               scalar_ops.TRANSCENDENTAL for s in body):
        return ()
    return ((0, 64 if any(s.dtype is torch.float64 for s in body if s.out) else 32),)


MAX_CONDITIONS = 3         # an unswitched loop is printed 2^n times (codegen/cpp_unswitch.py)


def outer_select_conditions(k: Kernel) -> tuple[str, ...]:
    """The conditions of `k`'s selects that its innermost loop does not change (the side
    of a cat along an outer dim, a write into rows of a tensor, a bool read once per row
    or once per call: lerp's scalar-weight test), if at most MAX_CONDITIONS: gcc 12
    vectorizes no select on such a loop-invariant bool, so the printer copies the loop per
    combination of their values (codegen/cpp_unswitch.py has the note). A condition read
    from a buffer `k` writes is left alone: its value may change within the row."""
    if not k.loop_vars:
        return ()
    varying = inner_varying(k.body, k.loop_vars[-1].name)
    reads_written = reads_buffers(k.body, {b.name for b in k.outputs})
    conds = tuple(dict.fromkeys(s.args[0] for s in k.body if s.op == "where"
                                and s.args[0] not in varying and s.args[0] not in reads_written))
    return conds if len(conds) <= MAX_CONDITIONS else ()


def replicated_var(k: Kernel) -> int | None:
    """The outer loop var that only the stores step along, in a kernel that calls
    transcendental functions (codegen/cpp_replicate.py has the note): its values are
    computed once and stored once per index of that var. The longest such var (static
    sizes), else none."""
    if len(k.loop_vars) < 2 or not any(
            s.op in scalar_ops.TABLE and scalar_ops.TABLE[s.op].transcendentals for s in k.body):
        return None
    stores = [s for s in k.body if s.op == "store"]
    values = {s.out for s in k.body if s.out}
    if any({v.name for v in sympy.sympify(s.index).free_symbols} & values for s in stores):
        return None                  # a scatter's index is a value of the first loop
    named = [{v.name for v in sympy.sympify(s.index).free_symbols}
             for s in k.body if s.op != "store" and s.index is not None]
    found = []
    for d, (v, n) in enumerate(zip(k.loop_vars[:-1], k.ranges[:-1])):
        size = sympy.sympify(n)
        if size.is_Integer and int(size) > 1 and all(v.name not in u for u in named) \
                and all(v in sympy.sympify(s.index).free_symbols for s in stores):
            found.append((int(size), d))
    return max(found)[1] if found else None


def transposed_var(k: Kernel) -> int | None:
    """The outer var along which a load is contiguous while the inner var strides it."""
    if len(k.loop_vars) < 2 or k.is_reduction:
        return None
    inner, allv = k.loop_vars[-1], k.all_vars()
    for s in k.body:
        if s.op != "load":
            continue
        ci = linear_coeff(s.index, inner, allv)
        if ci is None or ci == 0 or ci == 1:
            continue
        for d, v in enumerate(k.loop_vars[:-1]):
            if linear_coeff(s.index, v, allv) == 1:
                return d
    return None


def _tiled(k: Kernel, d: int, num_threads: int, tile_a: int = TILE_A,
           tile_inner: int = TILE_INNER) -> CppSchedule:
    sizes = static_sizes(k.ranges)
    fork = None
    if sizes is not None:
        others = [i for i in range(len(sizes) - 1) if i != d]
        nwork = (product(sizes[i] for i in others) * tiles(sizes[d], tile_a)
                 * tiles(sizes[-1], tile_inner))
        fork = forks(nwork, tile_a * tile_inner, PARALLEL_MIN_NUMEL)
    stream = frozenset() if tile_inner < TRANSPOSE_BLOCK else frozenset(streamed(k))
    flat = flat_tile(k, d, tile_inner) if tile_inner >= TRANSPOSE_BLOCK else 0
    staged = transposed_loads(k, k.loop_vars[d], k.loop_vars[-1])
    return CppSchedule("tiled", num_threads, forks=fork, transposed=d,
                       tile=(tile_a, tile_inner), stream=stream, flat_tile=flat,
                       tile_loads=frozenset((s.buffer, str(s.index)) for s in staged))
