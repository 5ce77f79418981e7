"""Run CPU 2-d convolutions in channels-last (NHWC) layout.

oneDNN, which ATen calls for CPU convolutions, is about twice as fast on NHWC tensors as on
NCHW ones for the model suite's conv net. The pass copies each eligible convolution's
input and weight to channels-last (`aten.clone(memory_format=torch.channels_last)`; a value
already in that layout is used as is), and the convolution's result comes out NHWC. The
pointwise ops, norms and pools after it keep that layout, as eager's stride rules say, so
the fused kernels that read and write them walk channels innermost. The same goes for
`convolution_backward` (grad_output, input and weight), whose gradients then come out NHWC.

Note: which values change layout. After the copies are inserted, `meta["val"]` is
recomputed by running the graph on FakeTensors, so each value carries the strides eager
would give it. Only what may differ is run again: a node one of whose inputs changed
layout, or a view of an input that got a new value (it must alias that value); any other
node keeps its value (its result is fresh storage, laid out as before). A graph output
whose strides changed gets a copy back to its old layout, except the outputs listed in
`gm.meta["layout_free_outputs"]` (indices into the output tuple): the driver lists there
the activations a training forward saves for its backward, whose layout only brrr's own
backward sees (it reports the new strides to AOTAutograd, which hands them to the
backward). So user-visible outputs keep eager's strides.

Eligible: a non-transposed 4-d convolution of float32/bfloat16 CPU tensors with static
shapes, when oneDNN is available, whose arithmetic outweighs the copies of graph inputs
(images, weights) it would need on every call (`_pays`) or, where MEASURE, that timed
clearly faster channels-last with those copies (_conv_choice.timed_paying: ResNet's last
stage at batch 1 on the AMD EPYC VM); one that does not pay reads its input contiguous
where an earlier convolution's layout made it channels-last and its weight is NCHW and
larger (`_reads_nchw`). Anything else is left as it is.
Of those, a run of convolutions to the end of the network that each timed faster NCHW on
this machine stays NCHW (_conv_timing.py has the note, _conv_choice.py the rule), their
inputs copied back to it where an earlier convolution's layout reaches them (ResNet's
last stage over 2x2 pixels: 2.2-2.5x faster so on the Intel VM); the others go
channels-last. MEASURE = False skips the timing (every eligible convolution goes
channels-last), for tests that assert a layout.
"""
import copy
import logging

import torch
from torch._guards import detect_fake_mode
from torch.fx import Graph, GraphModule, Node, map_arg
from torch.fx.experimental.symbolic_shapes import free_symbols

from ._conv_choice import LAYOUT_ARGS as _LAYOUT_ARGS
from ._conv_choice import is_channels_last as _is_channels_last
from ._conv_choice import timed_choice, timed_paying, weight_position
from ._purity import is_view

aten = torch.ops.aten
logger = logging.getLogger("brrr.passes")

_DTYPES = (torch.float32, torch.bfloat16)
_VIEWS = (aten.view.default, aten._unsafe_view.default)
LAYOUT_FREE_OUTPUTS = "layout_free_outputs"   # the gm.meta key of the module note
MEASURE = True     # time each eligible convolution's layouts (module note)


def conv_channels_last(gm: GraphModule) -> GraphModule:
    """Copy the layout arguments of eligible convolutions to channels-last (module note).
    The work happens on a copy of the graph, which replaces gm's only when it succeeds."""
    if not any(n.target in _LAYOUT_ARGS and _eligible(n) and (MEASURE or _pays(n))
               for n in gm.graph.nodes) \
            or not torch.backends.mkldnn.is_available() or not _static(gm.graph):
        return gm
    graph = copy.deepcopy(gm.graph)      # nodes' meta dicts are copied, their values shared
    eligible = [n for n in graph.nodes if n.target in _LAYOUT_ARGS and _eligible(n)]
    paying = _paying(eligible)
    unpaid = {n for n in eligible if n not in paying and _reads_nchw(n)}
    convs = timed_choice(paying, unpaid) if MEASURE else paying
    nchw = [n for n in eligible if n in unpaid or n in paying and n not in convs]
    try:
        _to_channels_last(graph, convs, set(gm.meta.get(LAYOUT_FREE_OUTPUTS, ())), nchw)
    except Exception as err:    # an op FakeTensors cannot re-run: no layout change at all
        logger.warning("conv_channels_last: layouts left as they were (%s)", err)
        return gm
    gm.graph = graph
    return gm


def _to_channels_last(graph: Graph, convs: list, free: set, nchw: list) -> None:
    """`convs` go channels-last; `nchw` (timed faster so, or not paying for the copies:
    `_reads_nchw`) read contiguous inputs."""
    before = [_strides(v) for v in _output_values(graph)]
    copies: dict[Node, Node] = {}
    for conv in convs:
        for pos in _LAYOUT_ARGS[conv.target]:
            if not _is_channels_last(conv.args[pos].meta["val"]):
                copy_ = _copy_to_channels_last(graph, conv.args[pos], conv, copies)
                conv.update_arg(pos, copy_)
    mode = _repropagate(graph)
    if _copy_to_contiguous(graph, nchw):
        mode = _repropagate(graph)
    _drop_needless(graph, copies)
    _restore_outputs(graph, before, free, mode)


