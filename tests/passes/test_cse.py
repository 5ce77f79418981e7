"""cse: duplicate pure nodes merge; random ops, outputs and reads across writes do not."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck, assert_close

from brrr_compiler.passes import run_pipeline

aten = torch.ops.aten


def _pass(fn, *args, tracing_mode="fake"):
    """Trace `fn` to ATen and run the one pass under test (linted, recompiled)."""
    return run_pipeline(make_fx(fn, tracing_mode=tracing_mode)(*args), ("cse",))


def _count(gm, target):
    return sum(n.target == target for n in gm.graph.nodes)


def test_duplicate_chains_merge():
    def fn(x):
        return x.sin().cos() + x.sin().cos()

    x = torch.randn(4)
    gm = _pass(fn, x)
    assert _count(gm, aten.sin.default) == 1 and _count(gm, aten.cos.default) == 1
    FileCheck().check("aten.add.Tensor(cos, cos)").run(gm.code)
    assert_close(gm(x), fn(x))


def test_list_and_float_arguments_merge():
    def fn(x):
        nan = float("nan")
        return x.sum([0]) + x.sum([0]) + (x + nan).sum([0]) * (x + nan).sum([0])

    x = torch.randn(3, 2)
    gm = _pass(fn, x)
    assert _count(gm, aten.sum.dim_IntList) == 2
    assert _count(gm, aten.add.Tensor) == 3
    assert_close(gm(x), fn(x), equal_nan=True)


def test_different_scalars_kept_apart():
    def fn(x):
        return x * 0.0, x * -0.0, x + 1, x + 2, x.view(6), x.view(3, 2)

    x = torch.tensor([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]])
    gm = _pass(fn, x)
    assert _count(gm, aten.mul.Tensor) == 2 and _count(gm, aten.add.Tensor) == 2
    assert _count(gm, aten.view.default) == 2
    out, ref = gm(x), fn(x)
    assert torch.equal(out[1].signbit(), ref[1].signbit())
    assert_close(out, ref)


def test_random_ops_not_merged():
    def fn(x):
        return torch.rand_like(x) + torch.rand_like(x), torch.bernoulli(x) - torch.bernoulli(x)

    x = torch.full((1000,), 0.5)
    gm = _pass(fn, x)
    assert _count(gm, aten.rand_like.default) == 2
    assert _count(gm, aten.bernoulli.default) == 2
    out = gm(x)
    assert out[1].abs().sum() > 0  # two independent draws differ somewhere
    assert out[0].shape == x.shape


def test_graph_outputs_stay_distinct():
    def fn(x):
        return x.sin(), x.sin()

    x = torch.randn(3)
    gm = _pass(fn, x)
    assert _count(gm, aten.sin.default) == 2
    a, b = gm(x)
    assert a.data_ptr() != b.data_ptr()
    assert_close((a, b), fn(x))


def test_base_of_a_returned_view_not_merged():
    def fn(x):
        return x + 1, (x + 1).view(-1)

    x = torch.randn(2, 3)
    gm = _pass(fn, x)
    assert _count(gm, aten.add.Tensor) == 2
    a, b = gm(x)
    assert a.data_ptr() != b.data_ptr()
    assert_close((a, b), fn(x))


def test_no_merge_across_a_write():
    def fn(x):
        a = x.sin()
        x.view(-1).add_(1)
        return a + x.sin()

    gm = _pass(fn, torch.randn(3), tracing_mode="real")
    assert _count(gm, aten.sin.default) == 2
    x = torch.randn(3)
    assert_close(gm(x.clone()), fn(x.clone()))


def test_written_result_not_merged():
    def fn(x):
        a, b = x.clone(), x.clone()
        a.add_(1)
        return a + b

    x = torch.randn(3)
    gm = _pass(fn, x, tracing_mode="real")
    assert _count(gm, aten.clone.default) == 2
    assert_close(gm(x), fn(x))
