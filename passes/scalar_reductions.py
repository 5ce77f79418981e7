"""A reduction of a 0-d value is that value, cast to the reduction's dtype.

`loss.mean()` of a loss that is already a scalar, `x.amax(0)` or `x.sum()` of a 0-d x:
ATen reduces one element. brrr's kernels reduce over dims of known size and a 0-d value
has none, so such a reduction ran as an ATen call between kernels, splitting the graph
(6 of 150 generated patterns at L1 had one; pattern 37 compiled to 5 kernels and 4 ATen
calls). The value itself, cast where the reduction's dtype differs (a sum or prod of an
integer or bool promotes to int64, any/all give bool: nonzero, NaN included, is True as
in eager), is a pointwise copy that fuses: a clone or _to_copy, which remove_noops drops
where nothing needs a fresh tensor.

Which: the order-free reductions of _dims.REDUCTIONS (sum, mean, prod, amax, amin, any,
all) of a 0-d real input, whose result is 0-d. Not nansum (a NaN becomes 0), var/std (a
correction), argmax/argmin (an index), nor a complex input.
"""
import torch
from torch.fx import GraphModule, Node

from ._dims import REDUCTIONS

aten = torch.ops.aten


def scalar_reductions(gm: GraphModule) -> GraphModule:
    """Replace each reduction of a 0-d value by a copy of it in the result's dtype."""
    graph = gm.graph
    for node in list(graph.nodes):
        if not _of_a_scalar(node):
            continue
        src, dtype = node.args[0], node.meta["val"].dtype
        with graph.inserting_before(node):
            copy = graph.call_function(aten.clone.default, (src,)) \
                if src.meta["val"].dtype == dtype else \
                graph.call_function(aten._to_copy.default, (src,), {"dtype": dtype})
        copy.meta = dict(node.meta)
        node.replace_all_uses_with(copy)
        graph.erase_node(node)
    return gm


def _of_a_scalar(node: Node) -> bool:
    if node.op != "call_function" or node.target not in REDUCTIONS or not node.args \
            or not isinstance(node.args[0], Node):
        return False
    src, out = node.args[0].meta.get("val"), node.meta.get("val")
    return isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor) and \
        src.dim() == 0 and out.dim() == 0 and not src.is_complex() and not out.is_complex()
