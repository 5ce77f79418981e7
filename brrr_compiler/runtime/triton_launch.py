"""Build a graph's Triton kernels into an importable module and launch them.

Note on the cache. The generated module (codegen/triton.py) is written to
`<cache_dir>/triton/<key[:2]>/<key>.py`, key = sha256 of the source and the Triton
version, under a temporary name moved into place with `os.replace` (build.py's
`_write_atomic`), so readers see nothing or a whole file. A file whose text differs from
the source is rewritten. The module is imported from that file (Triton's JIT reads kernel
source through `inspect`, so kernels must live in a real file) under a unique name, once
per process. Triton compiles each kernel for the GPU at first launch and keeps the binary
in its own cache; on CUDA we warm each kernel up at build time (with dtypes, not data), so
a kernel that fails to compile falls back to ATen with one warning instead of failing
mid-model. Under TRITON_INTERPRET=1 kernels run on the CPU through Triton's interpreter
(slow; for tests).

`cudagraphs()` wraps a compiled graph so that its kernels are captured in one CUDA graph
and replayed: one launch instead of one per kernel (the overhead term of the cost model).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys

import torch

from brrr_compiler.codegen import triton as triton_codegen
from brrr_compiler.schedule.triton import DEFAULT_SM_COUNT, choose_triton
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.log import fallback, logger
from brrr_compiler.runtime import cache
from brrr_compiler.runtime.build import _write_atomic
from brrr_compiler.runtime.runner import CompiledKernel
from brrr_compiler.runtime.triton_libdevice import interpreting

_modules: dict[str, object] = {}
WARMUP_SIZE = 17          # a size argument's value for the build-time compile


@functools.cache
def available() -> bool:
    """Is Triton importable here?"""
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:            # not installed, or broken (a missing driver, ...)
        return False
    return True


def sm_count(device) -> int:
    if device is not None and torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return DEFAULT_SM_COUNT


# ---- the module ----------------------------------------------------------------------

def module_key(source: str) -> str:
    import triton
    mode = "interpreter" if interpreting() else "compiled"
    return hashlib.sha256(f"{source}\0triton {triton.__version__} {mode}".encode()).hexdigest()


def _write(source: str, cache_dir: str, key: str, max_bytes: int = 0) -> str:
    root = cache.usable_dir(cache_dir)
    path = os.path.join(root, "triton", key[:2], key + ".py")
    try:
        with open(path) as f:
            if f.read() == source:
                cache.touch(path)
                return path
    except OSError:
        pass
    try:
        _write_atomic(path, source.encode())
    except OSError as err:
        root = cache.fallback_dir(root, f"is not usable ({err})")
        path = os.path.join(root, "triton", key + ".py")
        _write_atomic(path, source.encode())
    cache.evict(root, max_bytes, added=len(source))
    return path


def load_module(source: str, cache_dir: str, max_bytes: int = 0):
    """Write `source` into the cache (unless there) and import it; once per process.
    `max_bytes`: the cache's size cap (runtime/cache.py)."""
    key = module_key(source)
    if key not in _modules:
        path = _write(source, cache_dir, key, max_bytes)
        name = f"brrr_triton_{key[:24]}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _modules[key] = module
    return _modules[key]


# ---- kernels -------------------------------------------------------------------------

def _warmup(kernel: Kernel, module, device) -> None:
    """Compile `kernel` for `device` now (CUDA only), from dtypes and typical sizes."""
    if device is None or torch.device(device).type != "cuda" or interpreting():
        return
    fn = getattr(module, kernel.name)
    s = choose_triton(kernel, sm_count(device))
    args = [b.dtype for b in kernel.buffers] + [WARMUP_SIZE] * len(kernel.size_vars)
    args += [torch.int32] if kernel.checks_bounds else []
    consts = triton_codegen.constexprs(s)
    with torch.cuda.device(device):
        fn.warmup(*args, grid=(1,), num_warps=s.num_warps, **consts)


def _compiled(kernel: Kernel, module, group_id: int, out_specs, device) -> CompiledKernel:
    launch = getattr(module, f"launch_{kernel.name}")
    take_error = None
    if kernel.checks_bounds:
        launch, take_error = _error_word(launch, device)
    return CompiledKernel(group_id, kernel.name, launch, [b.origin for b in kernel.inputs],
                          out_specs, list(kernel.size_vars), take_error, device=device,
                          tensor_args=True)


