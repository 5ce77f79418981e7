"""A zoo of pointwise and broadcast chains, compiled by brrr and checked against eager.

Every chain runs on float32 contiguous inputs, forward and gradients; a representative
subset runs over float64/float16/bfloat16 and over non-contiguous, broadcast, expanded,
0-dim, 0-size and odd-sized inputs (not the full cross product: the file stays fast).
Cats, rotary embeddings and slice gradients are in test_cat_and_slices.py.
"""
from __future__ import annotations

import zlib
from typing import Callable, NamedTuple

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager


class Chain(NamedTuple):
    name: str
    fn: Callable
    nargs: int
    domain: str = "any"        # any | pos (in [0.5, 2)) | nonzero (|v| in [0.5, 1.5))


def _rounding(x):
    halves = (x * 8).round() / 2          # exact .5 values exercise round-half-to-even
    return x.floor() + x.ceil() * 2 + x.round() * 3 + x.trunc() * 4 + x.frac() + halves.round()


CHAINS = [
    Chain("scalar_arith", lambda x, y: (x * 2.5 + 1.0 - y / 3.0) * -0.5 + (2 - x), 2),
    Chain("add_sub_alpha", lambda x, y: torch.add(x, y, alpha=2) - torch.sub(y, x, alpha=0.5)
          + torch.rsub(x, 1.5), 2),
    Chain("div_modes", lambda x, y: torch.div(x * 3, y, rounding_mode="floor")
          + torch.div(x * 3, y, rounding_mode="trunc") * 0.5 + x / y, 2, "nonzero"),
    Chain("pow_scalars", lambda x: x ** 2 + x ** 3 + x ** 0.5 + x ** -1 + x ** 2.5, 1, "pos"),
    # integer exponents of 4 and more: float32 multiplies them out in float64 (scalar_rules)
    # (positive terms: a half-precision sum of cancelling powers is eager's rounding noise)
    Chain("pow_integers", lambda x: x ** 4 + x ** 5 + x ** 6 + (x ** -7).reciprocal()
          + x ** 13.0, 1, "pos"),
    Chain("pow_tensor", lambda x, y: x ** y + torch.pow(2.0, y) - x ** (y * 0 + 2), 2, "pos"),
    Chain("exp_log", lambda x, y: (x.exp() * y).log() + x.exp2(), 2, "pos"),
    Chain("tanh_erf_sigmoid", lambda x, y: x.tanh() + y.erf() * x.sigmoid(), 2),
    Chain("sin_cos", lambda x, y: x.sin() * y.cos() - (x * y).sin(), 2),
    Chain("expm1_log1p", lambda x, y: x.expm1() + y.log1p() * 2, 2, "pos"),
    Chain("sqrt_rsqrt", lambda x, y: x.sqrt() + y.rsqrt() - (x * y).reciprocal(), 2, "pos"),
    Chain("abs_neg_sign", lambda x, y: x.abs() - (-y) * x.sign() + y.neg().abs(), 2),
    Chain("rounding", _rounding, 1),
    Chain("maximum_minimum", lambda x, y: torch.maximum(x, y) - torch.minimum(x * 2, y), 2),
    Chain("clamp_relu", lambda x, y: x.clamp(-0.5, 0.7) + y.clamp_min(0.1) + x.relu()
          + x.clamp(max=0.3) + torch.clamp_max(y, -0.2), 2),
    Chain("where_masked_fill", lambda x, y: torch.where(x > y, x * 2, y)
          + x.masked_fill(y < 0, -1.0), 2),
    Chain("compare_to_bool", lambda x, y: (x.ge(y) & x.ne(0.25), x.lt(y) | x.gt(1),
                                           x.eq(x), y.le(0)), 2),
    Chain("logical_select", lambda x, y: torch.where(
        torch.logical_xor(torch.logical_and(x > 0, y > 0), torch.logical_or(x > 1, y < -1))
        | torch.logical_not(x < y), x, y * 3), 2),
    Chain("cast_roundtrip", lambda x: x.to(torch.bfloat16).float() * 3 + x.half().float()
          - x.double().float(), 1),
    Chain("cast_to_int", lambda x, y: (x * 4).to(torch.int32) + y.to(torch.int64) * 0.5
          + (x > y).float(), 2),
    Chain("gelu_exact", lambda x, y: F.gelu(x) * y, 2),
    Chain("gelu_tanh", lambda x, y: F.gelu(x, approximate="tanh") + y, 2),
    Chain("silu", lambda x, y: F.silu(x) * y, 2),
    Chain("softplus", lambda x, y: F.softplus(x) + F.softplus(y * 3, beta=2, threshold=1), 2),
    Chain("hardtanh_leaky_relu", lambda x, y: F.hardtanh(x, -0.5, 0.5)
          + F.leaky_relu(y, 0.1), 2),
    Chain("elu_mish", lambda x, y: F.elu(x) + F.mish(y), 2),
    Chain("hardswish_hardsigmoid", lambda x, y: F.hardswish(x * 4) + F.hardsigmoid(y * 4), 2),
    Chain("addcmul_addcdiv", lambda x, y, z: torch.addcmul(x, y, z, value=0.5)
          + torch.addcdiv(x, y, z, value=2), 3, "nonzero"),
    Chain("lerp", lambda x, y, z: torch.lerp(x, y, 0.3) + torch.lerp(x, y, z), 3),
    Chain("nan_to_num", lambda x: torch.nan_to_num(x.log(), nan=0.5, posinf=1.0, neginf=-1.0)
          + torch.nan_to_num(x / 0.0), 1),
    Chain("bias_tanh", lambda x, y: torch.tanh(x + y * 0.1) * 2, 2),
    Chain("mixed_promotion", lambda x, y: x * (y > 0) + (x > 0) + 3 * (y < 0.5).int(), 2),
]
BY_NAME = {c.name: c for c in CHAINS}

