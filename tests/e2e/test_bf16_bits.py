"""bfloat16 conversions bit for bit: float32 -> bfloat16 rounds to nearest even (ties,
carries into the exponent, overflow to inf, subnormals, -0.0, NaN), and bfloat16 values
stored again keep their bits. Compared as int16 views: assert_close hides signed zeros
and NaN payloads."""
import torch

from tests.helpers import check_against_eager

BF16 = torch.bfloat16


def _f32(*bits: int) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)


# float32 bit patterns around each rounding decision
EDGES = _f32(
    0x3F808000, 0x3F818000,              # ties: to even (down), to even (up)
    0x3F808001, 0x3F807FFF,              # just above / below a tie
    0x3FFFFFFF, 0x7F7FFFFF, 0x7F7F7FFF,  # carry into the exponent; past bf16 max -> inf; stays finite
    0x00000001, 0x00008000, 0x00018000, 0x807FFFFF,  # subnormals, ties among them, negative
    0x80000000, 0x00000000, 0x7F800000, 0xFF800000,  # -0.0, 0.0, inf, -inf
    0x7FC00000, 0xFFC00000, 0x7F800001,  # NaNs (quiet, negative, signaling)
)


def _bits(*tensors):
    return [t.view(torch.int16) for t in tensors]


def _compiled(fn, *args):
    torch._dynamo.reset()
    out = torch.compile(fn, backend="brrr")(*args)
    torch._dynamo.reset()
    return out


def test_float32_to_bfloat16_rounds_like_eager():
    x = EDGES.repeat(40)                 # long enough for the vector loop, with a tail
    fn = lambda x: (x * 1.0).to(BF16)    # noqa: E731  (a kernel, not a bare cast)
    got, want = _compiled(fn, x), fn(x)
    finite = ~want.isnan()
    assert torch.equal(*_bits(got[finite], want[finite]))
    assert torch.equal(got.isnan(), want.isnan())


def test_bfloat16_values_keep_their_bits_through_selects_and_stores():
    x = EDGES.to(BF16).repeat(40)
    fn = lambda x: (torch.where(x > 1, x, -0.0), x * 1, x.float().to(BF16))  # noqa: E731
    for got, want in zip(_compiled(fn, x), fn(x)):
        finite = ~want.isnan()
        assert torch.equal(*_bits(got[finite], want[finite]))
        assert torch.equal(got.isnan(), want.isnan())


def test_bfloat16_fill_is_rounded():
    """full_like(x, 1.1) in bfloat16 holds 1.1015625, stored and added."""
    x = torch.randn(300).to(BF16)
    check_against_eager(lambda x: (torch.full_like(x, 1.1), x + torch.full_like(x, 1.1)),
                        x, grad=False, atol=0, rtol=0)


def test_long_bfloat16_rows_round_like_eager():
    """Long rows through the vectorized loop: ties, carries, overflow, -0.0, inf and NaN
    spread over most vectors, subnormals in one row only."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 512, generator=g) * 3
    flat = x.view(-1)
    normal_edges = EDGES[(EDGES.abs() >= 1.2e-38) | (EDGES == 0) | EDGES.isnan()]
    flat[::37] = normal_edges.repeat(len(flat[::37]) // len(normal_edges) + 1)[:len(flat[::37])]
    x[5, 100:103] = _f32(0x00000001, 0x00018000, 0x807FFFFF)        # subnormals, row 5 only
    for fn in (lambda x: (x * 1.0).to(BF16), lambda x: (x * 1.0).to(BF16) * 2):
        got, want = _compiled(fn, x), fn(x)
        finite = ~want.isnan()
        assert torch.equal(*_bits(got[finite], want[finite]))
        assert torch.equal(got.isnan(), want.isnan())
