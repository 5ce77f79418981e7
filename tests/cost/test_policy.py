"""The cost policy on small graphs where the right groups are clear, against greedy and
none; refusals carry reasons; recomputation runs like eager."""
import pytest
import torch

from brrr_compiler import ops
from brrr_compiler.config import build_config
from brrr_compiler.cost import CostPolicy, generic_cpu, policy_from_option
from brrr_compiler.lowered_count import LoweredCount, cost_policy
from brrr_compiler.partition import GreedyPolicy, NoFusionPolicy, PolicyError
from tests.helpers import check_against_eager, plan_of

aten = torch.ops.aten
CPU2 = generic_cpu(threads=2)      # a fixed machine: decisions must not depend on this one


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)))


def _targets(group) -> list:
    return [n.target for n in group.nodes if ops.kind_of(n) is not ops.Kind.VIEW]


def _cost():
    return cost_policy(CPU2)


def _check_reasons(plan):
    for d in plan.decisions:
        assert d.reason, str(plan)
        if not d.accepted and not d.reason.startswith(("illegal", "too big")):
            assert {"unfused_us", "fused_us", "bytes_saved"} <= set(d.metrics), str(d)


def chain(x):
    return ((x * 2 + 1).exp() - x).tanh().relu() * 0.5


def unchained(x):
    return ((x * 2 + 1).exp() - x).relu() * 0.5


def test_chain_is_one_kernel():
    plan = plan_of(unchained, _x(256, 128), policy=_cost())
    assert len(plan.groups) == 1 and len(plan.groups[0].nodes) == 6, str(plan)
    assert all(d.accepted and d.metrics["fused_us"] < d.metrics["unfused_us"]
               for d in plan.decisions), str(plan)
    assert plan.policy == "cost"


def test_chained_transcendentals_split_where_one_takes_the_others_result():
    """tanh of exp's result waits on it (latency, not throughput): two kernels whose loops
    each evaluate independently ran faster here (256x128: 10.9 us fused, 8.1 split;
    benchmarks/results/notes.md, "What the chained rate decides")."""
    plan = plan_of(chain, _x(256, 128), policy=_cost())
    assert [_targets(g) for g in plan.groups] == [
        [aten.mul.Tensor, aten.add.Tensor, aten.exp.default, aten.sub.Tensor],
        [aten.tanh.default, aten.relu.default, aten.mul.Tensor]], str(plan)
    refused = [d for d in plan.decisions if not d.accepted]     # again once tanh grew
    assert len(refused) == 2 and all("compute +" in d.reason for d in refused), str(plan)


def expensive_vector(v):
    return v.sin().exp().erf()


# v varies along the first and last dims and is broadcast along the middle one: the fused
# kernel evaluates it per element (a vector of the last dim alone it would compute once
# per call into a table, transforms/tables.py; one of the first dims once per row)
V, Y = (2, 1, 128), (2, 1024, 128)


def broadcast_blowup(v, y):
    return expensive_vector(v) * y


def test_expensive_producer_is_not_broadcast_into_a_larger_domain():
    v, y = _x(*V), _x(*Y)
    greedy = plan_of(broadcast_blowup, v, y)
    assert len(greedy.groups) == 1, str(greedy)
    plan = plan_of(broadcast_blowup, v, y, policy=_cost())
    assert [_targets(g) for g in plan.groups] == [
        [aten.sin.default, aten.exp.default, aten.erf.default], [aten.mul.Tensor]], str(plan)
    refused = [d for d in plan.decisions if not d.accepted]
    assert refused and "compute +" in refused[0].reason, str(plan)
    assert refused[0].metrics["fused_us"] > refused[0].metrics["unfused_us"]
    _check_reasons(plan)


def four_consumers(v, y1, y2, y3, y4):
    p = expensive_vector(v)
    return p * y1, p + y2, p - y3, p * y4 + 1


def test_expensive_producer_feeding_four_consumers_is_materialized():
    """Four consumers over a larger domain: recomputing the erf(exp(sin)) in each would
    evaluate it 512 times per element; it is computed once and read back."""
    args = (_x(*V),) + tuple(_x(2, 512, 128) for _ in range(4))
    plan = plan_of(four_consumers, *args, policy=_cost())
    first, *consumers = plan.groups
    assert _targets(first) == [aten.sin.default, aten.exp.default, aten.erf.default], str(plan)
    assert len(consumers) == 4 and all(aten.erf.default not in _targets(g) for g in consumers)
    assert all(any(n.target is aten.erf.default for n in g.inputs) for g in consumers), str(plan)
    (offer,) = [d for d in plan.decisions if d.reason.startswith("recompute")]
    assert not offer.accepted and "recompute in 4 reader(s)" in offer.reason, str(plan)
    assert "compute +" in offer.reason and offer.metrics["fused_us"] > offer.metrics["unfused_us"]
    none = plan_of(four_consumers, *args, policy=NoFusionPolicy())
    assert len(none.groups) == 3 + 5, str(none)
    _check_reasons(plan)