SHAPE = (33, 17)
LAYOUTS = ("contiguous", "transposed", "sliced", "broadcast", "expanded", "scalar0d",
           "empty", "odd")


def _layout(layout: str, i: int, fill: Callable) -> torch.Tensor:
    """The i-th input of a chain, in `layout` (broadcast alternates column and row)."""
    m, n = SHAPE
    return {
        "contiguous": lambda: fill(m, n),
        "transposed": lambda: fill(n, m).t(),
        "sliced": lambda: fill(m, 2 * n)[:, ::2],
        "broadcast": lambda: fill(m, 1) if i % 2 == 0 else fill(1, n),
        "expanded": lambda: fill(m, 1).expand(m, n) if i == 0 else fill(m, n),
        "scalar0d": lambda: fill(),
        "empty": lambda: fill(0, 5),
        "odd": lambda: fill(7, 13),
    }[layout]()


def _filler(domain: str, dtype: torch.dtype, gen: torch.Generator) -> Callable:
    def fill(*shape):
        if dtype is torch.bool:
            return torch.randint(0, 2, shape, generator=gen).bool()
        if not dtype.is_floating_point:
            return torch.randint(-8, 8, shape, generator=gen, dtype=dtype)
        v = torch.randn(shape, generator=gen, dtype=torch.float64)
        if domain == "pos":
            v = torch.rand(shape, generator=gen, dtype=torch.float64) * 1.5 + 0.5
        elif domain == "nonzero":
            v = v.sign() * (torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5)
        return v.to(dtype)
    return fill


def make_inputs(chain: Chain, layout: str = "contiguous", dtype=torch.float32) -> list:
    gen = torch.Generator().manual_seed(zlib.crc32(f"{chain.name}{layout}{dtype}".encode()))
    fill = _filler(chain.domain, dtype, gen)
    return [_layout(layout, i, fill).requires_grad_(dtype.is_floating_point)
            for i in range(chain.nargs)]


@pytest.mark.parametrize("chain", CHAINS, ids=lambda c: c.name)
def test_chain_float32(chain):
    graphs = check_against_eager(chain.fn, *make_inputs(chain))
    assert graphs and any(g.kernels for g in graphs), "no kernel was generated"


