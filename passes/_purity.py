"""What a pass may merge, drop or bypass: node purity and the aliasing facts that guard it.

A node is *pure* when running it twice with the same inputs gives the same value and
running it zero times changes nothing else: a non-mutating ATen op with at least one
return, not random (no RNG state), not allocating garbage (`empty*`), not side-effectful.
CSE merges only pure nodes and DCE drops only pure nodes.
"""
import operator

import torch
from torch.fx import Node

_RANDOM_PREFIXES = (
    "rand", "bernoulli", "native_dropout", "dropout", "normal", "uniform",
    "exponential", "empty", "cauchy", "geometric", "log_normal", "multinomial", "poisson",
)


def _op_name(op: torch._ops.OpOverload) -> str:
    """`aten::rand_like` -> `rand_like` (the namespace is ignored)."""
    return op._schema.name.split("::")[-1]


def _pure_overload(op: torch._ops.OpOverload) -> bool:
    schema = op._schema
    return (
        not schema.is_mutable
        and len(schema.returns) > 0
        and torch.Tag.nondeterministic_seeded not in op.tags
        and not _op_name(op).startswith(_RANDOM_PREFIXES)
    )


def is_pure(node: Node) -> bool:
    """True for a call of a pure ATen op (or a getitem of one's results)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    if not isinstance(node.target, torch._ops.OpOverload):
        return False
    return _pure_overload(node.target) and not node.is_impure()


def mutates(node: Node) -> bool:
    """True for a call that may write memory: a mutable-schema op or any impure non-ATen call."""
    if node.op != "call_function":
        return False
    if isinstance(node.target, torch._ops.OpOverload):
        return node.target._schema.is_mutable
    return node.target is not operator.getitem and node.is_impure()


def is_view(node: Node) -> bool:
    """True when the node's result shares storage with its first argument."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem or node.target is torch.ops.aten._unsafe_view.default:
        return True
    if not isinstance(node.target, torch._ops.OpOverload):
        return False
    returns = node.target._schema.returns
    alias = returns[0].alias_info if returns else None
    return alias is not None and not alias.is_write


def feeds_mutation(node: Node) -> bool:
    """True when the node's result, directly or through views of it, is written by some op."""
    for user in node.users:
        if mutates(user) or (is_view(user) and feeds_mutation(user)):
            return True
    return False


def is_graph_output(node: Node) -> bool:
    """True when the node's result is returned by the graph."""
    return any(user.op == "output" for user in node.users)
