"""Calibration: measure this machine's DeviceSpec with small micro-benchmarks (< 1 minute).

A tool beside the pipeline, not part of the cost model: it compiles and runs brrr kernels
through the driver, so it lives at the top with the command line (cost/ only reads the
DeviceSpec it saves).

    streaming bandwidth    a brrr kernel x + 1 on 192 MB of float32 (read + write counted)
    cache bandwidth        a brrr kernel x + 1 on two sizes the last-level cache holds and
                           the L2s do not (moving twice the L2s and four times that, where
                           the LLC holds both; else 1.5 and 6 MB): bytes moved over the
                           time between the two sizes, the kernel replayed natively (as
                           segments call it: runtime/replay.py), not through the graph
    l2 bandwidth           the same on sizes the threads' L2s hold (read from sysfs: moving
                           a sixth and a half of them)
    transpose cost         a brrr transposed copy's time over x + 1's on the same bytes in
                           the last-level cache (the larger cache bandwidth size)
    flop rate              brrr kernels of 8 and 40 steps x * 1.0001 + 0.5 on 1 MB of
                           data (float32, float64): 2 flop-equivalents per step and element
    transcendental rate    brrr kernels summing 1 and 4 independent exp(-c x) on the same
                           data (as real kernels call them), and so sin, tanh, erf, sigmoid
                           and log (each its own rate; functions not measured by name at
                           the mean of the libm calls sin and log); chained ones (x =
                           exp(-x), 1 and 4 times) for a function of another's result
    reduce folds           x.sum(-1), x.amax(-1) over 192 and 768 cache-resident rows
    scalar transcendental  sin inside a row argmax (a loop that does not vectorize)
    overheads              one-element graphs of 1 and 65 kernels (fusion "none"), timed
                           in alternating batches: the slope is the per-kernel cost, the
                           intercept the per-call cost; again with segments off: a
                           kernel's call from Python
    fork overhead          an empty OpenMP parallel region on all threads, 10000 times in
                           one native call
    stream prefetch        brrr kernels x * 0.5 - 1.0 and x * y - z on inputs twice the
                           last-level cache share (at least 64 MB each), compiled with
                           their input streams prefetched and without, in paired rounds:
                           streaming kernels prefetch (DeviceSpec.stream_prefetch) where
                           both ran at most PREFETCH_PAYS (calibration_kernels.py) of
                           their time without

The sizes are chosen apart from the cost model's validation set
(benchmarks/bench_cost_model.py: x + 1 on 64K, 1M, 16M and 64M floats, x.amax(-1) on
1024x1024, ...), so the model is never validated on the points it was fitted to.

Every figure is measured again until its last three tries agree within STABLE_SPREAD
(at most TRIES tries) and the median of those three is kept; the spread is printed beside
it. A figure that never settles is noisy: `brrr calibrate` then refuses to save (a noisy
calibration would steer every later compile), unless told --force. A try more than 30x
off the generic CPU's number is implausible and not counted; a figure with no plausible
try keeps the generic value, and the spec's `source` says which. Compute is measured on brrr's
own kernels, so the rates include what its code generator
makes of them (vectorized libm calls, OpenMP tiles); the slope between two chain lengths
cancels call overhead and memory traffic. Each number is a low percentile over
repeated runs: on a shared machine noise only ever adds time. Large buffers are allocated
once and reused: without the glibc settings of `brrr calibrate` (MALLOC_MMAP_MAX_=0,
MALLOC_TRIM_THRESHOLD_=...) a fresh 256 MB tensor per call would time page faults.
"""
from __future__ import annotations

import datetime
import statistics
import time
from pathlib import Path
from typing import NamedTuple

import torch

from brrr_compiler.calibration_kernels import (EXP, FMA, FUNCTIONS, LIBM_CALLS, REDUCTIONS,
                                               cache_bandwidth, cached_extent, chain_rate,
                                               fork_overhead, l2_bandwidth, overheads,
                                               reduce_rate, stream_prefetch,
                                               scalar_transcendental_rate, stream_bandwidth,
                                               terms_rate, transpose_cost)
