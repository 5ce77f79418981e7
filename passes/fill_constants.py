"""Fills that read their tensor argument only for its dtype and device become aten.full.

`x.new_full(size, v)` (and new_zeros, new_ones) makes a fresh contiguous tensor of `size`
filled with `v`, in x's dtype and device unless told otherwise: it reads no element of x.
In the graph, though, it is a user of x, and that edge is a dependency like any other.
torch's decomposition of lerp with a number weight makes its weight this way
(`start.new_full((), weight)`), so the fill sat between the cast of `start` and the lerp
arithmetic: fusing the cast into the lerp's kernel would have gone through the fill (a
cycle), and the lerp kernel stored and reread both (bfloat16 lerp: 3 kernels, not 1).
As `aten.full(size, v, dtype=..., device=...)` the fill depends on nothing, and a
constant joins any kernel that reads it.

Safety: both make a fresh tensor (written to or not, the graph sees the same values); the
replacement has the node's own `meta["val"]`, and only a contiguous result is replaced
(full's own layout).
"""
import torch
from torch.fx import GraphModule

aten = torch.ops.aten

_VALUES = {aten.new_zeros.default: 0, aten.new_ones.default: 1}
_FILLS = {aten.new_full.default, *_VALUES}


def fill_constants(gm: GraphModule) -> GraphModule:
    """Replace each new_full/new_zeros/new_ones by aten.full of the same value, dtype,
    layout and device."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _FILLS:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not val.is_contiguous():
            continue
        size = node.args[1] if len(node.args) > 1 else node.kwargs["size"]
        value = _VALUES.get(node.target)
        if value is None:
            value = node.args[2] if len(node.args) > 2 else node.kwargs["fill_value"]
        kwargs = {"dtype": val.dtype, "layout": val.layout, "device": val.device,
                  "pin_memory": False}
        with gm.graph.inserting_before(node):
            full = gm.graph.call_function(aten.full.default, (size, value), kwargs)
        full.meta = dict(node.meta)
        node.replace_all_uses_with(full)
        gm.graph.erase_node(node)
    return gm
