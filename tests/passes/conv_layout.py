"""Helpers shared by the tests of conv_channels_last and of its timed choices: run the
pass alone on a traced function, list its layout copies, and check a graph's values and
every node's strides against eager."""
import torch
from torch.fx import Interpreter
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import assert_close

from brrr_compiler.passes import LAYOUT_FREE_OUTPUTS, run_pipeline
from brrr_compiler.passes import conv_channels_last as _module

aten = torch.ops.aten
CL = torch.channels_last
PASS = __import__("sys").modules[_module.__module__]   # the module, not the function


def run_pass(fn, *args, tracing_mode="fake", free=()):
    gm = make_fx(fn, tracing_mode=tracing_mode)(*args)
    gm.meta[LAYOUT_FREE_OUTPUTS] = free
    return run_pipeline(gm, ("conv_channels_last",))


def layout_copies(gm) -> list:
    return [n.kwargs["memory_format"] for n in gm.graph.nodes
            if n.target is aten.clone.default and "memory_format" in n.kwargs]


class StrideCheck(Interpreter):
    """Runs the graph on real tensors and checks each result's strides against its
    meta["val"] (brrr's kernels are specialised to those strides)."""

    def run_node(self, n):
        result = super().run_node(n)
        val = n.meta.get("val")
        if isinstance(result, torch.Tensor) and isinstance(val, torch.Tensor):
            assert result.stride() == val.stride(), (n.name, result.stride(), val.stride())
        return result


def check(gm, fn, *args):
    out = StrideCheck(gm).run(*args)
    expected = fn(*args)
    for a, e in zip(out if isinstance(out, tuple) else (out,),
                    expected if isinstance(expected, tuple) else (expected,), strict=True):
        assert_close(a, e, rtol=1e-4, atol=1e-5)
        assert a.stride() == e.stride()
    return out


def is_cl(val) -> bool:
    return val.is_contiguous(memory_format=CL) and not val.is_contiguous()
