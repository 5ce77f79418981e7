"""A reduction of a broadcast tensor reduces one copy of what was broadcast.

A tensor with stride 0 along a dim of size n (an input made by `expand`, or an `expand`
node) holds n copies of the same values. `x.amin(2)` over such a tensor, broadcast along
dim 1, computes n equal results; read through a slice of size 1 along dim 1 and expanded
afterwards, it computes one, and its readers see a broadcast value, which lowering keeps
out of their loops (fuzz seed 29899: a row sum of 128 copies of one min, added lane by
lane in float, was 2.7 ulp off where eager was exact; a sum whose summand does not change
along its row adds in double, codegen/cpp_accumulators.py).

Over a reduced dim, the copies matter only to a sum (n times the value) and to prod;
amax, amin, any, all and mean of n copies are those of one, so those read one copy of the
reduced broadcast dims as well.

Safety: static sizes and strides only (the FakeTensor's, which Dynamo guards), and only
where the reduction's result is contiguous, as eager's reductions of such inputs give it:
the expanded copy is cloned back into that layout. Its readers then see the strides they
saw before (a pointwise op lays its output out by its inputs' strides, as TensorIterator
does: `minimum(x.amax(2), y.t())` of an expanded x came out transposed, eager's
contiguous, fuzz seed 70981), and the clone costs nothing inside the kernel that reads
it. The result is the same values: each copy is reduced by the same loop.
"""
import torch
from torch.fx import GraphModule

from ._dims import REDUCTIONS, copies_reduce, reduced_dims
from ._fake import fake_call as _call, static_reduction

aten = torch.ops.aten


def broadcast_reductions(gm: GraphModule) -> GraphModule:
    """Point each qualifying reduction at one copy of its broadcast input (module note)."""
    for node in list(gm.graph.nodes):
        plan = _plan(node)
        if plan is None:
            continue
        sliced_dims, out_shape = plan
        with gm.graph.inserting_before(node):
            src = node.args[0]
            for d in sliced_dims:
                src = _call(gm, aten.slice.Tensor, (src, d, 0, 1))
            one = _call(gm, node.target, (src, *node.args[1:]), dict(node.kwargs))
            one.meta.update({k: v for k, v in node.meta.items() if k != "val"})
            spread = _call(gm, aten.expand.default, (one, out_shape))
            dense = _call(gm, aten.clone.default, (spread,),
                          {"memory_format": torch.contiguous_format})
        node.replace_all_uses_with(dense)
        gm.graph.erase_node(node)
    return gm


def _plan(node) -> tuple[list[int], list[int]] | None:
    """(the dims to read one copy of, the reduction's shape), or None to leave it."""
    vals = static_reduction(node, REDUCTIONS)
    if vals is None or not vals[1].is_contiguous():
        return None
    val, out = vals
    reduced = reduced_dims(node, val.dim())
    if reduced is None:
        return None
    one_copy = copies_reduce(node)
    dims = [d for d in range(val.dim()) if val.shape[d] > 1 and val.stride(d) == 0
            and (d not in reduced or one_copy)]
    return (dims, list(out.shape)) if dims else None
