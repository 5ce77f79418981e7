"""Column walks over a short innermost dim take blocks of its rows per tile
(schedule/columns.py `_column_rows`), and copy a row's piece of a strided input into a
tile array first (codegen/cpp_column_stage.py). The text,
and values, strides and gradients against eager on odd sizes, size-1 and zero-size dims,
NaN and inf."""
import pytest
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import cpp as schedule
from tests.helpers import check_against_eager, plan_of


def _kernels(fn, *args):
    plan = plan_of(fn, *args)
    return [lower_group(g, g.name) for g in plan.groups]


def _source(fn, *args) -> str:
    return "\n".join(cpp.kernel_source(k, 2) for k in _kernels(fn, *args))


def _amax0(x, y):
    """An amax over dim 0 of x - y, y read transposed in its last two dims."""
    return (x - y.transpose(-1, -2)).amax(0)


def _inputs(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    y = torch.randn(shape[:-2] + (shape[-1], shape[-2]), generator=g).to(dtype)
    return x, y


def test_a_short_inner_dim_takes_a_block_of_its_rows_per_tile():
    (k,) = _kernels(_amax0, *_inputs((8, 7, 8, 16)))
    sched = schedule.choose_cpp(k, 2)
    # the kept (8, 16) or (16, 8) of each of the 7 work items, whole, in one tile
    width, rows = sched.column_tile, sched.column_rows
    assert width * rows == 128 and rows > 1, sched.describe()
    (FileCheck().check(f"const int64_t lo1 = (w % ntiles) * {rows};")
     .check("for (int64_t b1 = 0; b1 < bn1; ++b1)").check("#pragma omp simd")
     .check(f"for (int64_t b2 = 0; b2 < {width}; ++b2)")
     .check(f"const int64_t b = b1 * {width} + b2;")
     .run(cpp.kernel_source(k, 2)))


def test_a_wide_inner_dim_keeps_one_row_per_tile():
    (k,) = _kernels(_amax0, *_inputs((4, 2, 2048, 2048)))
    assert schedule.choose_cpp(k, 2).column_rows == 1


def test_no_block_where_no_input_runs_contiguous_over_it():
    # rows of 8 out of every 20: a block of rows would be pieces a row apart anyway
    x = torch.randn(8, 7, 16, 20)[..., :8]
    (k,) = _kernels(lambda x: x.sum(0), x)
    assert schedule.choose_cpp(k, 2).column_rows == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_transposed_half_input_is_copied_in_the_order_it_lies(dtype):
    src = _source(_amax0, *_inputs((8, 7, 8, 16), dtype))
    # the copy runs along the block's rows (the source's unit stride), innermost
    (FileCheck().check("uint16_t sd_v").check("for (int64_t b2 = 0; b2 < ")
     .check("for (int64_t b1 = 0; b1 < bn1; ++b1)").check_regex(r"\[b1 \* \d+ \+ b2\] = in")
     .check("#pragma omp simd").check("(sd_v").run(src))


def test_a_step_sliced_half_input_the_same_in_every_row_is_copied_once():
    x = torch.randn(6, 7, 8, 16).half()
    y = torch.randn(6, 7, 1, 32).half()[..., ::2]     # the same for each row of dim 2
    src = _source(lambda x, y: torch.maximum(x, y).amax(1), x, y)
    FileCheck().check("sd_v").check("[b2] = in1[").check("(sd_v").check("[b2])").run(src)


def test_contiguous_loads_are_not_copied_and_strided_floats_are():
    x = torch.randn(8, 7, 8, 16)
    assert "sd_v" not in _source(_amax0, x, x.transpose(-1, -2))   # y.mT contiguous
    FileCheck().check("float sd_v").check("= sd_v").run(_source(_amax0, *_inputs((8, 7, 8, 16))))


def test_contiguous_float16_loads_convert_a_row_at_a_time():
    """The target's conversion instructions (brrr_f16_load), not the walk's integer
    conversion: a piece per row of a tile, of a block, or one row's worth."""
    FileCheck().check("float sd_v0[512];").check("brrr_f16_load(sd_v0, &in0[").check(", bn);") \
        .check("= sd_v0[b];").run(_source(lambda x: x.sum(0), torch.randn(300, 1024).half()))
    x = torch.randn(8, 7, 8, 16).half()
    FileCheck().check("brrr_f16_load(sd_v").check("bn);").check("brrr_f16_load(sd_v") \
        .run(_source(_amax0, x, x.transpose(-1, -2)))
    y = torch.randn(6, 7, 1, 16).half()                      # the same for each row of dim 2
    FileCheck().check("brrr_f16_load(sd_v").check(", 16);").run(
        _source(lambda x, y: (x + y).amax(1), torch.randn(6, 7, 8, 16).half(), y))


def test_float16_column_sums_match_eager():
    g = torch.Generator().manual_seed(7)
    for shape in ((300, 1000), (33, 17), (256, 64, 24), (5, 1, 3)):
        x = torch.randn(shape, generator=g).half()
        x.view(-1)[0] = float("nan")
        x.view(-1)[-1] = float("-inf")
        check_against_eager(lambda x: x.sum(0), x, grad=False)
        check_against_eager(lambda x: x.float().amax(0), x.requires_grad_())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(8, 7, 8, 16), (5, 3, 9, 13), (3, 1, 5, 7), (2, 3, 33, 2)])
def test_blocks_and_copies_match_eager(dtype, shape):
    x, y = _inputs(shape, dtype, seed=sum(shape))
    x.view(-1)[3] = float("nan")
    x.view(-1)[-1] = float("inf")
    check_against_eager(_amax0, x, y, grad=False)
    f64 = [t.double().requires_grad_() for t in _inputs(shape, seed=1)]
    check_against_eager(lambda x, y: (x * y.transpose(-1, -2)).sum(0), *f64)


def test_masks_and_means_match_eager():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 5, 7, 12, generator=g, requires_grad=True)
    mask = torch.rand(6, 5, 12, 7, generator=g) > 0.5
    check_against_eager(lambda x, m: x.masked_fill(m.transpose(-1, -2), 0.0).mean(0), x, mask)
    codes = torch.randint(0, 255, (6, 5, 7, 24), generator=g, dtype=torch.uint8)[..., ::2]
    check_against_eager(lambda x, c: (x * c).sum(1), x, codes)
    step = torch.randn(6, 5, 1, 24, generator=g).half()[..., ::2]
    # low_precision="float32" (the default) keeps the half sum unrounded: half tolerances
    check_against_eager(lambda x, s: (x.half() + s).float().var(0), x.detach(), step,
                        grad=False, atol=1e-2, rtol=1e-2)


def test_size_one_and_zero_size_dims_match_eager():
    for shape in ((1, 1, 1, 16), (4, 0, 8, 16), (4, 3, 0, 16), (4, 3, 1, 1)):
        x, y = _inputs(shape, torch.float16)
        check_against_eager(_amax0, x, y, grad=False, kernels=0 not in shape)
