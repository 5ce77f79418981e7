"""Remove no-op nodes, handing their users the node's input instead.

A candidate is a view to an identical layout (view/_unsafe_view/reshape/expand to the same
shape, a full-range step-1 slice, an identity permute, alias), a copy that changes nothing
(clone, _to_copy/to with the same dtype, device, layout and strides) or arithmetic with the
identity scalar (x*1, x/1, x+0, x-0; note x+0 turns -0.0 into +0.0, as eager would not).

Note: safety rules. Nothing is removed unless `meta["val"]` of the node and of its input
have the same dtype, device, layout, shape and strides (and storage offset for views), so
type promotion, broadcasting and memory format survive. A copy or arithmetic no-op makes a
fresh tensor, so it is kept when it is a graph output, when its input aliases a graph input,
or when the graph mutates anything; a view no-op is kept when it is a graph output whose
input is a graph input or another graph output, or when its result is written to. So no
graph output comes to alias a graph input, or another output, that it did not alias before.
"""
import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ._purity import feeds_mutation, is_graph_output, is_view, mutates

aten = torch.ops.aten

_VIEW_NOOPS = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
    aten.slice.Tensor, aten.permute.default, aten.alias.default,
}
_COPY_NOOPS = {
    aten.clone.default, aten._to_copy.default,
    aten.to.dtype, aten.to.dtype_layout, aten.to.device,
}
_IDENTITY_SCALAR = {
    aten.mul.Tensor: 1, aten.mul.Scalar: 1, aten.div.Tensor: 1, aten.div.Scalar: 1,
    aten.add.Tensor: 0, aten.add.Scalar: 0, aten.sub.Tensor: 0, aten.sub.Scalar: 0,
}
_INPUT_OPS = ("placeholder", "get_attr")


def _identity_arithmetic(node: Node) -> bool:
    """x*1, x/1, x+0, x-0 with a Python-number operand (and no alpha other than 1)."""
    other = node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
    is_number = isinstance(other, (bool, int, float))
    alpha = node.kwargs.get("alpha", 1)
    return is_number and other == _IDENTITY_SCALAR[node.target] and alpha == 1


def _source(node: Node) -> Node | None:
    """The node's tensor input when the node is a candidate no-op, else None."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], Node):
        return None
    if node.target in _VIEW_NOOPS or node.target in _COPY_NOOPS:
        return node.args[0]
    if node.target in _IDENTITY_SCALAR and _identity_arithmetic(node):
        return node.args[0]
    return None


def _same_ints(a, b) -> bool:
    return len(a) == len(b) and all(statically_known_true(x == y) for x, y in zip(a, b))


def _same_layout(a, b, check_offset: bool) -> bool:
    """True when two meta values are tensors with equal dtype/device/layout/shape/strides."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if (a.dtype, a.device, a.layout) != (b.dtype, b.device, b.layout) or a.layout != torch.strided:
        return False
    if not (_same_ints(a.shape, b.shape) and _same_ints(a.stride(), b.stride())):
        return False
    return not check_offset or statically_known_true(a.storage_offset() == b.storage_offset())


def _aliases_graph_input(node: Node) -> bool:
    """True when the node is a graph input or a chain of views of one."""
    while is_view(node) and node.args and isinstance(node.args[0], Node):
        node = node.args[0]
    return node.op in _INPUT_OPS


def _removable(node: Node, src: Node, graph_mutates: bool) -> bool:
    fresh = node.target not in _VIEW_NOOPS
    if not _same_layout(node.meta.get("val"), src.meta.get("val"), check_offset=not fresh):
        return False
    if fresh:
        keep = is_graph_output(node) or _aliases_graph_input(src) or graph_mutates
    else:
        hands_back = src.op in _INPUT_OPS or is_graph_output(src)
        keep = (is_graph_output(node) and hands_back) or feeds_mutation(node)
    return not keep


def remove_noops(gm: GraphModule) -> GraphModule:
    """Bypass and erase every no-op node that is safe to remove (see the module note)."""
    graph_mutates = any(mutates(node) for node in gm.graph.nodes)
    for node in list(gm.graph.nodes):
        src = _source(node)
        if src is not None and _removable(node, src, graph_mutates):
            node.replace_all_uses_with(src)
            gm.graph.erase_node(node)
    return gm
