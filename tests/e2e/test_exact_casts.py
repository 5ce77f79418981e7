"""transforms/exact_casts.py: casts back to float16/bfloat16 of values the type already
holds (abs, neg, max/min, selects, floor/ceil/trunc/round of its own values) print no
rounding, and the results keep eager's bits: every float16 and every bfloat16 bit
pattern through each op, compared as integer views (assert_close hides signed zeros and
NaN payloads; a NaN must stay a NaN, its payload is not compared)."""
import pytest
import torch

from brrr_compiler import machine
from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from brrr_compiler.scalar_ops import EXACT
from tests.helpers import plan_of

ALL_BITS = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16)
KEEPING = {
    "abs": lambda x, y: x.abs(),
    "neg": lambda x, y: -x,
    "maximum": lambda x, y: torch.maximum(x, y),
    "minimum_of_clamp": lambda x, y: x.clamp(max=2.5),
    "where": lambda x, y: torch.where(x > y, x, y),
    "floor": lambda x, y: x.floor(),
    "ceil": lambda x, y: x.ceil(),
    "trunc": lambda x, y: x.trunc(),
    "round": lambda x, y: x.round(),
    "relu": lambda x, y: torch.relu(x),
    "copysign": lambda x, y: torch.copysign(x, y),
    "sign": lambda x, y: torch.sign(x),
    # (not fmax: eager's bfloat16 fmax of a subnormal and a NaN gives NaN, not the number)
}


def _compiled(fn, *args):
    torch._dynamo.reset()
    out = torch.compile(fn, backend="brrr")(*args)
    torch._dynamo.reset()
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", sorted(KEEPING))
def test_ops_that_keep_half_values_keep_eagers_bits(name, dtype):
    x = ALL_BITS.view(dtype)
    y = x.flip(0)
    got, want = _compiled(KEEPING[name], x, y), KEEPING[name](x, y)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_kept_values_print_no_rounding_but_arithmetic_does(dtype):
    x = torch.randn(4096).to(dtype)
    round_fn = "brrr_round_bf16(" if dtype is torch.bfloat16 else "brrr_round_f16("
    for fn, rounds in [(lambda t: torch.maximum(t.abs(), -t).floor(), False),
                       (lambda t: torch.where(t > 0, t, 0.5), False),
                       (lambda t: torch.where(t > 0, t, 0.1), False),   # 0.1 as a half
                       (lambda t: torch.where(t > 0, t * 3, t), True),
                       (lambda t: t.abs() * 3, True), (lambda t: (t + 1).abs(), True)]:
        plan = plan_of(fn, x)
        g = plan.groups[0]
        k = lower_group(g, g.name)
        src = cpp.kernel_source(k, 1).split("extern")[-1]
        # float16 stores convert through brrr_f16_store (codegen/cpp_half.py), which
        # rounds, and so do bfloat16 ones where the CPU rounds bfloat16 in one instruction
        # (machine.rounds_bfloat16): only the in-loop rounding shows in the loop
        in_loop = dtype is torch.bfloat16 and not machine.rounds_bfloat16()
        assert not in_loop or (round_fn in src) == rounds, src
        if not rounds:
            assert any(s.op == "cast" and s.value == EXACT for s in k.body)


def test_a_half_value_narrowed_from_float64_is_exact_and_a_float32_one_is_not():
    x = torch.randn(4096).to(torch.bfloat16)
    plan = plan_of(lambda t: t.double().abs().to(torch.bfloat16), x)
    k = lower_group(plan.groups[0], plan.groups[0].name)
    assert any(s.op == "cast" and s.value == EXACT for s in k.body)
    y = torch.randn(4096)
    plan = plan_of(lambda t: t.abs().to(torch.bfloat16), y)
    k = lower_group(plan.groups[0], plan.groups[0].name)
    assert not any(s.value == EXACT for s in k.body)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_constant_is_exact_where_a_round_trip_through_the_type_keeps_it(dtype):
    """The constant check (struct, not a tensor round trip) agrees with torch's own
    conversion on edges: subnormals, the largest finite values, overflow, infinities."""
    from brrr_compiler.transforms.exact_casts import _holds

    info = torch.finfo(dtype)
    edges = [0.0, -0.0, 1.0, 0.1, 1 / 3, info.max, info.max * (1 + 2 ** -12), info.max * 2,
             info.tiny, info.tiny / 2, info.smallest_normal * info.eps, 2.0 ** -150, 3.5e38,
             1e308, float("inf"), float("-inf"), float("nan"), 257.0, 1.0 + 2 ** -8, -2.5]
    bits = ALL_BITS[::97].view(dtype).double().tolist()
    for v in edges + bits:
        round_trip = torch.tensor(v, dtype=torch.float64).to(dtype).double().item()
        assert _holds(dtype, v) == (v != v or round_trip == v), v
    assert not _holds(dtype, True) and not _holds(dtype, "1.0")
