"""The cost policy counts the kernel lowering would print: the estimate behind a fusion
decision is the estimate of the kernel that runs; a merge whose group would not lower is
refused; counts are cached per group."""
import pytest
import torch

import brrr_compiler
from brrr_compiler.cost import CostPolicy, KernelNotLowered, generic_cpu
from brrr_compiler.lowered_count import LoweredCount, cost_policy
from tests.helpers import check_against_eager, plan_of

CPU2 = generic_cpu(threads=2)


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(7))


def norm_then_scale(x):
    y = x - x.mean(-1, keepdim=True)
    return y * torch.rsqrt((y * y).mean(-1, keepdim=True) + 1e-5) * 2.0


def test_the_last_merges_estimate_is_the_printed_kernels():
    """The fused time a decision quotes is explain's predicted time of the kernel that
    was built: one count, of the lowered kernel and its schedule."""
    report = brrr_compiler.explain(norm_then_scale, _x(256, 1024),
                                   options={"fusion": "cost", "num_threads": 2})
    (graph,) = report.graphs
    (kernel,) = graph.kernels
    accepted = [d for d in graph.decisions if d.accepted]
    assert accepted, str(report)
    last = accepted[-1]
    # decisions price every kernel as called in a segment; this one, alone in its graph,
    # is called from Python, which explain charges (the only difference)
    assert kernel.called == "python"
    device = generic_cpu(threads=2)
    call = device.python_call_overhead_s - device.kernel_overhead_s
    assert last.metrics["fused_us"] == pytest.approx((kernel.predicted_s - call) * 1e6, rel=1e-3)
    check_against_eager(norm_then_scale, _x(256, 1024), options={"fusion": "cost"})


class CountingLowered(LoweredCount):
    """LoweredCount that records each group it lowers and refuses to lower groups of
    more than `most` compute nodes (as lowering refuses an op it has no rule for)."""

    def __init__(self, most: int | None = None):
        super().__init__("cpp", 2)
        self.most, self.lowered = most, []

    def _count(self, members, stored):
        self.lowered.append(frozenset(members))
        computing = [n for n in members if n.op == "call_function"
                     and "view" not in str(n.target)]
        if self.most is not None and len(computing) > self.most:
            return KernelNotLowered(f"the kernel would not lower: {len(computing)} ops")
        return super()._count(members, stored)


def chain(x):
    return ((x * 2 + 1).exp() - x).tanh()


def test_a_merge_that_would_not_lower_is_refused_with_the_reason():
    count = CountingLowered(most=2)
    plan = plan_of(chain, _x(512, 512), policy=CostPolicy(CPU2, count))
    refused = [d for d in plan.decisions if not d.accepted]
    assert refused and all("would not lower" in d.reason for d in refused), str(plan)
    assert all(len([n for n in g.nodes if n.op == "call_function"]) <= 2 for g in plan.groups)


def test_each_group_is_lowered_once():
    count = CountingLowered()
    plan_of(chain, _x(512, 512), policy=CostPolicy(CPU2, count))
    assert count.lowered and len(count.lowered) == len(set(count.lowered))


def test_a_cost_policy_without_a_counter_says_how_to_build_one():
    with pytest.raises(TypeError, match="cost_policy"):
        CostPolicy(CPU2)
    assert isinstance(brrr_compiler.cost_policy(CPU2), CostPolicy)
    assert isinstance(cost_policy(CPU2, "triton", 1).count, LoweredCount)


def test_a_user_built_cost_policy_compiles_like_the_named_one():
    policy = brrr_compiler.cost_policy(CPU2, threads=2)
    check_against_eager(chain, _x(512, 512), options={"fusion": policy})


def test_the_counted_schedule_prefetches_as_the_device_says():
    """cost_policy counts the schedule the compile prints on its device: input streams
    prefetched only where the device's calibration turned that on."""
    assert cost_policy(CPU2).count.prefetch is False
    assert cost_policy(CPU2.replace(stream_prefetch=True)).count.prefetch is True
    assert LoweredCount("cpp", 2).prefetch is False
