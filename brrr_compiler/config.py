"""brrr's configuration: one frozen dataclass, built once at the entry point.

Sources, later ones winning: defaults, `BRRR_*` environment variables, and the
`options={...}` dict given to `torch.compile` (or `mode=`, which torch hands over alone).
Every value is checked as it comes in (config_checks.py), and a bad one is an
`OptionError` naming the option or variable and what it accepts. The result is handed
down explicitly; nothing deeper in the pipeline reads the environment.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from brrr_compiler.config_checks import (
    OptionError, as_bool, as_byte_size, as_choice, as_count, as_fusion, as_device, as_passes,
    as_path, as_program, as_ratio)

FUSION_POLICIES = ("cost", "greedy", "none")
TARGETS = ("auto", "cpp", "triton")
LOW_PRECISION_MODES = ("eager", "float32")
LIBM_MODES = ("fast", "accurate")
# torch.compile's modes (torch/__init__.py); what each does in brrr: README.md, Options
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")     # as in inductor
AUTOTUNE_MODES = ("max-autotune", "max-autotune-no-cudagraphs")   # measure where unsure
# cost/measured.py's note: one prediction misses its measurement by 1.32x at the median
DEFAULT_AUTOTUNE_MARGIN = 1.3
DEFAULT_CACHE_MAX_BYTES = 4 << 30


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "brrr")


def default_calibration_dir() -> str:
    """Where `brrr calibrate` keeps this machine's numbers: apart from the kernel cache,
    so that clearing the cache keeps them."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "brrr")


@dataclass(frozen=True)
class Config:
    # fusion policy: "cost" (fuse when the cost model, counting the kernels lowering would
    # print, predicts a gain), "greedy" (fuse everything legal), "none", or a policy object
    fusion: Any = "cost"
    # the machine the cost model predicts for: None (this machine's `brrr calibrate`, else a
    # generic CPU; a GPU preset for CUDA tensors), "a100" | "h100" | "h200" | "cpu", a
    # device.json path, or a brrr_compiler.cost.DeviceSpec
    device: Any = None
    # where built kernels live (content-hash cache)
    cache_dir: str = field(default_factory=default_cache_dir)
    # the kernel cache's size cap in bytes; least recently used entries go first (0: none)
    cache_max_bytes: int = DEFAULT_CACHE_MAX_BYTES
    # where `brrr calibrate` saves device.json, which device=None reads (then, as older
    # versions kept it, <cache_dir>/device.json)
    calibration_dir: str = field(default_factory=default_calibration_dir)
    # if set, per-graph dumps of ATen graphs, fusion groups and generated source go here
    debug_dir: str | None = None
    # C++ compiler; None means $CXX, then g++, then c++, then clang++
    cxx: str | None = None
    # OpenMP threads for generated kernels; 0 means torch.get_num_threads()
    num_threads: int = 0
    # code generation target: "auto" (C++ for CPU tensors, Triton for CUDA tensors), "cpp",
    # or "triton" (also CPU tensors, under Triton's interpreter: TRITON_INTERPRET=1)
    target: str = "auto"
    # torch.compile's mode (MODES); kept so that later stages can act on it
    mode: str = "default"
    # replay each compiled graph of CUDA tensors from one CUDA graph (fewer launches);
    # None: as the mode says (on in CUDAGRAPH_MODES, silently off where it cannot apply)
    cudagraphs: bool | None = None
    # every fallback (ops left to ATen, a target or CUDA graphs not honoured) is an error
    strict: bool = False
    # names of graph passes to run, in order; None runs passes.PIPELINE
    passes: tuple[str, ...] | None = None
    # refuse groups with more distinct buffer arguments than this
    max_kernel_args: int = 48
    # check on every call, not only the first, that the tensors kernels read from ATen and
    # the graph inputs have the dtypes and strides the compiler assumed (a mismatch is
    # copied into the assumed layout: runtime/meta_check.py)
    check_strides: bool = False
    # run consecutive kernels of a graph as one native call, their intermediates in one
    # planned arena (runtime/segments.py); False calls each kernel on its own
    segments: bool = True
    # check every kernel's IR after lowering (kernel_verify.py; always on with debug_dir)
    verify_ir: bool = False
    # float16/bfloat16 values inside a kernel: "eager" rounds every op's result to its
    # dtype, as eager does (results match eager's bits but for the last-ulp differences of
    # transcendental functions); "float32" computes in float32 between ops and rounds only
    # at the casts the program wrote and at the kernel's stores (fewer roundings: faster,
    # and at least as accurate, but not eager's bits; inductor's default does the same
    # but also drops the program's own casts)
    low_precision: str = "float32"
    # float32 (and float16/bfloat16) transcendental functions in C++ kernels: "fast" calls
    # libmvec's float kernels (2-4 ulp; eager's are within 1), "accurate" evaluates them
    # in double and rounds once (correctly rounded, 2-6x the function's cost:
    # transforms/rounded_libm.py)
    libm: str = "fast"
    # under AUTOTUNE_MODES: a merge whose predicted times before and after differ by less
    # than this factor is measured (cost/measured.py); 1 measures none, a huge one all
    autotune_margin: float = DEFAULT_AUTOTUNE_MARGIN
    # fold reductions of another order into row kernels (C++ target): a loss's full sum,
    # cross-entropy's mean over rows, LayerNorm's weight and bias gradients beside its
    # row sums, as per-thread partials added in thread order (so such sums depend on the
    # thread count, never on timing); False gives them kernels of their own
    fold_across_rows: bool = True

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def wants_cudagraphs(self) -> bool:
        """CUDA graphs as asked for (option or BRRR_CUDAGRAPHS), else as the mode says."""
        return self.cudagraphs if self.cudagraphs is not None else self.mode in CUDAGRAPH_MODES

    def autotunes(self) -> bool:
        """Whether brrr measures candidates where its cost model is unsure (the mode)."""
        return self.mode in AUTOTUNE_MODES


