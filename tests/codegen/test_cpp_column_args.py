"""argmax and argmin in the columns schedule (codegen/cpp_outer_reduce.py): per column of
the tile a value and an index, blocks of rows folded in order, so the first extreme (and
the first NaN) wins as in eager; max/min with dim over a middle dim take it too."""
import pytest
import torch

from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule.cpp import choose_cpp
from tests.helpers import check_against_eager, plan_of


def _schedule(fn, x):
    (g,) = plan_of(fn, x).groups
    return choose_cpp(lower_group(g, g.name), 2)


def _x(*shape, dtype=torch.float32, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    flat = x.view(-1)
    flat[3], flat[17], flat[40] = float("nan"), float("inf"), float("-inf")
    x[5] = x[2]                                     # ties along dim 0: the first wins
    return x.to(dtype) if dtype.is_floating_point else (x * 10).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int32])
@pytest.mark.parametrize("fn", [
    lambda x: x.argmax(0), lambda x: x.argmin(0),
    lambda x: torch.max(x, 0), lambda x: torch.min(x, 0, keepdim=True),
])
def test_argmax_over_outer_dims_matches_eager(fn, dtype):
    check_against_eager(fn, _x(300, 37, dtype=dtype), grad=False, strict=True)


def test_argmax_over_dim_0_takes_the_columns_schedule():
    sched = _schedule(lambda x: torch.max(x, 0), torch.randn(300, 37))
    assert sched.kind == "columns", sched


@pytest.mark.parametrize("shape", [(400, 5, 5), (7, 1200, 3), (64, 9, 130)])
def test_max_with_dim_over_a_middle_dim(shape):
    x = _x(*shape)
    check_against_eager(lambda x: (torch.max(x, 1), torch.argmin(x, 1, keepdim=True)), x,
                        grad=False, strict=True)


def test_max_with_dim_gradients():
    x = torch.randn(200, 6, 5, requires_grad=True)
    check_against_eager(lambda x: torch.max(x, 1).values.sin().sum(), x)
