"""The GraphReport of one compiled graph: its kernels with predictions and the user lines
they come from, and every node left to ATen with the reason it was.

Driver-level (backend.py calls it after the runner is built): it reads the plan, the
lowering's and the build's outcome, and asks the cost model for each kernel and for its
ops run one kernel each (what the fusion saved).
"""
from __future__ import annotations

import operator
import re
import types

import torch

from brrr_compiler import ops
from brrr_compiler.cost import CostModelError, CostPolicy, kernel_report_fields
from brrr_compiler.ops import Kind
from brrr_compiler.partition import legality
from brrr_compiler.report import AtenCall, GraphReport, KernelReport, short_path

_ROOT = re.compile(r"^L\['(self|fn|mod)'\]")
_SCOPE = re.compile(r"[LG]\['([^']+)'\]")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n[ \t]*([^\n]*)')


def op_name(node) -> str:
    if isinstance(node.target, types.BuiltinFunctionType):      # size arithmetic
        return f"operator.{node.target.__name__}"
    return str(node.target).replace("aten::", "aten.")


def user_source(node) -> str:
    """'file:line  code  [module]' of the user's line a node comes from (Dynamo's
    stack_trace, which AOTAutograd keeps on forward and backward nodes) and of the
    innermost module it runs in; '' when neither is known."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    module = _module(node)
    if not frames:
        return module
    path, line, code = frames[-1]
    return f"{short_path(path)}:{line}  {code.strip()}" + (f"  [{module}]" if module else "")


def _module(node) -> str:
    """'self.layers.0.norm (LayerNorm)': the innermost module of Dynamo's nn_module_stack
    (`self`: the module compiled; other names are the function's locals or globals)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, cls = list(stack.values())[-1][:2]
    path = _SCOPE.sub(lambda m: m.group(1), _ROOT.sub("self", str(path)))
    return f"{path} ({getattr(cls, '__name__', cls)})"


def _sources(nodes, limit: int = 3) -> list[str]:
    found = list(dict.fromkeys(s for s in map(user_source, nodes) if s))
    return found[:limit] + ([f"... and {len(found) - limit} more lines"] if len(found) > limit else [])


def graph_report(name, kind, plan, compiled, source, runner_code, kernel_irs=None,
                 machine=None, device=legality.CPU, not_run=None, schedules=None,
                 count=None, segmented=None) -> GraphReport:
    """`compiled`: the kernels the runner calls, by group id; `device`: the one the
    kernels run on (None: the graph has no code generation target); `not_run`: {group
    id: why the group runs through ATen} for the groups that are not among them;
    `schedules`: each kernel's schedule by group id (what the cost model counts);
    `segmented`: the names of the kernels a CPU runner runs inside segments (None: not a
    CPU runner)."""
    kernels = [_kernel(compiled[g.id].name, g, (kernel_irs or {}).get(g.id),
                       (schedules or {}).get(g.id), machine, count, segmented)
               for g in plan.groups if g.id in compiled]
    reasons = {n: not_run[g.id] for g in plan.groups if g.id in (not_run or {}) for n in g.nodes}
    grouped = {n for g in plan.groups if g.id in compiled for n in g.nodes}
    aten = [n for n in plan.graph.graph.nodes if n.op == "call_function" and n not in grouped]
    calls = [AtenCall(n.name, op_name(n), *aten_reason(n, reasons.get(n), device),
                      source=user_source(n)) for n in aten]
    edges = [(a.name, n.name) for n in plan.graph.graph.nodes for a in n.all_input_nodes]
    return GraphReport(name, kind, kernels, [(c.name, c.op) for c in calls],
                       list(plan.decisions), source, runner_code, edges,
                       machine.name if machine else "", calls,
                       [not_run[g.id] for g in plan.groups if g.id in (not_run or {})])


def failed_graph_report(name, kind, gm, why: str) -> GraphReport:
    """The report of a graph brrr failed on, which runs through ATen whole: every node
    with `why` (views and size arithmetic as such)."""
    calls = [AtenCall(n.name, op_name(n), *aten_reason(n, why, legality.CPU),
                      source=user_source(n)) for n in gm.graph.nodes if n.op == "call_function"]
    edges = [(a.name, n.name) for n in gm.graph.nodes for a in n.all_input_nodes]
    return GraphReport(name, kind, [], [(c.name, c.op) for c in calls], edges=edges,
                       aten_calls=calls, fallbacks=[why])


def eager_graph_report(name, gm, why: str) -> GraphReport:
    """The report of a Dynamo graph that runs as eager runs it (it was never lowered to
    ATen): each of its calls, torch-level, with `why`."""
    calls = [AtenCall(n.name, _torch_name(n), why, n.target is operator.getitem,
                      user_source(n))
             for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    edges = [(a.name, n.name) for n in gm.graph.nodes for a in n.all_input_nodes]
    return GraphReport(name, "dynamo", [], [(c.name, c.op) for c in calls], edges=edges,
                       aten_calls=calls, fallbacks=[why])


def _torch_name(node) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        return f"module {node.target}"
    module = getattr(node.target, "__module__", None) or "torch"
    return f"{module}.{getattr(node.target, '__name__', node.target)}"


def _kernel(name, group, kernel_ir, schedule, machine, count, segmented) -> KernelReport:
    called = "" if segmented is None else "segment" if name in segmented else "python"
    report = KernelReport(name, [op_name(n) for n in group.nodes], [n.name for n in group.nodes],
                          list(group.domain),
                          **kernel_report_fields(kernel_ir, schedule, group, machine,
                                                 called == "python"),
                          sources=_sources(group.nodes), called=called,
                          schedule=schedule.describe() if schedule is not None else "")
    if machine is not None and count is not None:
        report.unfused_s, report.unfused_bytes = _unfused(group, machine, count)
    return report


def _unfused(group, machine, count) -> tuple:
    """Predicted time and bytes of the group's compute ops run one kernel each (views are
    free in eager too), as `count` (lowered_count.LoweredCount) counts each one's kernel;
    (None, None) where the model has no number."""
    policy = CostPolicy(machine, count)
    try:
        alone = [policy.kernel({n}, frozenset(), [n]) for n in group.nodes
                 if not _is_view(n)]
    except CostModelError:
        return None, None
    alone = [k for k in alone if k is not None]
    return sum(k.total_s for k in alone), sum(k.bytes for k in alone)


def _size_arithmetic(node) -> bool:
    """A node that computes a size (sym_size, sym_numel, +, //) rather than a tensor."""
    if isinstance(node.meta.get("val"), torch.Tensor):
        return False
    if op_name(node).startswith(("aten.sym_", "operator.")):
        return True
    return not any(isinstance(a.meta.get("val"), torch.Tensor) for a in node.all_input_nodes)


def _is_view(node) -> bool:
    return legality.is_view(node) or node.target is operator.getitem


def aten_reason(node, group_reason: str | None, device) -> tuple[str, bool]:
    """(why `node` runs through ATen, whether it computes nothing: a view, a pick of a
    tuple, size arithmetic); `group_reason`: why the group it was in did not run."""
    if node.target is operator.getitem:
        return "picks one result of a multi-output op", True
    if _size_arithmetic(node):
        return "size arithmetic on symbolic shapes (no tensor)", True
    kind = ops.kind_of(node)
    if kind is Kind.VIEW:
        return "view: no compute, no data moved", True
    if group_reason:
        return group_reason, False
    if kind is Kind.LIBRARY:
        return "library op (matmul/conv/attention; a linear layer with its activation): " \
            "runs in its vendor kernel", False
    schema = getattr(node.target, "_schema", None)
    if schema is not None and schema.is_mutable:
        return "writes an in-place update back into an input (as eager does)", False
    if kind is Kind.FALLBACK:
        if ops.info(node.target).kind is not Kind.FALLBACK:
            return f"brrr lowers {op_name(node)} but not with these arguments", False
        return "an op brrr does not lower", False
    if device is None:
        return "no code generation target for this graph's device", False
    why = legality.why_not_fusible(node, device)
    return (f"not fusible: {why}" if why else "left out of every kernel"), False
