"""float16 conversions bit for bit, through compiled kernels: every one of the 65536
float16 bit patterns widened to float32, and every float32 near a float16 rounding
decision (ties, the subnormal boundary, 65504 and 65520, float32 subnormals, +-0, +-inf,
NaN) rounded to float16, against eager. Compared as integer views: assert_close hides
signed zeros and NaN payloads. A NaN must stay a NaN with its sign; its payload is
not compared (eager's own differs between its vector and scalar loops)."""
import functools

import pytest
import torch

from brrr_compiler.backend import brrr_backend
from tests.helpers import assert_no_fallback, check_against_eager

F16 = torch.float16


def _f32(bits: torch.Tensor) -> torch.Tensor:
    return bits.to(torch.int64).to(torch.int32).view(torch.float32)   # wraps past 2^31


ALL_HALVES = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(F16)


def _float_sweep() -> torch.Tensor:
    """float32 values within a few ulps of each finite float16, of each midpoint between
    neighbours (the ties), of the largest float16 and the overflow threshold 65520, and
    the float32 subnormals' low end, inf and NaN; both signs."""
    finite = ALL_HALVES[:0x7C00].float().double()             # 0 .. 65504, ascending
    above = torch.cat([finite[1:], torch.tensor([65536.0], dtype=torch.float64)])
    anchors = torch.cat([finite, (finite + above) / 2]).float()   # each midpoint is a float32
    bits = anchors.view(torch.int32).to(torch.int64)
    near = torch.cat([bits + d for d in range(-3, 4)] + [
        torch.arange(0, 1 << 12),                                 # float32 subnormals, +0
        torch.arange(0x477FE000 - 64, 0x47800000 + 64),           # 65504 .. 65536
        torch.arange(0x7F800000 - 8, 0x7F800000 + 8),             # largest floats, inf, NaNs
        torch.tensor([0x7FC00000, 0x7FFFFFFF, 0x7FBFFFFF]),       # quiet, all-ones, signaling NaN
    ])
    near = near[(near >= 0) & (near < (1 << 31))].unique()
    return _f32(torch.cat([near, near | (1 << 31)]))


def _compiled(fn, *args):
    """`fn` run by brrr, which must have made a kernel and run nothing through ATen."""
    torch._dynamo.reset()
    sink: list = []
    out = torch.compile(fn, backend=functools.partial(brrr_backend, _sink=sink))(*args)
    torch._dynamo.reset()
    assert_no_fallback(sink)
    return out


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor, source=None) -> None:
    """Equal bits, but for a NaN: a NaN, with the sign of its `source` element if given
    (eager's scalar loop, which converts a tensor's tail, gives 0x7FFFFFFF for any NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = want.isnan()
    g, w = got.view(_INT[got.dtype]), want.view(_INT[want.dtype])
    assert torch.equal(got.isnan(), nan)
    bad = (g != w) & ~nan
    assert not bad.any(), [(hex(x), hex(y)) for x, y in zip(g[bad][:8].tolist(), w[bad][:8].tolist())]
    if source is not None:
        assert torch.equal(g[nan] < 0, source.view(_INT[source.dtype])[nan] < 0)


_INT = {torch.float16: torch.int16, torch.float32: torch.int32}


def test_every_float16_widens_like_eager():
    fn = lambda h: h.float()                                     # noqa: E731
    _assert_same_bits(_compiled(fn, ALL_HALVES), fn(ALL_HALVES), ALL_HALVES)


def test_float32_to_float16_rounds_like_eager():
    x = _float_sweep()
    fn = lambda x: x.half()                                      # noqa: E731
    _assert_same_bits(_compiled(fn, x), fn(x), x)


def test_float16_round_trip_in_float32_like_eager():
    """The rounding cast alone, its result stored as float32 (brrr_round_f16)."""
    x = _float_sweep()
    fn = lambda x: x.half().float()                              # noqa: E731
    _assert_same_bits(_compiled(fn, x), fn(x), x)


def test_float16_values_keep_their_bits_through_selects_and_stores():
    h = ALL_HALVES
    fn = lambda h: (torch.where(h > 1, h, -0.0), h * 1, h.float().half(), -h)  # noqa: E731
    for got, want, source in zip(_compiled(fn, h), fn(h), (h, h, h, -h)):
        _assert_same_bits(got, want, source)


def test_float16_arithmetic_rounds_each_op_in_eager_mode():
    """low_precision="eager": every float16 op rounded (subnormal results, overflow to
    inf near 65504, ties), as eager does."""
    h = ALL_HALVES
    fn = lambda h: (h * 3 + 1, h * 0.001, h / 7, h + 32.0)       # noqa: E731
    torch._dynamo.reset()
    sink: list = []
    backend = functools.partial(brrr_backend, options={"low_precision": "eager"}, _sink=sink)
    outs = torch.compile(fn, backend=backend)(h)
    torch._dynamo.reset()
    assert_no_fallback(sink)
    for got, want in zip(outs, fn(h)):
        _assert_same_bits(got, want)


def test_float16_fill_is_rounded():
    """full_like(x, 1.1) in float16 holds 1.099609375, stored and added."""
    x = torch.randn(300).to(F16)
    check_against_eager(lambda x: (torch.full_like(x, 1.1), x + torch.full_like(x, 1.1)),
                        x, grad=False, atol=0, rtol=0)


def test_long_float16_rows_round_like_eager():
    """A row kernel over float16 (softmax and a norm's rescale), in the vectorized loop."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 512, generator=g) * 4).to(F16)
    x[3, ::7] = 0
    x[5, 100:103] = ALL_HALVES[torch.tensor([0x0001, 0x03FF, 0x83FF])]   # subnormals
    check_against_eager(lambda x: (torch.softmax(x, -1), x / x.float().norm(dim=-1, keepdim=True)),
                        x, grad=False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_comparisons_round_the_scalar_to_the_tensors_dtype(dtype):
    # eager compares in the promoted dtype: 0.3 becomes dtype's nearest value first, so a
    # value equal to that is not greater than 0.3 (fuzz seed 5552: sigmoid(x) > 0.3)
    at = torch.tensor(0.3, dtype=dtype)
    x = torch.stack([at, at, torch.tensor(0.25, dtype=dtype), torch.tensor(0.35, dtype=dtype)])
    x = x.repeat(64)
    bound = torch.tensor(0.3)                       # a float32 0-dim tensor: no promotion

    def fn(x):
        y = x * 1
        return y > 0.3, y >= 0.3, y == 0.3, y < bound, y.eq(bound)

    check_against_eager(fn, x, grad=False, strict=True)
