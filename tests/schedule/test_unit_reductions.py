"""Reductions over size-1 dims lower to pointwise kernels (transforms/unit_reductions.py),
with eager's values: a sum adds to 0 (-0 -> +0), a product keeps -0, max keeps NaN."""
import pytest
import torch

from brrr_compiler.schedule import choose
from tests.helpers import check_against_eager
from tests.schedule.test_choose import _kernel

FNS = {
    "log_softmax": lambda x: x.log_softmax(1),
    "sum_keepdim": lambda x: x.sum(1, keepdim=True) + x,
    "prod": lambda x: x.prod(1),
    "amax_mean": lambda x: x.amax(1) - x.mean(1),
    "any": lambda x: (x > 0).any(1),
    "argmax": lambda x: x.argmax(1) + x.argmin(1),
}


def _input(dtype):
    x = torch.randn(64, 1, 33, dtype=dtype)
    x[0, 0, :4] = torch.tensor([-0.0, float("nan"), float("-inf"), float("inf")])
    return x


@pytest.mark.parametrize("name", sorted(FNS))
def test_a_fold_of_one_value_is_a_pointwise_kernel_with_eagers_values(name):
    x = _input(torch.float32)
    k = _kernel(FNS[name], x)
    assert not k.is_reduction and choose(k, "cpp", 2).kind == "pointwise"
    check_against_eager(FNS[name], x, grad=False)
    check_against_eager(FNS[name], _input(torch.float64), grad=False)


def test_gradients_through_a_softmax_over_one_value():
    check_against_eager(lambda x: x.softmax(1) * x, _input(torch.float32).requires_grad_())
