"""The strides of pointwise ops' outputs made the ones eager's kernels give them.

Note on the layouts. brrr allocates each value a kernel computes with the strides of the
node's FakeTensor and builds views from them (runtime/reinterpret.py), so those strides
must be eager's. For pointwise ops FakeTensor runs torch's Python references, which lay
outputs out by rules of their own: they upcast float16/bfloat16 inputs into dense
float32 copies first (`a.expand(5, 17, 17) + b.transpose(1, 2)` is transposed in eager,
contiguous to FakeTensor in bfloat16), and they keep strides in size-1 dims that eager's
TensorIterator normalizes, or the other way round. A size-1 dim's stride then decides
a later op's layout (TensorIterator breaks ties between dims by comparing strides of
every dim): an output of shape (4, 3, 8, 1) came out (24, 1, 3, 3), eager's (24, 8, 1, 1).
So each pointwise op of the op table that eager runs through TensorIterator gets the
strides ti_strides.py computes as TensorIterator does; where they differ from its
FakeTensor's, the node gets a FakeTensor with them, and every node that reads a value
whose strides changed is traced again. A node that ends a decomposition of an op
reading such a value is laid out again as that op lays its result out
(decomposition_layout's eager_result): retracing the decomposition's last op (a cat
standing for a select_scatter) would follow that op's rule, not the decomposed one's.
Symbolic sizes and empty outputs keep FakeTensor's strides.
"""
from __future__ import annotations

import operator

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.fx.node import map_arg

from brrr_compiler import decomposition_layout, ops
from brrr_compiler.ti_strides import operands as ti_operands, output_strides

def follow_eager(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` with its pointwise nodes' FakeTensors restrided as eager lays them out, and
    the nodes reading them traced again (module note)."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    from torch._guards import detect_fake_mode
    mode = detect_fake_mode([n.meta.get("val") for n in gm.graph.nodes])
    if mode is None:
        return gm
    changed: set = set()
    traced = {n: n.meta.get("val") for n in nodes}
    with mode:
        for n in nodes:
            if any(a in changed for a in n.all_input_nodes) and _retrace(n):
                changed.add(n)
            if _restride(n) or (_any_changed(n, changed) and _relayout(n)):
                changed.add(n)
            if n in changed and _keeps_its_trace(n, traced[n]):
                changed.discard(n)
    return gm


def _any_changed(n: torch.fx.Node, changed: set) -> bool:
    """Whether a node that the op `n`'s decomposition stands for read was restrided."""
    made = n.meta.get(decomposition_layout.DECOMPOSED_FROM)
    if made is None:
        return False
    names = {c.name for c in changed}
    return any(isinstance(a, decomposition_layout.Input) and a in names
               for a in torch.utils._pytree.tree_leaves(made[1:3]))


def _relayout(n: torch.fx.Node) -> bool:
    """Give the node that ends an op's decomposition the strides eager's op gives its
    result from its inputs' corrected strides (decomposition_layout's eager_result): the
    cat that stands for a select_scatter of a restrided base is laid out as that base.
    True if they differ from its FakeTensor's. A node read by a view its strides decide
    keeps them (_keeps_its_trace)."""
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or _is_view(n) or not _static(val) or \
            val.numel() == 0 or any(u.target in _STRIDED_VIEWS for u in n.users):
        return False
    vals = {m.name: m.meta["val"] for m in n.graph.nodes if "val" in m.meta}
    want = decomposition_layout.eager_result(n, vals)
    if not isinstance(want, torch.Tensor) or want.shape != val.shape or \
            want.dtype != val.dtype or not _static(want) or \
            tuple(want.stride()) == tuple(val.stride()) or \
            not torch._prims_common.is_non_overlapping_and_dense_or_false(want):
        return False
    n.meta["val"] = torch.empty_strided(val.shape, want.stride(), dtype=val.dtype,
                                        device=val.device)
    return True


# views whose meaning depends on their input's strides
_STRIDED_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default,
                  torch.ops.aten.as_strided.default)


def _keeps_its_trace(n: torch.fx.Node, traced) -> bool:
    """A pointwise value read by a view that its strides decide (`view`, `as_strided`) keeps
    the strides it was traced with: Dynamo traced `fmax(a, b).reshape(-1)` as a view of a
    contiguous result, where eager's layout is transposed and its reshape copies; with
    eager's strides the view failed and the graph ran through ATen (maximum, atan2 and
    any pointwise op alike). The kernel writes any layout, so it writes that one. Returns
    True when `n` was given its traced value back."""
    val = n.meta.get("val")
    if not any(u.target in _STRIDED_VIEWS for u in n.users) or \
            not isinstance(traced, torch.Tensor) or not isinstance(val, torch.Tensor) or \
            not isinstance(n.target, torch._ops.OpOverload) or \
            ops.info(n.target).kind is not ops.Kind.POINTWISE or \
            traced.shape != val.shape or traced.dtype != val.dtype:
        return False
    n.meta["val"] = traced
    return True


def operands(target, args: tuple, kwargs: dict) -> tuple[list, list] | None:
    """TensorIterator's inputs for a call of `target` (ti_strides.operands), None for an
    op that is not a pointwise op of the op table."""
    if ops.info(target).kind is not ops.Kind.POINTWISE:
        return None
    return ti_operands(target, args, kwargs)


def _restride(n: torch.fx.Node) -> bool:
    """Give `n` the strides eager's TensorIterator gives its output; True if they differ
    from its FakeTensor's."""
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or not isinstance(n.target, torch._ops.OpOverload):
        return False
    args, kwargs = map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
    found = operands(n.target, args, kwargs)
    if found is None or not all(_static(v) for v in [val, *found[0]]) or val.numel() == 0:
        return False            # an empty output's strides are never stepped along
    stride = output_strides(found[0], val.device, found[1])
    if tuple(val.stride()) == stride:
        return False
    n.meta["val"] = torch.empty_strided(val.shape, stride, dtype=val.dtype, device=val.device)
    return True


def _static(v) -> bool:
    if not isinstance(v, torch.Tensor):
        return isinstance(v, (int, float, bool))
    return all(isinstance(x, int) for x in (*v.shape, *v.stride()))


def _retrace(n: torch.fx.Node) -> bool:
    """Trace `n` again from its inputs' FakeTensors; keep the new value (True) when its
    strides differ, or when it is a view (of storage that is new)."""
    old = n.meta.get("val")
    args, kwargs = map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
    new = n.target(*args, **kwargs)
    if not _is_view(n) and _same_values(old, new):
        return False
    n.meta["val"] = new
    return True


def _same_values(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and len(a.shape) == len(b.shape) and all(
            statically_known_true(x == y) for x, y in zip((*a.shape, *a.stride()),
                                                          (*b.shape, *b.stride())))
    return not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor)


def _is_view(n: torch.fx.Node) -> bool:
    return n.target is operator.getitem or (
        isinstance(n.target, torch._ops.OpOverload) and n.target.is_view)
