"""The partitioner on ATen graphs: which nodes share a group, and why (Decisions)."""
import networkx as nx
import pytest
import torch

from brrr_compiler import ops
from brrr_compiler.partition import NoFusionPolicy, Verdict
from tests.helpers import plan_of

aten = torch.ops.aten


def _x(*shape):
    return torch.randn(*shape)


def _targets(group):
    return [n.target for n in group.nodes]


def _group_with(plan, target):
    found = [g for g in plan.groups if target in _targets(g)]
    assert len(found) == 1, f"{target} is in {len(found)} groups:\n{plan}"
    return found[0]


def chain(x):
    return ((x * 2 + 1).exp() - x).tanh().relu() * 0.5


def test_chain_is_one_group():
    plan = plan_of(chain, _x(8, 5))
    assert len(plan.groups) == 1, str(plan)
    assert len(plan.groups[0].nodes) == 7 and plan.aten_nodes() == [], str(plan)
    assert plan.decisions and all(d.accepted for d in plan.decisions), str(plan)
    assert plan.groups[0].domain == (8, 5)


def test_mm_splits_groups():
    def fn(x, w):
        return ((x * 2).tanh() @ w).sigmoid() + 1

    plan = plan_of(fn, _x(8, 5), _x(5, 3))
    assert len(plan.groups) == 2, str(plan)
    assert [n.target for n in plan.aten_nodes()] == [aten.mm.default], str(plan)
    before, after = _group_with(plan, aten.tanh.default), _group_with(plan, aten.sigmoid.default)
    assert before is not after
    assert aten.mul.Tensor in _targets(before) and aten.add.Tensor in _targets(after)


def test_cycle_through_aten_node_is_refused():
    """exp -> mm -> add and exp -> add: one kernel for exp and add would have to run both
    before and after the mm."""
    def fn(x, w):
        a = x.exp()
        return a + a @ w

    plan = plan_of(fn, _x(6, 6), _x(6, 6))
    assert _group_with(plan, aten.exp.default) is not _group_with(plan, aten.add.Tensor)
    refused = [d for d in plan.decisions if not d.accepted]
    assert len(refused) == 1, str(plan)
    assert refused[0].reason.startswith("illegal") and "cycle" in refused[0].reason, str(plan)
    assert "exp" in refused[0].producer and "add" in refused[0].consumer


def _kernel_dag_is_acyclic(plan) -> bool:
    """Kernels and ATen nodes as units, an edge wherever a value crosses between units."""
    unit = {n: ("group", g.id) for g in plan.groups for n in g.nodes}
    dag = nx.DiGraph()
    for n in plan.graph.graph.nodes:
        dag.add_node(unit.get(n, n))
        for a in n.all_input_nodes:
            if unit.get(a, a) != unit.get(n, n):
                dag.add_edge(unit.get(a, a), unit.get(n, n))
    return nx.is_directed_acyclic_graph(dag)


def test_cycle_through_another_kernel_is_refused():
    """sin -> mm -> add, and add's kernel also holds cos, which mul reads: sin and mul in
    one kernel would run after cos's kernel (it feeds mul) and before it (via the mm).
    The path mm -> add, cos -> mul has no node edge from add to cos: only the kernel
    they share connects them."""
    def fn(x, w):
        a, b = x.sin(), x.cos()
        return (a @ w) + b, a * b

    plan = plan_of(fn, _x(6, 6), _x(6, 6))
    assert _kernel_dag_is_acyclic(plan), str(plan)
    assert _group_with(plan, aten.sin.default) is not _group_with(plan, aten.mul.Tensor)
    refused = [d for d in plan.decisions if not d.accepted]
    # the walk's proposal, and the revisit's once mul's kernel has grown
    assert [(d.producer, d.consumer) for d in refused] == [("sin", "mul"),
                                                           ("sin", "add+cos+mul")], str(plan)
    assert all("cycle" in d.reason for d in refused)


def test_none_policy_one_group_per_pointwise_node():
    plan = plan_of(chain, _x(8, 5), policy=NoFusionPolicy())
    pointwise = [n for n in plan.graph.graph.nodes if ops.kind_of(n) is ops.Kind.POINTWISE]
    assert len(pointwise) == 7
    assert [g.nodes for g in plan.groups] == [[n] for n in pointwise], str(plan)
    assert plan.policy == "none"
    assert plan.decisions and not any(d.accepted for d in plan.decisions), str(plan)


class OnlyIntoExp:
    """A researcher's policy: fuse a producer only into a group that computes an exp."""
    name = "only-into-exp"

    def __init__(self):
        self.calls = 0

    def decide(self, candidate):
        self.calls += 1
        accept = any(n.target is aten.exp.default for n in candidate.consumer)
        return Verdict(accept, f"custom: consumer has exp = {accept}", {"call": self.calls})


