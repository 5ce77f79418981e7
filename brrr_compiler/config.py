"""brrr's configuration: one frozen dataclass, built once at the entry point.

Sources, later ones winning: defaults, `BRRR_*` environment variables, and the
`options={...}` dict given to `torch.compile`. The result is handed down explicitly;
nothing deeper in the pipeline reads the environment.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "brrr")


@dataclass(frozen=True)
class Config:
    # fusion policy: "cost" (fuse when the cost model predicts a gain), "greedy" (fuse
    # everything legal), "none", or a policy object
    fusion: Any = "greedy"
    # the machine the cost model predicts for: None (this machine's `brrr calibrate`, else a
    # generic CPU; a GPU preset for CUDA tensors), "a100" | "h100" | "h200" | "cpu", a
    # device.json path, or a brrr_compiler.cost.DeviceSpec
    device: Any = None
    # where built kernels live (content-hash cache)
    cache_dir: str = field(default_factory=default_cache_dir)
    # if set, per-graph dumps of ATen graphs, fusion groups and generated source go here
    debug_dir: str | None = None
    # C++ compiler; None means $CXX, then g++, then c++, then clang++
    cxx: str | None = None
    # OpenMP threads for generated kernels; 0 means torch.get_num_threads()
    num_threads: int = 0
    # code generation target: "auto" (C++ for CPU tensors, Triton for CUDA tensors), "cpp",
    # or "triton" (also CPU tensors, under Triton's interpreter: TRITON_INTERPRET=1)
    target: str = "auto"
    # replay each compiled graph of CUDA tensors from one CUDA graph (fewer launches)
    cudagraphs: bool = False
    # names of graph passes to run, in order; None runs passes.PIPELINE
    passes: tuple[str, ...] | None = None
    # refuse groups with more distinct buffer arguments than this
    max_kernel_args: int = 48
    # check at run time that ATen fallbacks return the strides the compiler assumed
    check_strides: bool = False
    # float16/bfloat16 values inside a kernel: "eager" rounds every op's result to its
    # dtype, as eager does (results match eager's bits but for the last-ulp differences of
    # transcendental functions); "float32" computes in float32 between ops and rounds only
    # at the casts the program wrote and at the kernel's stores (fewer roundings: faster,
    # and at least as accurate, but not eager's bits; inductor's default does the same
    # but also drops the program's own casts)
    low_precision: str = "float32"
    # fold reductions of another order into row kernels (C++ target): a loss's full sum,
    # cross-entropy's mean over rows, LayerNorm's weight and bias gradients beside its
    # row sums, as per-thread partials added in thread order (so such sums depend on the
    # thread count, never on timing); False gives them kernels of their own
    fold_across_rows: bool = True

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)


LOW_PRECISION_MODES = ("eager", "float32")

_ENV = {
    "BRRR_FUSION": ("fusion", str),
    "BRRR_DEVICE": ("device", str),
    "BRRR_CACHE_DIR": ("cache_dir", str),
    "BRRR_DEBUG_DIR": ("debug_dir", str),
    "BRRR_CXX": ("cxx", str),
    "BRRR_NUM_THREADS": ("num_threads", int),
    "BRRR_TARGET": ("target", str),
    "BRRR_LOW_PRECISION": ("low_precision", str),
    "BRRR_CHECK_STRIDES": ("check_strides", lambda v: v not in ("", "0", "false", "False")),
    "BRRR_CUDAGRAPHS": ("cudagraphs", lambda v: v not in ("", "0", "false", "False")),
    "BRRR_FOLD_ACROSS_ROWS": ("fold_across_rows", lambda v: v not in ("", "0", "false", "False")),
}


def valid_keys() -> list[str]:
    return sorted(f.name for f in fields(Config))


def build_config(options: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Build the Config from the environment and `options`; unknown option keys raise."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for var, (key, conv) in _ENV.items():
        if environ.get(var):
            values[key] = conv(environ[var])
    options = dict(options or {})
    unknown = sorted(set(options) - set(valid_keys()))
    if unknown:
        raise ValueError(
            f"brrr: unknown option(s) {unknown}; valid options are: {', '.join(valid_keys())}"
        )
    values.update(options)
    if values.get("passes") is not None:
        values["passes"] = tuple(values["passes"])
    cfg = Config(**values)
    _validate(cfg)
    return cfg


def _validate(cfg: Config) -> None:
    if isinstance(cfg.fusion, str) and cfg.fusion not in ("cost", "greedy", "none"):
        raise ValueError(f"brrr: option fusion={cfg.fusion!r}; expected 'cost', 'greedy', 'none' "
                         "or a policy object")
    if cfg.target not in ("auto", "cpp", "triton"):
        raise ValueError(f"brrr: option target={cfg.target!r}; expected 'auto', 'cpp' or 'triton'")
    if cfg.low_precision not in LOW_PRECISION_MODES:
        raise ValueError(f"brrr: option low_precision={cfg.low_precision!r}; expected "
                         + " or ".join(repr(m) for m in LOW_PRECISION_MODES))
    if not isinstance(cfg.fold_across_rows, bool):
        raise ValueError(f"brrr: option fold_across_rows={cfg.fold_across_rows!r}; expected True or False")
    if cfg.num_threads < 0:
        raise ValueError("brrr: option num_threads must be >= 0")
