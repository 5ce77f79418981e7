"""A pointwise loop over a short static row (fewer than 64 elements) that reads or
writes bytes (a bool mask) beside a transcendental function stages its byte loads as
int lanes before the loop and its bool stores after it (schedule/cpp.py
`short_row_masks`, codegen/cpp_staging.py `staged_row`): with bytes in the loop gcc
sized its vectors for more bytes than the row held and fell back to a quarter of the
float lanes. The text, and values and gradients against eager on odd rows, NaN and
inf, float64, half types and size-1 dims."""
import pytest
import torch
from torch.testing import FileCheck

from tests.helpers import check_against_eager, kernel_sources


def _source(fn, *args) -> str:
    return "\n".join(kernel_sources(fn, *args))


def _masked_log1p(x, mask, bias):
    """Generated pattern 6's kernel: log1p beside a broadcast mask, an isnan | mask
    stored as bool, and two float outputs."""
    y = x - torch.log1p(x.abs())
    kept = torch.where(mask, y, 0.0)
    return kept.isnan() | mask, y + bias, torch.maximum(x.abs(), torch.log1p(x.abs()))


def _inputs(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    mask = torch.rand(shape[0], shape[1], 1, shape[3], generator=g) > 0.5
    bias = torch.randn(1, shape[1], 1, shape[3], generator=g).to(dtype)
    return x, mask, bias


def test_a_short_row_with_a_mask_and_libm_is_staged():
    src = _source(_masked_log1p, *_inputs((7, 13, 8, 31)))
    (FileCheck().check("int32_t st_v").check("= in0[").check("int32_t ss_v")
     .check("#pragma omp simd").check("brrr_libm_log1pf").check("ss_v")
     .check("(uint8_t)ss_v").run(src))


@pytest.mark.parametrize("shape", [(7, 13, 8, 64), (4, 4, 4, 5)])
def test_long_rows_and_cheap_loops_keep_their_bytes(shape):
    """A row of 64 or more fills gcc's byte vectors; a loop without a transcendental is
    left as it was (its float lanes cost little beside its memory)."""
    if shape[-1] >= 64:
        src = _source(_masked_log1p, *_inputs(shape))
    else:
        src = _source(lambda x, m, b: (torch.where(m, x * 2, 0.0) + b, m | (x > 0)),
                                *_inputs(shape))
    assert "st_v" not in src and "ss_v" not in src, src


@pytest.mark.parametrize("shape", [(7, 13, 8, 31), (3, 2, 5, 1), (2, 3, 1, 63), (1, 1, 1, 7)])
def test_values_match_eager(shape):
    x, mask, bias = _inputs(shape, seed=len(shape) + shape[-1])
    x.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    check_against_eager(_masked_log1p, x, mask, bias, grad=False)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_other_dtypes_match_eager(dtype):
    check_against_eager(_masked_log1p, *_inputs((5, 3, 4, 19), dtype, seed=3), grad=False)


def test_gradients_match_eager():
    x, mask, bias = _inputs((3, 5, 4, 23), torch.float64, seed=9)
    x.requires_grad_()
    bias.requires_grad_()
    check_against_eager(lambda a, m, b: torch.where(m, torch.sigmoid(a) + b, a.exp()), x, mask,
                        bias)


def test_a_uint8_mask_and_exp_in_float64():
    """Lanes are 64-bit where the loop computes in double; a uint8 load keeps its value."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 9, 17, generator=g, dtype=torch.float64)
    q = torch.randint(0, 255, (6, 1, 17), generator=g, dtype=torch.uint8)
    fn = lambda a, b: (a.exp() * b, (a > 0.5) & (b > 100))   # noqa: E731
    src = _source(fn, x, q)
    assert "int64_t st_v" in src, src
    check_against_eager(fn, x, q, grad=False)
