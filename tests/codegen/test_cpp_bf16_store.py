"""codegen/cpp_half.py: where the CPU rounds bfloat16 in one instruction
(machine.rounds_bfloat16), contiguous bfloat16 stores of pointwise loops are staged as
floats and rounded by the prelude's brrr_bf16_store (vcvtneps2bf16, with subnormal
groups and tails through the integer rounding). Bits against eager on every float32
near a bfloat16 value or a tie, subnormals scattered among normals, inf and NaN, and odd
lengths; printed either way, whatever this machine has (the helper falls back to the
integer rounding where the compiler does not target the instruction)."""
import pytest
import torch

from brrr_compiler import machine
from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from tests.helpers import plan_of, one_kernel_source

BF16 = torch.bfloat16


@pytest.fixture(params=[True, False], ids=["staged", "in_loop"])
def staged(request, monkeypatch):
    monkeypatch.setattr(machine, "rounds_bfloat16", lambda: request.param)
    return request.param


_source = one_kernel_source


def _sweep() -> torch.Tensor:
    """float32 bit patterns: each bfloat16 value and each tie between neighbours, +-3 ulps
    around both (subnormals, the largest finite values, inf and NaN among them), shuffled
    so subnormals land in groups of normal values."""
    base = torch.arange(1 << 16, dtype=torch.int64) << 16
    bits = torch.cat([base + d for d in range(-3, 4)] + [base + 0x8000 + d for d in range(-3, 4)])
    bits = bits[(bits >= 0) & (bits < (1 << 32))]
    bits = bits[torch.randperm(len(bits), generator=torch.Generator().manual_seed(0))]
    return bits.to(torch.int64).where(bits < (1 << 31), bits - (1 << 32)).to(torch.int32).view(
        torch.float32)


def _compiled(fn, *args):
    torch._dynamo.reset()
    out = torch.compile(fn, backend="brrr", dynamic=False)(*args)
    torch._dynamo.reset()
    return out


def _assert_same_bits(got, want):
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    g, w = got.view(torch.int16), want.view(torch.int16)
    bad = (g != w) & ~nan
    assert not bad.any(), [(hex(a), hex(b)) for a, b in zip(g[bad][:8].tolist(),
                                                            w[bad][:8].tolist())]


def test_pointwise_bfloat16_stores_are_staged_where_the_cpu_rounds(staged):
    x = torch.randn(5000)
    src = _source(lambda t: (t * 2).sigmoid().to(BF16), x)
    assert ("brrr_bf16_store(&out0[c0], hs" in src) == staged, src
    assert ("brrr_round_bf16" in src) != staged, src      # the helper rounds instead
    src = _source(lambda t: t.to(BF16), x)                # a bare cast: input to output
    assert ("brrr_bf16_store(&out0[" in src and "omp simd" not in src) == staged, src


def test_copies_and_short_loops_keep_their_stores_in_the_loop(staged):
    """A loaded bfloat16 value stores its bits with one shift, and a loop shorter than the
    instruction's 16 values only pays the staging (machine.stages_store)."""
    x = torch.randn(5000, 64).to(BF16)
    src = _source(lambda t: torch.cat([t[:, 40:], t], 1), x)        # no rounding: copies
    assert "brrr_bf16_store" not in src and "brrr_bf16_bits" in src, src
    src = _source(lambda t: (t[:, :6].float() * 2).sigmoid().to(BF16), x)   # rows of 6
    assert "brrr_bf16_store" not in src and "brrr_round_bf16" in src, src


def test_row_walks_stage_their_stores_but_not_their_loads(staged):
    """layer_norm's output walk: the store rounds after the chunk, the loads stay shifts
    in the loop (staging them cost more than the rounding saves: cpp_staging.py)."""
    x, w = torch.randn(64, 1000).to(BF16), torch.randn(1000).to(BF16)
    g = plan_of(lambda a, w: torch.nn.functional.layer_norm(a, (1000,), w, w), x, w).groups
    src = "".join(cpp.kernel_source(lower_group(k, k.name), 2) for k in g)
    assert ("brrr_bf16_store(&out0[" in src) == staged, src
    assert ("brrr_round_bf16" in src) != staged and "brrr_bf16_load(" not in src, src


def test_row_walks_keep_eagers_bits(monkeypatch):
    """layer_norm and softmax over rows, staged and not: the same bits."""
    x = _sweep()[:64 * 1000].view(64, 1000).nan_to_num(0.0).clamp(-1e4, 1e4).to(BF16)
    w = torch.randn(1000)
    for fn in (lambda a: torch.nn.functional.layer_norm(a, (1000,), w.to(BF16)),
               lambda a: a.float().softmax(-1).to(BF16),
               lambda a: (a.float().softmax(-1) * 1e-36).to(BF16)):     # subnormal results
        outs = []
        for hardware in (True, False):
            monkeypatch.setattr(machine, "rounds_bfloat16", lambda: hardware)
            outs.append(_compiled(fn, x))
        assert outs[0].isfinite().all()
        _assert_same_bits(*outs)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 255, 257, 8193])
def test_odd_lengths_keep_eagers_bits(staged, n):
    x = _sweep()[:n]
    for fn in (lambda t: (t * 1.0).to(BF16), lambda t: t.to(BF16), lambda t: (t * 0.5).to(BF16)):
        _assert_same_bits(_compiled(fn, x), fn(x))


def test_every_rounding_decision_keeps_eagers_bits(staged):
    x = _sweep()
    for fn in (lambda t: (t * 1.0).to(BF16), lambda t: t.to(BF16)):
        _assert_same_bits(_compiled(fn, x), fn(x))


def test_bfloat16_arithmetic_rounds_as_the_loop_did(monkeypatch):
    """silu and a chain over bfloat16 inputs (brrr keeps their intermediates in float32,
    where eager rounds each op): staged, the same bits as rounded in the loop."""
    x = _sweep().to(BF16)
    for fn in (torch.nn.functional.silu, lambda t: (t * 0.5 + 1).relu() * t):
        outs = []
        for hardware in (True, False):
            monkeypatch.setattr(machine, "rounds_bfloat16", lambda: hardware)
            outs.append(_compiled(fn, x))
        _assert_same_bits(*outs)
