"""argmax and argmin along rows in vector lanes (codegen/cpp_arg_lanes.py): each position
mod LANES keeps its first extreme, the lanes combine to the smallest index among equal
values (the first NaN where there is one), and the tail past the last whole group of
lanes folds in order, so every result is eager's first extreme."""
import pytest
import torch

from brrr_compiler.codegen import cpp
from brrr_compiler.codegen.cpp_arg_lanes import LANES
from brrr_compiler.lower.group import lower_group
from tests.helpers import check_against_eager, plan_of


def _rows(n, m, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, m, generator=g)
    if dtype.is_floating_point:
        return x.to(dtype)
    return (x * 3).round().to(dtype)        # small integers: many ties


def _specials(x):
    """Rows that test each rule of the combine (rows past the first few are random)."""
    m = x.shape[1]
    x[0] = 1.0                                 # all equal: index 0
    x[1, m - 1] = float("nan")                 # a NaN in the tail (or the last lane)
    x[2, 1::LANES] = 5.0                       # one lane's values tie with ...
    x[2, 0] = 5.0                              # ... an earlier lane's single value
    x[3] = float("-inf")                       # all -inf: index 0
    x[4, m // 2] = float("inf")
    x[4, m // 3] = float("nan")                # NaN before inf: the NaN wins
    x[5, 7::3] = float("nan")                  # NaNs in several lanes: the first
    x[6, LANES + 2] = 9.0
    x[6, 2] = 9.0                              # same lane, two equal maxima: the first
    x[7, :] = float("inf")
    return x


@pytest.mark.parametrize("m", [LANES + 3, LANES * 3, LANES * 3 + 5, 1000, 9000])
@pytest.mark.parametrize("fn", [
    lambda x: x.argmax(1), lambda x: x.argmin(1, keepdim=True),
    lambda x: torch.max(x, 1), lambda x: torch.min(x, -1),
])
def test_row_arg_folds_match_eager(fn, m):
    check_against_eager(fn, _specials(_rows(12, m)), grad=False, strict=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64, torch.int32,
                                   torch.int64, torch.uint8])
def test_row_arg_folds_in_other_dtypes(dtype):
    x = _rows(9, 203, dtype)
    if dtype.is_floating_point:
        x = _specials(x)
    check_against_eager(lambda x: (x.argmax(1), torch.min(x, 1)), x, grad=False, strict=True)


@pytest.mark.parametrize("shape", [(1 << 16) + 3, (3, 5000, 7)])
def test_full_argmax_and_argmin(shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    flat = x.view(-1)
    flat[flat.numel() // 2] = 50.0
    flat[flat.numel() - 1] = 50.0                # a later tie: the first still wins
    check_against_eager(lambda x: (x.argmax(), x.argmin()), x, grad=False, strict=True)


@pytest.mark.parametrize("shape, dim", [((0, 40), 1), ((5, 0), 0)])
def test_zero_size(shape, dim):
    check_against_eager(lambda x: torch.max(x, dim), torch.randn(shape), grad=False, strict=True)


def test_rows_fold_in_lanes_then_a_tail_in_order():
    (g,) = plan_of(lambda x: x.argmax(1), torch.randn(4, 3000)).groups
    src = cpp.kernel_source(lower_group(g, g.name), 2)
    lanes = src.index(f"for (int64_t lane = 0; lane < {LANES}; ++lane)")
    assert "#pragma omp simd" in src[lanes - 60:lanes], src
    assert "for (int64_t r0 = lv;" in src, src


def test_max_with_dim_gradients_through_lanes():
    x = torch.randn(6, 300, requires_grad=True)
    check_against_eager(lambda x: torch.max(x, 1).values.exp().sum(), x)
