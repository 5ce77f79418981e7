"""A runnable dump of one compiled graph: `python graph0_forward.py` rebuilds its kernels
and checks brrr's runner against the ATen graph brrr was given (script_main.py's note).

The file holds, in order: the ATen graph as a module (its code, its constants); the
inputs' shapes, strides, storage offsets and dtypes; brrr's runner (its FX code) and a
`bind` that makes its kernel calls from the built kernels; the command that builds the
kernels; the helpers of script_main.py; the kernels as one C++ translation unit; and
the call to `run`. Inputs are random, of the shapes, strides and dtypes brrr compiled
for (script_inputs.py: integer inputs stay inside the dimensions they index).

A graph whose kernels are Triton's carries, after the same first parts, the helpers of
script_triton.py, the graph's Triton module (its libdevice import made local), brrr's
libdevice shim and the call to `run_triton` (script_triton.py's note: where it runs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from brrr_compiler import scalar_ops
from brrr_compiler.codegen import cpp
from brrr_compiler.runtime import script_main, script_triton, triton_libdevice
from brrr_compiler.runtime.profiling import is_kernel_call
from brrr_compiler.runtime.script_inputs import input_specs
from brrr_compiler.runtime.toolchain import find_toolchain

HELPERS_MARKER = "# ---- runnable dump helpers"
TRITON_MARKER = "# ---- Triton dump helpers"
LIBDEVICE_IMPORT = "from brrr_compiler.runtime.triton_libdevice import"   # triton_prelude.py
CPP_BUILDS = ("the kernels (at the end of this file) with the recorded command\n($BRRR_CXX "
              "replaces the compiler)")
TRITON_BUILDS = ("the Triton kernels (at the end of this file; a graph of CPU\ntensors runs "
                 "them through Triton's interpreter)")
# names FX code may use that script_main.py defines (or imports)
HELPER_NAMES = {"inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree",
                "brrr_reinterpret"}
MAX_INLINE = 64         # constants up to this many elements are written out, larger ones random


@dataclass
class Reference:
    """The ATen graph as brrr received it, before its passes change it."""
    code: str
    names: set              # the globals its code uses
    constants: dict         # attribute name -> tensor, for get_attr nodes


def reference_of(gm: torch.fx.GraphModule) -> Reference:
    consts = {n.target: _fetch(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    return Reference(gm.code, set(gm.graph.python_code("self").globals), consts)


def _fetch(gm, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def build_command(cfg) -> list[str] | None:
    """The command brrr builds kernels with here, {source} and {output} left to fill."""
    found = find_toolchain(cfg.cxx, cfg.cache_dir)
    return found.command("{source}", "{output}") if found else None


def runnable(name: str, reference: Reference, graph: torch.fx.Graph,
             runner: torch.fx.GraphModule, kernels: dict, printed: dict, num_threads: int,
             command: list[str] | None, triton_module: str | None = None) -> str:
    """The dump's text. `graph`: the ATen graph `runner` runs (for its inputs);
    `kernels`: {group id: Kernel IR}; `printed`: their C++ sources by name; `command`:
    the compiler command with {source} and {output} placeholders; `triton_module`: the
    graph's generated Triton module, for a graph whose kernels are Triton's.
    NotImplementedError: a graph this file cannot reproduce (the reason says why)."""
    names = runner.graph.python_code("self").globals
    calls = {n: fn for n, fn in names.items() if is_kernel_call(fn)}
    _check_names(reference.names, set(), "the ATen graph")
    _check_names(set(names), set(calls), "brrr's runner")
    triton = any(call.brrr_kernel.tensor_args for call in calls.values())
    if triton:
        kernel_parts = _triton_parts(name, triton_module)
    else:
        used = [kernels[call.brrr_kernel.group_id] for call in calls.values()]
        source = cpp.translation_unit(used, num_threads, printed) if used else ""
        kernel_parts = _cpp_parts(name, source, command)
    return "\n".join([
        _header(name, TRITON_BUILDS if triton else CPP_BUILDS),
        "# ---- the ATen graph brrr was given ----",
        _module_source(reference, runner),
        "\n# ---- its inputs: (shape, stride, storage offset, dtype, device), an integer",
        "# tensor's values drawn from [0, last entry) (script_inputs.py), or a size ----",
        "INPUTS = [\n" + "".join(f"    {spec!r},\n" for spec in input_specs(graph)) + "]",
        "\n# ---- brrr's runner: its FX code, and its kernel calls bound to the built kernels ----",
        runner.code.strip("\n").replace("def forward(self, args_list)",
                                         "def brrr_runner(self, args_list)", 1),
        _bind_source(calls), *kernel_parts])


def _helpers(module, marker: str) -> str:
    """The part of `module`'s text a dump carries verbatim: from its marker line on."""
    text = Path(module.__file__).read_text()
    return text[text.index(marker):]


def _cpp_parts(name: str, source: str, command: list[str] | None) -> list[str]:
    return ["\n# ---- the command that built the kernels ({source}, {output} to fill) ----",
            f"BUILD_COMMAND = {command!r}\n",
            _helpers(script_main, HELPERS_MARKER),
            "\n# ---- the kernels: one C++ translation unit ----",
            f"KERNELS_CPP = {_literal(source)}",
            f"\nif __name__ == '__main__':\n    sys.exit(run({name!r}, AtenGraph(), brrr_runner, "
            "bind, cpp_kernels(KERNELS_CPP, BUILD_COMMAND), INPUTS))\n"]


