"""Short columns of a reduction over an outer dim run 16 at a time, one per vector lane
(codegen/cpp_row_lanes.py, column_lanes): each block of 16 adjacent columns walks its
rows unrolled, the last block overlapping the one before. Values, NaN, dtypes and
strides match eager, for every width around a block's edge."""
import pytest
import torch

from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule.cpp import choose_cpp
from tests.helpers import check_against_eager, plan_of


def _x(*shape, dtype=torch.float32, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    flat = x.view(-1)
    flat[3], flat[40], flat[77] = float("nan"), float("inf"), float("-inf")
    return x.to(dtype)


def _schedule(fn, *args):
    (g,) = plan_of(fn, *args).groups
    return choose_cpp(lower_group(g, g.name), 2)


@pytest.mark.parametrize("cols", [17, 20, 31, 33, 47])
@pytest.mark.parametrize("fn", [
    lambda x: x.amax(1), lambda x: x.amin(1, keepdim=True), lambda x: x.sum(1),
    lambda x: x.mean(1) * 3, lambda x: (x * 2 + 1).sum(1), lambda x: torch.where(x.isnan(), 0.0, x).sum(1),
])
def test_short_columns_in_lanes_match_eager(fn, cols):
    check_against_eager(fn, _x(13, 9, cols), grad=False, strict=True)


@pytest.mark.parametrize("rows", [17, 40, 64])
def test_columns_of_up_to_64_rows(rows):
    check_against_eager(lambda x: (x.sum(1), x.amax(1), x.mean(1, keepdim=True)),
                        _x(7, rows, 21), grad=False, strict=True)


def test_the_schedule_takes_lanes_for_short_narrow_columns_only():
    def lanes(fn, *shape):
        sched = _schedule(fn, torch.randn(*shape))
        return sched.kind == "rows" and sched.column_lanes
    assert lanes(lambda x: x.amax(1), 400, 9, 31)
    assert lanes(lambda x: x.sum(1), 400, 3, 20)
    assert not lanes(lambda x: x.sum(1), 400, 9, 64)      # whole vectors: the columns schedule
    assert not lanes(lambda x: x.sum(1), 400, 9, 15)      # narrower than a block
    assert lanes(lambda x: x.sum(1), 400, 40, 31)
    assert not lanes(lambda x: x.sum(1), 400, 80, 31)     # a long column
    assert not lanes(lambda x: x.sum(1), 400, 9, 50)      # sums: 17-31 columns only
    assert not lanes(lambda x: x.sum(1), 400, 9, 24)      # ... and not 24: one 8-wide epilogue
    assert not lanes(lambda x: x.sum(1), 400, 9, 17)      # ... nor 17: one scalar column
    assert lanes(lambda x: x.amax(1), 400, 9, 17)
    assert lanes(lambda x: x.amin(1), 400, 9, 24)
    assert lanes(lambda x: x.amax(1), 400, 9, 50)         # selecting folds: any such width
    assert not lanes(lambda x: x.var(1), 400, 9, 31)      # two walks: the mean first
    assert not lanes(lambda x: x.argmax(1), 400, 9, 31)
    assert lanes(lambda x: x.mean(1), 400, 9, 20)         # its count, cast to float, is a constant


def test_float16_takes_lanes_where_the_last_block_repeats_few_columns():
    def lanes(fn, *shape, dtype=torch.float16):
        sched = _schedule(fn, torch.randn(*shape).to(dtype))
        return sched.kind == "rows" and sched.column_lanes
    assert lanes(lambda x: x.sum(1), 400, 9, 31)          # the last block repeats 1 column
    assert not lanes(lambda x: x.sum(1), 400, 9, 20)      # ... 12: their conversions twice
    assert not lanes(lambda x: x.amax(1), 400, 9, 17)
    assert lanes(lambda x: x.sum(1), 400, 9, 20, dtype=torch.bfloat16)
    assert "short columns 16 at a time" in _schedule(lambda x: x.amax(1), torch.randn(40, 9, 31)).describe()


def test_several_outer_dims_and_a_per_column_input():
    x, b = _x(3, 5, 7, 19), torch.randn(19)
    check_against_eager(lambda x, b: ((x + b).amax(2), (x * b).sum(2)), x, b,
                        grad=False, strict=True)


def test_a_transposed_input_and_strided_output():
    x = _x(25, 6, 40).transpose(0, 2)        # (40, 6, 25): its columns stride 240
    check_against_eager(lambda x: x.contiguous().sum(1), x, grad=False, strict=True)
    check_against_eager(lambda x: x.amax(1), _x(40, 6, 25), grad=False, strict=True)


@pytest.mark.parametrize("cols", [21, 31])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_float_dtypes(dtype, cols):
    check_against_eager(lambda x: (x.sum(1), x.amax(1), x.mean(1)), _x(30, 7, cols, dtype=dtype),
                        grad=False, strict=True)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_integer_and_bool_columns(dtype):
    x = (torch.randn(20, 5, 23, generator=torch.Generator().manual_seed(2)) * 4).to(dtype)
    check_against_eager(lambda x: (x.any(1), x.all(1)) if dtype is torch.bool
                        else (x.sum(1), x.amax(1), x.prod(1)), x, grad=False, strict=True)


def test_two_and_three_rows_add_in_float_in_order_as_eager():
    # eager adds 2 or 3 rows of a column in float, in order: bit for bit the same here
    for rows in (2, 3):
        x = _x(300, rows, 21) * 1e3
        torch.testing.assert_close(torch.compile(lambda x: x.sum(1), backend="brrr")(x),
                                   x.sum(1), rtol=0, atol=0, equal_nan=True)


def test_column_sums_with_gradients():
    x = torch.randn(11, 6, 27, requires_grad=True)
    check_against_eager(lambda x: x.sum(1).tanh().sum() + x.amax(1).sum(), x)


def test_size_one_and_zero_outer_dims():
    check_against_eager(lambda x: x.amax(1), _x(1, 9, 31), grad=False, strict=True)
    check_against_eager(lambda x: x.sum(1), torch.randn(0, 9, 31), grad=False, strict=True)
    check_against_eager(lambda x: x.amax(2), _x(4, 1, 9, 31), grad=False, strict=True)
    check_against_eager(lambda x: x.sum(1, keepdim=True) * x, _x(5, 9, 1, 17), grad=False, strict=True)


def _row_lanes(fn, *shape):
    sched = _schedule(fn, torch.randn(*shape))
    return sched.kind == "rows" and sched.row_lanes and not sched.column_lanes


def test_narrow_columns_run_as_rows_in_lanes_where_they_fold_with_indices_or_walk_twice():
    """Narrower than a vector (schedule/columns._narrow_columns): the columns schedule's
    tiles of a few columns keep one walk of plain folds."""
    assert _row_lanes(lambda x: torch.max(x, 1), 400, 5, 5)
    assert _row_lanes(lambda x: x.argmin(1), 400, 3, 12)
    assert _row_lanes(lambda x: x.softmax(1), 400, 8, 5)
    assert _row_lanes(lambda x: x.var(1), 400, 9, 6)
    assert not _row_lanes(lambda x: x.amax(1), 400, 5, 5)
    assert not _row_lanes(lambda x: x.sum(1), 400, 5, 5)
    assert not _row_lanes(lambda x: torch.max(x, 1), 400, 17, 5)     # a column past SHORT_ROW


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("shape", [(37, 5, 5), (50, 3, 12), (17, 16, 1), (1, 2, 15)])
def test_narrow_columns_with_indices_match_eager(dtype, shape):
    """Ties, a NaN in a column's middle and at its end, values and indices, keepdim."""
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randint(0, 3, shape, generator=g).to(dtype)
    if dtype.is_floating_point:
        x[0, shape[1] // 2, 0] = x[0, shape[1] - 1, shape[2] - 1] = float("nan")
    check_against_eager(lambda t: (torch.max(t, 1), t.argmin(1, keepdim=True)), x,
                        grad=False, strict=True)


def test_narrow_columns_walked_twice_match_eager_with_gradients():
    x = _x(41, 8, 5)
    check_against_eager(lambda t: (t.softmax(1), t.var(1)), x, grad=False, strict=True)
    y = torch.randn(23, 9, 6, requires_grad=True)
    check_against_eager(lambda t: (t.log_softmax(1) * t).sum(), y)


def test_wide_columns_few_rows_long_take_lanes_at_any_row_size():
    """schedule/columns.py, WIDE_LANE_COLUMNS and WIDE_LANE_ROWS."""
    def lanes(fn, x):
        sched = _schedule(fn, x)
        return sched.kind == "rows" and sched.column_lanes
    assert lanes(lambda x: x.sum(0), torch.randn(4, 100000))
    assert lanes(lambda x: x.amax(0), torch.randn(32, 4096))
    assert not lanes(lambda x: x.sum(0), torch.randn(64, 4096))          # too many rows
    assert not lanes(lambda x: x.sum(0), torch.randn(4, 1000))           # too few columns
    assert not lanes(lambda x: x.sum(0), torch.randn(4, 100000).half())  # float16 loads


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
@pytest.mark.parametrize("shape", [(2, 1031), (5, 3007), (32, 1024 + 15)])
def test_wide_columns_in_lanes_match_eager(dtype, shape):
    """Odd widths (the last block overlaps the one before), NaN and inf, sums, means,
    maxes and an any; a bias gradient through them."""
    x = _x(*shape) if dtype.is_floating_point else torch.randint(-9, 9, shape)
    x = x.to(dtype)
    check_against_eager(lambda t: (t.sum(0), t.amax(0), (t != 0).any(0)), x, grad=False,
                        strict=True)
    if dtype.is_floating_point:
        check_against_eager(lambda t: (t * 2 + 1).mean(0), x, grad=False, strict=True)
    w = torch.randn(shape[1], requires_grad=True)
    check_against_eager(lambda t, w: ((t.float() + w).relu() * 3).sum(), x, w)
