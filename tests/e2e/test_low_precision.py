"""Config.low_precision: where float16/bfloat16 values round inside a kernel.

"eager" rounds every op's result as eager does, so results match eager bit for bit
(arithmetic here; transcendentals may differ in the last float32 ulp before rounding).
"float32" (the default) keeps values in float32 between ops and rounds only at casts the
program wrote and at stores: the result of a fused chain is its float32 result rounded
once. Compared as int16 views (assert_close would allow a bf16 ulp)."""
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.config import build_config

BF16 = torch.bfloat16


def _run(fn, *args, mode=None, fusion=None):
    torch._dynamo.reset()
    options = None if mode is None else {"low_precision": mode}
    if fusion is not None:
        options = {**(options or {}), "fusion": fusion}
    out = torch.compile(fn, backend="brrr", options=options)(*args)
    torch._dynamo.reset()
    return out


def _same_bits(a, b) -> bool:
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def _inputs(n=3, shape=(64, 300)):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(shape, generator=g).to(BF16) for _ in range(n)]


CHAINS = {
    "mul_mul": lambda a, b, c: a * b * c,
    "mul_add": lambda a, b, c: a * b + c,
    "mean_sub": lambda a, b, c: a - (a * b).mean(-1, keepdim=True),
    "div_sub": lambda a, b, c: (a / (b.abs() + 1)) - c,
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_eager_mode_rounds_every_op_like_eager(name):
    fn, args = CHAINS[name], _inputs()
    assert _same_bits(_run(fn, *args, mode="eager"), fn(*args))


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_float32_mode_rounds_a_fused_chain_once(name):
    """Fused by the greedy policy: the cost model may keep mean_sub's mean a kernel of its
    own (where a bfloat16 store converts in one instruction it is faster so), and a
    tensor between kernels is rounded to its dtype."""
    fn, args = CHAINS[name], _inputs()
    once = fn(*[a.float() for a in args]).to(BF16)
    assert _same_bits(_run(fn, *args, mode="float32", fusion="greedy"), once)


def test_float32_is_the_default():
    assert build_config(environ={}).low_precision == "float32"


WRITTEN_CASTS = {     # an emulated low-precision step, each way a program writes it
    "to": lambda x, y: (x * 3).to(BF16).float() + 1,
    "to_dtype_kwarg": lambda x, y: (x * 3).to(dtype=BF16).to(torch.float32) + 1,
    "bfloat16": lambda x, y: (x * 3).bfloat16().float() + 1,
    "type_as": lambda x, y: (x * 3).type_as(y).float() + 1,
    "to_other": lambda x, y: (x * 3).to(y).float() + 1,
    "half": lambda x, y: (x * 3).half().float() + 1,
}


@pytest.mark.parametrize("mode", ["eager", "float32"])
@pytest.mark.parametrize("form", sorted(WRITTEN_CASTS))
def test_casts_the_program_wrote_round_in_both_modes(mode, form):
    x, y = torch.randn(64, 300), torch.randn(3).to(BF16)
    fn = WRITTEN_CASTS[form]
    assert torch.equal(_run(fn, x, y, mode=mode), fn(x, y))


def test_float32_mode_skips_a_decompositions_own_casts():
    """silu on bfloat16 decomposes to a float32 round trip; in float32 mode its result is
    not rounded before the multiply, so the product rounds once (to within an ulp of the
    float32 computation: brrr's exp is not eager's)."""
    a, b = _inputs(2)
    got = _run(lambda a, b: F.silu(a) * b, a, b, mode="float32")
    once = (F.silu(a.float()) * b.float()).to(BF16)
    ulps = (got.view(torch.int16).int() - once.view(torch.int16).int()).abs()
    assert ulps.max() <= 1
    eager = F.silu(a) * b
    assert not _same_bits(got, eager)            # eager rounds silu's result first


def test_float32_mode_consumers_read_a_stored_value_as_stored():
    """A value the kernel also stores (here returned; in training, saved for backward)
    rounds before its consumers read it: a backward recomputing from the stored tensor
    must see what the forward's consumers saw (fuzz seed 79394: amin's gradient found no
    element equal to the saved minimum and came out NaN)."""
    a, b = _inputs(2)
    s, prod = _run(lambda a, b: (F.silu(a), F.silu(a) * b), a, b, mode="float32")
    assert _same_bits(prod, (s.float() * b.float()).to(BF16))


def _layer_norm_gelu_grads(fn, x, w):
    x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    out = fn(x, w)
    out.float().pow(2).sum().backward()
    return [t.double() for t in (out, x.grad, w.grad)]


@pytest.mark.parametrize("seed", [0, 1])
def test_float32_mode_is_at_least_as_accurate_as_eager_with_gradients(seed):
    """Against float64, forward and both gradients: float32 mode's mean error is no
    worse than eager bfloat16's own."""
    fn = lambda x, w: F.gelu(F.layer_norm(x * 2, (256,), w)) * w    # noqa: E731
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(32, 256, generator=g).to(BF16), torch.randn(256, generator=g).to(BF16)
    exact = _layer_norm_gelu_grads(fn, x.double(), w.double())
    eager = _layer_norm_gelu_grads(fn, x, w)
    torch._dynamo.reset()
    brrr = _layer_norm_gelu_grads(torch.compile(fn, backend="brrr",
                                                options={"low_precision": "float32"}), x, w)
    torch._dynamo.reset()
    for got, ref, want in zip(brrr, eager, exact, strict=True):
        assert (got - want).abs().mean() <= 1.05 * (ref - want).abs().mean()


def test_unknown_mode_is_an_error_naming_the_modes():
    with pytest.raises(ValueError, match="'eager' or 'float32'"):
        build_config({"low_precision": "fast"})
    assert build_config(environ={"BRRR_LOW_PRECISION": "eager"}).low_precision == "eager"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mode", ["eager", "float32"])
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_compare_the_rounded_values(kind, mode, dtype):
    """1 + 1e-3 rounds to 1 in bfloat16 and float16: the row ties in eager, which takes
    the first index. In float32 mode too the compared values are rounded first (lower/
    reduce_rules.py), so the float32 1.001 does not win."""
    from tests.helpers import check_against_eager
    a = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]], dtype=dtype)
    b = torch.tensor([[0.0, 1e-3, 0.0], [0.0, -1e-3, 0.0]], dtype=dtype)

    def f(a, b):
        return getattr(a + b, kind)(-1)

    check_against_eager(f, a, b, grad=False, options={"low_precision": mode})
    assert _run(f, a, b, mode=mode).tolist() == f(a, b).tolist()
