"""MeasuredPolicy (max-autotune) with stand-in measurements: which merges it measures
(those the model does not back by more than the margin), what it hands the measurement,
how a measurement decides and how its reason and metrics read. No kernel is timed here:
tests/e2e/test_autotune.py runs the real measurements."""
import torch

from brrr_compiler.cost import CostPolicy, generic_cpu
from brrr_compiler.lowered_count import cost_policy
from brrr_compiler.cost.measured import Measurement, MeasuredPolicy, measured_where_unsure
from brrr_compiler.partition import GreedyPolicy, NoFusionPolicy
from tests.cost.test_policy import V, Y, broadcast_blowup, cheap_four_ways
from tests.helpers import plan_of

CPU2 = generic_cpu(threads=2)


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)))


class Stand:
    """A measurement that records what it was asked and answers `answer(before, after)`."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def __call__(self, before, after):
        self.asked.append((before, after))
        return self.answer(before, after)


def _policy(base, stand, margin=1e9):
    return MeasuredPolicy(base, cost_policy(CPU2), stand, margin)


def _chain(t):
    return ((t * 2 + 1) * 3 - t).abs()


def test_measured_merges_follow_the_measurement_and_say_so():
    stand = Stand(lambda before, after: Measurement(before_s=1e-3, after_s=2e-3))
    plan = plan_of(broadcast_blowup, _x(*V), _x(*Y), policy=_policy(GreedyPolicy(), stand))
    assert stand.asked and len(plan.groups) > 1, str(plan)
    for d in plan.decisions:
        assert not d.accepted, str(d)
        assert d.reason.startswith("measured: fused 2 ms vs separate 1 ms (model: "), d.reason
        assert "greedy would fuse" in d.reason
        assert (d.metrics["measured_fused_us"], d.metrics["measured_unfused_us"]) == (2000, 1000)
        assert d.metrics["measured_cached"] is False and d.metrics["fused_us"] > 0


def test_the_measurement_gets_both_sides_of_the_merge():
    stand = Stand(lambda before, after: Measurement(2e-3, 1e-3, cached=True))
    plan = plan_of(broadcast_blowup, _x(*V), _x(*Y), policy=_policy(GreedyPolicy(), stand))
    assert len(plan.groups) == 1 and all(d.accepted for d in plan.decisions), str(plan)
    assert all("measured, cached: fused 1 ms vs separate 2 ms" in d.reason for d in plan.decisions)
    for before, after in stand.asked:
        assert len(before) == 2 and len(after) == 1
        (merged, stored), = after
        assert merged == before[0][0] | before[1][0]
        assert stored and all(s in merged for s in stored)
        assert all(out for _, out in before)        # each kernel before stores something


def test_a_merge_the_model_backs_beyond_the_margin_is_not_measured():
    stand = Stand(lambda before, after: Measurement(1.0, 2.0))
    plan = plan_of(_chain, _x(1024, 1024), policy=_policy(GreedyPolicy(), stand, margin=1.3))
    assert not stand.asked and len(plan.groups) == 1, str(plan)
    assert all(d.reason.startswith("legal") for d in plan.decisions)


def test_cost_measures_inside_the_margin_either_way():
    """broadcast_blowup's merge into the product is predicted to lose by a wide margin:
    at a margin of 1.3 the cost policy's refusal stands; past the predicted ratio the
    merge is measured."""
    args = _x(*V), _x(*Y)
    wide, narrow = Stand(lambda b, a: Measurement(2.0, 1.0)), Stand(lambda b, a: Measurement(2.0, 1.0))
    plan = plan_of(broadcast_blowup, *args, policy=_policy(cost_policy(CPU2), narrow, margin=1.3))
    refused = [d for d in plan.decisions if not d.accepted]
    assert refused and all("measured" not in d.reason for d in refused), str(plan)
    plan = plan_of(broadcast_blowup, *args, policy=_policy(cost_policy(CPU2), wide))
    assert wide.asked and len(plan.groups) == 1, str(plan)


def test_a_merge_it_cannot_measure_keeps_the_policy_verdict_with_the_reason():
    stand = Stand(lambda before, after: "the graph has symbolic sizes")
    plan = plan_of(broadcast_blowup, _x(*V), _x(*Y), policy=_policy(GreedyPolicy(), stand))
    assert len(plan.groups) == 1, str(plan)
    assert all(d.reason == "legal; the greedy policy fuses every legal merge; not measured: "
                           "the graph has symbolic sizes" for d in plan.decisions), str(plan)


def test_recompute_offers_are_measured_as_recomputing_vs_materialized():
    stand = Stand(lambda before, after: Measurement(3e-3, 1e-3))
    plan = plan_of(cheap_four_ways, _x(2048, 4096), policy=_policy(cost_policy(CPU2), stand))
    (offer,) = [d for d in plan.decisions if "recomputing" in d.reason]
    assert offer.accepted and "measured: recomputing 1 ms vs materialized 3 ms" in offer.reason
    (before, after), = [(b, a) for b, a in stand.asked if len(a) == 2]   # the offer
    assert len(before) == 2, stand.asked         # p's kernel stores it, the reader reads it
    for members, stored in after:                # each kernel computes p = x * 2 + 1 itself
        assert {"mul", "add"} <= {n.name for n in members}
        assert not {"mul", "add"} & {n.name for n in stored}


def test_size_refusals_stand_unmeasured():
    stand = Stand(lambda before, after: Measurement(2.0, 1.0))
    base = cost_policy(CPU2, max_inputs=1)
    plan = plan_of(broadcast_blowup, _x(*V), _x(*Y), policy=_policy(base, stand))
    too_big = [d for d in plan.decisions if d.reason.startswith("too big")]
    assert too_big and not any(d.accepted for d in too_big), str(plan)


def test_only_brrrs_weighing_policies_are_wrapped():
    model, stand = cost_policy(CPU2), Stand(lambda b, a: Measurement(1.0, 1.0))
    none = NoFusionPolicy()
    assert measured_where_unsure(none, model, stand, 1.3) is none

    class Mine:
        name = "mine"

        def decide(self, candidate):
            raise AssertionError("not called")
    mine = Mine()
    assert measured_where_unsure(mine, model, stand, 1.3) is mine
    wrapped = measured_where_unsure(cost_policy(CPU2), model, stand, 1.3)
    assert isinstance(wrapped, MeasuredPolicy) and wrapped.name == "cost" and wrapped.recompute
    greedy = measured_where_unsure(GreedyPolicy(), model, stand, 1.3)
    assert greedy.name == "greedy" and not greedy.recompute
