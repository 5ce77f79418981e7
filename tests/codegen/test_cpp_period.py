"""Short trailing dims flattened into one loop, the values repeating along it tabled
(transforms/period.py): the schedule is chosen where the inner loop covers less than a
cache line, the printed loop reads the parameters from tables, and results (values,
strides, gradients) match eager on odd, prime, size-1 and empty shapes, NaN and inf."""
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import choose_cpp
from tests.helpers import check_against_eager, with_specials, plan_of


def _kernel(fn, *args):
    plan = plan_of(fn, *args)
    g = plan.groups[-1]
    return lower_group(g, g.name)


def _affine(x, w, b):
    return torch.relu(x * w[:, None] + b[:, None])


def _params(c, dtype=torch.float32):
    return torch.randn(c).to(dtype), torch.randn(c).to(dtype)


def test_batch_norm_shape_flattens_with_rows_of_the_batch():
    k = _kernel(_affine, torch.randn(800, 5, 5).bfloat16(), *_params(5, torch.bfloat16))
    assert choose_cpp(k, 2).period == (1, 40)          # 40 rows of 25: a 1000-element loop
    src = cpp.kernel_source(k, 2)
    table, loop = src.split("for (int64_t w = 0;")
    assert "% 5)]" in table and "uint16_t tab_v" not in table   # values, as floats
    assert "% 5" not in loop and "= tab_v" in loop and "in0[(i0*1000 + i1)]" in loop


@pytest.mark.parametrize("shape, chosen", [
    ((64, 24, 16), False),   # float32 rows of 16: a full cache line
    ((64, 24, 12), True),
    ((61, 24, 7), True),     # a prime batch: one row of the batch per loop
])
def test_chosen_where_the_inner_loop_is_shorter_than_a_line(shape, chosen):
    k = _kernel(_affine, torch.randn(shape), *_params(shape[1]))
    assert (choose_cpp(k, 2).period is not None) == chosen


def test_transposed_input_is_not_flattened():
    x = torch.randn(24, 7, 64).transpose(0, 2)            # (64, 7, 24) strided
    k = _kernel(lambda x, w: x * w[:, None], x, torch.randn(7))
    assert choose_cpp(k, 2).period is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(61, 5, 5), (40, 3, 1, 7), (1, 6, 4), (0, 5, 3), (300, 2, 3)])
def test_affine_matches_eager(shape, dtype):
    x = with_specials(torch.randn(shape)).to(dtype).requires_grad_(dtype is torch.float32)
    w, b = (t.view(-1, *([1] * (len(shape) - 2))) for t in _params(shape[1], dtype))
    w.requires_grad_(dtype is torch.float32)
    check_against_eager(lambda x, w, b: torch.relu(x * w + b), x, w, b,
                        grad=dtype is torch.float32, kernels=shape[0] > 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_over_short_rows_matches_eager(dtype, training):
    x = torch.randn(240, 5, 5).to(dtype).requires_grad_(dtype is torch.float32)
    w, b = (t.requires_grad_(dtype is torch.float32) for t in _params(5, dtype))
    mean, var = torch.zeros(5, dtype=dtype), torch.ones(5, dtype=dtype)
    check_against_eager(lambda x, w, b: F.batch_norm(x, mean.clone(), var.clone(), w, b,
                                                     training, 0.1, 1e-5),
                        x, w, b, grad=dtype is torch.float32, reference=True)


def test_group_norm_and_channels_last_bias_match_eager():
    x = torch.randn(30, 6, 3, 3, requires_grad=True)
    w, b = (t.requires_grad_() for t in _params(6))
    check_against_eager(lambda x, w, b: F.group_norm(x, 3, w, b).relu(), x, w, b)
    xc = torch.randn(8, 6, 5, 5).contiguous(memory_format=torch.channels_last)
    check_against_eager(lambda x, b: (x + b.view(-1, 1, 1)).sigmoid(), xc.requires_grad_(),
                        torch.randn(6, requires_grad=True))


def _scaled_erf(x, p):
    y = x * p
    return torch.erf(y), torch.floor(y * 4) + y


def test_parameter_of_an_outer_dim_gets_a_table_spanning_it():
    # p of (1, 16, 1, 31) over (8, 16, 16, 31): its table is [16][16 * 31], filled once
    x, p = torch.randn(8, 16, 16, 31).bfloat16(), torch.randn(1, 16, 1, 31).bfloat16()
    k = _kernel(_scaled_erf, x, p)
    sched = choose_cpp(k, 2)
    assert sched.period == (2, 1) and sched.table_dims == (1,)
    table, loop = cpp.kernel_source(k, 2).split("for (int64_t w = 0;")
    assert "tab_v" in table and "[7936];" in table and "(i2 % 31))]" in table
    assert "% 31" not in loop and "tab_v" in loop and "(i1*496 + i2)" in loop


def test_parameter_of_the_dim_before_the_loop_keeps_one_row_per_loop():
    x, p = torch.randn(8, 16, 24, 5), torch.randn(1, 16, 1, 5)
    sched = choose_cpp(_kernel(lambda x, p: (x * p).sigmoid(), x, p), 2)
    assert sched.period == (2, 1) and sched.table_dims == (1,)


@pytest.mark.parametrize("xshape, pshape, taken", [
    ((8, 16, 16, 31), (8, 16, 1, 31), False),   # a table as large as the kernel
    ((4, 64, 32, 7), (1, 64, 1, 7), False),     # 64 x 224 entries: past MAX_TABLE
    ((32, 4, 16, 7), (1, 4, 1, 7), True),       # 4 x 112 of 14336
])
def test_tables_over_outer_dims_stay_small(xshape, pshape, taken):
    x, p = torch.randn(xshape).bfloat16(), torch.randn(pshape).bfloat16()
    sched = choose_cpp(_kernel(lambda x, p: (x * p).sigmoid(), x, p), 2)
    assert (sched.period is not None) == taken


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("xshape, pshape", [
    ((8, 16, 16, 31), (1, 16, 1, 31)),
    ((5, 7, 11, 3), (1, 7, 1, 3)),          # odd, prime extents
    ((8, 16, 24, 5), (1, 16, 1, 5)),         # the dim before the loop read: one row each
    ((4, 1, 9, 7), (1, 1, 1, 7)),            # a size-1 dim
    ((0, 16, 16, 31), (1, 16, 1, 31)),       # empty
])
def test_outer_dim_parameters_match_eager(xshape, pshape, dtype):
    x = with_specials(torch.randn(xshape)).to(dtype).requires_grad_(dtype is torch.float32)
    p = with_specials(torch.randn(pshape)).to(dtype).requires_grad_(dtype is torch.float32)
    check_against_eager(lambda x, p: torch.erf(x * p) + x * 2, x, p,
                        grad=dtype is torch.float32, kernels=xshape[0] > 0)