def _triton_parts(name: str, module: str | None) -> list[str]:
    if module is None:
        raise NotImplementedError("the graph's Triton module was not given")
    if LIBDEVICE_IMPORT not in module:
        raise NotImplementedError("the Triton module does not import libdevice as a dump "
                                  "expects (codegen/triton_prelude.py)")
    local = module.replace(LIBDEVICE_IMPORT, f"from {script_triton.LIBDEVICE_MODULE} import")
    return [_helpers(script_main, HELPERS_MARKER), _helpers(script_triton, TRITON_MARKER),
            "\n# ---- the kernels: the graph's Triton module ----",
            f"KERNELS_TRITON = {_literal(local)}",
            "\n# ---- brrr's libdevice shim (runtime/triton_libdevice.py), which they import ----",
            f"LIBDEVICE_PY = {_literal(_shim())}",
            "\n# ---- the scalar-op table the shim reads under the interpreter (scalar_ops.py) ----",
            f"SCALAR_OPS_PY = {_literal(Path(scalar_ops.__file__).read_text())}",
            f"\nif __name__ == '__main__':\n    sys.exit(run_triton({name!r}, AtenGraph(), "
            "brrr_runner, bind, KERNELS_TRITON, LIBDEVICE_PY, INPUTS, "
            "scalar_ops=SCALAR_OPS_PY))\n"]


def _shim() -> str:
    """triton_libdevice.py, reading the dump's copy of the scalar-op table."""
    text = Path(triton_libdevice.__file__).read_text()
    line = f'SCALAR_OPS = "{triton_libdevice.SCALAR_OPS}"'
    if line not in text:
        raise NotImplementedError("triton_libdevice.py does not name its table as a dump expects")
    return text.replace(line, f'SCALAR_OPS = "{script_triton.SCALAR_OPS_MODULE}"')


def _literal(text: str) -> str:
    """`text` as a Python literal: raw and triple-quoted where that reads back the same."""
    return repr(text) if "'''" in text or text.endswith("\\") else f"r'''{text}'''"


def _header(name: str, builds: str) -> str:
    return (f'"""{name}: one graph brrr compiled, runnable on its own (torch '
            f"{torch.__version__}).\n\n    python {name}.py [--rounds N]\n\nbuilds "
            f"{builds},\nruns brrr's runner and the ATen graph on the same random inputs, "
            'says whether\nthey agree, and times both.\n"""\nimport torch\n')


def _check_names(names: set, defined: set, what: str) -> None:
    unknown = sorted(names - HELPER_NAMES - defined - {"__builtins__"})
    if unknown:
        raise NotImplementedError(f"{what} calls {', '.join(unknown)}, which a dump cannot "
                                  "define")


def _module_source(reference: Reference, runner) -> str:
    consts = dict(reference.constants)
    consts.update((n.target, _fetch(runner, n.target)) for n in runner.graph.nodes
                  if n.op == "get_attr")
    lines = ["class AtenGraph(torch.nn.Module):", "    def __init__(self):",
             "        super().__init__()"]
    for target, value in consts.items():
        if not isinstance(value, torch.Tensor) or "." in target:
            raise NotImplementedError(f"the graph reads {target!r}, which a dump cannot define")
        lines.append(f"        self.{target} = {_tensor_source(value)}")
    body = reference.code.strip("\n")
    return "\n".join(lines) + "\n\n" + "\n".join("    " + ln if ln else ln for ln in body.splitlines())


def _tensor_source(t: torch.Tensor) -> str:
    where = f", device={str(t.device)!r}"
    if t.numel() <= MAX_INLINE:
        with unset_fake_temporarily():     # dumps are written while the compile traces
            values = t.detach().cpu().flatten().tolist()
        return f"torch.tensor({values!r}, dtype={t.dtype}{where}).reshape({list(t.shape)})"
    stride = torch.empty(t.shape, device="meta").stride()
    return f"random_input(({tuple(t.shape)}, {stride}, 0, {t.dtype}, {str(t.device)!r}, 2))"


def _bind_source(calls: dict) -> str:
    lines = ["def bind(kernels):", '    """The runner\'s kernel calls, made from the built kernels '
             '(a C++ library or a Triton module)."""', "    return {"]
    for global_name, call in calls.items():
        k = call.brrr_kernel
        args = [repr(k.name), str(len(k.input_names)), _outs_source(k)]
        if k.tensor_args:
            args.append(f"device={str(k.device or 'cpu')!r}")
        if any(call.brrr_offsets):
            args.append(f"offsets={call.brrr_offsets!r}")
        if k.size_vars:
            args.append(f"n_sizes={len(k.size_vars)}")
        if k.take_error is not None:
            args.append("checks=True")
        if getattr(call, "brrr_into", ()):
            args.append(f"into={call.brrr_into!r}")
        maker = "triton_call" if k.tensor_args else "kernel_call"
        lines.append(f"        {global_name!r}: {maker}(kernels, {', '.join(args)}),")
    return "\n".join(lines + ["    }"])


def _outs_source(kernel) -> str:
    """`lambda <size vars>: [(shape, stride, dtype), ...]` for the kernel's outputs."""
    params = [str(s) for s in kernel.size_vars or []]
    specs = ", ".join(f"({_tuple(sh, params)}, {_tuple(st, params)}, {dt})"
                      for sh, st, dt in kernel.out_specs)
    return f"lambda {', '.join(params)}: [{specs}]"


def _tuple(exprs, params: list[str]) -> str:
    items = [_expr(x, params) for x in exprs]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _expr(x, params: list[str]) -> str:
    text = str(x)
    names = set(re.findall(r"[A-Za-z_]\w*", text))
    if names - set(params):
        raise NotImplementedError(f"an output size {text} is not plain arithmetic of sizes")
    return text
