"""Values of a pointwise kernel's rows alone that call a transcendental function are
computed over every row in one vector loop before the parallel loop, into a table per
value (transforms/tables.py, "Rows"), instead of in scalar code at each row: checked as
text, and against eager on odd, size-1 and empty shapes, NaN and inf, in four dtypes
with gradients."""
import functools
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import choose_cpp
from tests.helpers import check_against_eager, with_specials, one_kernel_source, plan_of

_source = functools.partial(one_kernel_source, threads=1, whole=True)


def _row_softplus(x, y):
    return F.softplus(x) * y                       # x broadcast along y's rows


def _schedule(fn, *args):
    g = plan_of(fn, *args).groups[-1]
    return choose_cpp(lower_group(g, g.name), 2)


def test_a_transcendental_of_the_rows_is_computed_over_all_rows_first():
    x, y = torch.randn(992, 1), torch.randn(992, 64)
    assert _schedule(_row_softplus, x, y).row_tables
    table, loops = _source(_row_softplus, x, y).split("for (int64_t w = 0;")
    assert "float tab_v" in table and "#pragma omp simd" in table
    assert "for (int64_t i0 = 0; i0 < 992; ++i0)" in table and "brrr_expf(" in table
    assert "brrr_expf(" not in loops and "= tab_v" in loops


@pytest.mark.parametrize("fn, x", [
    (lambda x, y: (x * 2 + 1) * y, torch.randn(992, 1)),       # nothing transcendental
    (_row_softplus, torch.randn(10000, 1)),                    # more rows than a table holds
])
def test_no_row_table(fn, x):
    assert not _schedule(fn, x, torch.randn(x.shape[0], 64)).row_tables


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("xshape, yshape", [
    ((37, 1), (37, 29)),
    ((5, 7, 1), (5, 7, 33)),          # two outer dims
    ((6, 1, 1), (6, 9, 40)),          # a table over one of them
    ((1, 1), (1, 17)),                # one row: no table
    ((0, 1), (0, 8)),                 # empty
])
def test_row_tables_match_eager(xshape, yshape, dtype):
    grad = dtype in (torch.float32, torch.float64)
    x = with_specials(torch.randn(xshape)).to(dtype).requires_grad_(grad)
    y = with_specials(torch.randn(yshape)).to(dtype).requires_grad_(grad)
    check_against_eager(lambda x, y: (torch.tanh(torch.exp(x.clamp(-4, 4))) * y, F.softplus(x) + y),
                        x, y, grad=grad, kernels=xshape[0] > 0)