from brrr_compiler.cost.device import (CHAIN, MIB, DeviceSpec, generic_cpu, in_float64,
                                       save_device_spec)
from brrr_compiler.cost.estimate import L2_RAMP, LLC_RAMP
from brrr_compiler.machine import cache_sizes

STABLE_SPREAD = 0.10   # a figure's last three tries within 10% of each other
# ... or, for the per-kernel overheads, within 50 ns: a kernel's dispatch inside a segment
# is about 0.1 us, and its tries spread 20-370% on a 2-vCPU VM (so calibrate refused to
# save there) while differing by less than the smallest kernels' own noise
OVERHEAD_ATOL = 0.05e-6
TRIES = 6


def _llc_share(cache_dir: str, l2_total: int, llc: int, dram: float, clock, log) -> int:
    """The last-level cache the cost model counts on: sysfs's size, or less where x + 1
    streams before it fills (calibration_kernels.cached_extent: a VM's share of a large
    chip's cache). Sizes from 4x the L2s up to twice sysfs's, at most 512 MB moved."""
    moved, size = [], 1 << max(4 * l2_total - 1, 1).bit_length()
    while size <= min(2 * llc, 512 * MIB):
        moved.append(size)
        size *= 2
    if not moved:
        return llc
    kept = cached_extent(cache_dir, moved, dram, clock)
    share = min(llc, max(kept, l2_total))
    log(f"  last-level cache      {share / MIB:8.0f} MB  (sysfs {llc / MIB:.0f} MB; x + 1 beats "
        f"the streaming rate by 1.3x up to {kept / MIB:.0f} MB moved)")
    return share


