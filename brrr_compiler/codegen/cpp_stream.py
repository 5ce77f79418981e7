"""Streaming (non-temporal) stores for pointwise kernels whose outputs exceed the caches.

Note on why. An ordinary store to a line not in cache first reads the line
(write-allocate), so a kernel that reads one array and writes another moves three bytes
for every two it needs; torch's `copy_`, the stream yardstick, pays the same. A
non-temporal store writes whole lines past the caches without reading them
(benchmarks/results/notes.md, "Streaming stores"). An output smaller than the last-level cache stays cached
instead, since whoever reads it next will likely find it there (schedule/stream.py
chooses the outputs that stream: CppSchedule.stream).

The printer keeps its scalar loop body (gcc vectorizes it): each streamed store writes
into a 256-value local array of the output's storage type (float, double, bfloat16 or
float16 bits), and after each chunk of the inner loop `brrr_stream` (the prelude) copies
the array to the output with non-temporal stores, ordinary ones at an unaligned head and at
the tail. `brrr_stream_fence` after a thread's work makes the
streamed data visible to the threads that read it next.

Such a kernel reads its inputs from memory too, and where it reads a 1-byte stream (a
mask) beside its float ones, the hardware prefetcher fell behind: `x.masked_fill(m, 0) *
2` over 4096 x 4096 floats took 1.7-1.9x its unmasked twin `x * 2` for 1.125x the bytes,
`where(m, x, y)` 1.4x `x + y` (the same in a hand-written C++ loop, so not the printed
code). Each chunk now asks for the lines of its float streams AHEAD elements on
(`__builtin_prefetch`, nta) first: masked_fill 1.9x faster, where 1.35x, a dropout mask
1.1x, and the twin `x * 2` (one stream) 1.15x; kernels with two or more float streams
and no mask gained nothing or lost (x + y 4%, an Adam step 10%), so they keep the
hardware's prefetch alone (schedule/stream.py `ahead_loads` chooses;
benchmarks/results/notes.md, "Prefetching streamed inputs").
"""
from __future__ import annotations

import dataclasses

import sympy

from brrr_compiler.kernel_ir import Stmt
from brrr_compiler.schedule.rows import LINE_BYTES
from brrr_compiler.transforms.loops import linear_coeff

CHUNK = 256                     # values staged per streamed store (<= 2 KB: stays in L1)
AHEAD = 2048                    # elements a prefetched input is asked for ahead of the loop


def chunked_loop(body: list[Stmt], buffers: set[str], var, start: str, end: str,
                 line, cexpr, indent: str, ahead: frozenset = frozenset()) -> list[str]:
    """`for var in [start, end)` in chunks of CHUNK, the stores to `buffers` staged and
    streamed after each chunk; the loads of `ahead` (CppSchedule.prefetch) contiguous
    along `var` prefetched AHEAD elements on, a line at a time. `line(stmt)` prints one
    statement, `cexpr` an index."""
    c = sympy.Symbol("c0", integer=True)
    stores = [s for s in body if s.op == "store" and s.buffer in buffers]
    stage = {s.buffer: f"sb_{s.buffer}" for s in stores}
    out = [f"{indent}for (int64_t c0 = {start}; c0 < {end}; c0 += {CHUNK}) {{",
           f"{indent}  const int64_t c1 = brrr_min_i64(c0 + {CHUNK}, {end});"]
    out += _prefetches(body, ahead, var, cexpr, indent + "  ")
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


def _prefetches(body: list[Stmt], ahead: frozenset, var, cexpr, indent: str) -> list[str]:
    """One prefetch per cache line of the chunk AHEAD elements on, per load of `ahead`
    contiguous along `var`, into the nearest cache without keeping it (nta: a streamed
    input is read once)."""
    pf, lines, seen = sympy.Symbol("pf", integer=True), [], set()
    for s in body:
        key = (s.buffer, s.index)
        if s.op != "load" or s.buffer not in ahead or key in seen or \
                linear_coeff(s.index, var, (var,)) != 1:
            continue
        seen.add(key)
        lines.append(f"{indent}for (int64_t pf = c0 + {AHEAD}; pf < c1 + {AHEAD}; "
                     f"pf += {LINE_BYTES // s.dtype.itemsize}) "
                     f"__builtin_prefetch(&{s.buffer}[{cexpr(s.index.subs(var, pf))}], 0, 0);")
    return lines
