"""dce: unused pure nodes go; inputs, random ops, writes and asserts stay."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck, assert_close

from brrr_compiler.passes import run_pipeline


def _pass(fn, *args, tracing_mode="fake"):
    """Trace `fn` to ATen and run the one pass under test (linted, recompiled)."""
    return run_pipeline(make_fx(fn, tracing_mode=tracing_mode)(*args), ("dce",))


def _ops(gm):
    return [n.op for n in gm.graph.nodes]


def test_dead_chain_removed_unused_input_kept():
    def fn(x, unused):
        x.sin().cos().exp()
        x.split(2)
        return x + 1

    x, y = torch.randn(4), torch.randn(2)
    gm = _pass(fn, x, y)
    assert _ops(gm) == ["placeholder", "placeholder", "call_function", "output"]
    FileCheck().check("aten.add").check_not("aten.sin").check_not("aten.split").run(gm.code)
    assert_close(gm(x, y), fn(x, y))


def test_unused_random_and_empty_kept():
    def fn(x):
        torch.rand_like(x)
        torch.empty_like(x)
        return x * 2

    x = torch.randn(3)
    gm = _pass(fn, x)
    FileCheck().check("aten.rand_like").check("aten.empty_like").check("aten.mul").run(gm.code)
    assert_close(gm(x), fn(x))


def test_unused_write_and_assert_kept():
    def fn(x):
        x.add_(1)
        torch._assert_async(x.abs().sum() >= 0, "negative norm")
        return x * 2

    gm = _pass(fn, torch.randn(3), tracing_mode="real")
    FileCheck().check("aten.add_").check("aten._assert_async").run(gm.code)
    x = torch.randn(3)
    assert_close(gm(x.clone()), fn(x.clone()))