def test_same_shape_consumers_share_one_kernel():
    def fn(x, y1, y2, y3, y4):
        p = x.sin() + x.exp() * x.erf()
        return p * y1, p + y2, p - y3, p * y4
    plan = plan_of(fn, *(_x(128, 256) for _ in range(5)), policy=_cost())
    assert len(plan.groups) == 1, str(plan)
    assert len(plan.groups[0].outputs) == 4


def cheap_four_ways(x):
    p = x * 2 + 1
    return p.sum(0), p.amax(0), p.sum(1), p.amax(1)


def expensive_four_ways(x):
    p = x.sin().exp().erf()
    return p.sum(0), p.amax(0), p.sum(1), p.amax(1)


def _stores(plan, target) -> bool:
    return any(n.target is target for g in plan.groups for n in g.outputs)


def test_cheap_producer_is_recomputed_in_each_reduction():
    """p feeds reductions over dim 0 and over dim 1, which cannot share a kernel: greedy
    writes p and reads it back (64 MB more traffic, past the cache); recomputing x * 2 + 1
    in the second kernel is cheaper."""
    x = _x(2048, 4096)
    greedy = plan_of(cheap_four_ways, x)
    assert len(greedy.groups) == 2 and _stores(greedy, aten.add.Tensor), str(greedy)
    plan = plan_of(cheap_four_ways, x, policy=_cost())
    assert len(plan.groups) == 2 and not _stores(plan, aten.add.Tensor), str(plan)
    for g in plan.groups:
        assert aten.mul.Tensor in _targets(g) and aten.add.Tensor in _targets(g), str(plan)
        assert len(g.outputs) == 2 and [n.op for n in g.inputs] == ["placeholder"], str(plan)
    (offer,) = [d for d in plan.decisions if d.reason.startswith("recompute")]
    assert offer.accepted and offer.metrics["bytes_saved"] == 2048 * 4096 * 4, str(plan)
    assert plan.aten_nodes() == [], str(plan)


def test_expensive_producer_is_materialized_not_recomputed():
    plan = plan_of(expensive_four_ways, _x(2048, 4096), policy=_cost())
    assert _stores(plan, aten.erf.default), str(plan)
    (offer,) = [d for d in plan.decisions if d.reason.startswith("recompute")]
    assert not offer.accepted and "compute +" in offer.reason, str(plan)
    _check_reasons(plan)


@pytest.mark.parametrize("fn", [cheap_four_ways, expensive_four_ways, four_consumers])
def test_cost_policy_runs_like_eager(fn):
    args = (_x(64, 48),) if fn is not four_consumers else \
        (_x(48),) + tuple(_x(64, 48) for _ in range(4))
    check_against_eager(fn, *args, options={"fusion": "cost"}, grad=False)


def test_training_under_the_cost_policy_matches_eager():
    x = _x(32, 24).requires_grad_()
    check_against_eager(lambda x: torch.softmax(x.sin() * 2, -1) * x.sum(0), x,
                        options={"fusion": "cost"})


def test_too_many_inputs_is_refused_with_a_reason():
    def fn(a, b, c, d, e):
        return a + b + c + d + e
    plan = plan_of(fn, *(_x(64, 64) for _ in range(5)),
                   policy=cost_policy(CPU2, max_inputs=3))
    refused = [d for d in plan.decisions if not d.accepted]
    assert refused and all("max_inputs=3" in d.reason for d in refused), str(plan)
    assert len(plan.groups) == 2, str(plan)


def test_too_many_live_values_is_refused_with_a_reason():
    def fn(x):
        a, b, c = x.sin(), x.cos(), x.exp()
        return a * b * c
    plan = plan_of(fn, _x(64, 64), policy=cost_policy(CPU2, max_live=1))
    refused = [d for d in plan.decisions if not d.accepted]
    assert refused and all("live at once" in d.reason for d in refused), str(plan)


def test_missing_numbers_raise_in_strict_mode_and_fuse_otherwise():
    no_exp = CPU2.replace(transcendentals=0.0)
    # the partitioner names the policy and the merge around the model's own error
    with pytest.raises(PolicyError, match="policy 'cost' raised CostModelError.*transcendental"):
        plan_of(chain, _x(8, 8), policy=cost_policy(no_exp, strict=True))
    plan = plan_of(chain, _x(8, 8), policy=cost_policy(no_exp))
    assert len(plan.groups) == 1 and any("no estimate" in d.reason for d in plan.decisions)


