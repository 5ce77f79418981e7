"""A reduction over dims on both sides of a kept dim, whose innermost reduced run is
short, reduces in two steps: the outer reduced dims first, then the short run.

`x.sum((0, 2))` of an (A, B, C) tensor keeps dim 1. brrr's row schedule walks, for each
of the B results, A runs of C elements; when a run is short, each loop is a few lanes
long and every cache line is loaded by several results (the B runs of a row share its
lines). Reduced over dim 0 first, the partials (B, C) are a column reduction: rows of
B * C contiguous elements added into one tile, at the memory's speed; then B sums of C
partials each, a tiny kernel. The batch norm of an (N, C, L) input and of an NCHW image
with a small H * W are this shape; so are a max over the middle dim and a norm's sums.
Measurements: benchmarks/results/notes.md, "Short inner reductions".

Which: sum, mean, amax and amin with static sizes over a dense, non-overlapping input,
when, walking the dims of size > 1 in memory order, the innermost are reduced, their run
holds at most RUN_BYTES, and the reduced dims outside it hold at least MIN_OUTER elements
(so that the partials are a small part of the input). The same values: a max or min is
exact in any order; a float sum or mean keeps its partials in float64 and rounds once
into its own dtype, as brrr's double accumulators do. The result keeps its strides, or
the reduction is left as it is.
"""
import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false as _dense
from torch.fx import GraphModule

from ._dims import reduced_dims
from ._fake import fake_call, static_reduction

aten = torch.ops.aten

_TARGETS = (aten.sum.dim_IntList, aten.mean.dim, aten.amax.default, aten.amin.default)
_WITH_DTYPE = (aten.sum.dim_IntList, aten.mean.dim)
# Above 256 bytes (64 floats) the row schedule's runs are long enough: at 512 bytes the
# two steps were as fast as one, at 1024 slower (the notes above).
RUN_BYTES = 256
MIN_OUTER = 8


def short_inner_reductions(gm: GraphModule) -> GraphModule:
    """Reduce each qualifying reduction in two steps (module note)."""
    for node in list(gm.graph.nodes):
        plan = _plan(node)
        if plan is not None:
            _split(gm, node, *plan)
    return gm


def _plan(node) -> tuple[list[int], list[int]] | None:
    """(the outer reduced dims, the inner run's dims), or None to leave the node."""
    vals = static_reduction(node, _TARGETS)
    if vals is None or vals[0].is_complex() or not _dense(vals[0]):
        return None
    val = vals[0]
    reduced = reduced_dims(node, val.dim())
    if not reduced or len(reduced) == val.dim():
        return None
    order = sorted((d for d in range(val.dim()) if val.shape[d] > 1),
                   key=lambda d: -val.stride(d))       # outermost first
    inner = []
    for d in reversed(order):
        if d not in reduced:
            break
        inner.append(d)
    outer = sorted(reduced - set(inner))
    run = _numel(val, inner) * val.element_size()
    if not inner or not outer or run > RUN_BYTES or len(inner) == len(order) \
            or _numel(val, outer) < MIN_OUTER:       # no outer dims: an empty dim list
        return None                                  # would reduce every dim
    return outer, sorted(inner)


def _numel(val, dims) -> int:
    n = 1
    for d in dims:
        n *= val.shape[d]
    return n


def _split(gm: GraphModule, node, outer: list[int], inner: list[int]) -> None:
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    out = node.meta["val"]
    if not keepdim:     # the outer dims are gone when the run is reduced
        inner = [d - sum(o < d for o in outer) for d in inner]
    kwargs, cast = {}, None
    if node.target in _WITH_DTYPE and out.dtype.is_floating_point:
        kwargs = {"dtype": torch.float64}       # both steps; one rounding at the end
        cast = out.dtype if out.dtype != torch.float64 else None
    elif node.target in _WITH_DTYPE and "dtype" in node.kwargs:
        kwargs = {"dtype": node.kwargs["dtype"]}
    with gm.graph.inserting_before(node):
        new = [fake_call(gm, node.target, (node.args[0], outer, keepdim), kwargs)]
        new.append(fake_call(gm, node.target, (new[0], inner, keepdim), kwargs))
        if cast is not None:
            new.append(fake_call(gm, aten._to_copy.default, (new[1],), {"dtype": cast}))
    second = new[-1]
    got = second.meta["val"]
    if got.shape != out.shape or got.stride() != out.stride() or got.dtype != out.dtype:
        for n in reversed(new):
            gm.graph.erase_node(n)
        return
    for n in new:
        n.meta.update({k: v for k, v in node.meta.items() if k != "val"})
    node.replace_all_uses_with(second)
    gm.graph.erase_node(node)
