"""What a reduction node reduces: its input, the reduced dims, keepdim, and its kind."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from brrr_compiler import ops, symbolic


@dataclass(frozen=True)
class ReductionSpec:
    input: torch.fx.Node
    dims: tuple[int, ...]      # reduced dims of the input, sorted, non-negative
    keepdim: bool
    kind: str                  # sum, mean, max, min, prod, any, all, argmax, argmin

    def full_shape(self) -> tuple:
        return symbolic.shape(self.input.meta["val"])

    def kept_shape(self, keepdim: bool) -> tuple:
        full = self.full_shape()
        if keepdim:
            return tuple(1 if d in self.dims else s for d, s in enumerate(full))
        return tuple(s for d, s in enumerate(full) if d not in self.dims)


def _arg(node, i: int, name: str, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def reduction_spec(node: torch.fx.Node) -> ReductionSpec | None:
    """The ReductionSpec of a reduction node, or None if `node` is not one brrr fuses."""
    info = ops.info(node.target)
    if node.op != "call_function" or info.kind is not ops.Kind.REDUCTION:
        return None
    x = node.args[0]
    rank = x.meta["val"].dim()
    schema_args = [a.name for a in node.target._schema.arguments]
    dim = _arg(node, 1, "dim") if "dim" in schema_args else None
    keepdim = bool(_arg(node, 2, "keepdim", False)) if "keepdim" in schema_args else False
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        dims = tuple(range(rank))
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(sorted({d + rank if d < 0 else d for d in dims}))
    if rank == 0:
        dims = ()
    return ReductionSpec(x, dims, keepdim, info.scalar)
