"""Recomputation offers: a value a group stores only for other groups may be computed again
inside each of them from its own inputs (copies of its pointwise nodes join each reader
group). Asked only when the policy says `recompute = True`; if the policy accepts, the
producer nodes nobody reads any more are erased, and with them the write and the
read-backs. `walk` is the partitioner's state (partitioner.Walk), changed through its methods.
"""
from __future__ import annotations

from brrr_compiler import ops
from brrr_compiler.partition import legality
from brrr_compiler.partition.policy import MergeCandidate, ask


def offer_recompute(walk) -> None:
    """Offer every value stored only for other groups to be computed in each of them."""
    for p in sorted(walk.group_of, key=walk.order.__getitem__):
        a = walk.group_of.get(p)
        if a is None or p not in legality.stored_nodes(a, walk.graph_outputs):
            continue
        readers = _readers(walk, p, a)
        if readers:
            _try_recompute(walk, p, a, readers)

def _readers(walk, p, a: set) -> list | None:
    """The groups reading `p` from outside `a`, each with the views it reads p through;
    None if a graph output or anything but a group (through fusible views) reads it."""
    found: dict = {}
    for u in p.users:
        views, node = walk.views_down(u)
        if node not in walk.group_of:
            return None
        if walk.group_of[node] is not a:
            found.setdefault(id(walk.group_of[node]), [walk.group_of[node], []])[1] += views
    return None if p in walk.graph_outputs else [g | set(v) for g, v in found.values()]

def _try_recompute(walk, p, a: set, readers: list) -> None:
    sub, todo = set(), [p]                       # p and its ancestors inside a
    while todo:
        n = todo.pop()
        if n in sub:
            continue
        if ops.kind_of(n) is ops.Kind.REDUCTION:
            return
        sub.add(n)
        todo += [x for x in n.all_input_nodes if x in a]
    if sub == a and len(readers) == 1 and not a & walk.graph_outputs and p not in walk.rereads \
            and all(u in a or u in readers[0] for n in a for u in n.users):
        return       # the merge the walk already decided (not one it left to these offers)
    for r in readers:
        nargs = len(legality.external_inputs(sub | r)) + len(legality.stored_nodes(r, walk.graph_outputs))
        if nargs > walk.max_args:
            return
    union = set().union(*readers)
    verdict = ask(walk.policy, MergeCandidate(
        frozenset(a), frozenset(union), legality.stored_nodes(union, walk.graph_outputs),
        legality.external_inputs(sub | union), walk.graph_outputs, frozenset(sub),
        tuple(frozenset(r) for r in readers)))
    walk.record(sub, union, verdict.accept,
                f"recompute in {len(readers)} reader(s): {verdict.reason}", verdict.metrics)
    if verdict.accept:
        for r in readers:
            _clone_into(walk, sub, r, a)

def _clone_into(walk, sub: set, b: set, a: set) -> None:
    """Copy `sub` into group `b` (its readers there read the copies); erase what in `a`
    nobody reads any more."""
    first = min((u for n in sub for u in n.users if u in b), key=walk.order.__getitem__)
    copies = walk.copy_before(sub, first)
    for u in b:
        for n in set(u.all_input_nodes) & sub:
            u.replace_input_with(n, copies[n])
    walk.regroup(b | set(copies.values()))
    walk.erase_unread(a)
