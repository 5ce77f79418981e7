"""DeviceSpec: the handful of machine numbers the cost model needs, and where they come from.

A spec is one of: the calibration of this machine (`brrr calibrate` writes
`<calibration_dir>/device.json`, apart from the kernel cache; older versions wrote
`<cache_dir>/device.json`, which is still read), a generic-CPU default when there is none, or a GPU preset
from datasheets (A100, H100, H200). Compute throughput is in flop-equivalents per
second, the unit of the op table (ops.py: an add or a mul is 1, so a vector FMA counts 2,
as datasheets count it); transcendental functions have their own rate, in evaluations per
second, because their cost relative to an add differs from machine to machine (libmvec
on a CPU, special-function units on a GPU).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from brrr_compiler.machine import MIB

DEVICE_FILE = "device.json"
# DeviceSpec.functions key: exp-class evaluations/s of a function whose argument is
# another's result in the same element's work (latency-bound: see calibration_kernels)
CHAIN = "transcendental_chain"


def in_float64(function: str) -> str:
    """DeviceSpec.functions key of `function`'s rate in float64: libm's double functions
    (exp and erf included, which brrr inlines only in float32) run 2-6x slower than
    float32's, more than the flop rates' 2x (benchmarks/results/notes.md, "float64
    functions")."""
    return f"{function}.float64"


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    kind: str                       # "cpu" or "cuda"
    threads: int                    # CPU threads a kernel runs on (GPU: SMs, informative)
    flops: dict = field(default_factory=dict)   # dtype name -> flop-equivalents/s, all threads
    transcendentals: float = 0.0    # evaluations/s in float32, all threads, of a function the
    #                                 device measured no rate of its own for (functions)
    functions: dict = field(default_factory=dict)   # op -> evaluations/s (float32, all
    #   threads) measured for this machine: transcendentals by name ("erf"), reduce folds
    #   as "reduce_<kind>"; ops not listed are priced from the op table's weights
    dram_bandwidth: float = 0.0     # bytes/s streaming from memory (a copy counts read + write)
    cache_bandwidth: float = 0.0    # bytes/s re-reading data resident in the last-level cache
    l2_bandwidth: float = 0.0       # bytes/s, all threads, re-reading data resident in their
    #                                 private L2s (0: cache_bandwidth; GPU: unused)
    l2_bytes: int = 0               # private cache per thread: per-row re-reads that fit are cheap
    llc_bytes: int = 0              # last-level cache: a kernel whose bytes fit runs from cache
    kernel_overhead_s: float = 0.0  # per kernel: C call or launch, plus the runner's dispatch
    python_call_overhead_s: float = 0.0   # per CPU kernel the runner calls from Python, not
    #                                 in a segment (alone between library calls, writing
    #                                 into an input, an error flag): 0 = kernel_overhead_s
    call_overhead_s: float = 0.0    # per call of a compiled graph (guards, runner entry)
    fork_overhead_s: float = 0.0    # per CPU kernel that runs on more than one thread
    parallel_min_elements: int = 0  # smaller kernels run on one thread (the C++ printer's rule)
    overlap: float = 1.0            # 1: time = max(compute, memory); 0: their sum
    transpose_cost: float = 1.0     # a byte a tiled kernel moves through block transposes
    #                                 costs this many dense bytes' time (CPU)
    stream_prefetch: bool = False   # CPU: streaming pointwise kernels ask for their input
    #                                 streams ahead (software prefetch); calibration turns it
    #                                 on where it measured it paying (calibration.py)
    source: str = "default"         # "default", "datasheet", "calibrated <date>", a path

    @functools.cached_property
    def float64_slowdown(self) -> float | None:
        """The geometric mean of float32 over float64 rates of the functions measured in
        both (None: none is); kept, the estimate asks it for every float64 function."""
        ratios = [math.log(rate / self.functions[in_float64(name)])
                  for name, rate in self.functions.items() if self.functions.get(in_float64(name))]
        return math.exp(sum(ratios) / len(ratios)) if ratios else None

    def flops_for(self, dtype: torch.dtype) -> float:
        """Flop-equivalents/s for arithmetic in `dtype` (integers and bool: float32's)."""
        key = dtype_key(dtype)
        if key not in self.flops:
            raise KeyError(f"brrr: device {self.name!r} has no flop rate for {key}")
        return self.flops[key]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DeviceSpec":
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"brrr: unknown DeviceSpec fields {unknown}")
        return cls(**data)

    def replace(self, **changes: Any) -> "DeviceSpec":
        return dataclasses.replace(self, **changes)


