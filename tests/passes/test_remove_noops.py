"""remove_noops: identity views, copies and arithmetic go; anything observable stays."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck, assert_close

from brrr_compiler.passes import run_pipeline

aten = torch.ops.aten
BIG = 9223372036854775807


def _pass(fn, *args, tracing_mode="fake"):
    """Trace `fn` to ATen and run the one pass under test (linted, recompiled)."""
    return run_pipeline(make_fx(fn, tracing_mode=tracing_mode)(*args), ("remove_noops",))


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _views(x):
    y = aten.slice.Tensor(x.sin(), 1, 0, BIG)
    y = y.permute(0, 1).expand(2, 3).reshape(2, 3).view(2, 3)
    return aten.alias.default(y).cos()


def _arithmetic(x):
    return ((x.sin() * 1 + 0 - 0) / 1).cos()


def _copies(x):
    return x.sin().clone().to(torch.float32, copy=True).cos()


@pytest.mark.parametrize("fn", [_views, _arithmetic, _copies])
def test_identity_nodes_removed(fn):
    x = torch.randn(2, 3)
    gm = _pass(fn, x)
    assert len(make_fx(fn)(x).graph.nodes) > 4
    assert _targets(gm) == [aten.sin.default, aten.cos.default]
    assert_close(gm(x), fn(x))


def test_dtype_changing_cast_kept():
    def fn(x):
        return x.sin().to(torch.float64).cos()

    x = torch.randn(3)
    gm = _pass(fn, x)
    FileCheck().check("aten._to_copy").check("aten.cos").run(gm.code)
    assert gm(x).dtype == torch.float64
    assert_close(gm(x), fn(x))


def test_clone_of_input_returned_kept():
    def fn(x):
        return x.clone(), x.clone().sin()

    x = torch.randn(3)
    gm = _pass(fn, x)
    assert _targets(gm) == [aten.clone.default, aten.clone.default, aten.sin.default]
    out = gm(x)
    assert out[0].data_ptr() != x.data_ptr()
    assert_close(out, fn(x))


def test_clone_returned_beside_its_input_kept():
    def fn(x):
        y = x.sin()
        return y, y.clone(), y * 1

    x = torch.randn(3)
    gm = _pass(fn, x)
    FileCheck().check("aten.clone").check("aten.mul").run(gm.code)
    out = gm(x)
    assert len({t.data_ptr() for t in out}) == 3
    assert_close(out, fn(x))


def test_identity_view_of_input_returned_kept():
    def fn(x):
        return x.view(2, 3)

    x = torch.randn(2, 3)
    gm = _pass(fn, x)
    assert _targets(gm) == [aten.view.default]
    assert gm(x) is not x
    assert_close(gm(x), fn(x))


def test_view_to_other_shape_kept():
    def fn(x):
        return x.sin().view(3, 2).cos()

    x = torch.randn(2, 3)
    gm = _pass(fn, x)
    FileCheck().check("aten.view.default").run(gm.code)
    assert_close(gm(x), fn(x))


def test_promoting_or_restriding_arithmetic_kept():
    def fn(b, x):
        return b + 0, x.expand(2, 3) * 1

    b, x = torch.tensor([True, False]), torch.randn(3)
    gm = _pass(fn, b, x)
    assert _targets(gm) == [aten.add.Tensor, aten.expand.default, aten.mul.Tensor]
    out = gm(b, x)
    assert out[0].dtype == torch.int64 and out[1].stride() == (3, 1)
    assert_close(out, fn(b, x))


def test_memory_format_clone_kept():
    def fn(x):
        return x.sin().clone(memory_format=torch.channels_last).cos()

    x = torch.randn(1, 2, 3, 4)
    gm = _pass(fn, x)
    FileCheck().check("aten.clone").run(gm.code)
    assert gm(x).stride() == fn(x).stride()
    assert_close(gm(x), fn(x))


def test_copy_kept_when_graph_mutates():
    def fn(x):
        y = x.sin()
        z = y.clone()
        y.add_(1)
        return z.cos() + y

    x = torch.randn(3)
    gm = _pass(fn, x, tracing_mode="real")
    FileCheck().check("aten.clone").check("aten.add_").run(gm.code)
    assert_close(gm(x), fn(x))
