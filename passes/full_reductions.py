"""A reduction over every element reads its input without the permutes in front of it.

`x.permute(...).sum()` adds the same elements as `x.sum()`, in another order. Through
the permute, the sum's loop walks the producer's values in the permuted order: a
strided walk, and a domain that is not the producer's, so the partitioner keeps the
producer (say an exp that is also stored as an output) and the sum apart. Read without
the permute, the sum walks the values contiguously, over the producer's own domain,
where the fusion policy may join the two (pattern seed 7 of benchmarks/patterns.py).

Only reductions whose result does not depend on the order of the elements (sum, mean,
prod, amax, amin, any, all; argmax would change), over every dim: the result's shape is
then the same either way (a scalar, or all ones with keepdim). A float sum's rounding
depends on its order in any case; brrr's differs from eager's already. The permute
stays for its other users; dce removes it when it has none.
"""
import torch
from torch.fx import GraphModule

from ._dims import REDUCTIONS, reduced_dims

aten = torch.ops.aten

_PERMUTES = {aten.permute.default, aten.t.default, aten.transpose.int}


def full_reductions(gm: GraphModule) -> GraphModule:
    """Point each order-free reduction over all dims past the permutes of its input."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or not node.args or not _over_every_dim(node):
            continue
        src = node.args[0]
        while isinstance(src, torch.fx.Node) and src.op == "call_function" \
                and src.target in _PERMUTES:
            src = src.args[0]
        if src is not node.args[0]:
            node.args = (src, *node.args[1:])
    return gm


def _over_every_dim(node) -> bool:
    val = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or node.target not in REDUCTIONS:
        return False
    return reduced_dims(node, val.dim()) == set(range(max(val.dim(), 1)))
