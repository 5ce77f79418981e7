"""Profiler events: each compiled graph a range `brrr::graph0_forward`, each generated
kernel an event `brrr::k0_add_mul_erf` inside it (torch.profiler, Chrome traces).

Note on the cost. Nothing is recorded unless a profiler runs, and a call without one
must not pay for the events it would record. torch sets the Python bool
`torch.autograd.profiler._is_profiler_enabled` when a profiler starts and clears it when
it stops (inductor's generated code and AOTAutograd's wrappers check the same bool).
The boxed call checks it once per graph call and, while it is set, runs a second copy
of the runner's FX program whose kernel calls are wrapped in `_RecordFunctionFast` (a
RecordFunction opened and closed in C++, what inductor's Triton launches use); otherwise
it runs the plain runner, unchanged. The copy is built on the first profiled call, so
compiling costs nothing more either.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, NamedTuple

import torch
import torch.fx
from torch._C._profiler import _RecordFunctionFast

PREFIX = "brrr::"


def event_name(name: str) -> str:
    """The profiler's name for a kernel or graph brrr made."""
    return PREFIX + name


def is_kernel_call(target) -> bool:
    """Whether an FX call target is a generated kernel's call (runner.make_call)."""
    return getattr(target, "brrr_kernel", None) is not None


class KernelCall(NamedTuple):
    """One kernel call of a profiled graph run, kept for replay (benchmarks time each
    kernel on its own with these): `call` is runner.make_call's function."""
    graph: str
    call: Callable
    args: tuple
    outputs: tuple


class _Capture(threading.local):
    graph: str = ""
    calls: list | None = None


_CAPTURE = _Capture()


@contextlib.contextmanager
def kernel_calls():
    """While a profiler runs inside this block, every generated kernel's call on this
    thread is recorded as a KernelCall, its arguments and outputs kept alive, into the
    list this yields. (Without a profiler brrr's plain runner runs, which records nothing:
    segments call several kernels in one native call.)"""
    old, _CAPTURE.calls = _CAPTURE.calls, []
    try:
        yield _CAPTURE.calls
    finally:
        _CAPTURE.calls = old


def _recorded(call):
    """`call` inside a profiler event named after its kernel; the event carries the
    inputs, so `record_shapes=True` shows their shapes."""
    label = event_name(call.brrr_kernel.name)

    def recorded(*args):
        with _RecordFunctionFast(label, args):
            outputs = call(*args)
        if _CAPTURE.calls is not None:
            _CAPTURE.calls.append(KernelCall(_CAPTURE.graph, call, args, tuple(outputs)))
        return outputs

    # the same name as `call`, so the profiled program's code reads like the plain one
    recorded.__name__ = recorded.__qualname__ = call.__name__
    recorded.__module__, recorded.__wrapped__ = call.__module__, call
    return recorded


def profiled_program(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of the runner `gm` whose kernel calls record profiler events."""
    graph = torch.fx.Graph()
    out, old_output = graph.graph_copy(gm.graph, {}, return_output_node=True)
    graph.output(out, type_expr=getattr(old_output, "type", None))
    graph.set_codegen(gm.graph._codegen)
    for node in graph.nodes:
        if node.op == "call_function" and is_kernel_call(node.target):
            node.target = _recorded(node.target)
    return torch.fx.GraphModule(gm, graph)


class ProfiledRunner:
    """The runner `gm` as a range named `name`, its kernels as events; built on first use."""

    def __init__(self, gm: torch.fx.GraphModule, name: str):
        self.gm, self.label = gm, event_name(name)
        self._forward = None
        self._lock = threading.Lock()

    def __call__(self, args: list):
        if self._forward is None:
            with self._lock:
                if self._forward is None:
                    self._forward = profiled_program(self.gm).forward
        _CAPTURE.graph = self.label[len(PREFIX):]
        with _RecordFunctionFast(self.label):
            return self._forward(args)
