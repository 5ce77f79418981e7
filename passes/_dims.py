"""The reductions the passes rewrite, and the dims each node of them reduces."""
import torch

aten = torch.ops.aten

# Each reduction whose result does not depend on the order of its elements (argmax's
# would), by target: (what an empty list of dims reduces: "all", "none" (any.dims,
# all.dims), or None for an op without dims, which reduces every dim; whether n equal
# copies along a reduced dim reduce to what one copy does: not for sum and prod).
REDUCTIONS = {
    aten.sum.default: (None, False), aten.mean.default: (None, True),
    aten.prod.default: (None, False), aten.any.default: (None, True),
    aten.all.default: (None, True),
    aten.sum.dim_IntList: ("all", False), aten.mean.dim: ("all", True),
    aten.amax.default: ("all", True), aten.amin.default: ("all", True),
    aten.any.dims: ("none", True), aten.any.dim: ("all", True),
    aten.all.dims: ("none", True), aten.all.dim: ("all", True),
}


def copies_reduce(node) -> bool:
    """Whether n copies along a reduced dim reduce to what one copy does (table above)."""
    return REDUCTIONS[node.target][1]


def reduced_dims(node, rank: int) -> set[int] | None:
    """The dims `node`, one of REDUCTIONS, reduces (its dims are argument 1 or `dim=`: an
    int, a list, or None for every dim), each in range(max(rank, 1)) as a rank-0 tensor
    reduces its one element over dim 0 or -1; None when a dim is symbolic."""
    empty = REDUCTIONS[node.target][0]
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    every = set(range(max(rank, 1)))
    if empty is None or dims is None:
        return every
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        return every if empty == "all" else set()
    if not all(isinstance(d, int) for d in dims):
        return None
    return {d % max(rank, 1) for d in dims}
