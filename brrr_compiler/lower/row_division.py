"""x / d inside a reduction kernel, as x * (1 / d) where that is one reciprocal per row.

Applies where the quotient varies along the reduced dims and d does not (softmax's
x / sum, F.normalize's x / norm): one reciprocal per row and a multiply per element, as
eager's own softmax kernel does (benchmarks/results/notes.md has the measurement).

Decided by the shapes alone, so every read of the quotient, inside the row's loop or
once per row, computes it alike: an amax's tie mask compares the row's values with their
max, and a value computed both ways differs in the last bit (fuzz seed 9056: a NaN
gradient). Pointwise kernels divide, bit-exact with eager.

Not applied where the quotient reaches a comparison or a max/min in the graph: the
backward graph recomputes the quotient in a kernel of its own shape (often a pointwise
one, which divides) and compares it with the max the forward saved, so a forward max of
x * (1 / d) matches no element (fuzz seed 43932: amin's gradient divided by a zero count).
"""
from __future__ import annotations

import torch

from brrr_compiler import ops
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
    if _reaches_comparison(node):
        return None
    d_idx = _at(idx, d)
    cdt = opmath(node.meta["val"].dtype)
    d_body, _ = low.target(d, d_idx)
    inv = d_body.emit("reciprocal", cdt, (d_body.cast(low.value(d, d_idx), cdt),))
    xv = body.cast(low.value(x, _at(idx, x)), cdt)
    return body.emit("mul", cdt, (xv, inv))


_SELECTING = {"max", "min", "argmax", "argmin", "eq", "ne", "lt", "le", "gt", "ge"}
_aten = torch.ops.aten
# ATen ops that pick elements by comparing them (their backward scatters to the picks)
_PICKING = {_aten.max.dim, _aten.min.dim, _aten.max.default, _aten.min.default,
            _aten.sort.default, _aten.sort.stable, _aten.topk.default,
            _aten.kthvalue.default, _aten.median.dim, _aten.median.default,
            _aten.nanmedian.dim, _aten.mode.default, _aten.cummax.default,
            _aten.cummin.default}


def _reaches_comparison(node) -> bool:
    """Whether `node`'s value flows, through pointwise ops and views, into a comparison
    or a max/min anywhere in its graph (those must see eager's exact quotient)."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        for u in n.users:
            if u in seen:
                continue
            seen.add(u)
            kind = ops.kind_of(u)
            if u.target in _PICKING or (kind is not ops.Kind.FALLBACK
                                        and ops.info(u.target).scalar in _SELECTING):
                return True
            if kind in (ops.Kind.POINTWISE, ops.Kind.VIEW):
                todo.append(u)
    return False


def _at(idx: tuple, node) -> tuple:
    """`idx` broadcast to `node`'s shape."""
    return indexing.broadcast(idx, indexing.shape(node.meta["val"]))
