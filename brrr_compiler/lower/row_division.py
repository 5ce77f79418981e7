"""x / d inside a reduction kernel, as x * (1 / d) where that is one reciprocal per row.

Applies where the quotient varies along the reduced dims and d does not (softmax's
x / sum, F.normalize's x / norm): one reciprocal per row and a multiply per element, as
eager's own softmax kernel does (benchmarks/results/notes.md has the measurement).

Decided by the shapes alone, so every read of the quotient, inside the row's loop or
once per row, computes it alike: an amax's tie mask compares the row's values with their
max, and a value computed both ways differs in the last bit (fuzz seed 9056: a NaN
gradient). Pointwise kernels divide, bit-exact with eager.
"""
from __future__ import annotations

import torch

from brrr_compiler.lower import indexing
from brrr_compiler.lower.scalar_rules import Body, V, opmath


def row_reciprocal_div(low, node, idx: tuple, body: Body) -> V | None:
    """`node` (an aten.div.Tensor of the group `low` lowers) at `idx` as x * (1 / d),
    or None where the rule above does not apply."""
    if node.target is not torch.ops.aten.div.Tensor or low.in_columns or not low.red_vars:
        return None
    x, d = node.args[0], node.args[1]
    if not isinstance(d, torch.fx.Node) or not isinstance(x, torch.fx.Node):
        return None
    if not low.is_full(_at(low.full_idx, node)) or low.is_full(_at(low.full_idx, d)):
        return None
    d_idx = _at(idx, d)
    cdt = opmath(node.meta["val"].dtype)
    d_body, _ = low.target(d, d_idx)
    inv = d_body.emit("reciprocal", cdt, (d_body.cast(low.value(d, d_idx), cdt),))
    xv = body.cast(low.value(x, _at(idx, x)), cdt)
    return body.emit("mul", cdt, (xv, inv))


def _at(idx: tuple, node) -> tuple:
    """`idx` broadcast to `node`'s shape."""
    return indexing.broadcast(idx, indexing.shape(node.meta["val"]))
