"""The micro-kernels `brrr calibrate` times (calibration.py lists them and what each
figure is): brrr's own compiled chains, timed through the driver or replayed natively.
"""
from __future__ import annotations

import functools
import math
import statistics
import time

import torch

QUANTILE = 0.2     # each figure is a low percentile: on a shared machine noise only adds
CACHED_RATE = 1.3  # a size whose x + 1 runs this much above the streaming rate is cached


def _per_call(fn, args=(), calls: int = 10, rounds: int = 7, budget_s: float = 2.0,
              clock=time.perf_counter) -> float:
    """Low-quantile seconds per call of fn(*args), over `rounds` batches of `calls`."""
    fn(*args)
    samples, start = [], time.perf_counter()
    for _ in range(rounds):
        t0 = clock()
        for _ in range(calls):
            fn(*args)
        samples.append((clock() - t0) / calls)
        if time.perf_counter() - start > budget_s and len(samples) >= 3:
            break
    samples.sort()
    return samples[int(QUANTILE * (len(samples) - 1))]


def stream_bandwidth(nbytes: int, cache_dir: str, clock=time.perf_counter) -> float:
    """Bytes/s (read + write) of a brrr kernel x + 1 over `nbytes` of float32: what brrr's
    own streaming loop moves (ATen's copy_ is a memcpy, which ran 66 GB/s here where
    brrr's pointwise kernels of 100 MB and more moved 49-58)."""
    x = torch.rand(nbytes // 4)
    fn = _compiled(ADD, 1, cache_dir=cache_dir, size=x.numel())
    return 2 * x.numel() * 4 / _per_call(fn, (x,), calls=1, clock=clock)


def cached_extent(cache_dir: str, moved: list[int], dram: float,
                  clock=time.perf_counter) -> int:
    """The most bytes (read + write, of `moved`, ascending) a brrr kernel x + 1 moves at
    CACHED_RATE times the streaming bandwidth `dram` or faster: the last-level cache this
    process gets. sysfs names the whole chip's (480 MB on a 2-vCPU Xeon VM, whose x + 1
    ran 56 GB/s up to 64 MB moved and at the streaming 27 from 128 MB on); 0 where even
    the first size streams. Each kernel is replayed natively: through the graph's call
    (31 us of Dynamo and runner on a slow 2-vCPU EPYC VM) x + 1 moving 8 MB ran 47-52
    GB/s, under 1.3x its 34 GB/s stream, where the kernel alone moved 94 (so its 32 MB of
    L3 read as none: everything past 0.5 MB was priced at DRAM speed)."""
    best = 0
    for nbytes in moved:
        x = torch.rand(nbytes // 8)
        fn = _compiled(ADD, 1, cache_dir=cache_dir, size=x.numel())
        t = _replayed_per_call(fn, x, cache_dir, clock) or \
            _per_call(fn, (x,), calls=3, rounds=5, clock=clock)
        if nbytes / t < CACHED_RATE * dram:
            break
        best = nbytes
    return best


def l2_bandwidth(cache_dir: str, elements: tuple[int, int],
                 clock=time.perf_counter) -> float | None:
    """Bytes/s (read + write) of a brrr kernel x + 1 on data the threads' L2s hold: the
    slope between two sizes (`elements`), so the dispatch and fork cancel out."""
    return _add_slope(cache_dir, elements, clock)


def transpose_cost(cache_dir: str, elements: int, clock=time.perf_counter) -> float | None:
    """How many times x + 1's time a brrr transposed copy (x.t().contiguous(), a tiled
    kernel staging 16x16 blocks) takes on the same bytes, about `elements` of them, in the
    last-level cache: both replayed natively. The side is a multiple of 16 that is not a
    power of two (a power-of-two stride maps a tile's rows to the same cache sets)."""
    side = max(16, math.isqrt(elements) * 15 // 16 // 16 * 16)
    x = torch.rand(side, side)
    t = [_replayed_per_call(_compiled(step, 1, cache_dir=cache_dir, size=side * side), x,
                            cache_dir, clock) for step in (TRANSPOSE, ADD)]
    return None if None in t else t[0] / max(t[1], 1e-12)


def _add_slope(cache_dir: str, elements: tuple[int, int], clock) -> float | None:
    """Bytes/s (read + write) of x + 1's kernel between two sizes, replayed natively."""
    t = [_replayed_per_call(_compiled(ADD, 1, cache_dir=cache_dir, size=n), torch.rand(n),
                            cache_dir, clock) for n in elements]
    return None if None in t else 8 * (elements[1] - elements[0]) / max(t[1] - t[0], 1e-12)


def _replayed_per_call(fn, x: torch.Tensor, cache_dir: str, clock, rounds: int = 15,
                       budget_s: float = 0.02) -> float | None:
    """Low-quantile seconds of fn(x)'s one kernel, repeated in one native call as segments
    call kernels (runtime/replay.py): the graph's Python call around a kernel of a few
    microseconds costs more than the kernel and, worse, more after a larger kernel has
    pushed its code and data out of the L2s (x + 1 through the driver measured 85-95 GB/s
    in the L2s of a Xeon VM whose kernels, replayed, moved 115-150). None where fn ran
    no kernel of brrr's (calibrate keeps the generic figure and says so)."""
    from brrr_compiler.config import build_config
    from brrr_compiler.runtime import replay, trampoline
    cfg = build_config(None)
    calls = replay.capture(lambda: fn(x))
    if len(calls) != 1:        # its kernel did not build (ATen ran it): not measurable
        return None
    run, _ = replay.replayer(calls[0], trampoline.load(cache_dir, cfg.cxx, cfg.cache_max_bytes))
    run(1)
    repeats = max(1, int(budget_s / max(replay.per_repeat(run, 1, clock), 1e-7)))
    samples = sorted(replay.per_repeat(run, repeats, clock) for _ in range(rounds))
    return samples[int(QUANTILE * (len(samples) - 1))]


def _compiled(step: str, steps: int, result: str = "x", *, size: int | None = None,
              **options):
    """The compiled chain (see _chain), once per process, thread count and `size` (an
    input's element count, where a figure times one chain on several): the repeated tries
    of a figure time it again rather than compile it again, and a chain timed on many
    sizes never reaches Dynamo's recompile limit (past it, Dynamo runs ATen's op instead)."""
    return _compiled_for(torch.get_num_threads(), (_chain, step, steps, result),
                         tuple(sorted(options.items())), size)


@functools.cache
def _compiled_for(threads: int, build: tuple, options: tuple, size: int | None = None):
    """torch.compile of build[0](*build[1:]) (_chain or _terms) with brrr `options`."""
    from brrr_compiler.backend import brrr_backend
    make, *args = build
    return torch.compile(make(*args),
                         backend=functools.partial(brrr_backend, options=dict(options) or None),
                         dynamic=False)


def _function(source: str, label: str):
    """`fn` of generated `source`: a fresh code object each time, so Dynamo compiles each
    micro-kernel once (no recompiles of a shared function)."""
    namespace = {"torch": torch}
    exec(compile(source, f"<brrr-calibrate {label}>", "exec"), namespace)
    return namespace["fn"]


def _terms(template: str, terms: int):
    """def fn(x): return <template, c=1.0> + <template, c=1.125> + ... (`terms` of them):
    independent evaluations, as real kernels have them (a softmax's exp, a GELU's erf)."""
    body = " + ".join(template.format(c=1.0 + 0.125 * i) for i in range(terms))
    return _function(f"def fn(x):\n    return {body}\n", f"{template} x{terms} terms")


def _chain(step: str, steps: int, result: str = "x"):
    """def fn(x): x = <step>, `steps` times; return <result>."""
    body = "".join(f"    x = {step}\n" for _ in range(steps))
    return _function(f"def fn(x):\n{body}    return {result}\n", f"{step} x{steps} {result}")


FMA, EXP, ADD = "x * 1.0001 + 0.5", "torch.exp(-x)", "x + 1.0"
TRANSPOSE = "x.t().contiguous()"
# functions measured beside exp: their rates differ (libmvec, brrr's own erf); `{c}` is
# each independent term's own scale (terms_rate)
FUNCTIONS = {"exp": "torch.exp(x * -{c})", "sin": "torch.sin(x * {c})",
             "tanh": "torch.tanh(x * {c})", "erf": "torch.erf(x * {c})",
             "sigmoid": "torch.sigmoid(x * {c})", "log": "torch.log(x + {c})"}
# libm calls (libmvec), the rate of functions not measured by name: exp and erf are brrr's
# own inline polynomials, 2-2.5x faster than these
LIBM_CALLS = ("sin", "log")
REDUCTIONS = {"reduce_sum": "x.sum(-1)", "reduce_max": "x.amax(-1)"}


OVERHEAD_KERNELS = 65     # the longer graph's kernels (overheads)
OVERHEAD_PAIRS = 7        # interleaved batches of the two graphs (overheads)


def overheads(cache_dir: str, clock=time.perf_counter, segments: bool = True
              ) -> tuple[float, float]:
    """(per-kernel, per-call) seconds from one-element graphs of 1 and OVERHEAD_KERNELS
    kernels; the longer one runs as one segment, or with `segments` off each kernel called
    from Python (as the runner calls a kernel alone between library calls). The two graphs
    are timed in alternating batches and each pair's difference kept: the median of those
    is the kernels' cost. Timed apart (1 and 17 kernels, each graph's batches together),
    a burst of other work during one graph's batches moved the figure: 0.11-0.19 us and
    then 3.04 in five tries on the AMD EPYC VM, where 65 kernels paired gave 0.03-0.05
    (benchmarks/results/notes.md, "Per-kernel cost, paired")."""
    x = torch.ones(1)
    n = OVERHEAD_KERNELS
    graphs = [_compiled(ADD, k, fusion="none", cache_dir=cache_dir, segments=segments)
              for k in (1, n)]
    for g in graphs:
        g(x)
    ones, per_kernel = [], []
    for _ in range(OVERHEAD_PAIRS):
        t1, tn = (_per_call(g, (x,), calls=200, rounds=3, clock=clock) for g in graphs)
        ones.append(t1)
        per_kernel.append((tn - t1) / (n - 1))
    kernel = max(statistics.median(per_kernel), 0.0)
    return kernel, max(statistics.median(ones) - kernel, 0.0)


def fork_overhead(cache_dir: str, clock=time.perf_counter) -> float | None:
    """Seconds a kernel pays to run on all threads rather than one: an OpenMP parallel
    region with an empty body (the fork and join every parallel kernel does), entered
    10000 times in one native call, built as brrr builds kernels. 0 on one thread; None
    where it cannot be built (the calibration keeps the generic figure and says so)."""
    import ctypes

    from brrr_compiler.runtime.build import BuildError, build_and_load
    threads = torch.get_num_threads()
    if threads == 1:
        return 0.0
    source = ("// brrr calibrate: the cost of a parallel region (calibration_kernels.py)\n"
              "#include <stdint.h>\n"
              'extern "C" void brrr_forks(int64_t n, int64_t threads) {\n'
              "  for (int64_t i = 0; i < n; ++i) {\n"
              "    #pragma omp parallel num_threads(threads)\n"
              '    { __asm__ volatile("" ::: "memory"); }\n'
              "  }\n}\n")
    try:
        fn = build_and_load(source, cache_dir).brrr_forks
    except (BuildError, OSError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int64, ctypes.c_int64], None
    n = 10_000
    fn(n, threads)                                   # the pool's threads start here
    return min(_timed(lambda: fn(n, threads), clock) for _ in range(7)) / n


def _timed(fn, clock) -> float:
    start = clock()
    fn()
    return clock() - start


def chain_rate(step: str, steps: tuple[int, int], dtype, cache_dir: str, numel: int = 1 << 18,
               clock=time.perf_counter) -> float:
    """Steps x elements per second of brrr kernels running `step` `steps` times: the slope
    between two chain lengths, so call overhead and memory traffic cancel out."""
    x = torch.rand(numel, dtype=dtype)
    t = [_per_call(_compiled(step, k, cache_dir=cache_dir), (x,), calls=20, clock=clock)
         for k in steps]
    return (steps[1] - steps[0]) * numel / max(t[1] - t[0], 1e-12)


def terms_rate(template: str, terms: tuple[int, int], cache_dir: str, numel: int = 1 << 18,
               clock=time.perf_counter, dtype=torch.float32) -> float:
    """Evaluations per second of a function in sums of `terms` independent evaluations
    (_terms): the slope between the two counts. A chain of them (x = f(x), again) runs at
    the latency of one evaluation after another, not at the vector units' throughput:
    exp(-x) four times chained cost 0.16 ns an exp more each (2 threads, float32), four
    independent exps summed 0.085 (benchmarks/results/notes.md, "The cost model validated
    again")."""
    x = torch.rand(numel, dtype=dtype)
    # greedy: the sum in one kernel whatever the device (the cost policy, pricing it with
    # the calibration being replaced, split it in some runs: exp came out 7.5 or 16 G/s)
    options = (("cache_dir", cache_dir), ("fusion", "greedy"))
    t = [_per_call(_compiled_for(torch.get_num_threads(), (_terms, template, k), options),
                   (x,), calls=20, clock=clock) for k in terms]
    return (terms[1] - terms[0]) * numel / max(t[1] - t[0], 1e-12)


def cache_bandwidth(cache_dir: str, elements: tuple[int, int],
                    clock=time.perf_counter) -> float | None:
    """Bytes/s (read + write) of a brrr kernel x + 1 on data the last-level cache holds
    and the L2s do not: the slope between two sizes (`elements`), replayed natively."""
    return _add_slope(cache_dir, elements, clock)


def scalar_transcendental_rate(cache_dir: str, clock=time.perf_counter) -> float:
    """sin evaluations per second inside a row argmax (a loop gcc does not vectorize): the
    slope between 1 and 4 sins per element over 256 cache-resident rows of 1024."""
    x = torch.rand(256, 1024)
    t = [_per_call(_compiled("torch.sin(x)", k, "x.argmax(-1)", cache_dir=cache_dir),
                   (x,), calls=10, clock=clock) for k in (1, 4)]
    return 3 * x.numel() / max(t[1] - t[0], 1e-12)


def reduce_rate(expr: str, cache_dir: str, clock=time.perf_counter) -> float:
    """Elements per second a brrr row reduction folds (cache-resident rows of 1024): the
    slope between 192 and 768 rows."""
    fn = _compiled(expr, 1, cache_dir=cache_dir)
    t = [_per_call(fn, (torch.rand(rows, 1024),), calls=20, clock=clock) for rows in (192, 768)]
    return (768 - 192) * 1024 / max(t[1] - t[0], 1e-12)


# streaming kernels timed with and without their input streams prefetched: one stream
# and three (prefetch_ratio); prefetching is on where it saves 2% on each of them
PREFETCHED = {"x * 0.5 - 1.0": "x", "x * y - z": "x, y, z"}
PREFETCH_PAYS = 0.98
_prefetch_variants: dict = {}


def prefetch_ratio(nbytes: int, cache_dir: str, clock=time.perf_counter,
                   rounds: int = 9) -> float:
    """The worst over PREFETCHED kernels (each input `nbytes` of float32, past the cache)
    of their time with software prefetch of the input streams over their time without:
    the median over `rounds` paired rounds, alternating which runs first. Whether it pays
    is the machine's: on a 2-vCPU AMD EPYC VM with AVX-512 prefetching won 1.06-1.57x on
    such kernels, on one without AVX-512 three streams lost 1.2-1.35x
    (benchmarks/results/notes.md, "Stream prefetch measured per machine")."""
    worst = 0.0
    for expr, args in PREFETCHED.items():
        inputs = [torch.rand(nbytes // 4) for _ in args.split(",")]
        on, off = (_prefetch_variant(expr, args, cache_dir, flag) for flag in (True, False))
        ratios = []
        for r in range(rounds):
            pair = (on, off) if r % 2 else (off, on)
            t = {fn: _per_call(fn, inputs, calls=1, rounds=3, clock=clock) for fn in pair}
            ratios.append(t[on] / t[off])
        worst = max(worst, sorted(ratios)[len(ratios) // 2])
    return worst


def _prefetch_variant(expr: str, args: str, cache_dir: str, prefetch: bool):
    """`def fn(args): return expr` compiled with input streams prefetched or not (the
    generic CPU's spec with stream_prefetch set; greedy fusion: one kernel), once per
    process and thread count."""
    from brrr_compiler.backend import brrr_backend
    from brrr_compiler.cost.device import generic_cpu
    threads = torch.get_num_threads()
    key = (expr, prefetch, threads, cache_dir)
    if key not in _prefetch_variants:
        fn = _function(f"def fn({args}):\n    return {expr}\n", f"{expr} prefetch={prefetch}")
        options = {"cache_dir": cache_dir, "fusion": "greedy",
                   "device": generic_cpu(threads).replace(stream_prefetch=prefetch)}
        _prefetch_variants[key] = torch.compile(
            fn, backend=functools.partial(brrr_backend, options=options), dynamic=False)
    return _prefetch_variants[key]


def stream_prefetch(cache_dir: str, llc: int, clock, figures) -> bool:
    """Whether streaming kernels should prefetch their inputs here (calibration.py's
    module docstring); `figures`: calibration's _Figures, which settles and notes it."""
    nbytes = min(max(2 * llc, 64 << 20), 256 << 20)
    ratio = figures.settle("stream prefetch", lambda: prefetch_ratio(nbytes, cache_dir, clock),
                           1.0)
    on = ratio <= PREFETCH_PAYS
    figures.log(f"  stream prefetch       {ratio:8.2f} x   (the worse of two streaming kernels' "
                f"time prefetching over not, {nbytes >> 20} MB inputs: "
                f"{'on' if on else 'off'}; {figures.note('stream prefetch')})")
    return on