def test_policy_by_name_and_option():
    assert isinstance(policy_from_option("cost", CPU2, LoweredCount()), CostPolicy)
    assert policy_from_option("cost", CPU2, LoweredCount()).device is CPU2
    assert isinstance(policy_from_option("greedy"), GreedyPolicy)
    assert build_config({"fusion": "cost"}).fusion == "cost"
    with pytest.raises(ValueError, match="cost"):
        build_config({"fusion": "bogus"})


def lse_and_copy(x):
    d = x * 2 - 1
    return torch.logsumexp(d, 0), d.contiguous()


@pytest.mark.parametrize("rows,fused", [(8, True), (128, False)])
def test_transposed_copy_joins_a_column_walk_only_while_its_lines_stay_cached(rows, fused):
    """The copy of a transposed tensor, fused into a column walk over dim 0, stores each
    column a row apart: the next work item reuses those lines only while one work item's
    (rows x columns lines) fit in the core's L2 (1 MiB on CPU2); past it each store is a
    line of its own (650 ms where the copy apart took 20, at 257 rows)."""
    x = _x(rows, 256, 256).transpose(1, 2)
    plan = plan_of(lse_and_copy, x, policy=_cost())
    (walk,) = [g for g in plan.groups if aten.logsumexp.default in _targets(g)
               or aten.amax.default in _targets(g)]
    # the copy of d (the clone of the sub), not the clone that gives logsumexp's
    # masked_fill of the maxima its contiguous layout (decompositions._contiguous, "result")
    copies = [n for n in walk.nodes if n.target is aten.clone.default
              and getattr(n.args[0], "target", None) is aten.sub.Tensor]
    assert bool(copies) is fused, str(plan)
    _check_reasons(plan)
    check_against_eager(lse_and_copy, _x(rows, 16, 24).transpose(1, 2),
                        options={"fusion": "cost"}, grad=False)


def test_a_plan_that_would_store_too_much_memory_fuses_whatever_the_estimate(monkeypatch):
    """cost/policy.py MEMORY_SHARE: an unfused side that stores more than a quarter of the
    machine's memory is no plan, however fast the estimate says it is."""
    import brrr_compiler.cost.policy as policy
    from brrr_compiler.cost.estimate import Estimate

    def est(total, nbytes):
        return Estimate(0.0, total, 0.0, total, "memory", 0.0, nbytes)
    before, after = [est(1e-3, 400 << 20), est(1e-3, 0)], [est(5e-3, 0)]
    monkeypatch.setattr(policy, "memory_bytes", lambda: 1 << 40)
    assert not policy.verdict(before, after, False).accept
    monkeypatch.setattr(policy, "memory_bytes", lambda: 512 << 20)
    v = policy.verdict(before, after, False)
    assert v.accept and "0.195 GiB, more than 25% of this machine's memory" in v.reason, v
    assert policy.verdict(before, after, True).reason.startswith("recomputing: materialized")


def test_multilabel_margin_loss_folds_its_pairs_where_storing_them_cannot_run(monkeypatch):
    """torch decomposes it through (C, C) values (AOTAutograd's table, not brrr's);
    the estimate stores them at C = 2000 (16 MB), which a 32 MB machine could not."""
    import brrr_compiler.cost.policy as policy
    monkeypatch.setattr(policy, "memory_bytes", lambda: 32 << 20)
    x = _x(2000)
    t = torch.randint(-1, 2000, (2000,), generator=torch.Generator().manual_seed(0))
    fn = lambda x, t: torch.nn.functional.multilabel_margin_loss(x, t)
    check_against_eager(fn, x, t, grad=False, options={"fusion": _cost()})
    from brrr_compiler import explain
    text = str(explain(fn, x, t, options={"fusion": _cost()}))
    assert "of this machine's memory" in text, text


def _min_moved(x):
    a = x.amin(-1, keepdim=True)
    return (x - a[:1]).sum(-1) / 2          # amin read at row 0, not at its own row


def test_greedy_fuses_only_what_lowers():
    """Partition legality lets amin merge into a kernel that reads it at another row's
    index, which lowering refuses ("a reduced dim moved"): the greedy policy the option
    names lowers each merge and keeps the two kernels, where the whole group ran through
    ATen before; the partition-only GreedyPolicy still takes the merge."""
    x = torch.randn(6, 5, 7, generator=torch.Generator().manual_seed(0))
    assert len(plan_of(_min_moved, x, policy=GreedyPolicy()).groups) == 1
    graphs = check_against_eager(_min_moved, x, options={"fusion": "greedy"})
    (graph,) = graphs
    assert [k.aten_ops for k in graph.kernels] == [["aten.amin.default"],
                                                   ["aten.slice.Tensor", "aten.sub.Tensor",
                                                    "aten.sum.dim_IntList", "aten.div.Tensor"]]
    assert not graph.fallbacks
    assert any(d.reason.startswith("not fused: the kernel would not lower")
               for d in graph.decisions if not d.accepted)
