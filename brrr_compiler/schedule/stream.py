"""Which outputs a C++ kernel stores past the caches (streaming, non-temporal stores).

An output at least as large as the last-level cache sysfs reports streams: an ordinary
store first reads the line it writes (codegen/cpp_stream.py has the note and prints the
stores). Smaller outputs stay cached for whoever reads them next. The size is the
machine's, not a constant: on the EPYC brrr was tuned on (32 MB of L3) streaming a 64 MB
x + 1 won 25%, but a 2-vCPU VM on a Xeon with 480 MB of L3 kept a 32 MB output cached
(eager's ordinary stores: 1.23 ms) where streaming it past the cache took 3.04 ms, and
from 128 MB on the two stores ran alike (benchmarks/results/notes.md, "Streaming stores
from the LLC sysfs reports").

A pointwise kernel's short rows stream where the output's rows follow one another in
memory and each is a whole number of cache lines: a thread's work items are consecutive
rows, so its stores are one long run of whole lines, as a long row's are (MIN_RUN's short
runs were rows whose stores jump: rotary's 32-wide halves). A 128 MB float64 output in rows
of 512 took 16-20 GB/s with ordinary stores, the same bytes in rows of 1024 (streamed) 48
(AMD EPYC VM without AVX-512; benchmarks/results/notes.md, "Short rows stream").
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.machine import cache_sizes
from brrr_compiler.scalar_ops import TABLE
from brrr_compiler.transforms.loops import linear_coeff

# bfloat16/half outputs stay ordinary: interleaved, min of 41, streaming them won 24% on a
# bare bf16 a + b but lost 4-9% on kernels busy with bf16 rounding (SiLU*b, bias+GELU, an
# RMS norm), which is where models spend their bf16 kernels (the template handles them)
STREAM_DTYPES = frozenset({torch.float32, torch.float64})
LINE_BYTES = 64                 # a cache line
MIN_RUN = 1024                  # inner loops shorter than this store in short runs, where
                                # partial lines flush the write-combining buffers
                                # (benchmarks/results/notes.md, "Streaming stores")
# a row kernel's rows that follow one another stream from this length: below it a layer
# norm's streamed rows lost (128-384 floats: 1.06-1.23x its time) where a row minus its
# mean won at every length (0.80-0.87x); from 512 both won (0.70-0.85x; "Short rows stream")
MIN_ROW_RUN = 512


def stream_min_bytes() -> int:
    """The smallest output that streams: the last-level cache sysfs reports (the note)."""
    return cache_sizes()[1]


def streamed(k: Kernel, rows_follow: bool = False) -> set[str]:
    """Buffers of `k`'s float32/float64 stores that stream: contiguous along an inner loop of
    at least MIN_RUN, each writing at least stream_min_bytes() (the caller leaves out an
    inner loop split at cat boundaries: its pieces are short runs). `rows_follow`: the
    caller's work items are rows in order (a plain pointwise loop), so a store whose rows
    follow one another in whole cache lines streams however short its rows (the note)."""
    if k.is_reduction or not k.loop_vars or not all(r.is_Integer for r in k.ranges):
        return set()
    return _streams(k, k.loop_vars, k.ranges, rows_follow)


def streamed_rows(k: Kernel, rows_follow: bool = False) -> set[str]:
    """For a row (reduction) kernel: buffers of float32/float64 stores that stream,
    contiguous along the innermost reduced dim of at least MIN_RUN, each writing at least
    stream_min_bytes() (the last phase of a softmax or a norm). `rows_follow`: the
    caller walks whole rows in order, so rows of at least MIN_ROW_RUN stream as in
    `streamed`."""
    ranges = list(k.ranges) + list(k.reduction_ranges)
    if not k.is_reduction or not k.reduction_vars or not all(r.is_Integer for r in ranges):
        return set()
    short = rows_follow and int(k.reduction_ranges[-1]) >= MIN_ROW_RUN
    return _streams(k, (*k.loop_vars, *k.reduction_vars), ranges, short)


def _streams(k: Kernel, loop_vars, ranges, short_rows: bool) -> set[str]:
    """The streamed buffers of `k` walked over `loop_vars` (static `ranges`, outermost
    first; the stores step along the innermost): all contiguous stores where that loop is
    at least MIN_RUN long, else, where `short_rows`, those whose rows run on (`_run`)."""
    found = _contiguous_stores(k, loop_vars[-1], int(sympy.Mul(*ranges)))
    if int(ranges[-1]) >= MIN_RUN:
        return found
    return {s.buffer for s in k.body if short_rows and s.op == "store" and s.buffer in found
            and _run(k, s, loop_vars, ranges) >= MIN_RUN}


def _run(k: Kernel, store, loop_vars, ranges) -> int:
    """Values `store` writes at unit stride across the innermost of `loop_vars` (over
    `ranges`, outermost first) taken together, rows that are whole cache lines only (else
    0: a line shared by two rows is written by ordinary stores at one row's tail and the
    next one's head, beside streamed ones)."""
    inner = int(ranges[-1])
    if (inner * store.dtype.itemsize) % LINE_BYTES:
        return 0
    allv, run = k.all_vars(), 1
    for v, n in zip(reversed(loop_vars), reversed(ranges)):
        if int(n) > 1 and linear_coeff(store.index, v, allv) != run:
            break
        run *= int(n)
    return run


def _contiguous_stores(k: Kernel, inner, numel: int) -> set[str]:
    """STREAM_DTYPES outputs of `numel` values and at least stream_min_bytes(), stored once,
    at unit stride along `inner`, never read back (a softmax that keeps its exp row in
    the output row re-reads it: streaming that output's final store past the cache, over
    lines the row phase left dirty there, was slower; benchmarks/results/notes.md,
    "Streaming stores")."""
    allv = k.all_vars()
    read = {s.buffer for s in k.body if s.op == "load"}
    stores = [s for s in k.body if s.op == "store"]
    once = {b for b in {s.buffer for s in stores} if sum(s.buffer == b for s in stores) == 1}
    least = stream_min_bytes()
    return {s.buffer for s in stores if s.dtype in STREAM_DTYPES and s.buffer in once
            and numel * s.dtype.itemsize >= least
            and s.buffer not in read and linear_coeff(s.index, inner, allv) == 1}


MAX_AHEAD_STREAMS = 3       # input streams a kernel prefetches at most (ahead_loads)


def ahead_loads(k: Kernel) -> frozenset[str]:
    """The inputs a streaming pointwise kernel prefetches ahead of its inner loop
    (codegen/cpp_stream.py has the note): its streams (loads contiguous along the
    innermost loop that step with every loop, not a broadcast bias), masks included,
    where the loop is cheap per byte (no transcendental function) and reads at most
    MAX_AHEAD_STREAMS of them. Asked into L2 on the AMD EPYC VM (paired rounds against
    the nta prefetches of masked kernels and none elsewhere): where(m, x, y) 1.00-1.37x,
    masked_fill 1.00-1.24x, x * y + z up to 1.30x, bias + relu 1.14-1.22x; kernels
    computing exp, erf or sin lost 3-12% (the prefetch loops' instructions, where the
    hardware's prefetch keeps up with the slower loop), an Adam step (four streams)
    4-13% (benchmarks/results/notes.md, "Prefetching streamed inputs into L2"). The
    schedule asks for these only on a machine whose calibration measured prefetching
    paying (DeviceSpec.stream_prefetch): on an AMD EPYC without AVX-512 three streams
    lost 1.2-1.35x."""
    if any(s.op in TABLE and TABLE[s.op].transcendentals for s in k.body):
        return frozenset()
    inputs = {b.name for b in k.inputs}
    allv, inner = k.all_vars(), k.loop_vars[-1]
    streams = frozenset(s.buffer for s in k.body if s.op == "load"
                        and s.buffer in inputs and linear_coeff(s.index, inner, allv) == 1
                        and set(k.loop_vars) <= sympy.sympify(s.index).free_symbols)
    return streams if len(streams) <= MAX_AHEAD_STREAMS else frozenset()