def _llc_sizes(l2_total: int, llc: int) -> tuple[int, int]:
    """Two x + 1 sizes (float32 elements) whose bytes moved the cost model counts as all in
    the last-level cache and none in the L2s: from twice the L2s (cost.estimate.L2_RAMP)
    to four times that, within the LLC's cached part (LLC_RAMP). Sizes straddling the
    L2s timed an L2-speed point against an LLC one (a 2-vCPU Xeon VM with 4 MB of L2s:
    34 GB/s, where kernels moving 8-32 MB ran 48-53). Without room between the two,
    1.5 and 6 MB moved."""
    lo = int(L2_RAMP[1] * l2_total)
    hi = min(4 * lo, int(LLC_RAMP[0] * llc))
    return (lo // 8, hi // 8) if hi >= 2 * lo else (3 << 16, 3 << 18)


def llc_share(cache_dir: str | None = None, log=lambda message: None,
              clock=time.perf_counter) -> int:
    """The last-level cache (bytes) this process gets, as calibrate measures it (sysfs's
    size, or less where brrr's x + 1 streams before filling it: a VM's share of a large
    chip's cache): what the benchmarks size their last-level-cache cases by."""
    from brrr_compiler.config import build_config
    l2, llc = cache_sizes()
    cache_dir = cache_dir or build_config().cache_dir
    dram = stream_bandwidth(192 * MIB, cache_dir, clock)
    return _llc_share(cache_dir, l2 * torch.get_num_threads(), llc, dram, clock, log)


def _l2_sizes(l2_total: int, parallel_min: int) -> tuple[int, int] | None:
    """Two x + 1 sizes (float32 elements) that move at most half of the threads' L2s
    (8 bytes an element), both large enough to run on every thread; None if none are."""
    hi = l2_total // 16
    return (hi // 3, hi) if hi // 3 >= parallel_min else None


def cpu_model_name(default: str = "cpu") -> str:
    """The CPU's model name from /proc/cpuinfo, else `default`."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default


class Calibration(NamedTuple):
    spec: DeviceSpec
    spread: dict[str, float]    # figure -> max/min - 1 over the tries it kept
    noisy: list[str]            # figures whose tries never settled


class _Figures:
    """Each figure measured until it settles (module docstring), with its spread."""

    def __init__(self, log):
        self.log, self.spread, self.noisy, self.doubtful = log, {}, [], []

    def settle(self, name: str, run, default: float, atol: float = 0.0) -> float:
        """`run`'s figure once its last three tries agree within STABLE_SPREAD, or within
        `atol` of each other (a figure of a tenth of a microsecond whose tries differ by
        less than the model can use)."""
        values = []
        for _ in range(TRIES):
            value = run()
            if value is None:        # its micro-kernel could not be built here
                self.log(f"  {name}: not measurable here (its micro-kernel did not build); "
                         f"the generic {default:.3g} stands in")
                self.doubtful.append(name)
                return default
            if default / 30 <= value <= default * 30:
                values.append(value)
                if len(values) >= 3 and _settled(values[-3:], atol):
                    break
        if not values:
            self.log(f"  {name}: measured {value:.3g}, implausible (a busy machine?); "
                     f"the generic {default:.3g} stands in")
            self.doubtful.append(name)
            return default
        kept = values[-3:]
        self.spread[name] = _spread(kept)
        if len(kept) < 3 or not _settled(kept, atol):
            self.noisy.append(name)
        return statistics.median(kept)

    def note(self, name: str) -> str:
        spread = self.spread.get(name)
        return "generic" if spread is None else f"spread {100 * spread:.0f}%" + \
            (", NOISY" if name in self.noisy else "")


def _spread(values: list[float]) -> float:
    return max(values) / min(values) - 1 if min(values) > 0 else float("inf")


def _settled(values: list[float], atol: float) -> bool:
    return _spread(values) <= STABLE_SPREAD or max(values) - min(values) <= atol


def measure(cache_dir: str, log=print, clock=time.perf_counter) -> Calibration:
    """Run the micro-benchmarks and return this machine's DeviceSpec (not saved), with
    each figure's spread and the figures that never settled.

    `clock` times them: wall time by default; time.process_time (CPU time) measures a
    single-threaded configuration on a machine other jobs share, since time spent
    preempted does not count."""
    from brrr_compiler.schedule_ir import PARALLEL_MIN_NUMEL
    started, threads = time.perf_counter(), torch.get_num_threads()
    generic, figures = generic_cpu(threads), _Figures(log)
    sane = figures.settle
    l2, llc = cache_sizes()
    dram = sane("streaming bandwidth", lambda: stream_bandwidth(192 * MIB, cache_dir, clock),
                generic.dram_bandwidth)
    log(f"  streaming bandwidth   {dram / 1e9:8.1f} GB/s  (brrr x + 1 on 192 MB, read + write; "
        f"{figures.note('streaming bandwidth')})")
    llc = _llc_share(cache_dir, l2 * threads, llc, dram, clock, log)
    in_llc = _llc_sizes(l2 * threads, llc)
    cache = sane("cache bandwidth", lambda: cache_bandwidth(cache_dir, in_llc, clock),
                 generic.cache_bandwidth)
    log(f"  cache bandwidth       {cache / 1e9:8.1f} GB/s  (brrr x + 1 moving {in_llc[0] >> 17}"
        f" to {in_llc[1] >> 17} MB; {figures.note('cache bandwidth')})")
    transpose = sane("transpose cost", lambda: transpose_cost(cache_dir, in_llc[1], clock),
                     generic.transpose_cost)
    log(f"  transpose cost        {transpose:8.2f} x   (a brrr transposed copy against x + 1 "
        f"on {in_llc[1] >> 17} MB moved; {figures.note('transpose cost')})")
    in_l2 = _l2_sizes(l2 * threads, PARALLEL_MIN_NUMEL)
    l2_rate = sane("l2 bandwidth", lambda: l2_bandwidth(cache_dir, in_l2, clock),
                   cache) if in_l2 else 0.0
    log(f"  l2 bandwidth          {l2_rate / 1e9:8.1f} GB/s  (brrr x + 1 on {in_l2[0] // 256}"
        f" to {in_l2[1] // 256} KB; {figures.note('l2 bandwidth')})" if in_l2 else
        f"  l2 bandwidth          not measured: the L2s ({l2 * threads >> 10} KB) hold no "
        f"kernel large enough to run on every thread; the cache bandwidth stands in")
    per_kernel = sane("kernel overhead", lambda: overheads(cache_dir, clock)[0],
                      generic.kernel_overhead_s, atol=OVERHEAD_ATOL)
    per_call = sane("call overhead", lambda: overheads(cache_dir, clock)[1],
                    generic.call_overhead_s)
    from_python = sane("python call overhead", lambda: overheads(cache_dir, clock, False)[0],
                       generic.python_call_overhead_s, atol=OVERHEAD_ATOL)
    fork = sane("fork overhead", lambda: fork_overhead(cache_dir, clock),
                generic.fork_overhead_s) if threads > 1 else 0.0
    log(f"  overhead              {per_kernel * 1e6:8.2f} us per kernel in a segment "
        f"({figures.note('kernel overhead')}), {from_python * 1e6:.2f} called from Python "
        f"({figures.note('python call overhead')}), {per_call * 1e6:.2f} us per graph call "
        f"({figures.note('call overhead')}), {fork * 1e6:.2f} us to fork "
        f"({figures.note('fork overhead')})")
    prefetch = stream_prefetch(cache_dir, llc, clock, figures)
    flops, functions, other = _compute_figures(cache_dir, clock, generic, figures)
    date = datetime.date.today().isoformat()
    source = f"calibrated {date} ({threads} threads)"
    if figures.doubtful:
        source += "; generic numbers for " + ", ".join(figures.doubtful)
    spec = DeviceSpec(
        name=cpu_model_name(), kind="cpu", threads=threads, flops=flops,
        transcendentals=other, functions=functions,
        dram_bandwidth=dram, cache_bandwidth=cache, l2_bandwidth=l2_rate, l2_bytes=l2,
        llc_bytes=llc,
        kernel_overhead_s=per_kernel, call_overhead_s=per_call, fork_overhead_s=fork,
        python_call_overhead_s=from_python,
        parallel_min_elements=PARALLEL_MIN_NUMEL, transpose_cost=transpose, overlap=1.0,
        stream_prefetch=prefetch, source=source)
    log(f"  done in {time.perf_counter() - started:.1f} s")
    return Calibration(spec, dict(figures.spread), list(figures.noisy))


def _compute_figures(cache_dir: str, clock, generic: DeviceSpec, figures: _Figures):
    """(flop rates by dtype, function rates by name, the rate of functions not measured
    by name) from brrr's own kernels."""
    sane, log = figures.settle, figures.log
    flops = {}
    for dtype in (torch.float32, torch.float64):
        key = str(dtype)[6:]
        flops[key] = sane(f"{key} flop rate", lambda: 2 * chain_rate(
            FMA, (8, 40), dtype, cache_dir, clock=clock), generic.flops[key])
    flops["float16"] = flops["bfloat16"] = flops["float32"]     # computed in float32
    log(f"  flop rate             {flops['float32'] / 1e9:8.1f} GFLOP/s float32 "
        f"({figures.note('float32 flop rate')}), {flops['float64'] / 1e9:.1f} float64 "
        f"({figures.note('float64 flop rate')})  (x * a + b chains)")
    functions = {}
    for name, template in FUNCTIONS.items():         # each term: a scale and an add besides
        per_term = sane(name, lambda: terms_rate(template, (1, 4), cache_dir, clock=clock),
                        generic.transcendentals)
        functions[name] = _less_flops(per_term, 2, flops["float32"])
    for name, template in FUNCTIONS.items():         # libm's double functions, not brrr's
        per_term = sane(f"{name} float64", lambda: terms_rate(
            template, (1, 4), cache_dir, clock=clock, dtype=torch.float64),
            generic.functions.get(in_float64(name), functions[name] / 4))
        functions[in_float64(name)] = _less_flops(per_term, 2, flops["float64"])
    trans = statistics.mean(functions[name] for name in LIBM_CALLS)
    per_step = sane("exp chain", lambda: chain_rate(EXP, (1, 4), torch.float32, cache_dir,
                                                    clock=clock), functions["exp"] / 2)
    functions[CHAIN] = _less_flops(per_step, 1, flops["float32"])          # less the neg
    log(f"  transcendental rate   {functions['exp'] / 1e9:8.2f} G/s exp (sums; "
        f"{figures.note('exp')}), {functions[CHAIN] / 1e9:.2f} chained (exp chains; "
        f"{figures.note('exp chain')}), {trans / 1e9:.2f} other functions (libm calls: "
        f"{', '.join(LIBM_CALLS)})")
    for name, expr in REDUCTIONS.items():
        functions[name] = sane(name, lambda: reduce_rate(expr, cache_dir, clock),
                               generic.functions.get(name, flops["float32"]))
    functions["reduce_min"] = functions["reduce_max"]           # the same loop
    functions["scalar_transcendental"] = sane(
        "scalar_transcendental", lambda: scalar_transcendental_rate(cache_dir, clock),
        generic.functions["scalar_transcendental"])
    log("  functions             " + ", ".join(
        f"{k} {v / 1e9:.2f} ({figures.note(k)})" for k, v in functions.items()
        if k not in ("exp", "reduce_min", CHAIN) and not k.endswith(".float64")) + " G/s")
    log("  float64 functions     " + ", ".join(
        f"{k} {functions[in_float64(k)] / 1e9:.2f} ({figures.note(f'{k} float64')})"
        for k in FUNCTIONS) + " G/s")
    return flops, functions, trans


def _less_flops(rate: float, flops: float, flop_rate: float) -> float:
    """Evaluations/s of a step's function alone: its `flops` of cheap work taken out (at
    most half the step's time, should the flop rate be off)."""
    return 1 / max(1 / rate - flops / flop_rate, 1 / (2 * rate))


def calibrate(cache_dir: str | None = None, save: bool = True, log=print,
              calibration_dir: str | None = None, force: bool = False) -> DeviceSpec:
    """Measure this machine (about a minute, building kernels in `cache_dir`) and save it
    as <calibration_dir>/device.json, which later compiles load; returns the DeviceSpec.
    Both dirs default to Config's (BRRR_CACHE_DIR, BRRR_CALIBRATION_DIR). A calibration
    with noisy figures is not saved unless `force` (see run)."""
    return run(cache_dir, save, log, calibration_dir, force)[0].spec


def run(cache_dir: str | None = None, save: bool = True, log=print,
        calibration_dir: str | None = None, force: bool = False):
    """calibrate's work: (Calibration, the path saved or None). Measured at the thread
    count brrr's kernels will use (Config.num_threads, else torch's)."""
    from brrr_compiler.config import build_config
    cfg = build_config()
    before = torch.get_num_threads()
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    try:
        result = measure(cache_dir or cfg.cache_dir, log)
    finally:
        torch.set_num_threads(before)
    if not save:
        return result, None
    if result.noisy and not force:
        log(f"  not saved: {', '.join(result.noisy)} did not settle within "
            f"{100 * STABLE_SPREAD:.0f}% over {TRIES} tries (a busy machine?); run it again "
            "when the machine is quiet, or pass --force to save these numbers anyway")
        return result, None
    path = save_device_spec(result.spec, calibration_dir or cfg.calibration_dir)
    log(f"  saved {path}")
    return result, path
