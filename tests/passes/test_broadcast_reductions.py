"""broadcast_reductions: a reduction of a tensor broadcast along some dims reduces one
copy, read through a slice, and its readers see the result expanded (fuzz seed 29899)."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from brrr_compiler.passes import run_pipeline
from brrr_compiler.passes._dims import REDUCTIONS
from tests.helpers import check_against_eager

aten = torch.ops.aten


def _reduction_input(fn, *args):
    """(the target the graph's one reduction reads, that input's shape) after the pass."""
    gm = run_pipeline(make_fx(fn, tracing_mode="fake")(*args), ("broadcast_reductions", "dce"))
    reds = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in REDUCTIONS]
    assert len(reds) == 1, gm.code
    x = reds[0].args[0]
    return x.target if x.op == "call_function" else x.op, tuple(x.meta["val"].shape)


def _broadcast(*shape, along=1, n=6):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    size = list(x.shape)
    size[along] = n
    return x.expand(size)


@pytest.mark.parametrize("fn", [
    lambda x: x.amin(2).exp(),                     # a kept broadcast dim
    lambda x: x.sum(-1, keepdim=True) * 2,
    lambda x: x.mean(dim=(1, 2)).neg(),            # mean over a broadcast dim: one copy's
    lambda x: x.mean().neg(),                      # over every dim, no dims argument
])
def test_reads_one_copy(fn):
    target, shape = _reduction_input(fn, _broadcast(3, 1, 5))
    assert target is aten.slice.Tensor and shape[1] == 1


@pytest.mark.parametrize("fn", [lambda m: m.any(2).float(), lambda m: m.all(-1).float()])
def test_reads_one_copy_of_a_mask(fn):
    mask = (torch.randn(3, 1, 5, generator=torch.Generator().manual_seed(0)) > 0).expand(3, 6, 5)
    target, shape = _reduction_input(fn, mask)
    assert target is aten.slice.Tensor and shape[1] == 1


def test_a_pointwise_result_of_a_broadcast_is_dense_and_left():
    # x > 0 is stored densely, every copy computed: the pass reads strides, not values
    target, _ = _reduction_input(lambda x: (x > 0).any(2).float(), _broadcast(3, 1, 5))
    assert target is aten.gt.Scalar


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(1).exp(),           # a sum over the broadcast dim adds its copies
    lambda x: x.sum().exp(),            # so does a sum over every dim
])
def test_leaves(fn):
    target, _ = _reduction_input(fn, _broadcast(3, 1, 5))
    assert target == "placeholder"


@pytest.mark.parametrize("fn", [
    lambda x: x.amin(2),                            # a graph output
    lambda x: x.amin(2).t().exp(),                  # a view reads it
    lambda x, y: torch.minimum(x.amax(2), y.t()),   # fuzz seed 70981: layout by strides
])
def test_the_one_copy_is_cloned_back_into_eagers_layout(fn):
    """Readers see the dense result eager's reduction gives, so outputs, views and the
    layout of pointwise ops that read it are eager's."""
    x = _broadcast(3, 1, 5)
    args = (x, torch.randn(6, 3)) if fn.__code__.co_argcount == 2 else (x,)
    target, shape = _reduction_input(fn, *args)
    assert target is aten.slice.Tensor and shape[1] == 1
    check_against_eager(fn, *args, grad=False)


def test_a_dense_input_is_left():
    target, _ = _reduction_input(lambda x: x.amin(2).exp(), torch.randn(3, 6, 5))
    assert target == "placeholder"


@pytest.mark.parametrize("fn", [
    lambda x: torch.cos(x.amin(2).sum(-1)),
    lambda x: (x.amax(-1, keepdim=True) - x).exp().sum(-1),
    lambda x: x.mean(dim=(0, 1)).sigmoid() + x.sum(1).sum(-1, keepdim=True),
    lambda x: (x - x.mean(-1, keepdim=True)).pow(2).mean(-1).rsqrt(),
    lambda x: x.mean() * x.amin(),
])
def test_matches_eager_with_gradients(fn):
    x = _broadcast(4, 1, 7, n=128).requires_grad_()
    check_against_eager(fn, x, strict=True)


def test_a_row_sum_of_equal_mins_is_exact():
    """Fuzz seed 29899: 128 copies of one min added in float lanes came out 2.7 ulp off
    where eager's sum was exact; one min, broadcast, adds in double."""
    g = torch.Generator().manual_seed(29899)
    x = torch.randn(2, 1, 7, generator=g).expand(2, 128, 7)
    got = torch.compile(lambda x: x.amin(2).sum(-1), backend="brrr")(x)
    assert torch.equal(got.double(), x.double().amin(2).sum(-1))
