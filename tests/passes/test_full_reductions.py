"""full_reductions: an order-free reduction over every dim reads past the permutes in
front of it, so it fuses with what produced the permuted tensor (pattern seed 7)."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from brrr_compiler.passes import run_pipeline
from tests.helpers import check_against_eager

aten = torch.ops.aten


def _reduction_input(fn, *args):
    """The target of the node the single reduction of `fn`'s graph reads, after the pass."""
    gm = run_pipeline(make_fx(fn, tracing_mode="fake")(*args), ("full_reductions", "dce"))
    reds = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in
            (aten.sum.default, aten.sum.dim_IntList, aten.amax.default, aten.mean.dim,
             aten.argmax.default, aten.prod.default)]
    assert len(reds) == 1, gm.code
    return reds[0].args[0].target


def _x():
    return torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("fn", [
    lambda x: x.exp().permute(2, 0, 1).sum(),
    lambda x: x.exp().transpose(0, 2).amax(dim=(0, -1, 1), keepdim=True),
    lambda x: x.exp().permute(1, 2, 0).mean(dim=[-3, 1, 2]),
    lambda x: x.exp().permute(2, 1, 0).prod(),
])
def test_reads_past_the_permute(fn):
    assert _reduction_input(fn, _x()) is aten.exp.default


@pytest.mark.parametrize("fn", [
    lambda x: x.exp().permute(2, 0, 1).sum(dim=(0, 1)),     # not every dim: order of the result
    lambda x: x.exp().permute(2, 0, 1).argmax(),            # the index depends on the order
])
def test_leaves_order_dependent_reductions(fn):
    assert _reduction_input(fn, _x()) is not aten.exp.default


def test_a_stored_permuted_exp_and_its_full_reductions_match_eager():
    """Pattern seed 7's shape of graph: the permuted exp is an output (through a slice),
    and its full sum and max others."""
    x = torch.randn(13, 13, 13, 1, generator=torch.Generator().manual_seed(7))
    x = x.expand(13, 13, 13, 17)

    def fn(x):
        v1 = torch.exp(x.clamp(-4, 4)).permute(2, 3, 0, 1)
        return v1.sum(), v1[..., ::2], v1.amax(dim=(0, 1, 2, 3), keepdim=True)

    check_against_eager(fn, x, grad=False, strict=True)
