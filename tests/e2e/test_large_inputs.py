"""Large inputs: outputs written with streaming stores, column sums past the prefetch
distance, and (opt-in, `-m slow`) more than 2^31 elements (64-bit indexing).
"""
import pytest
import torch

from tests.helpers import check_against_eager

# ---- more than 2^31 elements (64-bit indexing) ---------------------------------------
# eager is the oracle here too, but run on slices: eager's own sum of a 2 G-element int8
# or bool tensor makes an int64 copy (17 GB)

def _compiled_once(fn, x):
    torch._dynamo.reset()
    out = torch.compile(fn, backend="brrr")(x)
    torch._dynamo.reset()
    return out


@pytest.mark.slow
def test_more_than_2_31_elements():
    """~2.2 G int8 elements (2.2 GB): offsets past 2^31 need int64 indices."""
    n = 2**31 + 4099
    x = torch.ones(n, dtype=torch.int8)
    x[-3:] = torch.tensor([5, -7, 9], dtype=torch.int8)
    x[2**31 - 1] = 4

    tail = _compiled_once(lambda x: (x * 2 + 1)[-5:], x)
    assert torch.equal(tail, x[-5:] * 2 + 1)
    count = _compiled_once(lambda x: (x != 1).sum(), x)
    assert torch.equal(count, sum((c != 1).sum() for c in x.split(2**28)))


@pytest.mark.slow
def test_more_than_2_31_elements_2d_reduction():
    """Rows whose flat offsets pass 2^31: per-row reductions over [2^16 + 1, 2^15]."""
    x = torch.zeros(2**16 + 1, 2**15, dtype=torch.int8)
    x[-1, -1] = 3
    x[-2, 7] = -4

    def fn(x):
        return (x + 1).amax(-1), x.sum(-1, dtype=torch.int32)

    got = _compiled_once(fn, x)
    rows = [fn(c) for c in x.split(4096)]
    for i, g in enumerate(got):
        assert torch.equal(g, torch.cat([r[i] for r in rows]))


@pytest.mark.parametrize("fn", [lambda x: x * 2 - x.abs(),
                                lambda x: x * torch.rsqrt((x * x).mean(-1, True) + 1e-6)],
                         ids=["pointwise", "rows"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_streamed_outputs_match_eager(fn, dtype):
    """Outputs over 32 MB are written with streaming stores (cpp_stream.py); 2049 columns
    put most rows off the 64-byte alignment, so heads and tails take plain stores."""
    x = torch.randn(4100, 2049).to(dtype)
    x[7, 3] = float("nan")
    check_against_eager(fn, x, grad=False)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: torch.relu(x * 2 + 1), (16, 64, 112, 112)),          # rows of 112 floats
    (lambda x: x.expand(4, 4, 8192, 64) * 0.5, (4, 1, 8192, 64)),   # rows of 64, broadcast
    (lambda x: x - x.mean(-1, keepdim=True), (16400, 512)),         # a row kernel's rows
], ids=["pointwise", "broadcast", "rows"])
def test_short_streamed_rows_match_eager(fn, shape):
    """Rows shorter than MIN_RUN stream where they follow one another in whole cache lines
    (schedule/stream.py): each row's chunk streams on its own; NaN and -0.0 pass as eager's."""
    x = torch.randn(shape)
    x.view(-1)[[5, 70001]] = torch.tensor([float("nan"), -0.0])
    check_against_eager(fn, x, grad=False)
    check_against_eager(fn, x.to(torch.float64), grad=False)


def test_streamed_tiled_transpose_matches_eager():
    """The tiled schedule streams its output a tile row at a time (cpp_tiled.py); odd
    sizes leave partial tiles at both edges."""
    x, y = torch.randn(4100, 2049), torch.randn(2049, 4100)
    y[5, 9] = float("nan")
    check_against_eager(lambda a, b: (a + b.t()) * 0.5, x, y, grad=False)


def test_prefetched_column_sums_match_eager():
    """Column sums over inputs past the L2 prefetch rows ahead (cpp_outer_reduce.py); the
    last rows have nothing ahead of them, and NaN still propagates down its column."""
    x = torch.rand(3000, 1100)
    x[2995, 7] = float("nan")
    check_against_eager(lambda a: (a * 2).sum(0), x, grad=False)