DTYPE_CHAINS = ["scalar_arith", "pow_scalars", "pow_integers", "exp_log", "tanh_erf_sigmoid", "rounding",
                "maximum_minimum", "where_masked_fill", "gelu_tanh", "silu", "lerp",
                "cast_roundtrip"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("name", DTYPE_CHAINS)
def test_chain_dtypes(name, dtype):
    chain = BY_NAME[name]
    check_against_eager(chain.fn, *make_inputs(chain, dtype=dtype))


LAYOUT_CHAINS = ["scalar_arith", "tanh_erf_sigmoid", "where_masked_fill", "silu",
                 "addcmul_addcdiv", "compare_to_bool"]


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("name", LAYOUT_CHAINS)
def test_chain_layouts(name, layout):
    chain = BY_NAME[name]
    check_against_eager(chain.fn, *make_inputs(chain, layout))


@pytest.mark.parametrize("layout", ["transposed", "sliced", "broadcast"])
def test_bfloat16_layouts(layout):
    chain = BY_NAME["gelu_tanh"]
    check_against_eager(chain.fn, *make_inputs(chain, layout, torch.bfloat16))


ACTIVATIONS = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
    "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
}


@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_bias_activation(act):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(SHAPE, generator=gen, requires_grad=True)
    bias = torch.randn(SHAPE[1], generator=gen, requires_grad=True)
    check_against_eager(lambda x, b: ACTIVATIONS[act](x + b), x, bias)


@pytest.mark.parametrize("layout", ["flat", "long_rows", "transposed"])
def test_parallel_tiled_loops(layout):
    """Big enough for the OpenMP threads and for several 8192-element tiles per row."""
    gen = torch.Generator().manual_seed(7)
    x, y = {
        "flat": lambda: (torch.randn(70001, generator=gen), torch.randn(70001, generator=gen)),
        "long_rows": lambda: (torch.randn(3, 20000, generator=gen),
                              torch.randn(3, 20000, generator=gen)),
        "transposed": lambda: (torch.randn(131, 257, generator=gen).t(),
                               torch.randn(257, 131, generator=gen)),
    }[layout]()
    check_against_eager(BY_NAME["silu"].fn, x.requires_grad_(), y.requires_grad_())


@pytest.mark.parametrize("shape", [(300, 200), (2, 256, 128), (128, 64)],
                         ids=["edges", "batched", "one_tile"])