def _error_word(launch, device):
    """`launch` with the kernel's error word (allocated at the first call: compiling runs
    under fake tensors), and a function that reads and clears it."""
    word = []

    def launch_checked(*args):
        if not word:
            word.append(torch.zeros(1, dtype=torch.int32, device=device))
        launch(*args, err=word[0])

    def take_error() -> bool:
        if int(word[0].item()) == 0:
            return False
        word[0].zero_()
        return True
    return launch_checked, take_error


def _build(kernels: dict[int, Kernel], out_specs, cfg, device):
    source = triton_codegen.module_source(list(kernels.values()), sm_count(device))
    module = load_module(source, cfg.cache_dir, cfg.cache_max_bytes)
    for k in kernels.values():
        _warmup(k, module, device)
    return {gid: _compiled(k, module, gid, out_specs[gid], device)
            for gid, k in kernels.items()}, source


def build_triton_kernels(kernels: dict[int, Kernel], out_specs: dict[int, list], cfg, device):
    """Returns ({group_id: CompiledKernel}, module source); a kernel that fails to build
    runs through ATen instead, with one warning."""
    if not kernels:
        return {}, ""
    try:
        return _build(kernels, out_specs, cfg, device)
    except Exception as err:       # Triton raises many kinds (CompilationError, ...)
        logger.debug("Triton module failed to build: %s", err)
    compiled, sources = {}, []
    for gid, k in kernels.items():
        try:
            one, source = _build({gid: k}, out_specs, cfg, device)
        except Exception as err:
            fallback(f"triton-build-{k.name}-{hash(str(k))}",
                     f"brrr: Triton kernel {k.name} failed to build: "
                     f"{str(err).splitlines()[0] if str(err) else type(err).__name__}; its ops "
                     "run through ATen instead", cfg.strict)
            continue
        compiled.update(one)
        sources.append(source)
    return compiled, "\n".join(sources)


# ---- CUDA graphs ---------------------------------------------------------------------

def cudagraphs(run, graph: torch.fx.GraphModule, compiled: dict, asked: bool = True,
               strict: bool = False):
    """`run` (a boxed compiled graph) replayed from one CUDA graph, when that is safe;
    else `run` itself. `asked`: the cudagraphs option asked for them, so a refusal is a
    fallback (one warning saying why; under `strict` an error); else the mode only
    prefers them, and a refusal is logged."""
    reason = _cudagraph_refusal(graph, compiled)
    if reason is not None:
        if asked:
            fallback(f"cudagraphs-{reason}", f"brrr: option cudagraphs=True ignored: {reason}",
                     strict)
        else:
            logger.info("brrr: CUDA graphs not used for this graph: %s", reason)
        return run
    replay = _CudaGraphReplay(run)

    def replayed(args):
        return replay(args)

    replayed._boxed_call = True
    replayed.runner, replayed.cudagraph = getattr(run, "runner", None), replay
    return replayed


def _cudagraph_refusal(graph: torch.fx.GraphModule, compiled: dict) -> str | None:
    vals = [n.meta.get("val") for n in graph.graph.nodes if n.op == "placeholder"]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if not tensors or any(v.device.type != "cuda" for v in tensors):
        return "it needs a graph whose inputs are all CUDA tensors"
    if not torch.cuda.is_available():
        return "CUDA is not available"
    if any(not isinstance(v, torch.Tensor) for v in vals) or any(
            not isinstance(s, int) for v in tensors for s in v.shape):
        return "the graph has symbolic sizes (dynamic shapes)"
    if any(n.op == "call_function" and getattr(n.target, "_schema", None) is not None
           and n.target._schema.is_mutable for n in graph.graph.nodes):
        return "the graph mutates its inputs"
    if any(k.take_error is not None for k in compiled.values()):
        return "a kernel checks indices on the host after every launch"
    return None


class _CudaGraphReplay:
    """Capture on the first call (after one warm-up run on a side stream), replay after.

    Inputs are copied into static buffers before each replay; outputs are cloned out of
    the graph's memory, so a later replay never overwrites a tensor the caller holds.
    """

    def __init__(self, run):
        self.run, self.graph = run, None
        self.static_in, self.static_out = [], []

    def _capture(self, args) -> None:
        self.static_in = [torch.empty_strided(a.size(), a.stride(), dtype=a.dtype,
                                              device=a.device).copy_(a) for a in args]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.run(list(self.static_in))
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_out = list(self.run(list(self.static_in)))

    def __call__(self, args):
        a = list(args)
        args.clear()
        if self.graph is None:
            self._capture(a)
        else:
            for dst, src in zip(self.static_in, a):
                dst.copy_(src)
        self.graph.replay()
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in self.static_out]
