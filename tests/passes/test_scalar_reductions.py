"""scalar_reductions: a reduction of a 0-d value becomes a copy of it in the result's
dtype, so it fuses instead of running as an ATen call between kernels (generated
pattern 37); values, dtypes and gradients as eager's, NaN included."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from brrr_compiler.passes import run_pipeline
from tests.helpers import check_against_eager, compute_calls

aten = torch.ops.aten


def _targets(fn, *args):
    gm = run_pipeline(make_fx(fn, tracing_mode="fake")(*args), ("scalar_reductions",))
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("fn, dtype, copy", [
    (lambda x: x.sum(), torch.float32, aten.clone.default),
    (lambda x: x.mean(dim=0), torch.float64, aten.clone.default),
    (lambda x: x.amax(0), torch.float16, aten.clone.default),
    (lambda x: x.amin(-1, keepdim=True), torch.bfloat16, aten.clone.default),
    (lambda x: x.sum(), torch.int32, aten._to_copy.default),       # promotes to int64
    (lambda x: x.prod(), torch.bool, aten._to_copy.default),
    (lambda x: x.any(), torch.float32, aten._to_copy.default),      # to bool
])
def test_a_reduction_of_a_scalar_becomes_a_copy(fn, dtype, copy):
    x = torch.tensor(3, dtype=dtype)
    targets = _targets(fn, x)
    assert copy in targets and not [t for t in targets if t not in (copy,)]


def test_reductions_of_tensors_and_other_reductions_stay():
    assert aten.sum.default in _targets(lambda x: x.sum(), torch.ones(3))
    assert aten.nansum.default in _targets(lambda x: x.nansum(), torch.tensor(1.0))
    assert aten.argmax.default in _targets(lambda x: x.argmax(), torch.tensor(1.0))


@pytest.mark.parametrize("value", [2.5, float("nan"), float("-inf"), 0.0])
def test_a_scalar_loss_reduced_again_fuses(value):
    """`loss.mean()` of a 0-d loss, and amax/any/sum of 0-d values, in one compiled graph:
    no ATen call computes anything."""
    def f(x, y):
        loss = (x * y).sum()
        s = loss.exp().amax(0)
        return loss.mean() * 2, s.sum(), (s > 1).any(), loss.to(torch.int32).sum()

    x = torch.full((4, 3), value, requires_grad=True)
    reports = check_against_eager(f, x, torch.randn(4, 3), grad=value == 2.5, strict=True)
    assert not [c for r in reports for c in compute_calls(r)]
