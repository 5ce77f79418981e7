"""Predicted time of one kernel on one device: compute, memory, overhead, and which binds.

    compute  = cheap flops / flop rate + transcendentals / transcendental rate  (per dtype)
    memory   = (bytes read + written; transposed ones at the device's transpose cost) at
               the bandwidth of where they live
               + per-row re-reads (at cache speed when a row of them fits in L2)
    overhead = the per-kernel call (a C call inside a segment, or one from Python where the
               runner calls it alone; a launch on a GPU), and on a CPU the fork and join
               of its threads when its schedule runs it on several
    time     = overhead + max(compute, memory) + (1 - overlap) * min(compute, memory)

Note on the combination. With overlap = 1 this is the roofline (time is the larger of
compute and memory); with overlap = 0 it is their sum (XLA's compute + memory - overlap
with no overlap). The roofline predicted better where both were measured
(benchmarks/results/notes.md, "Roofline against sum"): the prefetchers stream a tile while the vector units work on the last one, so the slower of
the two hides the faster. The device carries `overlap` so another machine can say
otherwise.

Where bytes live. A kernel's data is assumed hot from the kernel before it when it fits in
the last-level cache: up to half the LLC it runs at cache bandwidth, beyond 4x the LLC at
DRAM bandwidth, and in between the hit fraction falls linearly in log(bytes), the shape a
copy of growing size measures (benchmarks/results/notes.md, "Cache hit fraction by
size"). The kernels a fusion decision compares run back to back and share the cache: each
is priced at the hit fraction of their bytes together (else splitting a kernel would look
cheaper merely because each part fits the cache better). Within the cached share, what
the threads' L2s hold (all up to half their size, none past twice it, the same log ramp)
moves at the device's L2 bandwidth where it measured one. A later loop phase re-reading a row finds it in L2 when a row fits there, else in
the LLC as far as one row per thread fits it (the same hit fraction). A CPU kernel smaller than
device.parallel_min_elements runs on one thread: its compute and cache rates are divided
by the thread count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from brrr_compiler import ops
from brrr_compiler.cost.device import CHAIN, DeviceSpec, in_float64
from brrr_compiler.cost.from_kernel import kernel_stats
from brrr_compiler.cost.stats import (CHAINED, REDUCE, SCALAR, CostModelError, KernelStats,
                                      function_name, size_hints, special_cost)
from brrr_compiler.schedule_ir import SPLIT_MIN_RED


@dataclass(frozen=True)
class Estimate:
    compute_s: float
    memory_s: float
    overhead_s: float
    total_s: float
    bound: str                # "compute", "memory" or "overhead"
    flops: float              # flop-equivalents (transcendentals at op-table weight)
    bytes: int                # bytes read + written (re-reads not included)

    def describe(self) -> str:
        return (f"{self.bound}-bound: {self.total_s * 1e6:.3g} us (compute "
                f"{self.compute_s * 1e6:.3g}, memory {self.memory_s * 1e6:.3g}, overhead "
                f"{self.overhead_s * 1e6:.3g} us)")


LLC_RAMP = (0.5, 4.0)
# the L2s together: all served from them up to half their size, none beyond twice it
# (x + 1 on this EPYC, 1 MB of L2 a thread: 175 GB/s at 1 MB moved, 140 at 2, 124 at 4)
L2_RAMP = (0.5, 2.0)


def hit_fraction(nbytes: float, llc_bytes: float, ramp: tuple = LLC_RAMP) -> float:
    """Fraction of a kernel's bytes served from a cache of `llc_bytes` (see the note)."""
    lo, hi = ramp[0] * llc_bytes, ramp[1] * llc_bytes
    if llc_bytes <= 0 or nbytes >= hi:
        return 0.0
    if nbytes <= lo:
        return 1.0
    return math.log(hi / nbytes) / math.log(hi / lo)


def parallel_threads(stats: KernelStats, device: DeviceSpec) -> int:
    """Threads the kernel runs on: its schedule's word where sizes are known, else the
    C++ printer's rule (small kernels stay on one thread)."""
    if device.kind != "cpu":
        return device.threads
    if stats.forks is not None:
        return device.threads if stats.forks else 1
    if stats.points >= device.parallel_min_elements and (
            stats.rows > 1 or stats.points >= SPLIT_MIN_RED):
        return device.threads
    return 1


def compute_seconds(stats: KernelStats, device: DeviceSpec) -> float:
    """Cheap flops at the flop rate; each transcendental and reduce fold at the rate the
    device measured for it, else at its op-table weight (transcendentals: in exp units at
    the transcendental rate; folds: flops); transcendentals in unvectorized loops at the
    measured scalar rate; chained ones (one of another's result) slower by the device's
    chained rate against its rate. float64 and other dtypes scale by their flop rate
    relative to float32."""
    if device.transcendentals <= 0:
        raise CostModelError(f"brrr: device {device.name!r} has no transcendental rate")
    t = 0.0
    for key, flops in stats.flops.items():
        t += flops / _rate(device, key)
    for (key, op), count in stats.special.items():
        scale = _rate(device, "float32") / _rate(device, key)
        if op.endswith(SCALAR) and device.functions.get("scalar_transcendental"):
            units = count * special_cost(op) / ops.TRANSCENDENTAL
            t += units / device.functions["scalar_transcendental"] * scale
            continue
        chain = _chain_factor(device) if op.endswith(CHAINED) else 1.0
        op = function_name(op)
        if op.startswith(REDUCE):
            measured = device.functions.get(op)
            t += count / measured * scale if measured else \
                count * special_cost(op) / _rate(device, key)
            continue
        if key == "float64":
            scale = _float64_scale(device, op, scale)
        if device.functions.get(op):         # measured (row schedule; not "...@columns")
            t += count / device.functions[op] * scale * chain
        else:
            t += count * special_cost(op) / ops.TRANSCENDENTAL / device.transcendentals \
                * scale * chain
    return t


