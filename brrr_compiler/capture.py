"""Capture: Dynamo's FX graph to functional ATen graphs through AOTAutograd.

AOTAutograd traces forward and backward with FakeTensors (so every node carries
`meta["val"]`), functionalizes mutations, applies the decomposition table below, and
splits the joint graph with torch's min-cut partitioner, which recomputes cheap
pointwise producers in the backward instead of saving them.

Note on joint-graph CSE. The min-cut partitioner first merges duplicate nodes of the
joint graph with torch's `fx_graph_cse`, whose import pulls in most of inductor (about
1.1 s of a cold compile, more than the rest of brrr's own work on a small model). The
driver hands `aot_backend` brrr's own CSE pass for that step instead (`joint_pass`), and
the partitioner runs with its CSE switched off.

The decomposition table is chosen for fusion: composite activations and helpers become
the pointwise primitives the op table knows, so their pieces fuse with neighbours;
matmuls, convolutions and attention are not decomposed and run as library calls.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
from torch._decomp import get_decompositions

from brrr_compiler import decompositions
from brrr_compiler.decomposition_layout import eager_layout

aten = torch.ops.aten

FUSION_DECOMPOSITIONS = [
    aten.gelu, aten.gelu_backward, aten.silu, aten.silu_backward,
    aten.sigmoid_backward, aten.tanh_backward, aten.softplus, aten.softplus_backward,
    aten.hardtanh, aten.hardtanh_backward, aten.hardsigmoid, aten.hardsigmoid_backward,
    aten.hardswish, aten.hardswish_backward, aten.leaky_relu, aten.leaky_relu_backward,
    aten.elu, aten.elu_backward, aten.mish, aten.mish_backward, aten.threshold,
    aten.threshold_backward, aten.addcmul, aten.addcdiv, aten.lerp, aten.logit,
    aten.logit_backward, aten.masked_fill, aten.nan_to_num, aten.xlogy, aten.square,
    aten.relu6, aten.celu, aten.selu, aten.rsub, aten.log_sigmoid_forward,
    aten.log_sigmoid_backward, aten.mse_loss, aten.mse_loss_backward, aten.huber_loss,
    aten.smooth_l1_loss, aten.sgn, aten.deg2rad, aten.rad2deg, aten.sinc,
    aten.logaddexp, aten.logaddexp2, aten.fill, aten.zero, aten.clamp_min, aten.clamp_max,
    aten.softshrink, aten.hardshrink, aten.lerp_,
    # norms, softmax and losses become reductions + pointwise ops, fused by brrr
    aten._softmax, aten._log_softmax, aten._softmax_backward_data,
    aten._log_softmax_backward_data, aten.native_layer_norm, aten.native_layer_norm_backward,
    aten.native_group_norm, aten.native_group_norm_backward, aten.native_batch_norm,
    aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional, aten.native_batch_norm_backward,
    aten._batch_norm_with_update, aten._batch_norm_with_update_functional,
    aten._batch_norm_no_update,
    aten.logsumexp, aten.var_mean, aten.var, aten.std, aten.rms_norm, aten.linalg_vector_norm,
    aten._fused_rms_norm, aten._fused_rms_norm_backward,
    aten.nll_loss_forward, aten.nll_loss_backward,
]


def decomposition_table() -> dict:
    """ATen overload -> python decomposition, for the ops listed above."""
    table = get_decompositions([op for op in FUSION_DECOMPOSITIONS if op is not None])
    # clamp_min/clamp_max are primitives to brrr; only their composite overloads go
    for op in (aten.clamp_min.default, aten.clamp_max.default):
        table.pop(op, None)
    # torch's decompositions of pointwise ops end in the layout of torch's Python
    # references (prims.copy_strided to their own stride rule), which is not always
    # TensorIterator's: lerp of an expanded and a transposed input is transposed in
    # eager, contiguous in the reference. Their results get the op's own layout, as
    # brrr's decompositions do. In-place and out= overloads keep their argument's.
    table = {op: fn if op._schema.is_mutable else eager_layout(op, fn)
             for op, fn in table.items()}
    table.update(decompositions.table())
    return table


def aot_backend(fw_compiler: Callable, bw_compiler: Callable, inference_compiler: Callable,
                joint_pass: Callable):
    """A Dynamo backend that runs AOTAutograd and hands ATen graphs to the compilers.

    Each compiler receives (GraphModule, example_inputs) and returns a boxed callable;
    `joint_pass` (GraphModule -> GraphModule) merges duplicates in the joint graph before
    it is partitioned.
    """
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch import config as functorch_config

    backend = aot_autograd(
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        inference_compiler=inference_compiler,
        decompositions=decomposition_table(),
        partition_fn=functools.partial(_partition, joint_pass=joint_pass),
        keep_inference_input_mutations=True,
    )

    def run(gm, example_inputs):
        # Effect tokens (ops under with_effects, such as linalg's error checks) stay inside
        # the graphs, as inductor has them: lifted to graph inputs and outputs, they shift
        # AOTAutograd's saved-tensor slice of the forward's outputs by one, so the strides
        # the forward reports land on the wrong backward inputs (a transposed saved
        # tensor then reads as untransposed: a wrong gradient).
        with functorch_config.patch(unlift_effect_tokens=True):
            return backend(gm, example_inputs)

    return run


def _partition(joint_module, joint_inputs, *, joint_pass: Callable, **kwargs):
    """torch's min-cut partitioner, with `joint_pass` in place of its own CSE."""
    from torch._functorch import config as functorch_config
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    joint_module = joint_pass(joint_module)
    with functorch_config.patch(cse=False):
        return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)


