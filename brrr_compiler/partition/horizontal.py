"""Horizontal fusion: after the walk, sibling groups that read a common input merge into a
reduction group over the same domain, or whose sums fold into its rows (column folds
and full sums, partition/domains.py). `walk` is the partitioner's state
(partitioner.Walk).
"""
from __future__ import annotations

import torch.fx

from brrr_compiler.partition import domains, legality


def merge_siblings(walk) -> None:
    """Merge sibling groups that read a common input into a reduction group over the
    same domain — another reduction — or a pointwise group of the domain's full shape
    (cross-entropy's one-hot mask that training saves), or a group of sums that fold
    into its rows (layer_norm backward's weight and bias gradients beside its input
    gradient): one pass over the data, one kernel fewer."""
    unique = walk.unique_groups()
    domain = {id(s): legality.reduction_domain(s) for s in unique}
    shape = {id(s): _pointwise_shape(walk, s) for s in unique if domain[id(s)] is None}
    readers: dict = {}           # input (seen through views) -> groups reading it
    for s in unique:
        for r in _read_roots(s):
            readers.setdefault(r, []).append(s)
    position = {id(s): i for i, s in enumerate(unique)}
    for a in unique:
        da = domain[id(a)]
        if da is None or isinstance(da, str):
            continue
        siblings = {id(b): b for r in _read_roots(a) for b in readers[r]
                    if (domain[id(b)] == da and position[id(b)] > position[id(a)])
                    or shape.get(id(b)) == da[0] or domains.folds_into(da, domain[id(b)])}
        for b in sorted(siblings.values(), key=lambda g: position[id(g)]):
            a_now, b_now = walk.group_of[next(iter(a))], walk.group_of[next(iter(b))]
            if a_now is not b_now:
                walk.try_merge(a_now, b_now)

def _read_roots(members: set) -> set:
    """The inputs a group reads, seen through the views computed outside it."""
    roots = set()
    for n in legality.external_inputs(members):
        while legality.is_view(n) and isinstance(n.args[0], torch.fx.Node):
            n = n.args[0]
        roots.add(n)
    return roots

def _pointwise_shape(walk, members: set) -> tuple | None:
    """The one shape a pointwise group stores, if it stores anything."""
    shapes = {legality.shape_of(n) for n in legality.stored_nodes(members, walk.graph_outputs)}
    return next(iter(shapes)) if len(shapes) == 1 else None
