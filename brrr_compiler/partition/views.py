"""Views between groups: shared views are duplicated before the walk, so each copy belongs
to exactly one consumer, and the revisit checks how view chains read a producer's values
before it fuses through them.
"""
from __future__ import annotations

import sympy
import torch.fx

from brrr_compiler import ops
from brrr_compiler.partition import legality


def duplicate_shared_views(gm: torch.fx.GraphModule) -> None:
    """Give every multi-user view node, and every constant (a fill that reads no tensor:
    CSE merges the zeros of several slice gradients), one private copy per user (last
    node first, so a view of a view that was just copied is copied for each of those
    copies too)."""
    for node in reversed(list(gm.graph.nodes)):
        if not (legality.is_view(node) or _constant(node)) or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with gm.graph.inserting_after(node):
                dup = gm.graph.call_function(node.target, node.args, node.kwargs)
            dup.meta = dict(node.meta)
            user.replace_input_with(node, dup)
    gm.graph.lint()


def _constant(node) -> bool:
    return (node.op == "call_function" and not node.all_input_nodes
            and ops.kind_of(node) is ops.Kind.POINTWISE)


def reads_once(chains: dict) -> bool:
    """Do the view chains read, in all, no more elements of each value than it has? (Equal
    chains, the copies duplicate_shared_views made, read the same elements.)"""
    read: dict = {}
    distinct = {(n, tuple((v.target, v.args[1:], tuple(v.kwargs.items())) for v in chain)): chain
                for (n, _), chain in chains.items()}
    for (n, _), chain in distinct.items():
        read[n] = read.get(n, 0) + legality.numel(chain[-1])
    spare = [sympy.expand(legality.numel(n) - total) for n, total in read.items()]
    return all(d.is_number and d >= 0 for d in spare)     # symbolic sizes: not known


def unit_stride(chains: dict, out) -> bool:
    """Do the views step by one element along the dim `out` stores innermost? (A max-pool
    over NCHW steps by two there: computing the producer inside those strided window loops
    is slower than storing it and reading it back; benchmarks/results/notes.md, "Producers
    inside strided window loops".) A view of another rank (a select: the row an in-place
    `x[0] += 1` reads) steps by one along its own innermost dim, or has one element."""
    val = legality.tensor_val(out)
    dims = [d for d in range(val.dim()) if val.shape[d] != 1]
    if not dims:
        return True
    inner = min(dims, key=lambda d: val.stride()[d])
    return all(_steps_by_one(c[-1].meta["val"], val.dim(), inner) for c in chains.values())


def _steps_by_one(view, rank: int, inner: int) -> bool:
    if view.dim() == rank:
        return view.stride()[inner] == 1
    strides = [st for n, st in zip(view.shape, view.stride()) if n != 1]
    return not strides or min(strides) == 1
