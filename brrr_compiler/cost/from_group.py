"""KernelStats from a group's FX nodes, before anything is lowered.

Note on the model. The numbers must match what the lowering will emit (from_kernel.py
counts that; tests/cost check the two agree), so this walks the group the way
lower/group.py evaluates it, using only FakeTensor metadata and the op table:
  - A pointwise group evaluates every member once per point of its domain, even a member
    of smaller shape (a broadcast producer is recomputed at every point it is read).
  - A reduction group runs, per row, loop phases 0..depth (depth: the most reductions on
    one path). Loop phase j folds the reductions of level j+1 and stores the full-shape
    outputs of level j; every full-shape member those need is computed again in that
    phase (values are not kept across phases), and every full-shape input they load is
    read again. Row-level members (their shape has size 1, or no dim, where the domain is
    reduced) are computed once per row.
"""
from __future__ import annotations

import torch

from brrr_compiler import ops
from brrr_compiler.cost.stats import (CostModelError, KernelStats, as_int, itemsize, op_cost,
                                      prod, size_hints)
from brrr_compiler.reduction_spec import reduction_spec


def _val(node):
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        raise CostModelError(f"brrr: node {getattr(node, 'name', node)} has no tensor metadata")
    return val


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic runs in (float16/bfloat16 compute in float32)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _is_view(node) -> bool:
    return ops.kind_of(node) is ops.Kind.VIEW


class _GroupWalk:
    def __init__(self, members: set, domain: list, dims: tuple, hints: dict):
        self.members, self.domain, self.dims, self.hints = members, domain, dims, hints
        self.red = prod(domain[d] for d in dims)
        self.rows = prod(s for d, s in enumerate(domain) if d not in dims)
        self.dropped = tuple(s for d, s in enumerate(domain) if d not in dims)
        self.stats = KernelStats(points=self.rows * self.red, rows=self.rows)
        self.seen: set = set()
        self.loads: dict = {}          # input node -> set of phases (None: row-level)
        self.level: dict = {}

    def shape(self, node) -> tuple:
        return tuple(as_int(s, self.hints) for s in _val(node).shape)

    def numel(self, node) -> int:
        return prod(self.shape(node))

    def is_full(self, node) -> bool:
        """Is `node` evaluated at every point of the reduced dims (not once per row)?"""
        if not self.dims:
            return True
        shape, rank = self.shape(node), len(self.domain)
        if len(shape) == rank:
            return any(shape[d] != 1 for d in self.dims)
        if shape == self.dropped:
            return False
        k = rank - len(shape)
        return any(shape[d - k] != 1 for d in self.dims if d >= k)

    def level_of(self, node) -> int:
        if node not in self.level:
            deps = [self.level_of(a) for a in node.all_input_nodes if a in self.members]
            self.level[node] = max(deps, default=0) + (reduction_spec(node) is not None)
        return self.level[node]

    def visit(self, node, full_ctx: bool, phase) -> None:
        full = full_ctx and self.is_full(node)
        key = (node, phase if full else None)
        if key in self.seen:
            return
        self.seen.add(key)
        if node not in self.members:
            self.loads.setdefault(node, set()).add(phase if full else None)
            return
        if reduction_spec(node) is not None:
            return
        if _is_view(node):
            self.visit(node.args[0], full, phase)
            return
        info = ops.info(node.target)
        if info.kind is not ops.Kind.POINTWISE:
            raise CostModelError(f"brrr: {node.name} ({node.target}) is not pointwise; no cost")
        count = self.stats.points if full else self.rows
        self.stats.add_op(ops.node_cost(node), _compute_dtype(_val(node).dtype), count)
        for a in node.all_input_nodes:
            self.visit(a, full, phase)

    def fold(self, node, phase: int) -> None:
        spec = reduction_spec(node)
        kind = "sum" if spec.kind == "mean" else spec.kind
        dtype = _compute_dtype(_val(node).dtype)
        self.stats.add_op(op_cost(kind, True), dtype, self.stats.points)
        if spec.kind == "mean":                  # the lowering divides once per row
            self.stats.add_op(op_cost("truediv"), dtype, self.rows)
        self.visit(spec.input, True, phase)

    def footprint(self, node) -> int:
        """Elements of `node` the group touches: views inside it may read only part."""
        total = 0
        for u in node.users:
            if u not in self.members:
                continue
            if _is_view(u) and u.args[0] is node:
                total += min(self.numel(u), self.footprint(u))
            else:
                total += self.numel(node)
        return min(self.numel(node), total)


def group_stats(nodes, outputs, inputs, domain, reduced_dims=()) -> KernelStats:
    """What the kernel for this group will compute and move (see the note above)."""
    members = set(nodes)
    hints = size_hints(_val(n) for n in list(members) + list(inputs) if "val" in n.meta)
    walk = _GroupWalk(members, [as_int(s, hints) for s in domain], tuple(reduced_dims), hints)
    reductions = [n for n in nodes if reduction_spec(n) is not None]
    depth = max((walk.level_of(n) for n in members), default=0)
    for j in range(depth + 1):
        for r in reductions:
            if walk.level_of(r) == j + 1:
                walk.fold(r, j)
        for o in outputs:
            if walk.is_full(o) and walk.level_of(o) == j:
                walk.visit(o, True, j)
    for o in outputs:
        if not walk.is_full(o):
            walk.visit(o, False, None)
    return _with_bytes(walk, outputs)


def _with_bytes(walk: _GroupWalk, outputs) -> KernelStats:
    stats = walk.stats
    for node, phases in walk.loads.items():
        nbytes = walk.footprint(node) * itemsize(_val(node).dtype)
        stats.bytes_read += nbytes
        full_phases = {p for p in phases if p is not None}
        if len(full_phases) > 1 and walk.dims:
            stats.reread_bytes += (len(full_phases) - 1) * nbytes
            stats.reread_row_bytes += walk.red * itemsize(_val(node).dtype)
    for o in outputs:
        stats.bytes_written += walk.numel(o) * itemsize(_val(o).dtype)
    return stats
