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

import contextlib
import gc
import itertools
import logging
import os

import torch

from brrr_compiler import passes
from brrr_compiler import capture, debug, eager_strides
from brrr_compiler.autotune_plan import Planned, tuned
from brrr_compiler.capture import aot_backend
from brrr_compiler.codegen import cpp
from brrr_compiler.codegen import triton as triton_printer
from brrr_compiler.config import Config, build_config, with_mode
from brrr_compiler.cost import CostPolicy, policy_from_option, resolve_device
from brrr_compiler.cost.measured import measured_where_unsure
from brrr_compiler.graph_report import (eager_graph_report, failed_graph_report, graph_report,
                                        op_name)
from brrr_compiler.kernel_verify import verify
from brrr_compiler.log import fallback, logger, warn_once
from brrr_compiler.lowered_count import LoweredCount
from brrr_compiler.lower.group import lower_group
from brrr_compiler.partition import PolicyError, partition
from brrr_compiler.runtime import (cache, inplace, script, segments, tangents, toolchain,
                                   trampoline, triton_launch)
from brrr_compiler.runtime.autotune import Autotuner
from brrr_compiler.runtime.kernels import build_kernels
from brrr_compiler.runtime.runner import guarded_runner, kernels_run
from brrr_compiler.schedule import choose as choose_schedule
from brrr_compiler.symbolic import shape, size_sources, strides
from brrr_compiler.transforms.inplace_order import stores_last

_graph_ids = itertools.count()


def brrr_backend(gm: torch.fx.GraphModule, example_inputs, options=None, *, mode=None,
                 _sink=None, _graph_ids=None):
    """The `torch.compile` backend: `torch.compile(model, backend="brrr", options={...})`
    or `mode=...` (torch passes one of them, never both; README.md, Options). `_sink` (a
    list) receives each graph's GraphReport; `_graph_ids` numbers the graphs (default:
    one count for the process); `explain` passes both."""
    cfg = build_config(with_mode(options, mode))
    # from here on debug_dir is this process's run folder (debug.py's note)
    cfg = cfg.replace(debug_dir=debug.dump_folder(
        cfg.debug_dir, os.environ.get("TORCH_COMPILE_DEBUG", "0") == "1"))
    if cfg.target != "triton" and not any(_on_cuda(x) for x in example_inputs):
        # probed while AOTAutograd traces; the cache dir is checked here, not in the thread
        toolchain.prefetch(cfg.cxx, cache.usable_dir(cfg.cache_dir))

    def compiler(kind: str):
        def compile_fn(aten_gm, aten_inputs):
            return compile_or_aten(aten_gm, cfg, kind, _sink, aten_inputs, _graph_ids)
        return compile_fn

    try:
        return aot_backend(compiler("forward"), compiler("backward"), compiler("inference"),
                           joint_pass=_joint_cse)(gm, example_inputs)
    except Exception as err:
        if cfg.strict or isinstance(err, (PolicyError, *_dynamo_protocol())):
            raise      # strict asks for errors; a user's policy with a bug is named
        return _eager_graph(gm, err, _sink, _graph_ids)


def _dynamo_protocol() -> tuple:
    """Exceptions Dynamo acts on when a backend raises them: a graph break at a
    data-dependent op, a restart of its analysis, a skipped frame, a shortened
    traceback, an out-of-range dim reported as eager reports it."""
    from torch._dynamo import exc
    names = ("TensorifyScalarRestartAnalysis", "ShortenTraceback", "SkipFrame")
    return (IndexError, *getattr(exc, "exceptions_allowed_to_be_fallback", ()),
            *(getattr(exc, n) for n in names if hasattr(exc, n)))


def _eager_graph(gm: torch.fx.GraphModule, err: Exception, sink, graph_ids):
    """Dynamo's graph run as eager runs it, with one warning, when AOTAutograd cannot
    trace it: tracing the joint graph fails on things eager only meets in backward, or
    never (an input saved for backward and then written in place, a write through
    overlapping memory), and eager's own errors then surface where eager raises them."""
    first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
    why = f"AOTAutograd could not trace a graph ({type(err).__name__}: {first})"
    warn_once(f"aot-{type(err).__name__}-{first}",
              f"brrr: {why}; it runs as eager runs it instead")
    if sink is not None:
        name = f"graph{next(_graph_ids if graph_ids is None else graph_ids)}_dynamo"
        sink.append(eager_graph_report(name, gm, f"brrr: {why}"))
    return gm.forward


