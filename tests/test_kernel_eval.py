"""The reference evaluator (kernel_eval.py): lowered kernels, run with torch ops, against
eager, apart from any printer or compiler; and a broken lowering is caught."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from brrr_compiler.kernel_eval import run_kernel
from brrr_compiler.lower.group import lower_group
from tests.helpers import lowered_vs_eager, plan_of

BF16 = torch.bfloat16


def _special(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * 3
    flat = x.view(-1)
    flat[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    return x.to(dtype)


POINTWISE = {
    "broadcast_chain": (lambda x, b: ((x + b) * 0.5).sin().exp() - b,
                        (_special(8, 16), torch.randn(16))),
    "transcendentals": (lambda x, y: torch.maximum(torch.sigmoid(torch.tanh(
                        torch.log1p((x * y + 1).sin().exp()) - y)).sqrt(), x),
                        (_special(64, 33), torch.randn(64, 33))),
    "transposed": (lambda x, y: (x + y.t()) * 2, (torch.randn(16, 24), torch.randn(24, 16))),
    "rounding": (lambda x: torch.stack([x.floor(), x.ceil(), x.trunc(), x.round(), x.frac(),
                                        x.sign()]), (_special(5, 7),)),
    "division": (lambda x, y: (x / y, torch.div(x, y, rounding_mode="floor"),
                               torch.div(x, y, rounding_mode="trunc"), x.remainder(y),
                               x.fmod(y)), (_special(6, 9), _special(6, 9, seed=1))),
    "pow": (lambda x: (x.abs() ** 1.7, x ** 2, x ** -0.5, torch.pow(2.0, x)), (_special(40),)),
    "integer": (lambda i, j: ((i * 3 - j) & 7, i // 1 + (i ^ j), torch.maximum(i, j), i.floor()),
                (torch.randint(-2**40, 2**40, (32,)), torch.randint(-9, 9, (32,)))),
}


@pytest.mark.parametrize("name", POINTWISE)
def test_pointwise(name):
    fn, args = POINTWISE[name]
    assert lowered_vs_eager(fn, *args) >= 1


REDUCTIONS = {
    "softmax": (lambda x: (x * 2).softmax(-1) + 1, (torch.randn(8, 33),)),
    "log_softmax": (lambda x: F.log_softmax(x, -1), (torch.randn(5, 70),)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (48,), w, b),
                   (torch.randn(6, 48), torch.randn(48), torch.randn(48))),
    "sum_outer_dim": (lambda x: x.sum(0) * 2, (torch.randn(40, 24),)),
    "full_sum": (lambda x: (x * x).sum(), (torch.randn(17, 9),)),
    "max_nan": (lambda x: x.amax(-1) - x.amin(-1), (_special(4, 11),)),
    "argmax": (lambda x: (x.argmax(-1), x.argmin(0)), (torch.randn(7, 13),)),
    "any_all": (lambda x: ((x > 1).any(-1), (x > -2).all(-1)), (torch.randn(9, 30),)),
    "var_mean": (lambda x: torch.var_mean(x, -1), (torch.randn(12, 40),)),
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t),
                      (torch.randn(16, 10), torch.randint(0, 10, (16,)))),
    "column_folds": (lambda x: (x.softmax(-1), x.sum(0) * 2), (torch.randn(8, 32),)),
}


@pytest.mark.parametrize("scratch", [True, False], ids=["cpp_rows", "no_scratch"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name, scratch):
    fn, args = REDUCTIONS[name]
    assert lowered_vs_eager(fn, *args, scratch=scratch, atol=1e-5, rtol=1e-5) >= 1


MASKS = {
    "masked_softmax": (lambda s, m: torch.where(m, s * 0.125, float("-inf")).softmax(-1),
                       (torch.randn(2, 3, 16, 16), torch.ones(16, 16, dtype=torch.bool).tril())),
    "masked_fill": (lambda x, m: x.masked_fill(m, 0.0) * 2.0,
                    (torch.randn(32, 32), torch.rand(32, 32) > 0.5)),
    "uint8_mask": (lambda x, m: x * m.bool() / 0.9,
                   (torch.randn(20, 20), (torch.rand(20, 20) > 0.3).to(torch.uint8))),
    "where_compare": (lambda x, y: torch.where(x > y, x - y, y.abs()),
                      (_special(10, 10), torch.randn(10, 10))),
    "logic": (lambda a, b: (a & ~b) | (a ^ b), (torch.rand(50) > 0.5, torch.rand(50) > 0.5)),
    "isnan_isinf": (lambda x: (x.isnan() | x.isinf()) & ~x.signbit(), (_special(30),)),
}


@pytest.mark.parametrize("name", MASKS)
def test_masks(name):
    fn, args = MASKS[name]
    assert lowered_vs_eager(fn, *args, atol=1e-6, rtol=1e-5) >= 1


CASTS = {
    "bf16_silu": (lambda x, y: F.silu(x) * y, (torch.randn(16, 16, dtype=BF16),
                                                torch.randn(16, 16, dtype=BF16))),
    "bf16_roundtrip": (lambda x: x.to(BF16).float() * 3, (torch.randn(64),)),
    "f16_norm": (lambda x: F.rms_norm(x, (32,)), (torch.randn(4, 32, dtype=torch.float16),)),
    "int_to_float": (lambda q, s: q.float() * s, (torch.randint(-128, 127, (8, 8), dtype=torch.int8),
                                                   torch.rand(8, 1))),
    "float_to_int": (lambda x: (x * 10).to(torch.int32) + 1, (torch.randn(30),)),
    "bool_to_float": (lambda x: (x > 0).float().sum(-1), (torch.randn(6, 20),)),
}


@pytest.mark.parametrize("exact", [True, False], ids=["eager_rounding", "float32"])
@pytest.mark.parametrize("name", CASTS)
def test_casts(name, exact):
    fn, args = CASTS[name]
    assert lowered_vs_eager(fn, *args, exact=exact) >= 1


def test_indirect_loads():
    x, i = torch.randn(6, 9), torch.randint(0, 9, (6, 4))
    assert lowered_vs_eager(lambda x, i: x.gather(1, i) * 2, x, i) == 1
    w, ids = torch.randn(11, 8), torch.randint(0, 11, (3, 5))
    assert lowered_vs_eager(lambda w, ids: F.embedding(ids, w) + 1, w, ids) == 1
    a, b = torch.randn(4, 3), torch.randn(4, 5)
    assert lowered_vs_eager(lambda a, b: torch.cat([a, b], 1).exp(), a, b) == 1


def test_out_of_bounds_index_raises():
    x, i = torch.randn(6, 9), torch.randint(0, 9, (6, 4))
    plan = plan_of(lambda x, i: x.gather(1, i) * 2, x, i)
    k = lower_group(plan.groups[0], "k0")
    i[2, 1] = 9
    given = dict(zip([n.name for n in plan.graph.graph.find_nodes(op="placeholder")], (x, i)))
    with pytest.raises(IndexError, match="out of bounds"):
        run_kernel(k, [given[b.origin] for b in k.inputs], [torch.empty(6, 4)])


def test_a_broken_lowering_is_caught():
    """Swap one scalar op of a lowered layer norm: the evaluator's result leaves eager's."""
    x = torch.randn(8, 33)
    plan = plan_of(lambda x: F.layer_norm(x, (33,)), x)
    k = lower_group(plan.groups[0], "k0", use_scratch=True)
    good, bad = torch.empty(8, 33), torch.empty(8, 33)
    run_kernel(k, [x], [good])
    assert_close(good, F.layer_norm(x, (33,)), atol=1e-5, rtol=1e-5)
    phases = [dataclasses.replace(p, body=[dataclasses.replace(s, op="add") if s.op == "sub"
                                           else s for s in p.body]) for p in k.phases]
    run_kernel(dataclasses.replace(k, phases=phases), [x], [bad])
    assert not torch.allclose(bad, good)
