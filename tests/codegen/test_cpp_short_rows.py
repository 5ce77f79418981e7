"""Rows of at most SHORT_ROW elements fold in one constant loop without `omp simd`
(codegen/cpp_reduce.py `_short_row`); longer rows keep the simd chunks. Values, NaN and
the first index of argmax/argmin match eager."""
import functools
import pytest
import torch

from brrr_compiler.schedule.rows import SHORT_ROW
from tests.helpers import check_against_eager, one_kernel_source


_source = functools.partial(one_kernel_source, whole=True)


@pytest.mark.parametrize("n, simd", [(5, False), (SHORT_ROW, False), (SHORT_ROW + 1, True)])
def test_short_rows_fold_in_a_constant_loop(n, simd):
    src = _source(lambda x: x.amax(1) + x.sum(1), torch.randn(64, n))
    src = src[src.index("} else if (n_outer > 0) {"):]      # the rows (not the split row)
    assert ("#pragma omp simd reduction" in src) == simd, src
    if not simd:
        assert f"for (int64_t r0 = 0; r0 < {n}; ++r0)" in src, src


def _special(x):
    x = x.clone()
    x[3, 1], x[5, 0], x[7, 2] = float("nan"), float("inf"), float("-inf")
    x[9, :] = 2.0                        # ties: the first index wins
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("n", [1, 3, 5, 16])
def test_short_rows_match_eager(n, dtype):
    x = _special(torch.randn(40, max(n, 3), generator=torch.Generator().manual_seed(n)))[:, :n]
    x = x.contiguous().to(dtype)

    def fn(x):
        return (x.amax(1), x.amin(1), x.argmax(1), x.argmin(1), x.sum(1), x.prod(1),
                torch.logsumexp(x, 1), x.softmax(1), x.mean(1))

    check_against_eager(fn, x, grad=False, strict=True, reference=True)


def test_short_rows_with_gradients():
    x = torch.randn(50, 7, requires_grad=True)
    check_against_eager(lambda x: (torch.logsumexp(x, 1) * x.amax(1)).sum(), x)
