"""The driver: the one place that names the pipeline's stages in order.

    Dynamo FX graph
      -> capture      (AOTAutograd: functional ATen forward/backward graphs)
      -> passes       (ATen -> ATen, passes.PIPELINE)
      -> partition    (FusionPlan, decided by the fusion policy)
      -> lower        (one Kernel IR per group)
      -> codegen      (one C++ translation unit, or one Triton module, per graph)
      -> runtime      (build, load, and an FX runner calling kernels and ATen in order)
"""
from __future__ import annotations

import itertools
import logging

import torch

import passes
from brrr_compiler import capture, debug
from brrr_compiler.capture import aot_backend
from brrr_compiler.codegen import cpp
from brrr_compiler.codegen import triton as triton_printer
from brrr_compiler.config import Config, build_config
from brrr_compiler.cost import kernel_report_fields, resolve_device
from brrr_compiler.log import logger, warn_once
from brrr_compiler.lower.group import lower_group
from brrr_compiler.partition import partition, policy_from_option
from brrr_compiler.report import GraphReport, KernelReport
from brrr_compiler.runtime import toolchain, triton_launch
from brrr_compiler.runtime.kernels import build_kernels
from brrr_compiler.runtime.runner import boxed, build_runner
from brrr_compiler.symbolic import shape, size_sources, strides

_graph_ids = itertools.count()


def brrr_backend(gm: torch.fx.GraphModule, example_inputs, options=None, *, _sink=None):
    """The `torch.compile` backend: `torch.compile(model, backend="brrr", options={...})`."""
    cfg = build_config(options)
    if cfg.target != "triton" and not any(_on_cuda(x) for x in example_inputs):
        toolchain.prefetch(cfg.cxx, cfg.cache_dir)    # probed while AOTAutograd traces

    def compiler(kind: str):
        def compile_fn(aten_gm, aten_inputs):
            return compile_graph(aten_gm, cfg, kind, _sink, aten_inputs)
        return compile_fn

    return aot_backend(compiler("forward"), compiler("backward"), compiler("inference"),
                       joint_pass=_joint_cse)(gm, example_inputs)