def _float64_scale(device: DeviceSpec, op: str, flop_scale: float) -> float:
    """How much longer `op` takes in float64 than in float32: its own measured rates'
    ratio, else the geometric mean of the functions measured in both, else the flop
    rates' ratio (`flop_scale`)."""
    measured = device.functions.get(in_float64(op))
    if measured and device.functions.get(op):
        return device.functions[op] / measured
    return device.float64_slowdown or flop_scale


def _chain_factor(device: DeviceSpec) -> float:
    """How much longer a chained transcendental takes than an independent one: the
    device's chained exp rate against its exp rate (1 where it measured none)."""
    chained = device.functions.get(CHAIN)
    return max(device.functions.get("exp", device.transcendentals) / chained, 1.0) \
        if chained else 1.0


def _rate(device: DeviceSpec, key: str) -> float:
    rate = device.flops.get(key)
    if not rate:
        raise CostModelError(f"brrr: device {device.name!r} has no flop rate for {key}")
    return rate


def memory_seconds(stats: KernelStats, device: DeviceSpec, slow: float = 1.0,
                   working_set: int | None = None) -> float:
    """`working_set`: the bytes of the kernels run back to back with this one (default
    its own), whose share of the LLC sets the hit fraction."""
    if device.dram_bandwidth <= 0 or device.cache_bandwidth <= 0:
        raise CostModelError(f"brrr: device {device.name!r} has no bandwidth")
    ws = stats.bytes if working_set is None else working_set
    hit = hit_fraction(ws, device.llc_bytes)
    in_l2 = hit_fraction(ws, device.l2_bytes * max(device.threads / slow, 1.0), L2_RAMP)
    moved = stats.bytes + (device.transpose_cost - 1.0) * stats.transposed_bytes
    t = moved * (hit * _cached(device, in_l2, slow) + (1 - hit) / device.dram_bandwidth)
    # a line per element, from where the kernel's bytes are (the LLC for the share that
    # fits, else memory): a column walk's transposed stores, evicted before the next work
    # item reuses them (from_kernel._scattered), and its loads strided along both its
    # columns and rows (from_kernel._gathered)
    lines = stats.gathered_bytes + (stats.scattered_bytes
                                    if stats.scattered_span > device.l2_bytes else 0)
    t += lines * (hit * _cached(device, 0.0, slow) + (1 - hit) / device.dram_bandwidth)
    if stats.reread_bytes:
        # a row is read again right after its first pass: what stays cached in between is
        # one row per thread (in L2 when a row fits, else as much of the LLC as it takes)
        if stats.reread_row_bytes <= device.l2_bytes:
            return t + stats.reread_bytes * _cached(device, 1.0, slow)
        rows_live = stats.reread_row_bytes * max(device.threads / slow, 1.0)
        hit = hit_fraction(rows_live, device.llc_bytes)
        t += stats.reread_bytes * (hit * _cached(device, 0.0, slow)
                                   + (1 - hit) / device.dram_bandwidth)
    return t


def _cached(device: DeviceSpec, in_l2: float, slow: float) -> float:
    """Seconds a byte takes from cache, `in_l2` of them from the threads' L2s."""
    l2 = device.l2_bandwidth or device.cache_bandwidth
    return slow * (in_l2 / l2 + (1 - in_l2) / device.cache_bandwidth)


def predict(stats: KernelStats, device: DeviceSpec, working_set: int | None = None,
            from_python: bool = False) -> Estimate:
    """`stats`' time on `device`; `working_set`: see memory_seconds; `from_python`: the
    runner calls the kernel from Python rather than inside a segment (where the device
    measured what that costs)."""
    threads = parallel_threads(stats, device)
    slow = device.threads / threads
    compute = compute_seconds(stats, device) * slow
    memory = memory_seconds(stats, device, slow, working_set)
    call = device.python_call_overhead_s if from_python and device.python_call_overhead_s \
        else device.kernel_overhead_s
    overhead = call + (device.fork_overhead_s if threads > 1 else 0.0)
    hi, lo = max(compute, memory), min(compute, memory)
    total = overhead + hi + (1.0 - device.overlap) * lo
    if overhead >= hi:
        bound = "overhead"
    else:
        bound = "compute" if compute >= memory else "memory"
    return Estimate(compute, memory, overhead, total, bound, stats.total_flops, stats.bytes)


def estimate_kernel(kernel, schedule, device: DeviceSpec, hints: dict | None = None,
                    from_python: bool = False) -> Estimate:
    """A lowered kernel run by `schedule` (its CppSchedule or TritonSchedule);
    `from_python`: see predict."""
    return predict(kernel_stats(kernel, schedule, hints), device, from_python=from_python)


def kernel_report_fields(kernel, schedule, group, device: DeviceSpec | None,
                         from_python: bool = False) -> dict:
    """KernelReport's predicted_s, bound, flops and bytes for a lowered kernel and its
    schedule ({} when there is no kernel IR, schedule or device; the model's error when
    it lacks a number); `from_python`: the runner calls it outside a segment."""
    if kernel is None or schedule is None or device is None:
        return {}
    try:
        vals = [n.meta.get("val") for n in [*group.nodes, *group.inputs]]
        est = estimate_kernel(kernel, schedule, device, size_hints(vals), from_python)
    except CostModelError as err:
        return {"estimate_error": str(err)}
    return {"predicted_s": est.total_s, "bound": est.bound, "flops": est.flops,
            "bytes": est.bytes, "compute_s": est.compute_s, "memory_s": est.memory_s}
