"""Values the same all along a kernel's inner loop are computed once per row (pointwise
kernels) or once per streamed row (column kernels),
before it (codegen/cpp_hoist.py), checked as text; values against eager."""
import functools
import torch
from torch.testing import FileCheck

from tests.helpers import check_against_eager, one_kernel_source


_source = functools.partial(one_kernel_source, threads=1, whole=True)


def _broadcast_mask(x, m, b):
    return torch.where(m, x * torch.sigmoid(b), x - b)


def _inputs(dtype=torch.float64):
    return (torch.randn(16, 31, 32, dtype=dtype), torch.rand(16, 31, 1) < 0.5,
            torch.randn(16, 31, 1, dtype=dtype))


def test_row_broadcast_values_are_read_once_per_row():
    """The mask byte and the broadcast value (and its sigmoid) are read before the
    `omp simd` loop: a byte load inside it sized the vector for 64 lanes, more than the
    row of 32 doubles, and the loop stayed scalar. The sigmoid is computed over all rows
    first, into a table (test_cpp_row_tables.py)."""
    src = _source(_broadcast_mask, *_inputs())
    table, work = src.split("for (int64_t w = 0;")
    assert "brrr_libm_exp(" in table and "exp(" not in work
    loop = work.split("#pragma omp simd", 1)[1]
    FileCheck().check("!= 0);").check("= tab_v").check("#pragma omp simd").run(work)
    assert "in1[" in loop and "!= 0" not in loop and "tab_v" not in loop  # in1: x
    assert "in0[" not in loop and "in2[" not in loop                       # the mask, b


def test_values_along_the_row_stay_in_the_loop():
    src = _source(lambda x, m: torch.where(m, x, 0.0), torch.randn(16, 32), torch.rand(16, 32) < 0.5)
    FileCheck().check("#pragma omp simd").check("in0[").check("!= 0);").run(src)


def test_hoisted_values_match_eager():
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        x, m, b = _inputs(dtype)
        b[0, 0] = float("nan")
        check_against_eager(_broadcast_mask, x, m, b)
        check_against_eager(_broadcast_mask, x.transpose(0, 1), m.transpose(0, 1), b.transpose(0, 1))


def _column_max_of_broadcast(x, m):
    # a max over dim 1 of where(m, -inf, tanh(x)), x expanded along the kept last dim:
    # the column schedule, with tanh(x) the same for every column of a row
    return torch.where(m, float("-inf"), torch.tanh(x)).amax(1)


def _column_inputs(dtype=torch.float64):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 64, 1, generator=gen, dtype=dtype).expand(8, 64, 257)
    return x, torch.rand(8, 64, 257, generator=gen) < 0.3


def test_column_kernels_compute_row_values_once_per_row():
    """A value of a streamed row that no column changes (tanh of the broadcast input) is
    computed before the loop over the tile's columns, not once per column."""
    src = _source(_column_max_of_broadcast, *_column_inputs())
    row_loop = src.split("for (int64_t rr = cb; rr < ce; ++rr) {", 1)[1]
    before, inner = row_loop.split("#pragma omp simd", 1)
    assert "brrr_libm_tanh(" in before and "brrr_libm_tanh(" not in inner.split("}", 1)[0]
    for dtype in (torch.float64, torch.float32):
        x, m = _column_inputs(dtype)
        check_against_eager(_column_max_of_broadcast, x, m)
