"""KernelStats from the kernel IR: the statements codegen prints, counted.

A statement in a scalar phase runs once per outer point (row); in a loop phase once per
point of the whole domain. A buffer's footprint is what its accesses touch: per distinct
index expression, the product of the extents of the loop variables it uses (a stride-0
broadcast drops a variable), summed over the expressions and capped by the largest index
touched plus one (x and x.t() read the same elements). A loop phase folding an argmax or
argmin runs unvectorized (unless its schedule tiles columns: the schedule
stage's choice, read from the kernel's schedule): its transcendentals are counted as
scalar ones. A transcendental of another's result in the same loop body (exp(-exp(x)))
is counted as chained: it waits on the first's latency. A buffer loaded at a full-domain
index in k loop phases is re-read k - 1 times. In a pointwise kernel, an access whose
innermost-loop stride s is not 0 or 1 (a transposed read) moves min(64, s * itemsize)
bytes per element: one cache line per element at worst. A tiled kernel stages each
operand read contiguously along its `transposed` dim a block at a time: those accesses
move their footprint once (x + x.t() over 4096 x 4096 floats: 6.6 ms measured, 4.5
predicted so, 40 at a line per element), at the device's transpose cost: a transposed
copy ran 2.2-2.5x the time of x + 1 on the same bytes in the LLC of a Xeon VM, 2.6-5x in
its L2s; the transposed operands of a short inner dim's tiles (walked along rows, not
staged in blocks) move at the dense rate. A per-row scratch array (kernel.scratch)
stays in the core's cache: it costs no memory traffic. An index loaded from a tensor
(gather's, embedding's) takes at most one value per point its index tensor is read at, and
at most its dim's extent. A column fold is one fold of the column kind
per point (its partial rows stay in cache too); the columns phase runs once per point
of the reduction domain. A column walk's load that steps a line or more along its
columns and is strided along the reduced dim too moves a line per element in each
phase reading it (`_gathered`). Loads, stores and rounding casts of float16 and
bfloat16 values cost the conversions the printer writes for them (scalar_ops.CONVERSION_COST, or
conversions.HARDWARE_COST where the target's instructions convert them); a cast
marked exact (transforms/exact_casts.py) prints none.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.cost.stats import (SCALAR_FOLDS, KernelStats, as_int,
                                      itemsize, op_cost, prod)
from brrr_compiler import ops, scalar_ops
from brrr_compiler.cost.conversions import HARDWARE_COST, hardware_converted, key
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.schedule_ir import CppSchedule, TritonSchedule

NO_WORK = frozenset({"load", "store", "const", "cast", "index"})
LINE = 64          # bytes of a cache line


def inner_stride(index, inner, hints: dict | None) -> int:
    """Element stride of an access along the innermost loop variable (0: not used)."""
    return abs(as_int(sympy.expand(index).coeff(inner), hints)) if inner is not None else 1


def buffer_bytes(indices, extents: dict, inner, size: int, hints: dict | None,
                 sources: dict | None = None, staged=None) -> int:
    """Bytes an access pattern moves: dense accesses once over their footprint, strided
    ones a share of a cache line per element; an access contiguous along the `staged`
    loop variable (a tiled kernel's transposed dim) counts as dense."""
    strides = {e: inner_stride(e, inner, hints) for e in indices}
    if staged is not None:
        strides.update({e: 1 for e in indices if inner_stride(e, staged, hints) == 1})
    dense = [e for e in indices if strides[e] in (0, 1)]
    nbytes = _footprint(dense, extents, hints, sources) * size
    for e in indices:
        if strides[e] not in (0, 1):
            nbytes += _footprint([e], extents, hints, sources) * min(LINE, strides[e] * size)
    return nbytes


def _footprint(indices, extents: dict, hints: dict | None, sources: dict | None = None) -> int:
    """Elements touched by accesses at `indices` over variables with `extents`. A loaded
    index (a key of `sources`) takes at most one value per point of the loop variables
    its index tensor is read over: the product over those, where smaller."""
    per_index, largest = 0, 0
    for e in indices:
        used = [v for v in e.free_symbols if v in extents]
        points = prod(extents[v] for v in used)
        if sources and any(v in sources for v in used):
            under = set().union(*(sources.get(v, {v}) for v in used))
            points = min(points, prod(extents[v] for v in under))
        per_index += points
        top = e.xreplace({v: sympy.Integer(extents[v] - 1) for v in used})
        largest = max(largest, as_int(top, hints) + 1)
    return min(per_index, largest)


def _indirect_extents(kernel: Kernel, hints: dict | None) -> dict:
    """The extent of each index loaded from a tensor (gather's `bounded` values): the
    largest value it may take, where the access's highest element lies."""
    return {sympy.Symbol(s.out, integer=True): as_int(s.index, hints)
            for s in kernel.body if s.op == "bounded"}


def _indirect_sources(kernel: Kernel, loop_vars: set) -> dict:
    """Each loaded index -> the loop variables its value depends on (through the loads
    and `index` values that compute it): an embedding of 1024 tokens reads 1024 rows of
    its table, not the whole table."""
    defs = {s.out: s for s in kernel.body if s.out}
    sources: dict = {}
    for s in kernel.body:
        if s.op != "bounded":
            continue
        used, todo, seen = set(), [s.args[0]], set()
        while todo:
            name = todo.pop()
            if name in seen or name not in defs:
                continue
            seen.add(name)
            d = defs[name]
            if d.op in ("load", "index") and d.index is not None:
                for v in d.index.free_symbols:
                    used |= sources.get(v, {v} if v in loop_vars else set())
            todo.extend(d.args)
        sources[sympy.Symbol(s.out, integer=True)] = used
    return sources


def _accesses(kernel: Kernel):
    """buffer -> (set of index expressions, set of loop phases loading it at full index)."""
    red = set(kernel.reduction_vars)
    out: dict = {}
    scratch = {b.name for b in kernel.scratch}       # per-row, cache-resident: no traffic
    for k, phase in enumerate(kernel.phases):
        for s in phase.body:
            if s.op not in ("load", "store") or s.buffer in scratch:
                continue
            idx, phases = out.setdefault(s.buffer, (set(), set()))
            idx.add(sympy.expand(s.index))
            if phase.per_row_loop and s.index.free_symbols & red:
                phases.add(k)
    return out


def _hoist_span(kernel: Kernel, schedule, hints) -> int:
    """How many elements share one computation of a value the printer hoists: a row of
    a pointwise kernel's inner loop; the columns of a column tile, per streamed row."""
    inner = max(as_int(kernel.ranges[-1], hints), 1)
    if getattr(schedule, "kind", None) != "columns":
        return inner
    return min(inner, schedule.column_tile or inner) * max(schedule.column_rows, 1)


def kernel_stats(kernel: Kernel, schedule: CppSchedule | TritonSchedule,
                 hints: dict | None = None) -> KernelStats:
    """What `kernel` run by `schedule` (schedule/: chosen once, the pair the printer
    prints) computes and moves; `hints` gives numbers for symbolic sizes."""
    rows = prod(as_int(r, hints) for r in kernel.ranges)
    red = prod(as_int(r, hints) for r in kernel.reduction_ranges)
    stats = KernelStats(points=rows * red, rows=rows,
                        forks=getattr(schedule, "forks", None))
    columns = schedule.columns
    values = {s.out: s.dtype for s in kernel.body if s.out is not None}
    rep = getattr(schedule, "replicate", None)   # values computed once per index of dim rep
    once = as_int(kernel.ranges[rep], hints) if rep is not None else 1
    per_row = getattr(schedule, "per_row", frozenset())     # once per row, before its loop
    per_call = getattr(schedule, "per_call", frozenset())   # once per call, into tables
    row = _hoist_span(kernel, schedule, hints) if per_row or per_call else 1
    spanned = prod(as_int(kernel.ranges[d], hints) for d in getattr(schedule, "table_dims", ()))
    for at, phase in enumerate(kernel.phases):
        count = (rows * red if phase.per_row_loop else red if phase.loop
                 else 1 if phase.once else rows)
        hardware = hardware_converted(kernel, schedule, at, phase)
        scalar = phase.loop and not columns and any(
            s.op == "reduce" and s.value in SCALAR_FOLDS for s in phase.body)
        chained = set() if scalar else _chained(phase.body)
        for s in phase.body:
            n = row * spanned if s.out in per_call else count // row if s.out in per_row else count
            convert = scalar_ops.CONVERSION_COST.get((s.op, s.dtype))
            if convert and key(s) in hardware:      # cost/conversions.py
                convert = HARDWARE_COST if s.op != "cast" else 0.0
            if s.op == "cast" and s.args and values.get(s.args[0]) is torch.bool:
                convert = 0.0        # a select of 1 or 0 (codegen cast_expr): no rounding
            if convert and s.value != scalar_ops.EXACT:     # an exact cast prints no rounding
                stats.add_flops(convert, torch.float32, n)
            if s.op in NO_WORK:
                continue
            if s.op in ("reduce", "column_reduce"):
                stats.add_op(s.value, s.dtype, count, reduce=True,
                             columns=columns or s.op == "column_reduce")
            else:
                stats.add_op(s.op, s.dtype, n // once, scalar=scalar,
                             chained=s.out in chained)
    extents = {v: as_int(r, hints) for v, r in zip(kernel.loop_vars, kernel.ranges)}
    extents.update({v: as_int(r, hints) for v, r in
                    zip(kernel.reduction_vars, kernel.reduction_ranges)})
    sources = _indirect_sources(kernel, set(extents))
    extents.update(_indirect_extents(kernel, hints))
    dtypes = {b.name: b.dtype for b in kernel.buffers}
    outputs = {b.name for b in kernel.outputs}
    inner, staged = _innermost(kernel, schedule)
    blocks = staged is not None and getattr(schedule, "transposes_blocks", False)
    walk = _column_walk(kernel, schedule, hints)
    for name, (indices, loop_phases) in _accesses(kernel).items():
        nbytes = buffer_bytes(indices, extents, inner, itemsize(dtypes[name]), hints, sources,
                              staged)
        if walk is not None and name in outputs:
            _scattered(stats, walk, indices, extents, itemsize(dtypes[name]), hints, nbytes)
        elif walk is not None:
            stats.gathered_bytes += _gathered(kernel, walk, indices, extents,
                                              itemsize(dtypes[name]), hints, nbytes,
                                              max(len(loop_phases), 1))
        if blocks:
            stats.transposed_bytes += _transposed_bytes(indices, extents, inner, staged,
                                                        itemsize(dtypes[name]), hints, sources)
        if name in outputs:
            stats.bytes_written += nbytes
            continue
        stats.bytes_read += nbytes
        if len(loop_phases) > 1:
            stats.reread_bytes += (len(loop_phases) - 1) * nbytes
            stats.reread_row_bytes += red * itemsize(dtypes[name])
    return stats


def _transposed_bytes(indices, extents: dict, inner, staged, size: int, hints: dict | None,
                      sources: dict | None) -> int:
    """Bytes of the accesses a tiled kernel stages through block transposes: strided along
    the innermost loop, contiguous along the staged one."""
    moved = [e for e in indices if inner_stride(e, inner, hints) not in (0, 1)
             and inner_stride(e, staged, hints) == 1]
    return _footprint(moved, extents, hints, sources) * size if moved else 0


def _column_walk(kernel: Kernel, schedule, hints: dict | None):
    """(the columns' loop variable, elements one work item walks) of a column walk, else
    None: a work item folds every reduction row over its tile of columns."""
    if getattr(schedule, "kind", None) != "columns" or not kernel.loop_vars:
        return None
    red = prod(as_int(r, hints) for r in kernel.reduction_ranges)
    width = min(as_int(kernel.ranges[-1], hints), schedule.column_tile or 1)
    return kernel.loop_vars[-1], red * width * max(1, schedule.column_rows)


def _scattered(stats: KernelStats, walk, indices, extents: dict, size: int,
               hints: dict | None, dense: int) -> None:
    """A column walk's stores that step along its columns by other than 0 or 1 touch a
    line per element; the next work item (the next outer index) reuses those lines only
    while one work item's lines stay in the core's cache. A copy to contiguous of a
    transposed (257, 512, 512) tensor fused into a logsumexp over dim 0 wrote each of its
    512 columns 2 KB apart: 650 ms where the copy apart took 20 (every store a page).
    Strided loads are left dense: a column walk copies them a streamed row at a time
    (column_stage), and a transposed float16 input's amax over dim 0 ran 1.5x its
    contiguous twin, not the 32x a line per element would say."""
    col, points = walk
    strided = [e for e in indices if inner_stride(e, col, hints) not in (0, 1)]
    if not strided:
        return
    stats.scattered_bytes += buffer_bytes(indices, extents, col, size, hints) - dense
    stats.scattered_span = max(stats.scattered_span, points * LINE * len(strided))


def _gathered(kernel: Kernel, walk, indices, extents: dict, size: int, hints: dict | None,
              dense: int, phases: int) -> int:
    """Bytes beyond the dense count of a column walk's loads that step a line or more along
    its columns and by other than 0 or 1 along the reduced dim (a transposed operand
    contiguous along the work items' dim): a line per element, in each of the `phases`
    reading them. The walk stages them a row at a time, each element from a line of its
    own, and the line comes back from cache only when the next work item reads its
    neighbour (a shorter column stride, a step-sliced input, shares its lines within the
    work item: left dense). The log_softmax over dim 0 of a (31, 32, 64, 128) bfloat16
    sum with a last-two-dims-transposed operand took 22-34 ms a call (1.7-2.1x eager's
    time), the dense count said 2. A load contiguous along the reduced dim reads whole
    lines as it walks."""
    col, red = walk[0], kernel.reduction_vars[-1] if kernel.reduction_vars else None
    if red is None:
        return 0
    moved = sum(_footprint([e], extents, hints) * LINE for e in indices
                if inner_stride(e, col, hints) * size >= LINE
                and inner_stride(e, red, hints) not in (0, 1))
    return max(moved * phases - dense, 0)


def _chained(body) -> set[str]:
    """The values of transcendental-class statements in a phase body whose argument
    depends, through any cheap ops, on another such statement's value in the same body:
    each waits for the one before (module note of calibration_kernels.terms_rate)."""
    after, out = set(), set()         # values downstream of a transcendental; chained ones
    for s in body:
        if s.out is None or s.op in ("reduce", "column_reduce"):
            continue
        fed = any(a in after for a in s.args)
        if s.op not in NO_WORK and op_cost(s.op) >= ops.TRANSCENDENTAL:
            if fed:
                out.add(s.out)
            after.add(s.out)
        elif fed:
            after.add(s.out)
    return out


def _innermost(kernel: Kernel, schedule) -> tuple:
    """(the innermost loop's variable where its stride decides what an access moves, the
    variable a tiled kernel stages blocks along): a pointwise kernel's last loop variable
    (module note). Reductions: None. A column walk's transposed store reuses its lines
    from the cache while one work item's lines fit there (a copy fused into a sum over
    (32, 1024, 1025): 18.3 ms fused, 18.1 apart), so a line per element overstates it
    then; _scattered charges it where they do not fit."""
    if not kernel.loop_vars or kernel.reduction_vars:
        return None, None
    transposed = getattr(schedule, "transposed", None)
    staged = kernel.loop_vars[transposed] if getattr(schedule, "kind", None) == "tiled" \
        and transposed is not None else None
    return kernel.loop_vars[-1], staged
