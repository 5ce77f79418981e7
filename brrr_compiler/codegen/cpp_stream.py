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
code). Each chunk asks for the lines of its input streams AHEAD elements on first
(`__builtin_prefetch`). Asked into L1 (nta), on an Intel Xeon: masked_fill 1.9x faster,
where 1.35x, but x + y lost 4% and an Adam step 10%; on an AMD EPYC the same nta
prefetches made the Adam step 1.3x slower. Asked into L2 (LOCALITY, as the row kernels'
prefetches), on the AMD EPYC, end to end against nta or none: where 1.37x, masked_fill
1.24x, x * y + z 1.30x, an Adam step and x + y even within the noise (faster by up to
1.17x while the machine's memory was slow). Kernels that compute transcendentals keep the
hardware's prefetch alone: their loops are slow enough for it, and the prefetch loops'
instructions cost them 3-12% (schedule/stream.py `ahead_loads`;
benchmarks/results/notes.md, "Prefetching streamed inputs into L2"). On another AMD EPYC
VM, one without AVX-512, the same prefetches made three-stream kernels 1.2-1.35x slower
(where(a > b, a, c), x * y + z) and a gather 1.9x, any distance or locality tried, while
its hardware prefetcher alone streamed them at 45 GB/s; so the schedule asks for them
only where the machine's calibration measured them paying (DeviceSpec.stream_prefetch;
"Stream prefetch measured per machine" in the notes).

A gather within rows (`x.gather(-1, idx)`, schedule/gather.py) reads each row of its
source in random order: every line's first touch waits for memory, with nothing for the
hardware prefetcher to follow. The chunked loop also serves such kernels, streamed or
not: chunk [c0, c1) of a row's N outputs asks for the same share [c0 * E / N, c1 * E / N)
of the next outer step's E-element source row, so the next row arrives while this one is
gathered (a hand-written loop over a 4096 x 4096 source, 2048 gathers a row: 11.4 ->
5.6 ms; the whole next row asked for at once, 10.4).
"""
from __future__ import annotations

import dataclasses

import sympy

from brrr_compiler.codegen.cpp_prefetch import LOCALITY
from brrr_compiler.codegen.cpp_strided import strided_copies
from brrr_compiler.kernel_ir import Stmt
from brrr_compiler.schedule.stream import LINE_BYTES
from brrr_compiler.transforms.loops import linear_coeff

CHUNK = 256                     # values staged per streamed store (<= 2 KB: stays in L1)
AHEAD = 2048                    # elements a prefetched input is asked for ahead of the loop


def chunked_loop(body: list[Stmt], buffers: set[str], var, start: str, end: str,
                 line, cexpr, indent: str, ahead: frozenset = frozenset(),
                 rows: NextRows | None = None, strided: frozenset = frozenset()) -> list[str]:
    """`for var in [start, end)` in chunks of CHUNK, the stores to `buffers` staged and
    streamed after each chunk; the loads of `ahead` (CppSchedule.prefetch) contiguous
    along `var` prefetched AHEAD elements on, a line at a time; the gathers of `rows`
    prefetch their next row; the loads of `strided` (CppSchedule.copy_strided) copied
    first (cpp_strided.py). `line(stmt)` prints one statement, `cexpr` an index."""
    c = sympy.Symbol("c0", integer=True)
    stores = [s for s in body if s.op == "store" and s.buffer in buffers]
    stage = {s.buffer: f"sb_{s.buffer}" for s in stores}
    out = [f"{indent}for (int64_t c0 = {start}; c0 < {end}; c0 += {CHUNK}) {{",
           f"{indent}  const int64_t c1 = brrr_min_i64(c0 + {CHUNK}, {end});"]
    out += _prefetches(body, ahead, var, cexpr, indent + "  ")
    out += rows.prefetches(body, cexpr, indent + "  ") if rows else []
    out += [f"{indent}  __typeof__({b}[0]) {name}[{CHUNK}];" for b, name in stage.items()]
    copies, body = strided_copies(body, strided, var, CHUNK, cexpr, indent + "  ")  # loads only
    out += copies
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
    contiguous along `var`, into L2 (the module note)."""
    pf, lines, seen = sympy.Symbol("pf", integer=True), [], set()
    for s in body:
        key = (s.buffer, s.index)
        if s.op != "load" or s.buffer not in ahead or key in seen or \
                linear_coeff(s.index, var, (var,)) != 1:
            continue
        seen.add(key)
        lines.append(f"{indent}for (int64_t pf = c0 + {AHEAD}; pf < c1 + {AHEAD}; "
                     f"pf += {LINE_BYTES // s.dtype.itemsize}) "
                     f"__builtin_prefetch(&{s.buffer}[{cexpr(s.index.subs(var, pf))}], 0, {LOCALITY});")
    return lines


@dataclasses.dataclass(frozen=True)
class NextRows:
    """The gathers (CppSchedule.gather_rows: load, column value, row extent) of a loop
    whose outer variable `outer` (bounded by the C name `bound`) steps rows of `per_row`
    outputs."""
    gathers: tuple[tuple[str, str, int], ...]
    outer: sympy.Symbol
    bound: str
    per_row: int

    def prefetches(self, body: list[Stmt], cexpr, indent: str) -> list[str]:
        """Per gather, this chunk's share of the next row, a line at a time, into every
        cache level (the row is read again and again)."""
        pf, lines, n = sympy.Symbol("pf", integer=True), [], self.per_row
        for s in body:
            spec = next((g for g in self.gathers if g[0] == s.out and s.op == "load"), None)
            if spec is None:
                continue
            index = sympy.sympify(s.index)
            column = next(x for x in index.free_symbols if x.name == spec[1])
            nxt = index.subs({column: pf, self.outer: self.outer + 1})
            lines.append(f"{indent}if ({self.outer} + 1 < {self.bound}) "
                         f"for (int64_t pf = c0 * {spec[2]} / {n}; pf < c1 * {spec[2]} / {n}; "
                         f"pf += {LINE_BYTES // s.dtype.itemsize}) "
                         f"__builtin_prefetch(&{s.buffer}[{cexpr(nxt)}], 0, 3);")
        return lines