def dtype_key(dtype: torch.dtype) -> str:
    """The flops-table key for arithmetic in `dtype`."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"brrr: not a dtype: {dtype!r}")
    if dtype.is_floating_point:
        return str(dtype).replace("torch.", "")
    return "float32"


def generic_cpu(threads: int | None = None) -> DeviceSpec:
    """A middle-of-the-road current AVX2 server core, scaled to `threads` (default torch's).

    Rates a little below the calibrations of the 2-vCPU EPYC and Xeon brrr is measured on
    (benchmarks/results/notes.md, "The generic device refreshed"): the per-kernel
    dispatch of a kernel in a segment (0.1-0.3 us measured), a call from Python (1.1-1.3),
    inline vectorized exp (8.5 G/s a thread measured), libm calls (5.2), exp chained on
    its own result (3.6), functions in loops that do not vectorize (2.7), exp in float64
    (1.6: libm's double exp, 4x slower than float32's where the flop rate halves)."""
    t = threads or torch.get_num_threads()
    per_thread = {"float32": 40e9, "float64": 20e9, "float16": 40e9, "bfloat16": 40e9}
    functions = {"exp": 7e9, CHAIN: 3e9, "scalar_transcendental": 2e9,
                 in_float64("exp"): 1.5e9}
    return DeviceSpec(
        name="generic-cpu", kind="cpu", threads=t,
        flops={k: v * t for k, v in per_thread.items()}, transcendentals=4e9 * t,
        functions={k: v * t for k, v in functions.items()},
        dram_bandwidth=40e9, cache_bandwidth=70e9 * t, l2_bytes=1 * MIB, llc_bytes=32 * MIB,
        kernel_overhead_s=0.3e-6, call_overhead_s=15e-6, fork_overhead_s=1e-6 if t > 1 else 0.0,
        python_call_overhead_s=1.5e-6,
        parallel_min_elements=32768, transpose_cost=2.0,
        overlap=1.0, source="default")


def _gpu(name, sms, fp32, fp64, fp16, bf16, sfu_per_s, hbm, l2_bw, l2, launch) -> DeviceSpec:
    return DeviceSpec(
        name=name, kind="cuda", threads=sms,
        flops={"float32": fp32, "float64": fp64, "float16": fp16, "bfloat16": bf16},
        transcendentals=sfu_per_s, dram_bandwidth=hbm, cache_bandwidth=l2_bw,
        l2_bytes=192 * 1024, llc_bytes=l2, kernel_overhead_s=launch, call_overhead_s=20e-6,
        parallel_min_elements=0, overlap=1.0, source="datasheet")


# Datasheet numbers (SXM parts, boost clock, vector units — tensor cores serve matmuls,
# which brrr leaves to the vendor library). Transcendentals: 16 special-function results
# per SM per clock. L2 bandwidth and launch overhead are typical measured values.
PRESETS: dict[str, DeviceSpec] = {
    "a100": _gpu("A100-SXM4-80GB", 108, 19.5e12, 9.7e12, 78e12, 39e12,
                 108 * 16 * 1.41e9, 2.039e12, 5.0e12, 40 * MIB, 4e-6),
    "h100": _gpu("H100-SXM5-80GB", 132, 66.9e12, 33.5e12, 133.8e12, 133.8e12,
                 132 * 16 * 1.98e9, 3.35e12, 8.0e12, 50 * MIB, 3.5e-6),
    "h200": _gpu("H200-SXM-141GB", 132, 66.9e12, 33.5e12, 133.8e12, 133.8e12,
                 132 * 16 * 1.98e9, 4.8e12, 8.0e12, 50 * MIB, 3.5e-6),
}


def device_file(directory: str) -> str:
    return os.path.join(directory, DEVICE_FILE)


def save_device_spec(spec: DeviceSpec, directory: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = device_file(directory)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(spec.to_json() + "\n")
    os.replace(tmp, path)
    return path


def load_device_spec(path: str) -> DeviceSpec:
    with open(path) as f:
        return DeviceSpec.from_json(f.read())


def current_device_spec(directories: str | Sequence[str]) -> DeviceSpec:
    """This machine's calibration: the first `<directory>/device.json` of `directories`
    (Config.calibration_dir, then the cache dir where older versions kept it), else
    generic_cpu()."""
    if isinstance(directories, (str, os.PathLike)):
        directories = [directories]
    path = next((device_file(d) for d in directories if os.path.exists(device_file(d))), None)
    if path is None:
        return generic_cpu()
    try:
        return load_device_spec(path)
    except (OSError, ValueError, TypeError) as err:
        from brrr_compiler.log import warn_once
        warn_once(f"device-{path}", f"brrr: ignoring unreadable calibration {path} ({err}); "
                                    "generic CPU numbers apply instead")
        return generic_cpu()


def gpu_preset(target: torch.device) -> DeviceSpec:
    """The datasheet preset matching the GPU's name (an unknown GPU gets the A100's)."""
    try:
        name = torch.cuda.get_device_name(target).lower()
    except (RuntimeError, AssertionError, AttributeError):
        name = ""
    return next((spec for key, spec in PRESETS.items() if key in name), PRESETS["a100"])


def resolve_device(option: Any, calibration_dirs: str | Sequence[str],
                   target: torch.device | None = None) -> DeviceSpec:
    """The spec named by options["device"]: None (this machine: its calibration, found in
    `calibration_dirs`, or for kernels on a CUDA `target` the GPU's preset), a preset
    name, a JSON path, a DeviceSpec."""
    if option is None:
        if target is not None and torch.device(target).type == "cuda":
            return gpu_preset(target)
        return current_device_spec(calibration_dirs)
    if isinstance(option, DeviceSpec):
        return option
    if isinstance(option, str):
        if option.lower() in PRESETS:
            return PRESETS[option.lower()]
        if option.lower() in ("cpu", "generic-cpu"):
            return generic_cpu()
        if os.path.exists(option):
            return load_device_spec(option)
        raise ValueError(f"brrr: option device={option!r}; expected a preset "
                         f"({', '.join(['cpu', *PRESETS])}), a device.json path or a DeviceSpec")
    raise TypeError(f"brrr: option device must be a str or DeviceSpec, got {type(option).__name__}")
