"""Writes into slices and selects (slice_decomposition.py): an in-place op on a slice, a
select's gradient and a copy into an empty tensor of a layout are cats and copies that
fuse, checked against eager in values, strides and gradients; so does a slice_scatter
with a step (a pointwise op of its own).
"""
import functools

import pytest
import torch

from brrr_compiler.backend import brrr_backend

from tests.helpers import check_against_eager

SCATTERS = ("slice_scatter", "select_scatter", "select_backward", "slice_backward")


def _aten_ops(graphs) -> list[str]:
    return [op for g in graphs for _, op in g.aten_nodes]


def _updates(x, v):
    y = x * 2
    y[:, 1:3] = v              # a copy into a slice, cast from v's dtype
    y[0] += 1                  # a select, read and written
    y[:, -1].mul_(3)           # a negative index
    y[-1:, :] = y[-1:, :].exp()
    return y.sin()


@pytest.mark.parametrize("shape", [(5, 7), (2, 3), (1, 4), (9, 33)], ids=str)
def test_inplace_updates_of_slices_fuse_with_gradients(shape):
    x = torch.randn(*shape, requires_grad=True)
    v = torch.randn(shape[0], 2, dtype=torch.float64)
    graphs = check_against_eager(_updates, x, v)
    ops = _aten_ops(graphs)
    assert not [op for op in ops if any(s in op for s in SCATTERS + ("copy",))], ops
    # four writes and the sin: one kernel, less the exp of the last row, which the
    # backward saves (a (1, n) value: a kernel of its own shape) and the sin reading it
    assert len(graphs[0].kernels) <= 3, graphs[0]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_select_copy_in_low_and_high_precision(dtype):
    def f(x, v):
        y = x.clone()
        y.select(1, 2).copy_(v)
        return y + 1
    check_against_eager(f, torch.randn(3, 4, 5).to(dtype), torch.randn(3, 5), grad=False)


def test_scatter_into_a_permuted_base_keeps_eager_strides():
    # eager's select_scatter clones its base (a permuted layout here): the cat is copied
    # into an empty tensor of those strides, and that copy fuses too
    base = torch.randn(5, 4, 3).permute(2, 1, 0)
    graphs = check_against_eager(lambda b, v: torch.select_scatter(b, v, 1, -1) * 2,
                                 base, torch.randn(3, 5), grad=False)
    assert not _aten_ops(graphs), graphs[0]


@pytest.mark.parametrize("args", [(0, 0, 2), (1, 2, None), (1, -3, -1), (1, 5, 2), (0, None, None)],
                         ids=str)
def test_slice_scatter_bounds(args):
    dim, start, end = args
    base = torch.randn(4, 6)
    size = len(range(*slice(start, end).indices(base.shape[dim])))
    src = torch.randn(*[size if d == dim else n for d, n in enumerate(base.shape)])
    check_against_eager(lambda b, s: torch.slice_scatter(b, s, dim, start, end) + 0,
                        base, src, grad=False)


def test_nan_inf_and_zero_size_writes():
    x = torch.tensor([[1.0, float("nan"), 3.0], [float("inf"), -0.0, 2.0]])
    check_against_eager(lambda x: torch.select_scatter(x, x[1] * 0, 0, 0).neg(), x, grad=False)
    empty = torch.randn(0, 4)
    check_against_eager(lambda b: torch.slice_scatter(b, b[:, :2] + 1, 1, 0, 2), empty, grad=False)


def test_select_gradient_is_a_fused_cat():
    graphs = check_against_eager(lambda x: (x[:, 1] * x[:, 2]).exp(),
                                 torch.randn(6, 5, requires_grad=True))
    assert not [op for op in _aten_ops(graphs) if "select_backward" in op], graphs[-1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_strided_slice_writes_fuse(dtype):
    def f(x):
        y = x.abs()
        y[1::3, :].mul_(2)
        y[-6::4] = -y[:2]
        return y
    graphs = check_against_eager(f, torch.randn(7, 10).to(dtype).requires_grad_())
    assert not [op for op in _aten_ops(graphs) if "slice" in op], graphs


def test_steps_along_the_innermost_dim_stay_in_aten():
    # a gather and a divide per element there: slower than ATen's strided copy (ops.py)
    def f(x):
        y = x * 2
        y[:, 1::3] = 0.5
        y[..., ::2].add_(1.0)
        return y
    graphs = check_against_eager(f, torch.randn(4, 10), grad=False)
    assert [op for op in _aten_ops(graphs) if "slice_scatter" in op], graphs[0]


@pytest.mark.parametrize("args", [(1, -7, None, 3), (0, 1, 6, 2), (1, 0, 100, 5), (0, 7, 8, 2)],
                         ids=str)
def test_strided_slice_scatter_bounds(args):
    dim, start, end, step = args
    base = torch.randn(8, 8)
    size = len(range(*slice(start, end, step).indices(base.shape[dim])))
    src = torch.randn(*[size if d == dim else n for d, n in enumerate(base.shape)])
    check_against_eager(lambda b, s: torch.slice_scatter(b, s, dim, start, end, step) * 2,
                        base, src, grad=False)


@pytest.mark.parametrize("pos", [0, 5, 14], ids=str)
def test_kv_cache_update_along_an_outer_dim(pos):
    def f(cache, new):
        cache = cache.clone()
        cache[:, :, pos:pos + new.shape[2]] = new
        return cache * 0.5
    graphs = check_against_eager(f, torch.randn(2, 3, 16, 8), torch.randn(2, 3, 2, 8), grad=False)
    assert len(graphs[0].kernels) == 1 and not _aten_ops(graphs), graphs[0]


def test_writes_along_a_static_dim_of_a_dynamic_tensor():
    # rows symbolic (mark_dynamic), columns static: writes into columns are cats along
    # the static dim; the row write (its dim symbolic) stays ATen's select_scatter, and
    # the whole-range slice functionalization wraps around the column write is src itself
    def f(x, v):
        y = x * 2
        y[:, 1:3] = v
        y[0] += 1
        y[:, -1].mul_(3)
        return y.sin()
    sink: list = []
    compiled = torch.compile(f, backend=functools.partial(brrr_backend, options=None, _sink=sink))
    for rows in (6, 9, 13):
        x, v = torch.randn(rows, 8), torch.randn(rows, 2)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(v, 0)
        torch.testing.assert_close(compiled(x, v), f(x, v), rtol=1e-6, atol=1e-6)
    ops = _aten_ops(sink)
    assert len(sink) == 1 and not [op for op in ops if "slice_scatter" in op], ops
    assert [op for op in ops if "select_scatter" in op], ops
