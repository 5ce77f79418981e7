"""The code a runnable dump of a Triton graph carries besides script_main.py's.

A Triton graph's dump holds the graph's generated module (its @triton.jit kernels and
their launchers), brrr's `libdevice` shim (runtime/triton_libdevice.py) and the
scalar-op table it reads (scalar_ops.py), and needs torch and triton, not brrr. The graph's tensors decide where it runs: a graph
of CUDA tensors needs a CUDA GPU (without one the dump says so and exits 2); a graph of
CPU tensors (compiled with target="triton" under Triton's interpreter) runs its kernels
through the interpreter, so the dump sets TRITON_INTERPRET=1 itself before the kernels
are imported, and skips the timing: the interpreter's speed says nothing about a GPU's.
Everything below the marker line is copied into each such dump verbatim, after
script_main.py's helpers, whose `run` and `BuildFailed` it uses.
"""
from brrr_compiler.runtime.script_main import BuildFailed, run  # noqa: F401 - in a dump: above
# ---- Triton dump helpers (copied verbatim from brrr_compiler/runtime/script_triton.py) ----
import importlib.util
import os
import sys

import torch

LIBDEVICE_MODULE = "brrr_triton_libdevice"      # the shim's module name inside a dump
SCALAR_OPS_MODULE = "brrr_scalar_ops"           # the scalar-op table's, which the shim reads


def triton_call(module, symbol: str, n_inputs: int, outs, device: str, n_sizes: int = 0,
                checks: bool = False):
    """A Python function running kernel `symbol` as brrr's runner does: its launcher
    takes `n_inputs` tensors, new outputs on `device` (allocated as `outs(*sizes)` says:
    [(shape, stride, dtype)]) and `n_sizes` sizes; `checks`: it reports an index out of
    bounds in an error word."""
    launch = getattr(module, f"launch_{symbol}")

    def call(*args):
        inputs, sizes = args[:n_inputs], [int(s) for s in args[n_inputs:]]
        out = [torch.empty_strided(sh, st, dtype=dt, device=device) for sh, st, dt in outs(*sizes)]
        if not checks:
            launch(*inputs, *out, *sizes)
            return out
        word = torch.zeros(1, dtype=torch.int32, device=device)
        launch(*inputs, *out, *sizes, err=word)
        if int(word.item()):
            raise IndexError(f"{symbol}: index out of bounds")
        return out
    return call


def triton_kernels(source: str, libdevice: str, scalar_ops: str = ""):
    """The `load` of a Triton dump: `folder` -> the kernels' module, imported from
    files written there (Triton reads a kernel's source from its file)."""
    def load(folder):
        for name, text in ((f"{SCALAR_OPS_MODULE}.py", scalar_ops),
                           (f"{LIBDEVICE_MODULE}.py", libdevice), ("kernels_triton.py", source)):
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        sys.path.insert(0, folder)
        try:
            spec = importlib.util.spec_from_file_location(
                "brrr_dump_kernels", os.path.join(folder, "kernels_triton.py"))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except Exception as err:        # Triton raises many kinds (CompilationError, ...)
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise BuildFailed(f"the Triton kernels do not load: {first}") from None
        finally:
            sys.path.remove(folder)
        return module
    return load


def where_to_run(specs) -> str:
    """'' when the kernels can run here (for CPU tensors after setting TRITON_INTERPRET=1),
    else one line saying what they need."""
    devices = {s[4] for s in specs if isinstance(s, tuple)}
    if any(d.startswith("cuda") for d in devices) and not torch.cuda.is_available():
        return ("this graph's tensors live on CUDA: it needs a CUDA GPU with triton "
                "(graphs of CPU tensors, compiled with target='triton' under "
                "TRITON_INTERPRET=1, run here through Triton's interpreter)")
    if devices <= {"cpu"}:
        os.environ["TRITON_INTERPRET"] = "1"
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed here (pip install triton)"
    return ""


def run_triton(name: str, module, runner, bind, source: str, libdevice: str, specs,
               argv=None, scalar_ops: str = "") -> int:
    """script_main.run for a Triton graph: exit code 2, with one line saying why, where
    its kernels cannot run."""
    problem = where_to_run(specs)
    if problem:
        print(f"{name}: {problem}", file=sys.stderr)
        return 2
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    return run(name, module, runner, bind, triton_kernels(source, libdevice, scalar_ops),
               specs, argv,
               untimed="the kernels run through Triton's interpreter (TRITON_INTERPRET=1), "
                       "whose speed says nothing about a GPU's" if interpreted else "")