# ---- layouts across the forward/backward boundary -------------------------------------
# A layout pass may give a forward's saved activations other strides than eager's (see
# passes/conv_channels_last.py). AOTAutograd supports that: the forward compiler reports
# its outputs' strides, and AOTAutograd restrides the backward's example inputs to match.


def saved_output_indices(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Positions, in a training forward's outputs, of the tensors it saves for the
    backward (only brrr's backward reads them); () when AOTAutograd does not say."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None:
        return ()
    saved = meta.tensors_saved_for_backwards_slice
    n = len(gm.graph.output_node().args[0])
    return tuple(range(n))[saved]


def protect_saved_mutated_inputs(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Save a copy of each graph input that the forward both saves for the backward and
    mutates. torch's min-cut partitioner may save the input itself in place of the clone
    the joint graph made of it (recomputing from inputs looks free); AOTAutograd then
    copies the new value into that very input, after the forward or inside it (a
    `copy_` the graph keeps), so the backward would read the mutated value (autograd's
    version check raises: `F.mish(x, inplace=True)`; or a gradient is silently wrong:
    fuzz seed 7882). A placeholder stands for the input's value before any mutation, so
    the copy is taken before the graph's first node (of a view of the input, right after
    the view: before the graph's mutations, which come after what they overwrite)."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if meta is None or len(meta.input_info) != len(holders):
        return gm
    mutated = {h for h, info in zip(holders, meta.input_info) if info.mutates_data}
    output = gm.graph.output_node()
    outs = list(output.args[0])
    first = next(n for n in gm.graph.nodes if n.op != "placeholder")
    copies: dict = {}
    for i in saved_output_indices(gm):
        if _view_root(outs[i]) in mutated:
            if outs[i] not in copies:
                at = first if outs[i].op == "placeholder" else outs[i].next
                with gm.graph.inserting_before(at):
                    copy = gm.graph.call_function(torch.ops.aten.clone.default, (outs[i],))
                copy.meta["val"] = outs[i].meta["val"].clone()
                copies[outs[i]] = copy
            outs[i] = copies[outs[i]]
    output.args = (tuple(outs),)
    gm.recompile()
    return gm


def _view_root(node):
    """The tensor `node` is a view of (through a chain of views), or `node` itself. A
    saved view of a mutated input reads the mutation as the input does (fuzz seed 8934:
    a transpose of the input, mutated through it after the forward read it)."""
    while (isinstance(node, torch.fx.Node) and node.op == "call_function"
           and isinstance(node.target, torch._ops.OpOverload) and node.target.is_view):
        node = node.args[0]
    return node


def graph_copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of `gm` that passes run on `gm` leave alone (nodes copied; their meta dicts
    shallowly, so FakeTensors are shared, not cloned)."""
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    return torch.fx.GraphModule(gm, graph)


def output_strides_mark() -> int | None:
    """How many output strides the compiling graph has reported so far (None: no one
    asks), so a failed compile's partial report can be taken back."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    strides = ctx.output_strides if ctx is not None else None
    return None if strides is None else len(strides)


def aten_fallback(gm: torch.fx.GraphModule, kind: str, mark: int | None):
    """`gm` run by ATen as a boxed callable, its output strides reported afresh."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._guards import TracingContext

    if kind == "forward":
        gm = protect_saved_mutated_inputs(gm)
    if mark is not None:
        del TracingContext.get().output_strides[mark:]
        report_output_strides(gm)
    return make_boxed_func(gm)


def report_output_strides(gm: torch.fx.GraphModule) -> None:
    """Tell AOTAutograd the strides the compiled graph's outputs will have."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    if ctx is None or ctx.output_strides is None:
        return
    for a in gm.graph.output_node().args[0]:
        val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        ctx.output_strides.append(tuple(val.stride()) if isinstance(val, torch.Tensor)
                                  else None)


def adopt_input_strides(gm: torch.fx.GraphModule, example_inputs) -> torch.fx.GraphModule:
    """Give the placeholders the strides of the example inputs where they differ (a
    backward whose forward changed its saved activations' layout), and recompute every
    node's meta["val"] from them."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    vals = [n.meta.get("val") for n in holders]
    if len(vals) != len(example_inputs) or not any(
            _restrided(v, x) for v, x in zip(vals, example_inputs)):
        return gm
    new = [x if _restrided(v, x) else v for v, x in zip(vals, example_inputs)]
    FakeTensorProp(gm, detect_fake_mode(new)).propagate_dont_convert_inputs(*new)
    return gm


def _restrided(val, example) -> bool:
    # AOTAutograd hands the placeholders' own values unless it restrided them
    return (isinstance(val, torch.Tensor) and isinstance(example, torch.Tensor)
            and val is not example and val.stride() != example.stride())
