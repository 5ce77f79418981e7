"""Legality: which nodes may live in a generated kernel, and which merges are allowed.

Legality never asks the cost model; the policy decides only among legal merges.
A merge of two groups is legal when
  1. no path leaves the pair and comes back (it would make a cycle between kernels),
     whether through ATen nodes or through another kernel's nodes (a kernel runs as
     one unit: a path entering it at one node may leave it at any other),
  2. every node whose value leaves the merged group has the same shape (the kernel's
     iteration domain: each stored value is written once per domain point), or the
     shape of a row's reduced value, or (after a fold across rows) one element,
  3. the kernel's buffer arguments stay within the configured limit.
"""
from __future__ import annotations

import sympy
import torch
import torch.fx

from brrr_compiler import ops, symbolic
from brrr_compiler.ops import Kind
from brrr_compiler.partition import domains
from brrr_compiler.reduction_spec import reduction_spec

aten = torch.ops.aten

SUPPORTED_DTYPES = frozenset({
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool,
})

# views whose index map is affine: they may live inside a kernel
AFFINE_VIEWS = frozenset({
    aten.permute.default, aten.t.default, aten.transpose.int, aten.expand.default,
    aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims,
    aten.slice.Tensor, aten.select.int, aten.alias.default, aten.detach.default,
    aten.view.default,
    aten._unsafe_view.default, aten.reshape.default,
})
RESHAPES = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default})


def tensor_val(node):
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


CPU = torch.device("cpu")


def _tensor_problem(val, device) -> str | None:
    """Why a value cannot live in a generated kernel on `device` (None: it can)."""
    if val is None:
        return "is not a single tensor"
    if val.dtype not in SUPPORTED_DTYPES:
        return f"has dtype {val.dtype}, which brrr does not generate code for"
    if val.device != device:
        return f"lives on {val.device}, not on the kernels' device {device}"
    if val.layout != torch.strided or val.is_quantized:
        return "is not a plain strided tensor"
    return None


def _args_problem(node: torch.fx.Node, device) -> str | None:
    for a in node.all_input_nodes:
        problem = _tensor_problem(tensor_val(a), device)
        if problem and isinstance(a.meta.get("val"), (torch.SymInt, torch.SymFloat)):
            return f"its input {a.name} is a number computed at run time, not a tensor"
        if problem:
            return f"its input {a.name} {problem}"
    return None


def _only_unit_dims_change(node) -> bool:
    """A reshape that only inserts or removes size-1 dims keeps an affine index map."""
    src = [s for s in shape_of(node.args[0]) if s != 1]
    dst = [s for s in shape_of(node) if s != 1]
    return len(src) == len(dst) and all(a == b for a, b in zip(src, dst))


def fusible(node: torch.fx.Node, device=CPU) -> bool:
    """May `node` be computed inside a generated kernel running on `device` (the
    target's: the CPU for C++; a GPU, or the CPU under Triton's interpreter, for Triton;
    None: nothing is fusible)? The node and its tensor arguments must all live there."""
    return why_not_fusible(node, device) is None


def why_not_fusible(node: torch.fx.Node, device=CPU) -> str | None:
    """Why `node` may not be computed inside a generated kernel (None: it may); the one
    rule behind `fusible`, worded for `explain`."""
    if node.op != "call_function":
        return "not an op call"
    problem = _tensor_problem(tensor_val(node), device)
    if problem:
        return f"its result {problem}"
    kind = ops.kind_of(node)
    if kind is Kind.POINTWISE:
        if _has_mutable_kwargs(node, device):
            return "it moves its value to another device"
        return _args_problem(node, device)
    if kind is Kind.REDUCTION:
        spec = reduction_spec(node)
        if spec is None or len(spec.dims) == 0:
            return "brrr lowers this reduction only over given dims of known size"
        return _args_problem(node, device)
    if kind is Kind.VIEW and node.target in AFFINE_VIEWS:
        if node.target in RESHAPES and not _only_unit_dims_change(node):
            return "a reshape that merges or splits dims (not affine in its input's index)"
        return _args_problem(node, device)
    return f"a {kind.value} op"


def _has_mutable_kwargs(node, device) -> bool:
    # _to_copy/clone with a non-default memory_format or pin_memory are layout requests
    # the stored output's meta strides already honour; device moves are not fusible
    dev = node.kwargs.get("device")
    return dev is not None and torch.device(dev).type != device.type


def is_view(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and ops.kind_of(node) is Kind.VIEW


def shape_of(node) -> tuple:
    return symbolic.shape(tensor_val(node))


def numel(node):
    """The node's element count (a sympy expression when its sizes are symbolic)."""
    return sympy.Mul(*shape_of(node))


def stored_nodes(members: set, graph_outputs: set) -> list:
    """Members whose value is needed outside the group, in graph order."""
    out = []
    for n in members:
        if n in graph_outputs or any(u not in members for u in n.users):
            out.append(n)
    return out


def creates_cycle(a: set, b: set, order: dict, group_of: dict, horizon: int) -> bool:
    """True if some path from one group to the other leaves the pair. A path runs along
    node edges and through other kernels: a kernel runs all its nodes at once, so a path
    into any of its members goes on from all of them (`group_of`: node -> its group's
    members). `horizon`: the order of the last grouped node; past both it and the pair's
    last node no path can come back (node edges only go forward, and there is no kernel
    there to jump back through)."""
    both = a | b
    limit = max(horizon, max(order[n] for n in both))
    seen: set = set()
    frontier: list = []

    def reach(u) -> None:
        for m in group_of.get(u, (u,)):
            if m not in seen and m not in both:
                seen.add(m)
                frontier.append(m)

    for n in both:
        for u in n.users:
            if u not in both and order[u] <= limit:
                reach(u)
    while frontier:
        for u in frontier.pop().users:
            if u in both:
                return True
            if u not in seen and order[u] <= limit:
                reach(u)
    return False


def external_inputs(members: set) -> list:
    seen, out = set(), []
    for n in members:
        for a in n.all_input_nodes:
            if a not in members and a not in seen:
                seen.add(a)
                out.append(a)
    return out


def reduction_domain(members) -> tuple | str | None:
    """(full shape, reduced dims) of the group's rows; None if it has no reductions; a
    reason string if they disagree (folds across rows aside: see domains.py)."""
    return domains.split_domain(members)[0]


def check_merge(a: set, b: set, order: dict, graph_outputs: set, max_args: int,
                group_of: dict, horizon: int, allow_across: bool = True) -> str | None:
    """None if merging groups `a` and `b` is legal, else the reason it is not
    (`group_of` and `horizon`: the other kernels, see creates_cycle; `allow_across`:
    the target's printer folds reductions across rows)."""
    merged = a | b
    if creates_cycle(a, b, order, group_of, horizon):
        return "illegal: a path through another kernel connects them (cycle)"
    stored = stored_nodes(merged, graph_outputs)
    problem = domains.shape_problem(merged, stored, allow_across)
    if problem:
        return problem
    if not stored:
        return None
    nargs = len(external_inputs(merged)) + len(stored)
    if nargs > max_args:
        return f"illegal: {nargs} buffer arguments exceed max_kernel_args={max_args}"
    return None
