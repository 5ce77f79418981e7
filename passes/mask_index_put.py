"""A write through a bool mask of the tensor's own shape becomes a select.

`x[mask] = v` with a bool `mask` shaped like `x` and a single value (`masked_fill`
written as indexing, and its gradient, `grad[mask] = 0`) reaches the graph as
`aten.index_put(x, [mask], v)`: a copy of x and a scatter to the masked elements, which
brrr does not lower, so it ran through ATen between two kernels. Each element is chosen
at most once, so the result is `where(mask, v, x)` (and with accumulate=True,
`where(mask, x + v, x)`): pointwise, fused with what makes x and what reads the result.

Safety: only a mask of x's exact shape, x and mask both contiguous (index_put's result
is a contiguous copy of x then, and where's TensorIterator layout over contiguous
operands is contiguous too), and a value of one element in x's dtype (index_put
requires the dtypes to match). The replacement keeps the node's `meta["val"]`.
"""
import torch
from torch.fx import GraphModule

aten = torch.ops.aten


def mask_index_put(gm: GraphModule) -> GraphModule:
    """Replace each qualifying index_put by a where (module note)."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.index_put.default \
                or not _qualifies(node):
            continue
        x, (mask,), value = node.args[:3]
        accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
        with gm.graph.inserting_before(node):
            chosen = value
            if accumulate:
                chosen = gm.graph.call_function(aten.add.Tensor, (x, value))
                chosen.meta["val"] = node.meta["val"]
            select = gm.graph.call_function(aten.where.self, (mask, chosen, x))
        select.meta = dict(node.meta)
        node.replace_all_uses_with(select)
        gm.graph.erase_node(node)
    return gm


def _qualifies(node) -> bool:
    x, indices, value = node.args[:3]
    if len(indices) != 1 or not all(isinstance(a, torch.fx.Node) for a in (x, indices[0], value)):
        return False
    xv, mv, vv, out = (a.meta.get("val") for a in (x, indices[0], value, node))
    if not all(isinstance(t, torch.Tensor) for t in (xv, mv, vv, out)):
        return False
    static = all(isinstance(n, int) for n in (*xv.shape, *mv.shape, *vv.shape))
    return static and mv.dtype is torch.bool and tuple(mv.shape) == tuple(xv.shape) \
        and vv.numel() == 1 and vv.dim() <= xv.dim() and vv.dtype == xv.dtype \
        and xv.is_contiguous() and mv.is_contiguous() and out.is_contiguous()