def test_transposed_operand_full_tiles_bit_exact(shape):
    """Full 128 x 64 tiles stage the transposed operand 16 x 16 blocks at a time
    (brrr_transpose16), edge tiles element by element: both must move every value
    exactly, NaN, inf and -0.0 included."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(shape, generator=gen)
    y = torch.randn(shape[:-2] + shape[-2:][::-1], generator=gen)
    y.view(-1)[::37] = float("nan")
    y.view(-1)[5::41] = -0.0
    y.view(-1)[7::53] = float("inf")

    def fn(a, b):
        return a + b.transpose(-1, -2) * 2

    got = torch.compile(fn, backend="brrr", dynamic=False)(x, y)
    want = fn(x, y)
    assert torch.equal(got.isnan(), want.isnan())
    ok = ~want.isnan()
    assert torch.equal(got[ok], want[ok])
    assert torch.equal(torch.signbit(got[ok]), torch.signbit(want[ok]))


INT_CHAINS = [
    Chain("int_arith", lambda x, y: (x + y * 3 - 7) * (x - y) + torch.neg(x).abs(), 2),
    Chain("int_bitwise", lambda x, y: ((x & y) | (x ^ 5)) + ~x + torch.bitwise_and(y, 3), 2),
    Chain("int_compare", lambda x, y: (torch.where(x >= y, x, y) * (x != 3), x < y,
                                       torch.maximum(x, y) - torch.minimum(x, 2 * y)), 2),
]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("chain", INT_CHAINS, ids=lambda c: c.name)
def test_integer_chains(chain, dtype):
    check_against_eager(chain.fn, *make_inputs(chain, dtype=dtype), grad=False)


def test_bool_logic():
    chain = Chain("bool_logic", lambda a, b: ((a & b) | ~a ^ b, torch.logical_not(a) == b,
                                              a.int() + b.int() * 2), 2)
    check_against_eager(chain.fn, *make_inputs(chain, dtype=torch.bool), grad=False)


SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.0, -1.0, 0.5]
SPECIAL_OPS = {
    "maximum": lambda x, y: torch.maximum(x, y),
    "minimum": lambda x, y: torch.minimum(x, y),
    "fmax": lambda x, y: torch.fmax(x, y) * 2,
    "fmin": lambda x, y: torch.fmin(x, y) - x,
    "clamp": lambda x, y: x.clamp(-0.0, 0.75) + y.clamp(min=0.0),
    "where": lambda x, y: torch.where(x > y, x, y) * torch.where(x <= y, y, -x),
    "relu": lambda x, y: torch.relu(x) - torch.relu(-y),
}
# eager's own max/min of -0.0 and 0.0 differs between its vectorized and scalar loops
ZERO_TIE_SIGN_UNSPECIFIED = ("maximum", "minimum", "fmax", "fmin")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16],
                         ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("op", list(SPECIAL_OPS))
def test_nan_inf_negative_zero(op, dtype):
    """Every pair of special values; signbit makes -0.0 versus 0.0 visible where the sign
    is specified (not for a NaN, nor for a max/min of two zeros)."""
    vals = torch.tensor(SPECIAL, dtype=dtype)
    x = vals.repeat_interleave(len(SPECIAL)).requires_grad_()
    y = vals.repeat(len(SPECIAL)).requires_grad_()

    def fn(x, y):
        out = SPECIAL_OPS[op](x, y)
        unspecified = out.isnan()
        if op in ZERO_TIE_SIGN_UNSPECIFIED:
            unspecified = unspecified | ((x == 0) & (y == 0))
        return out, torch.signbit(out) & ~unspecified

    check_against_eager(fn, x, y)


EXACT = {
    "mul_add": lambda x, y, z: x * y + z,
    "sub_mul_div": lambda x, y, z: (x - y) * z / (y.abs() + 1),
    "mul_scalar": lambda x, y, z: x * 0.1,
    "add_scalar": lambda x, y, z: x + 0.1,
}


@pytest.mark.parametrize("name, dtype", [
    ("mul_add", torch.float32),
    ("mul_add", torch.float64),
    ("sub_mul_div", torch.float32),
    ("sub_mul_div", torch.float64),
    ("mul_scalar", torch.bfloat16),
    ("mul_scalar", torch.float16),
    ("add_scalar", torch.bfloat16),
    ("add_scalar", torch.float16),
], ids=str)
def test_exact_arithmetic(name, dtype):
    """One rounding per ATen op, as eager does: +, -, *, / are bit-exact (no tolerance)."""
    chain = Chain(name, EXACT[name], 3)
    check_against_eager(chain.fn, *make_inputs(chain, dtype=dtype), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_exact_add_of_float32_zero_dim_tensor(dtype):
    x = make_inputs(Chain("x", None, 1), dtype=dtype)[0]
    check_against_eager(lambda x, s: x + s, x, torch.tensor(0.1), atol=0, rtol=0, grad=False)


def test_gelu_erf_large_magnitudes():
    """erf saturates at exactly +-1, so gelu of a large negative value is -0.0."""
    x = torch.tensor([-1e30, -1e10, -1e4, -100.0, -20.0, 20.0, 100.0, 1e4, 1e30],
                     requires_grad=True)
    check_against_eager(lambda x: (F.gelu(x), torch.erf(x)), x)


def test_bfloat16_signbit_builds():
    """bf16 load -> signbit -> store once crashed gcc 12's vectorizer (ICE)."""
    x = make_inputs(Chain("signbit", torch.signbit, 1), dtype=torch.bfloat16)[0]
    check_against_eager(torch.signbit, x, grad=False)