def test_custom_policy_is_honoured():
    def fn(x):
        return ((x * 2).exp() + 1).sin()

    policy = OnlyIntoExp()
    plan = plan_of(fn, _x(8, 5), policy=policy)
    assert plan.policy == "only-into-exp"
    assert [_targets(g) for g in plan.groups] == [
        [aten.mul.Tensor, aten.exp.default], [aten.add.Tensor], [aten.sin.default]], str(plan)
    assert policy.calls == len(plan.decisions) == 3
    assert [d.accepted for d in plan.decisions] == [True, False, False]
    assert all(d.reason.startswith("custom:") for d in plan.decisions)
    assert [d.metrics["call"] for d in plan.decisions] == [1, 2, 3]


class ExpOnlyIntoAnAdd:
    """Declines an exp's group into a group without an add: the exp's merge into the mul
    is declined until the mul's group takes the add."""
    name = "exp-only-into-an-add"

    def decide(self, candidate):
        has = {n.target for n in candidate.consumer}
        accept = aten.exp.default not in {n.target for n in candidate.producer} or \
            aten.add.Tensor in has
        return Verdict(accept, f"custom: {accept}")


def test_a_declined_merge_is_asked_again_once_a_side_has_grown():
    plan = plan_of(lambda x: x.exp() * 3 + 1, _x(8, 5), policy=ExpOnlyIntoAnAdd())
    assert [_targets(g) for g in plan.groups] == [
        [aten.exp.default, aten.mul.Tensor, aten.add.Tensor]], str(plan)
    assert [(d.producer, d.consumer, d.accepted) for d in plan.decisions] == [
        ("exp", "mul", False), ("mul", "add", True), ("exp", "add+mul", True)], str(plan)


class _Raises:
    name = "my-raising-policy"

    def decide(self, candidate):
        raise KeyError("no such stat")


class _AnswersBool:
    name = "my-bool-policy"

    def decide(self, candidate):
        return True


@pytest.mark.parametrize("policy, says", [(_Raises(), "raised KeyError"),
                                          (_AnswersBool(), "answered True")])
def test_a_broken_user_policy_gets_an_error_naming_it_and_the_merge(policy, says):
    """A researcher's policy with a bug is an error naming the policy and the merge it was
    asked about, not a silent run through ATen."""
    f = torch.compile(lambda x: (x * 2).exp() + 1, backend="brrr",
                      options={"fusion": policy})
    # Dynamo wraps a backend's error in its own BackendCompilerFailed, which names it
    with pytest.raises(Exception, match=f"PolicyError: brrr: fusion policy '{policy.name}' "
                                        f"{says}.*merging mul"):
        f(_x(8, 5))


def test_views_of_inputs_join_the_group_that_reads_them():
    """Views a kernel reads its inputs through (of a graph input, of an ATen result) are
    folded into the kernel: no view runs through ATen, and two slices of one tensor are
    one kernel argument."""
    def fn(x, w):
        y = x @ w
        return y[:, ::2] * y[:, 1::2] + x.t()[:4, :4]

    plan = plan_of(fn, _x(4, 8), _x(8, 8))
    assert [n.target for n in plan.aten_nodes()] == [aten.mm.default], str(plan)
    (group,) = plan.groups
    assert {n.name for n in group.inputs} == {"x_1", "mm"}, str(plan)


def _pool(x, mean, inv):
    """A batch norm's affine part and relu, then a 2x2 max-pool (windows side by side)."""
    return torch.nn.functional.max_pool2d(((x - mean) * inv).relu(), 2)


def test_pointwise_producer_joins_a_channels_last_pool():
    """The walk refuses each window's merge on its own (the other windows' views would
    read a value no longer stored); the revisit merges them all at once: NHWC windows
    read channels contiguously, and each value once."""
    x = _x(2, 4, 8, 8).contiguous(memory_format=torch.channels_last)
    plan = plan_of(_pool, x, _x(4, 1, 1), _x(4, 1, 1))
    assert len(plan.groups) == 1 and plan.aten_nodes() == [], str(plan)
    assert plan.groups[0].domain == (2, 4, 4, 4)


def test_pointwise_producer_stays_apart_from_an_nchw_pool():
    """NCHW windows step by two along the innermost dim: not merged."""
    plan = plan_of(_pool, _x(2, 4, 8, 8), _x(4, 1, 1), _x(4, 1, 1))
    assert len(plan.groups) == 2, str(plan)


def test_pointwise_producer_stays_apart_from_overlapping_windows():
    """A 3x3 stride-1 pool would compute each relu value nine times: not merged."""
    x = _x(2, 4, 8, 8).contiguous(memory_format=torch.channels_last)
    plan = plan_of(lambda x: torch.nn.functional.max_pool2d(x.exp().relu(), 3, 1), x)
    assert len(plan.groups) == 2, str(plan)