def _choice(*choices):
    return lambda value, where, env: as_choice(value, where, choices)


# option -> (check(value, where, from_env) -> value, its BRRR_* variable or None)
_OPTIONS = {
    "fusion": (lambda v, where, env: as_fusion(v, where, FUSION_POLICIES), "BRRR_FUSION"),
    "device": (as_device, "BRRR_DEVICE"),
    "cache_dir": (as_path, "BRRR_CACHE_DIR"),
    "cache_max_bytes": (as_byte_size, "BRRR_CACHE_MAX_BYTES"),
    "calibration_dir": (as_path, "BRRR_CALIBRATION_DIR"),
    "debug_dir": (as_path, "BRRR_DEBUG_DIR"),
    "cxx": (as_program, "BRRR_CXX"),
    "num_threads": (as_count(0), "BRRR_NUM_THREADS"),
    "target": (_choice(*TARGETS), "BRRR_TARGET"),
    "mode": (_choice(*MODES), "BRRR_MODE"),
    "cudagraphs": (as_bool, "BRRR_CUDAGRAPHS"),
    "strict": (as_bool, "BRRR_STRICT"),
    "passes": (as_passes, None),
    "max_kernel_args": (as_count(1), None),
    "check_strides": (as_bool, "BRRR_CHECK_STRIDES"),
    "segments": (as_bool, "BRRR_SEGMENTS"),
    "verify_ir": (as_bool, "BRRR_VERIFY_IR"),
    "low_precision": (_choice(*LOW_PRECISION_MODES), "BRRR_LOW_PRECISION"),
    "libm": (_choice(*LIBM_MODES), "BRRR_LIBM"),
    "fold_across_rows": (as_bool, "BRRR_FOLD_ACROSS_ROWS"),
    "autotune_margin": (as_ratio, "BRRR_AUTOTUNE_MARGIN"),
}
_ENV = {env: key for key, (_, env) in _OPTIONS.items() if env}
# options that may be None, meaning "the default's rule" (the comments in Config)
_NONE_OK = {"device", "debug_dir", "cxx", "cudagraphs", "passes"}


def valid_keys() -> list[str]:
    return sorted(f.name for f in fields(Config))


def build_config(options: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None) -> Config:
    """The Config from the environment and `options`; any bad key or value raises
    OptionError, naming it and what is accepted."""
    environ = os.environ if environ is None else environ
    if options is not None and not isinstance(options, Mapping):
        raise OptionError(f"brrr: options must be a dict, got {type(options).__name__}")
    values: dict[str, Any] = {}
    for var, key in _ENV.items():
        if environ.get(var):            # set and not empty
            values[key] = _OPTIONS[key][0](environ[var], var, True)
    options = dict(options or {})
    _reject_unknown(options)
    for key, value in options.items():
        if value is None and key in _NONE_OK:
            values[key] = None
        else:
            values[key] = _OPTIONS[key][0](value, f"option {key}", False)
    return Config(**values)


def _reject_unknown(options: Mapping[str, Any]) -> None:
    for key in options:
        if not isinstance(key, str):
            raise OptionError(f"brrr: option names are strings, got {key!r}")
        if key not in _OPTIONS:
            close = difflib.get_close_matches(key, list(_OPTIONS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise OptionError(f"brrr: unknown option {key!r}{hint}; valid options: "
                              f"{', '.join(valid_keys())}")


def with_mode(options: Mapping[str, Any] | None, mode: str | None) -> dict | None:
    """`options` with torch.compile's `mode` folded in. torch hands a backend `mode` or
    `options`, never both (it rejects the pair), so `options={"mode": ...}` is how both
    are given; a conflicting pair here is an error."""
    if mode is None:
        return None if options is None else dict(options)
    options = dict(options or {})
    if options.get("mode", mode) != mode:
        raise OptionError(f"brrr: mode={mode!r} and options['mode']={options['mode']!r} "
                          "disagree; give one")
    options["mode"] = mode
    return options