def _on_cuda(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cuda"


def _joint_cse(joint_gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """brrr's CSE on AOTAutograd's joint graph, in place of torch's (capture.py's note)."""
    return passes.run_pipeline(joint_gm, ("cse",))


def compile_or_aten(gm: torch.fx.GraphModule, cfg: Config, kind: str, sink=None,
                    example_inputs=(), graph_ids=None):
    """compile_graph, or, if brrr fails on the graph, the graph as AOTAutograd handed it,
    run through ATen (with one warning): a model that eager runs never meets a brrr
    compile error. `strict` re-raises instead."""
    original = capture.graph_copy(gm)
    mark = capture.output_strides_mark()
    name = f"graph{next(_graph_ids if graph_ids is None else graph_ids)}_{kind}"
    try:
        with _collector_paused():
            compiled = compile_graph(gm, cfg, kind, sink, example_inputs, name)
    except Exception as err:
        if cfg.strict or (isinstance(err, PolicyError) and not isinstance(cfg.fusion, str)):
            raise      # the user's own policy has a bug: say so rather than run ATen
        why = f"compiling a {kind} graph failed ({type(err).__name__}: {err})"
        warn_once(f"graph-{type(err).__name__}-{err}",
                  f"brrr: {why}; that graph runs through ATen instead")
        if sink is not None:
            sink.append(failed_graph_report(name, kind, original, f"brrr: {why}"))
        compiled = capture.aten_fallback(original, kind, mark)
    if kind == "backward":    # compiled or not: AOTAutograd may pass None for a tangent
        return tangents.zero_missing_tangents(original, compiled)
    return compiled


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off while brrr compiles a graph. The cost policy
    lowers hundreds of candidate kernels, and the objects that outlive a few of them
    (caches, kernel IR) set off full collections, each a walk of every object torch and
    Dynamo hold: 0.4 s of a ResNet training compile. Cycles made meanwhile are collected
    by the next collection after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def compile_graph(gm: torch.fx.GraphModule, cfg: Config, kind: str, sink=None,
                  example_inputs=(), name: str | None = None):
    """Compile one functional ATen graph into a boxed callable."""
    name = name or f"graph{next(_graph_ids)}_{kind}"
    dumps = debug.GraphDump(cfg.debug_dir, name)
    dumps.write("aten_before.py", gm.code)
    reference = script.reference_of(gm) if dumps.active else None
    if kind == "backward":
        gm = capture.adopt_input_strides(gm, example_inputs)
    elif kind == "forward":
        gm = capture.protect_saved_mutated_inputs(gm)
        gm.meta[passes.LAYOUT_FREE_OUTPUTS] = capture.saved_output_indices(gm)
    # eager's strides before the passes too: remove_noops judges a clone by its strides
    gm = passes.run_pipeline(eager_strides.follow_eager(gm), cfg.passes)
    gm = eager_strides.follow_eager(gm)
    capture.report_output_strides(gm)
    dumps.write("aten_after.py", gm.code)
    target, device = choose_target(cfg, gm)
    # for the cost model; older versions kept the calibration in the cache dir
    machine = resolve_device(cfg.device, (cfg.calibration_dir, cfg.cache_dir), device)
    threads = cfg.num_threads or torch.get_num_threads()
    tuner = Autotuner(gm, cfg, threads, target, machine.stream_prefetch) if cfg.autotunes() \
        else None
    pristine = capture.graph_copy(gm) if tuner is not None else None

    def planned(graph, policy) -> Planned:
        plan = partition(graph, policy, cfg.max_kernel_args, device=device,
                         allow_across=(target == "cpp" and cfg.fold_across_rows))
        not_run: dict = {}              # group id -> why it runs through ATen
        lowered = lower_plan(plan, target, threads, cfg.low_precision, not_run,
                             strict=cfg.strict, libm=cfg.libm, prefetch=machine.stream_prefetch,
                             verify_ir=cfg.verify_ir or cfg.debug_dir is not None)
        return Planned(plan, *lowered, not_run)

    count = counter(target, threads, cfg, machine)
    found = planned(gm, fusion_policy(cfg, machine, tuner, count))
    if tuner is not None:   # max-autotune: the finished plan and each kernel's threads timed
        found = tuned(tuner, name, found, lambda: planned(pristine, policy_from_option(
            cfg.fusion, machine, counter(target, threads, cfg, machine))))
    plan, kernels, specs, printed, schedules, not_run = found
    dumps.write("fusion_plan.txt", lambda: str(plan))
    if target == "triton":
        compiled, source = triton_launch.build_triton_kernels(kernels, specs, cfg, device)
    else:
        compiled, source = build_kernels(kernels, specs, cfg, threads, printed)
    run = guarded_runner(plan, compiled, every_call=cfg.check_strides, strict=cfg.strict,
                         name=name, trampoline_lib=trampoline.load(cfg.cache_dir, cfg.cxx,
                                                                   cfg.cache_max_bytes)
                         if cfg.segments and target == "cpp" and len(compiled) > 1 else None)
    runner = run.runner
    dumps.write("kernels.cpp" if target == "cpp" else "kernels_triton.py", source)
    dumps.write("runner.py", lambda: runner.code + segments.describe(run.segmented))
    if reference is not None:
        dumps.write(f"{name}.py", lambda: script.runnable(
            name, reference, plan.graph.graph, runner, kernels, printed, threads,
            script.build_command(cfg) if target == "cpp" else None,
            source if target == "triton" else None))
    if sink is not None or logger.isEnabledFor(logging.INFO):   # someone reads the report
        ran = kernels_and_fallbacks(plan, kernels, compiled, not_run)
        report = graph_report(name, kind, plan, ran, source, runner.code, kernels, machine,
                              device, not_run, schedules, count,
                              segments.segmented_kernels(run.segmented) if target == "cpp"
                              else None)
        logger.info("%s", report)
        if sink is not None:
            sink.append(report)
    if not cfg.wants_cudagraphs():
        return run
    return triton_launch.cudagraphs(run, gm, compiled, asked=cfg.cudagraphs is True,
                                    strict=cfg.strict)


def counter(target: str | None, threads: int, cfg: Config, machine) -> LoweredCount:
    """What the cost model counts for a candidate group: the kernel `target` would print
    on `machine` (its DeviceSpec: whether streams are prefetched)."""
    return LoweredCount(target or "cpp", threads, cfg.low_precision, machine.stream_prefetch)


def fusion_policy(cfg: Config, machine, tuner, count: LoweredCount):
    """The policy options["fusion"] names; under max-autotune (`tuner`), brrr's own
    policies measure the merges the cost model is unsure of (cost/measured.py)."""
    policy = policy_from_option(cfg.fusion, machine, count)
    if tuner is None:
        return policy
    return measured_where_unsure(policy, CostPolicy(machine, count), tuner.measure_merge,
                                 cfg.autotune_margin)


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
            fallback("no-triton", "brrr: CUDA tensors need Triton (pip install triton); "
                                  "their ops run through ATen instead", cfg.strict)
            return None, None
        return "triton", cuda[0]
    if cfg.target == "triton":
        if triton_launch.available() and triton_launch.interpreting():
            return "triton", torch.device("cpu")
        fallback("triton-on-cpu", "brrr: target='triton' runs CPU tensors only under "
                                  "Triton's interpreter (triton installed, TRITON_INTERPRET=1); "
                                  "using the C++ target instead", cfg.strict)
    return "cpp", torch.device("cpu")


def lower_plan(plan, target: str | None = "cpp", num_threads: int = 1,
               low_precision: str = "float32", failures: dict | None = None,
               strict: bool = False, verify_ir: bool = False, libm: str = "fast",
               prefetch: bool = False):
    """Kernel IR and its schedule (schedule/) for every group that lowers, by group id, and
    each kernel's source printed from the pair, by name (the C++ target's, for its
    translation unit); a group that does not runs through ATen (and
    `failures`, if given, maps its id to why; under `strict`, Config.strict, it is an
    error). `low_precision`: Config.low_precision; `verify_ir`: check each Kernel's rules
    (kernel_verify.py; a break raises KernelIRError, never a silent fallback); `libm`:
    Config.libm; `prefetch`: streaming kernels ask for their input streams ahead
    (DeviceSpec.stream_prefetch)."""
    kernels, specs, printed, schedules = {}, {}, {}, {}
    sources = size_sources(plan.graph.graph)
    backs = inplace.write_backs(plan.graph.graph)
    for g in plan.groups:
        try:
            k = lower_group(g, g.name, use_scratch=(target == "cpp"),
                            round_results=(low_precision == "eager"), libm=libm)
            k.may_alias = inplace.may_alias(g, k, backs)
            if k.may_alias:        # each element read before it is stored over
                k = stores_last(k)
            if verify_ir:
                verify(k)
            sched = choose_schedule(k, "cpp" if target == "cpp" else "triton", num_threads,
                                    prefetch=prefetch)
            # a printer gap shows up here, not at build
            text = (cpp.print_kernel(k, sched) if target == "cpp"
                    else triton_printer.kernel_source(k, sched=sched))
            missing = [s for s in k.size_vars if s not in sources]
            if missing:
                raise NotImplementedError(f"brrr: sizes {missing} of {k.name} are not graph inputs")
        except NotImplementedError as err:
            reason = str(err).removeprefix("brrr: ")
            fallback(f"lower-{err}", f"brrr: group {g.name} ({_ops_of(g)}) cannot be lowered: "
                                     f"{reason}; its ops run through ATen instead", strict)
            if failures is not None:
                failures[g.id] = f"its group {g.name} did not lower: {reason}"
            continue
        kernels[g.id] = k
        specs[g.id] = [_spec(o) for o in g.outputs]
        printed[k.name] = text
        schedules[g.id] = sched
    return kernels, specs, printed, schedules


def _ops_of(group, most: int = 6) -> str:
    ops = list(dict.fromkeys(op_name(n) for n in group.nodes))
    return ", ".join(ops[:most]) + (f", ... ({len(ops)} ops)" if len(ops) > most else "")


def _spec(node) -> tuple:
    val = node.meta["val"]
    return shape(val), strides(val), val.dtype


def kernels_and_fallbacks(plan, kernels, compiled, not_run: dict) -> dict:
    """The kernels the runner calls; `not_run` gets why each other group runs through ATen."""
    run = kernels_run(plan, compiled)
    for g in plan.groups:
        if g.id in run or g.id in not_run:
            continue
        if g.id in compiled:
            not_run[g.id] = (f"its kernel {g.name} is on a cycle with other kernels "
                             "through ATen calls")
        elif g.id in kernels:
            not_run[g.id] = f"its kernel {g.name} was not built (see the warning)"
    return run
