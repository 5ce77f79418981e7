"""C++ schedules of reduction kernels over rows (reductions over outer dims: columns.py).

A row kernel (codegen/cpp_reduce.py) takes one row per work item and, when rows are
fewer than the threads and each is at least SPLIT_MIN_RED long, splits each row across
them. Its schedule says where scratch rows live (transforms/scratch.py), which outputs
stream past the caches, which inputs of the next row are prefetched while the current
one computes (codegen/cpp_prefetch.py), and whether a row's max and sum of exps fold in
one walk (codegen/cpp_online.py). The loads and stores staged beside a row walk
(byte_loads and the others below) are picked here for columns.py too.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.kernel_ir import ARG_FOLDS, Kernel, Stmt
from brrr_compiler.machine import stages_store
from brrr_compiler.scalar_ops import TABLE
from brrr_compiler.schedule.online import online_index
from brrr_compiler.schedule.parallel import forks, product, static_sizes
from brrr_compiler.schedule.stream import LINE_BYTES, streamed_rows
from brrr_compiler.schedule.flat_rows import flat_phases
from brrr_compiler.schedule.sum_lanes import sum_lane_phases
from brrr_compiler.schedule_ir import PARALLEL_MIN_NUMEL, CppSchedule
from brrr_compiler.transforms.loops import linear_coeff
from brrr_compiler.transforms.scratch import rows_in_outputs, scratch_holders

BYTE_TYPES = frozenset({torch.bool, torch.uint8, torch.int8})
HALF_TYPES = frozenset({torch.float16, torch.bfloat16})
FLOAT_TYPES = frozenset({torch.float32, torch.float64})
STAGE_MAX_ROW = 256          # rows longer than this keep their byte loads (codegen/cpp_staging.py)
IN_ORDER_FOLDS = frozenset({"sum", "prod"})


def next_row_loads(k: Kernel) -> dict[tuple, int]:
    """(buffer, index) -> elements per cache line, for the first loop phase's input loads
    contiguous along the innermost reduced dim, when a second loop phase can hide their
    prefetch (codegen/cpp_prefetch.py)."""
    loop_phases = [p for p in k.phases if p.per_row_loop]
    if len(loop_phases) < 2 or not k.reduction_vars:
        return {}
    inner = k.reduction_vars[-1]
    inputs = {b.name: b.dtype for b in k.inputs}
    known = set(k.all_vars()) | set(k.size_vars)   # not a loaded index (embedding)
    return {(s.buffer, s.index): LINE_BYTES // inputs[s.buffer].itemsize
            for s in loop_phases[0].body
            if s.op == "load" and s.buffer in inputs and sympy.sympify(s.index).free_symbols <= known
            and linear_coeff(s.index, inner, k.all_vars()) == 1}


def _walks(k: Kernel, online: int | None) -> int:
    """How many times a row kernel walks each row: its per-row loop phases, the pair an
    online fold merges counted once. The rows fork at a walk's share of
    PARALLEL_MIN_NUMEL elements: each walk is a pass's work (a masked softmax over 992
    rows of 32 floats, three walks and an exp per element, ran 58 us on one thread
    where 31,744 elements did not fork, 29 on two; benchmarks/results/notes.md, "Row
    kernels fork by the rows' walks"). A kernel with a columns phase keeps the element
    count (its column folds share the clause), and so do short rows walked 16 at a time
    in vector lanes (cpp_row_lanes.py), whose walks are a block's, not a row's."""
    walks = sum(1 for p in k.phases if p.per_row_loop)
    return max(1, walks - (1 if online is not None else 0))


def rows(k: Kernel, num_threads: int) -> CppSchedule:
    holders = scratch_holders(k)
    printed = rows_in_outputs(k, holders)         # the kernel the printer walks
    columns = next((p for p in printed.phases if p.loop and p.once), None)
    stored = {s.buffer for s in columns.body if s.op == "store"} if columns else set()
    sizes, red = static_sizes(k.ranges), static_sizes(k.reduction_ranges)
    stream = frozenset(streamed_rows(printed) - stored)   # a column row is one row of values
    lanes = not stream and lane_rows(printed)   # beats the one-walk pair there
    if not stream and not lanes and columns is None:       # short rows, one after another
        stream = frozenset(streamed_rows(printed, rows_follow=True))
    online, staged = None if lanes else online_index(printed), _staged(printed)
    least = PARALLEL_MIN_NUMEL if columns or lanes else \
        -(-PARALLEL_MIN_NUMEL // _walks(printed, online))
    fork = None if sizes is None or red is None else forks(product(sizes), product(red), least)
    in_lanes = () if lanes else sum_lane_phases(printed, _lane_bound(printed, staged),
                                                online, stream)
    skip = {i for i, _ in staged + in_lanes} | (
        {online, online + 1} if online is not None else set())
    return CppSchedule(
        "rows", num_threads, forks=fork, min_parallel=least, stream=stream,
        prefetch=frozenset(b for b, _ in next_row_loads(printed)),
        scratch_rows=holders, online=online, staged=staged, sum_lanes=in_lanes,
        flat_phases=() if lanes else flat_phases(printed, skip, stream),
        columns_forks=None if red is None else product(red) * num_threads >= PARALLEL_MIN_NUMEL,
        row_lanes=ROW_LANES if lanes else 0)


ROW_LANES = 16          # rows per block of the row-lanes schedule: one AVX-512 float vector
# A row of at most this many elements (one reduced dim, static extent) is short: it runs
# in vector lanes where lane_rows allows, else in one constant loop without `omp simd`
# (codegen/cpp_reduce.py, ReductionPrinter._short_row)
SHORT_ROW = 16
_LANE_FOLDS = ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin")


def lane_rows(k: Kernel, longest: int = SHORT_ROW) -> bool:
    """Whether k's rows can run ROW_LANES at a time, a row per vector lane
    (codegen/cpp_row_lanes.py has the note): one reduced dim of static extent at most
    `longest`, static outer sizes, folds that select or add (no argmax: its branchy
    update), nothing folded across rows or columns, scratch rows only where each read of
    one follows a store of the same element (the staged store is what it reads),
    every load and store indexed by loop variables and sizes alone, each store by the
    row's, and no other statement reading the row's variables."""
    rr = k.reduction_ranges
    if len(k.reduction_vars) != 1 or k.scratch or not _rows_read_back(k) or \
            static_sizes(k.ranges) is None or static_sizes(rr) is None or \
            not 2 <= int(rr[0]) <= longest or product(static_sizes(k.ranges)) < ROW_LANES:
        return False
    for p in k.phases:
        if p.once or (not p.loop and any(s.op == "reduce" for s in p.body)):
            return False
        for s in p.body:
            if s.op == "column_reduce" or (s.op == "reduce" and s.value not in _LANE_FOLDS):
                return False
    computed, rows = {s.out for s in k.body if s.out is not None}, set(k.loop_vars)
    for s in k.body:
        used = sympy.sympify(s.index).free_symbols if s.index is not None else set()
        if s.op in ("load", "store"):
            if {v.name for v in used} & computed or (s.op == "store" and not used & rows):
                return False
        elif used & rows:           # an index value of the row: lanes decode no rows
            return False
    return True


def _rows_read_back(k: Kernel) -> bool:
    """Every load of a buffer the kernel stores reads an element stored before it."""
    stored, written = {s.buffer for s in k.body if s.op == "store"}, set()
    for s in k.body:
        if s.op == "store":
            written.add((s.buffer, s.index))
        elif s.op == "load" and s.buffer in stored and (s.buffer, s.index) not in written:
            return False
    return True


def byte_loads(body: list[Stmt]) -> list[Stmt]:
    """The loads of 1-byte values in `body` whose index uses only loop variables and
    sizes (not a value the body computes), of buffers `body` does not store."""
    return plain_loads(body, BYTE_TYPES)


def half_loads(body: list[Stmt]) -> list[Stmt]:
    """The loads of float16 and bfloat16 values in `body`, as byte_loads picks bytes."""
    return plain_loads(body, HALF_TYPES)


def plain_loads(body: list[Stmt], dtypes: frozenset) -> list[Stmt]:
    stored = {s.buffer for s in body if s.op == "store"}
    return [s for s in _plainly_indexed(body, "load")
            if s.dtype in dtypes and s.buffer not in stored]


def bool_stores(body: list[Stmt]) -> list[Stmt]:
    """The stores of bools in `body` (a comparison's mask, as bytes) indexed by loop
    variables and sizes alone, to buffers `body` does not load."""
    loaded = {s.buffer for s in body if s.op == "load"}
    return [s for s in _plainly_indexed(body, "store")
            if s.dtype is torch.bool and s.buffer not in loaded]


def half_stores(body: list[Stmt], inner) -> list[Stmt]:
    """The float16 stores of `body` (bfloat16 ones of rounded values too where the CPU
    rounds them in one instruction: machine.stages_store) contiguous along `inner` (a loop
    variable's symbol), indexed as bool_stores' are: staged, they convert with the
    target's instructions after the loop (codegen/cpp_staging.py)."""
    loaded = {s.buffer for s in body if s.op == "load"}
    return [s for s in _plainly_indexed(body, "store")
            if stages_store(s, body) and s.buffer not in loaded
            and linear_coeff(s.index, inner, (inner,)) == 1]


def strided_loads(body: list[Stmt], inner, dtypes: frozenset = FLOAT_TYPES) -> list[Stmt]:
    """The loads of `dtypes` (float32/float64) in `body` that step along the loop variable
    `inner` by other than 0 or 1 element (a transposed or step-sliced input), indexed as byte_loads'
    are: in a walk that calls libm such a load left gcc 12's loop scalar (a load at
    stride 16 beside exp, log1p and erf; codegen/cpp_staging.py)."""
    return [s for s in plain_loads(body, dtypes)
            if linear_coeff(s.index, inner, (inner,)) not in (None, 0, 1)]


def _plainly_indexed(body: list[Stmt], op: str) -> list[Stmt]:
    """The `op` statements of `body` whose index uses no value the body computes."""
    computed = {s.out for s in body if s.out is not None}
    return [s for s in body if s.op == op
            and not {v.name for v in sympy.sympify(s.index).free_symbols} & computed]


def _staged(k: Kernel) -> tuple[tuple[int, int], ...]:
    """(phase, lane bits) of the loop phases whose chunks copy their byte loads (masks)
    to integer lanes (and half loads to floats) first, and their bool stores from such
    lanes after: a float sum or product, folded in order lane by lane, over a short
    static row, and any phase that calls libm (codegen/cpp_staging.py has the note).
    Lanes are 64-bit where the phase computes in double, else 32-bit. Argmax and argmin
    loops are scalar anyway."""
    rr = k.reduction_ranges
    row = sympy.sympify(rr[-1] if k.reduction_vars else sympy.Mul(*rr))
    short = bool(row.is_Integer and int(row) <= STAGE_MAX_ROW)
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    inner = k.reduction_vars[-1] if k.reduction_vars else None
    out = []
    for i, p in enumerate(k.phases):
        reds = [s for s in p.body if s.op == "reduce"]
        if not p.loop or any(r.value in ARG_FOLDS for r in reds):
            continue
        libm = calls_libm(p.body, dtypes)
        if not (byte_loads(p.body) or bool_stores(p.body) or half_loads(p.body)
                or (libm and inner is not None and strided_loads(p.body, inner))):
            continue
        in_order = any(r.value in IN_ORDER_FOLDS and r.dtype.is_floating_point for r in reds)
        if (short and in_order) or libm or _float16_rows(p.body, inner):
            out.append((i, 64 if any(s.dtype is torch.float64 for s in p.body if s.out)
                        else 32))
    return tuple(out)


def _lane_bound(k: Kernel, staged: tuple) -> tuple:
    """The staged phases of `staged` whose masks are staged in integer lanes (byte loads,
    bool stores): those keep one vector per sum; a phase staged only for its half loads
    (converted into float arrays) may add its sums in a block of lanes as well."""
    return tuple((i, bits) for i, bits in staged
                 if byte_loads(k.phases[i].body) or bool_stores(k.phases[i].body))


def _float16_rows(body: list[Stmt], inner) -> bool:
    """Whether `body` loads or stores float16 values (or stores bfloat16 ones: half_stores)
    contiguously along the row (`inner`): staged, they convert with the target's
    instructions (codegen/cpp_staging.py)."""
    return inner is not None and (any(
        s.dtype is torch.float16 and linear_coeff(s.index, inner, (inner,)) == 1
        for s in half_loads(body)) or bool(half_stores(body, inner)))


def calls_libm(body: list[Stmt], dtypes: dict) -> bool:
    """Whether a statement of `body` calls a libm (libmvec) function."""
    for s in body:
        row = TABLE.get(s.op)
        if row is not None and row.libmvec:
            dt = row.form_dtype([dtypes.get(a, s.dtype) for a in s.args], s.dtype)
            if row.calls_libm(dt, s.value):
                return True
    return False