def _static(graph: Graph) -> bool:
    """No symbolic sizes anywhere (so re-running the graph on FakeTensors adds no guards)."""
    for n in graph.nodes:
        vals = n.meta.get("val")
        for v in vals if isinstance(vals, (tuple, list)) else (vals,):
            if isinstance(v, (torch.Tensor, torch.SymInt)) and free_symbols(v):
                return False
    return True


def _eligible(node: Node) -> bool:
    vals = [node.args[p].meta.get("val") if isinstance(node.args[p], Node) else None
            for p in _LAYOUT_ARGS[node.target]]
    if not all(isinstance(v, torch.Tensor) for v in vals):
        return False
    transposed = node.args[6] if node.target is aten.convolution.default else node.args[7]
    return not transposed and all(v.dim() == 4 and v.device.type == "cpu"
                                  and v.dtype in _DTYPES for v in vals)


# FLOPs a convolution must do per byte of graph inputs copied to channels-last for the
# copies to pay: NHWC saves oneDNN up to half its time (~100 GFLOP/s on 2 cores), a copy
# reads and writes its bytes (~20 GB/s), so the break-even is ~20 FLOP/B; 8 leaves the
# model suite's convolutions (ResNet's last 3x3 at batch 1: 24) as they were and catches
# what copying cannot repay: bench_sweep's conv2d of a (41668, 2, 3, 4) weight over a
# (1, 2, 4, 3) image, 1 FLOP/B, ran 0.3x eager with its 4 MB weight copied every call.
MIN_FLOPS_PER_COPIED_BYTE = 8


def _paying(eligible: list) -> list:
    """The convolutions of `eligible` that pay for their copies: by arithmetic (`_pays`),
    or, where MEASURE, timed clearly faster channels-last with the copies (a forward
    convolution and the backward ones of its shapes)."""
    paying = [n for n in eligible if _pays(n)]
    if not MEASURE:
        return paying
    won = timed_paying([n for n in eligible if n not in paying])
    return [n for n in eligible if n in paying or n in won]


def _pays(node: Node) -> bool:
    """The convolution's multiply-adds are at least MIN_FLOPS_PER_COPIED_BYTE times the
    bytes of the graph inputs (a weight, an image) it would copy to channels-last on
    every call; values made inside the graph are counted free (a convolution before made
    them NHWC, or their producer's kernel writes them so)."""
    forward = node.target is aten.convolution.default
    weight = node.args[weight_position(node)].meta["val"]
    out = node.meta["val"] if forward else node.args[0].meta["val"]   # backward: grad_output
    passes = 1 if forward else 2                                      # backward: two GEMMs
    flops = 2 * passes * out.numel() * weight[0].numel()
    copied = sum(a.meta["val"].numel() * a.meta["val"].element_size()
                 for a in (node.args[p] for p in _LAYOUT_ARGS[node.target])
                 if a.op == "placeholder" and not _is_channels_last(a.meta["val"]))
    return flops >= MIN_FLOPS_PER_COPIED_BYTE * copied


def _reads_nchw(node: Node) -> bool:
    """Whether a convolution left out of channels-last reads its other layout arguments
    contiguous: where its weight is NCHW and larger than they are together. ATen runs a
    convolution channels-last if either argument is, so one whose input came
    channels-last from an earlier convolution would copy its NCHW weight on every call,
    inside ATen (ResNet's last stage at batch 1, which does not pay for the copies: 3 x
    280 us a call of 3.2 ms on the Intel VM, to spare an input copy of 4 KB); where the
    input is the larger, that weight copy is the cheaper one."""
    vals = [node.args[p].meta["val"] for p in _LAYOUT_ARGS[node.target]]
    weight = vals.pop(weight_position(node))

    def size(v):
        return v.numel() * v.element_size()
    return not _is_channels_last(weight) and sum(size(v) for v in vals) <= size(weight)


def _copy_to_contiguous(graph: Graph, convs: list) -> bool:
    """A contiguous copy of each layout argument of `convs` that an earlier convolution's
    layout made channels-last; whether any was made."""
    made = False
    for conv in convs:
        for pos in _LAYOUT_ARGS[conv.target]:
            arg = conv.args[pos]
            if not arg.meta["val"].is_contiguous():
                with graph.inserting_before(conv):
                    copy_ = graph.call_function(aten.clone.default, (arg,),
                                                {"memory_format": torch.contiguous_format})
                conv.update_arg(pos, copy_)
                made = True
    return made


def _copy_to_channels_last(graph: Graph, arg: Node, conv: Node, copies: dict) -> Node:
    """One channels-last copy per value, placed right after the value is made; a graph
    input's (a weight's) right before its first convolution (`conv`: they are visited in
    graph order), so that each copy is made just before it is read, while it is still in
    cache, and the copies of all weights are never alive at once."""
    if arg not in copies:
        place = graph.inserting_before(conv) if arg.op == "placeholder" else \
            graph.inserting_after(arg)
        with place:
            copies[arg] = graph.call_function(
                aten.clone.default, (arg,), {"memory_format": torch.channels_last})
    return copies[arg]


