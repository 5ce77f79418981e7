"""Streaming (non-temporal) stores for pointwise kernels whose outputs exceed the caches.

Note on why. An ordinary store to a line not in cache first reads the line
(write-allocate), so a kernel that reads one array and writes another moves three bytes
for every two it needs; torch's `copy_`, the stream yardstick, pays the same. A
non-temporal store writes whole lines past the caches without reading them
(benchmarks/results/notes.md, "Streaming stores"). An output smaller than the last-level cache stays cached
instead, since whoever reads it next will likely find it there.

The printer keeps its scalar loop body (gcc vectorizes it): each streamed store writes
into a 256-value local array of the output's storage type (float, bfloat16 bits, half,
double), and after each chunk of the inner loop `brrr_stream` (the prelude) copies the
array to the output with non-temporal stores, ordinary ones at an unaligned head and at
the tail. `brrr_stream_fence` after a thread's work makes the
streamed data visible to the threads that read it next.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from brrr_compiler.kernel_ir import Kernel, Stmt
from brrr_compiler.lower.loops import linear_coeff

STREAM_MIN_BYTES = 32 << 20     # an output this large goes past the last-level cache
CHUNK = 256                     # values staged per streamed store (<= 2 KB: stays in L1)
# bfloat16/half outputs stay ordinary: interleaved, min of 41, streaming them won 24% on a
# bare bf16 a + b but lost 4-9% on kernels busy with bf16 rounding (SiLU*b, bias+GELU, an
# RMS norm), which is where models spend their bf16 kernels (the template handles them)
STREAM_DTYPES = frozenset({torch.float32, torch.float64})
MIN_RUN = 1024                  # inner loops shorter than this store in short runs, where
                                # partial lines flush the write-combining buffers (rotary's
                                # 32-wide halves: 2.6 -> 7.5 ms, measured)


def streamed(k: Kernel) -> set[str]:
    """Buffers of `k`'s float32/float64 stores that stream: contiguous along an inner loop of
    at least MIN_RUN, each writing at least STREAM_MIN_BYTES (the caller leaves out an
    inner loop split at cat boundaries: its pieces are short runs)."""
    if k.is_reduction or not k.loop_vars or not all(r.is_Integer for r in k.ranges):
        return set()
    if int(k.ranges[-1]) < MIN_RUN:
        return set()
    return _contiguous_stores(k, k.loop_vars[-1], int(sympy.Mul(*k.ranges)))


def streamed_rows(k: Kernel) -> set[str]:
    """For a row (reduction) kernel: buffers of float32/float64 stores that stream,
    contiguous along the innermost reduced dim of at least MIN_RUN, each writing at least
    STREAM_MIN_BYTES (the last phase of a softmax or a norm)."""
    ranges = list(k.ranges) + list(k.reduction_ranges)
    if not k.is_reduction or not k.reduction_vars or not all(r.is_Integer for r in ranges):
        return set()
    if int(k.reduction_ranges[-1]) < MIN_RUN:
        return set()
    return _contiguous_stores(k, k.reduction_vars[-1], int(sympy.Mul(*ranges)))


def _contiguous_stores(k: Kernel, inner, numel: int) -> set[str]:
    """STREAM_DTYPES outputs of `numel` values and at least STREAM_MIN_BYTES, stored once,
    at unit stride along `inner`, never read back (a softmax
    that keeps its exp row in the output row re-reads it: streaming that output's final
    store past the cache, over lines the row phase left dirty there, measured 7.7 ->
    10.4 ms)."""
    allv = k.all_vars()
    read = {s.buffer for s in k.body if s.op == "load"}
    stores = [s for s in k.body if s.op == "store"]
    once = {b for b in {s.buffer for s in stores} if sum(s.buffer == b for s in stores) == 1}
    return {s.buffer for s in stores if s.dtype in STREAM_DTYPES and s.buffer in once
            and numel * s.dtype.itemsize >= STREAM_MIN_BYTES
            and s.buffer not in read and linear_coeff(s.index, inner, allv) == 1}


def chunked_loop(body: list[Stmt], buffers: set[str], var, start: str, end: str,
                 line, cexpr, indent: str) -> list[str]:
    """`for var in [start, end)` in chunks of CHUNK, the stores to `buffers` staged and
    streamed after each chunk. `line(stmt)` prints one statement, `cexpr` an index."""
    c = sympy.Symbol("c0", integer=True)
    stores = [s for s in body if s.op == "store" and s.buffer in buffers]
    stage = {s.buffer: f"sb_{s.buffer}" for s in stores}
    out = [f"{indent}for (int64_t c0 = {start}; c0 < {end}; c0 += {CHUNK}) {{",
           f"{indent}  const int64_t c1 = brrr_min_i64(c0 + {CHUNK}, {end});"]
    out += [f"{indent}  __typeof__({b}[0]) {name}[{CHUNK}];" for b, name in stage.items()]
    out += [f"{indent}  #pragma omp simd", f"{indent}  for (int64_t {var} = c0; {var} < c1; ++{var}) {{"]
    offset = sympy.Symbol(f"{var} - c0", integer=True)      # printed as is
    for s in body:
        if s in stores:   # the store as printed (its conversion), into the staging array
            s = dataclasses.replace(s, buffer=stage[s.buffer], index=offset)
        out.append(f"{indent}    {line(s)}")
    out.append(f"{indent}  }}")
    for s in stores:
        out.append(f"{indent}  brrr_stream(&{s.buffer}[{cexpr(s.index.subs(var, c))}], "
                   f"{stage[s.buffer]}, c1 - c0);")
    return out + [f"{indent}}}"]
