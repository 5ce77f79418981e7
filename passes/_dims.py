"""The dims a reduction node reduces, read from its FX arguments."""


def reduced_dims(node, rank: int, empty_is_all: bool = True) -> set[int] | None:
    """The dims `node` reduces (its dims are argument 1 or `dim=`: an int, a list, or
    None for every dim), each in range(max(rank, 1)) as a rank-0 tensor reduces its one
    element over dim 0 or -1; None when a dim is symbolic. `empty_is_all`: whether an
    empty list means every dim (sum, mean, amax) or none (any.dims)."""
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    every = set(range(max(rank, 1)))
    if dims is None:
        return every
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        return every if empty_is_all else set()
    if not all(isinstance(d, int) for d in dims):
        return None
    return {d % max(rank, 1) for d in dims}