def _on_cuda(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cuda"


def _joint_cse(joint_gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """brrr's CSE on AOTAutograd's joint graph, in place of torch's (capture.py's note)."""
    return passes.run_pipeline(joint_gm, ("cse",))


def compile_graph(gm: torch.fx.GraphModule, cfg: Config, kind: str, sink=None,
                  example_inputs=()):
    """Compile one functional ATen graph into a boxed callable."""
    name = f"graph{next(_graph_ids)}_{kind}"
    debug.dump(cfg.debug_dir, name, "aten_before.py", gm.code)
    if kind == "backward":
        gm = capture.adopt_input_strides(gm, example_inputs)
    elif kind == "forward":
        gm.meta[passes.LAYOUT_FREE_OUTPUTS] = capture.saved_output_indices(gm)
    gm = passes.run_pipeline(gm, cfg.passes)
    capture.report_output_strides(gm)
    debug.dump(cfg.debug_dir, name, "aten_after.py", gm.code)
    target, device = choose_target(cfg, gm)
    machine = resolve_device(cfg.device, cfg.cache_dir, device)     # for the cost model
    plan = partition(gm, policy_from_option(cfg.fusion, machine), cfg.max_kernel_args,
                     device=device,
                     allow_across=(target == "cpp" and cfg.fold_across_rows))
    debug.dump(cfg.debug_dir, name, "fusion_plan.txt", str(plan))
    threads = cfg.num_threads or torch.get_num_threads()
    kernels, specs, printed = lower_plan(plan, target, threads, cfg.low_precision)
    if target == "triton":
        compiled, source = triton_launch.build_triton_kernels(kernels, specs, cfg, device)
    else:
        compiled, source = build_kernels(kernels, specs, cfg, threads, printed)
    runner = build_runner(plan, compiled)
    debug.dump(cfg.debug_dir, name, "kernels.cpp" if target == "cpp" else "kernels_triton.py", source)
    debug.dump(cfg.debug_dir, name, "runner.py", runner.code)
    if sink is not None or logger.isEnabledFor(logging.INFO):   # someone reads the report
        report = graph_report(name, kind, plan, compiled, source, runner.code, kernels, machine)
        logger.info("%s", report)
        if sink is not None:
            sink.append(report)
    run = boxed(runner)
    return triton_launch.cudagraphs(run, gm, compiled) if cfg.cudagraphs else run


def choose_target(cfg: Config, gm) -> tuple:
    """(code generation target, device its kernels run on) for one graph. CUDA tensors
    go to Triton (unless target="cpp"), CPU tensors to C++, or to Triton when target=
    "triton" and Triton's interpreter runs (TRITON_INTERPRET=1). (None, None): every op
    runs through ATen."""
    vals = [n.meta.get("val") for n in gm.graph.nodes]
    cuda = [v.device for v in vals if isinstance(v, torch.Tensor) and v.device.type == "cuda"]
    if cuda:
        if cfg.target == "cpp":
            return None, None
        if not triton_launch.available():
            warn_once("no-triton", "brrr: CUDA tensors need Triton (pip install triton); "
                                   "their ops run through ATen instead")
            return None, None
        return "triton", cuda[0]
    if cfg.target == "triton":
        if triton_launch.available() and triton_launch.interpreting():
            return "triton", torch.device("cpu")
        warn_once("triton-on-cpu", "brrr: target='triton' runs CPU tensors only under "
                                   "Triton's interpreter (triton installed, TRITON_INTERPRET=1); "
                                   "using the C++ target instead")
    return "cpp", torch.device("cpu")


def lower_plan(plan, target: str | None = "cpp", num_threads: int = 1,
               low_precision: str = "float32"):
    """Kernel IR for every group that lowers, and each kernel's printed source by name (the
    C++ target's, for its translation unit); a group that does not runs through ATen.
    `low_precision`: Config.low_precision."""
    kernels, specs, printed = {}, {}, {}
    sources = size_sources(plan.graph.graph)
    for g in plan.groups:
        try:
            k = lower_group(g, g.name, use_scratch=(target == "cpp"),
                            round_results=(low_precision == "eager"))
            # a printer gap shows up here, not at build
            text = (cpp.kernel_source(k, num_threads) if target == "cpp"
                    else triton_printer.kernel_source(k))
            missing = [s for s in k.size_vars if s not in sources]
            if missing:
                raise NotImplementedError(f"brrr: sizes {missing} of {k.name} are not graph inputs")
        except NotImplementedError as err:
            warn_once(f"lower-{err}", f"{err}; that group runs through ATen instead")
            continue
        kernels[g.id] = k
        specs[g.id] = [_spec(o) for o in g.outputs]
        printed[k.name] = text
    return kernels, specs, printed


def _spec(node) -> tuple:
    val = node.meta["val"]
    return shape(val), strides(val), val.dtype


def graph_report(name, kind, plan, compiled, source, runner_code, kernel_irs=None,
                 machine=None) -> GraphReport:
    kernels = [KernelReport(compiled[g.id].name,
                            [_op_name(n) for n in g.nodes], [n.name for n in g.nodes],
                            list(g.domain),
                            **kernel_report_fields((kernel_irs or {}).get(g.id), g, machine))
               for g in plan.groups if g.id in compiled]
    grouped = {n for g in plan.groups if g.id in compiled for n in g.nodes}
    aten_nodes = [(n.name, _op_name(n)) for n in plan.graph.graph.nodes
                  if n.op == "call_function" and n not in grouped]
    edges = [(a.name, n.name) for n in plan.graph.graph.nodes for a in n.all_input_nodes]
    return GraphReport(name, kind, kernels, aten_nodes, list(plan.decisions), source,
                       runner_code, edges, machine.name if machine else "")


def _op_name(node) -> str:
    return str(node.target).replace("aten::", "aten.")
