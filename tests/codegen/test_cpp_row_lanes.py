"""Short rows run 16 at a time, one per vector lane (codegen/cpp_row_lanes.py): inputs
staged [element][lane], each loop phase unrolled over the row, stores written back, the
rows past the last whole block one by one. Values, NaN and strides match eager."""
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.schedule.cpp import choose_cpp
from brrr_compiler.lower.group import lower_group
from tests.helpers import check_against_eager, plan_of


def _x(*shape, dtype=torch.float32, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    flat = x.view(-1)
    flat[3], flat[40], flat[77] = float("nan"), float("inf"), float("-inf")
    return x.to(dtype)


def _schedule(fn, x):
    (g,) = plan_of(fn, x).groups
    return choose_cpp(lower_group(g, g.name), 2)


@pytest.mark.parametrize("rows, n", [(16, 5), (103, 5), (250, 2), (77, 16), (40, 3)])
@pytest.mark.parametrize("fn", [
    lambda x: x.logsumexp(1), lambda x: x.softmax(-1), lambda x: x.log_softmax(1),
    lambda x: (x.amax(1), x.sum(1, keepdim=True) * x), lambda x: x.var(1) + x.mean(1),
])
def test_short_rows_in_lanes_match_eager(fn, rows, n):
    check_against_eager(fn, _x(rows, n), grad=False, strict=True)


def test_the_schedule_takes_lanes_for_short_rows_only():
    assert _schedule(lambda x: x.logsumexp(1), torch.randn(200, 5)).row_lanes == 16
    assert _schedule(lambda x: x.logsumexp(1), torch.randn(200, 17)).row_lanes == 0
    assert _schedule(lambda x: x.argmax(1), torch.randn(200, 5)).row_lanes == 16
    assert _schedule(lambda x: x.logsumexp(1), torch.randn(8, 5)).row_lanes == 0
    sched = _schedule(lambda x: x.softmax(-1), torch.randn(300, 8))   # exps kept in the output
    assert sched.row_lanes == 16 and sched.online is None, sched


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8])
@pytest.mark.parametrize("n", [2, 5, 12, 16])
def test_folds_with_indices_in_lanes_keep_the_first_extreme_and_the_first_nan(dtype, n):
    """Ties (few distinct values), NaN anywhere in a row (the first NaN's index wins),
    and rows of -inf, as eager's max / argmin report them; copied into the row's total
    rather than compared with its initial pair (cpp_row_lanes._into_total)."""
    g = torch.Generator().manual_seed(n)
    x = torch.randint(0, 4, (103, n), generator=g).to(dtype)
    if dtype.is_floating_point:
        x[5, n // 2] = x[5, n - 1] = x[9, 0] = float("nan")
        x[11] = -float("inf")
    check_against_eager(lambda t: (torch.max(t, 1), t.argmin(1)), x, grad=False, strict=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_float_dtypes(dtype):
    check_against_eager(lambda x: (x.softmax(-1), x.sum(-1)), _x(90, 7, dtype=dtype),
                        grad=False, strict=True)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_integer_and_bool_rows(dtype):
    x = (torch.randn(70, 6, generator=torch.Generator().manual_seed(2)) * 4).to(dtype)
    check_against_eager(lambda x: (x.sum(1), x.amax(1), x.any(1)) if dtype is torch.bool
                        else (x.sum(1), x.amax(1), x.prod(1)), x, grad=False, strict=True)


def test_a_middle_dim_and_per_row_parameters():
    x, w = _x(33, 6, 11), torch.randn(6)
    check_against_eager(lambda x, w: (x * w[:, None]).sum(1) + x.amax(1), x, w,
                        grad=False, strict=True)


def test_norms_over_short_rows_with_gradients():
    x = torch.randn(45, 8, requires_grad=True)
    w, b = torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)
    check_against_eager(lambda x, w, b: F.layer_norm(x, (8,), w, b).tanh().sum(), x, w, b)
    check_against_eager(lambda x: x.softmax(-1).square().sum(), torch.randn(50, 5, requires_grad=True))