def _drop_needless(graph: Graph, copies: dict) -> None:
    """Erase the copies of values that turned out channels-last already (their producers
    now follow an earlier convolution's layout)."""
    for arg, copy_ in copies.items():
        if _is_channels_last(arg.meta["val"]):
            copy_.replace_all_uses_with(arg)
            graph.erase_node(copy_)


def _repropagate(graph: Graph):
    """Recompute meta["val"] where it may change (module note), from the placeholders'
    FakeTensors. A view that the new layout cannot express (flattening an NHWC tensor)
    gets a contiguous copy of its input first, as eager would have had."""
    inputs = [n.meta["val"] for n in graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode(inputs)
    restrided, replaced = set(), set()
    with mode:
        for node in list(graph.nodes):
            if node.op != "call_function" or _keeps_value(node, restrided, replaced):
                continue
            old = node.meta.get("val")
            node.meta["val"] = _fake_run(graph, node)
            replaced.add(node)
            if old is None or _layout(old) != _layout(node.meta["val"]):
                restrided.add(node)
    return mode


def _keeps_value(node: Node, restrided: set, replaced: set) -> bool:
    """True when the node's value still holds: it has one, no input changed layout, and
    it is no view of an input that got a new value."""
    inputs = node.all_input_nodes
    if "val" not in node.meta or any(i in restrided for i in inputs):
        return False
    fresh = isinstance(node.target, torch._ops.OpOverload) and not is_view(node)
    return fresh or not any(i in replaced for i in inputs)


def _layout(val):
    if isinstance(val, (tuple, list)):
        return tuple(_layout(v) for v in val)
    if isinstance(val, torch.Tensor):
        return val.shape, val.stride(), val.storage_offset(), val.dtype, val.device
    return val


def _fake_run(graph: Graph, node: Node):
    args, kwargs = map_arg((node.args, node.kwargs), lambda a: a.meta["val"])
    try:
        return node.target(*args, **kwargs)
    except (RuntimeError, ValueError):      # what a fake view of the wrong strides raises
        if node.target not in _VIEWS:
            raise
    with graph.inserting_before(node):
        copy_ = graph.call_function(aten.clone.default, (node.args[0],),
                                    {"memory_format": torch.contiguous_format})
    copy_.meta["val"] = aten.clone.default(args[0], memory_format=torch.contiguous_format)
    node.update_arg(0, copy_)
    return node.target(copy_.meta["val"], *args[1:], **kwargs)


def _results(graph: Graph) -> list:
    """The graph's results (AOTAutograd's graphs return a tuple, make_fx's may not)."""
    out = graph.output_node().args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _output_values(graph: Graph) -> list:
    return [a.meta.get("val") if isinstance(a, Node) else None for a in _results(graph)]


def _strides(val):
    return tuple(val.stride()) if isinstance(val, torch.Tensor) else None


def _restore_outputs(graph: Graph, before: list, free: set, mode) -> None:
    """Copy each changed output not in `free` back to its old layout."""
    out = graph.output_node()
    results = _results(graph)
    for i, (node, old) in enumerate(zip(results, before)):
        if i in free or not isinstance(node, Node) or _strides(node.meta.get("val")) == old:
            continue
        results[i] = _copy_to_strides(graph, node, old, mode)
    single = not isinstance(out.args[0], (tuple, list))
    out.args = (results[0] if single else type(out.args[0])(results),) + tuple(out.args[1:])


def _copy_to_strides(graph: Graph, node: Node, stride: tuple, mode) -> Node:
    """A copy of `node` with strides `stride`: a clone to a memory format (fusible) when
    one gives them, else a copy into an empty tensor of those strides."""
    val = node.meta["val"]
    with graph.inserting_before(graph.output_node()), mode:
        fmt = _memory_format(val, stride)
        if fmt is not None:
            copy_ = graph.call_function(aten.clone.default, (node,), {"memory_format": fmt})
            copy_.meta["val"] = aten.clone.default(val, memory_format=fmt)
            return copy_
        kwargs = {"dtype": val.dtype, "device": val.device}
        empty = graph.call_function(aten.empty_strided.default,
                                    (list(val.shape), list(stride)), kwargs)
        empty.meta["val"] = aten.empty_strided.default(val.shape, stride, **kwargs)
        copy_ = graph.call_function(aten.copy.default, (empty, node))
        copy_.meta["val"] = aten.copy.default(empty.meta["val"], val)
        return copy_


def _memory_format(val: torch.Tensor, stride: tuple):
    """The memory format whose clone of `val` has strides `stride`, if one does (called
    under the graph's fake mode)."""
    formats = [torch.contiguous_format] + ([torch.channels_last] if val.dim() == 4 else [])
    return next((f for f in formats if tuple(val.clone(memory_format=f).stride()) == stride),
                None)
