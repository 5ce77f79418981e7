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
  - Except: an expensive member (op cost >= a transcendental's) computed in an earlier
    loop phase is re-read from the row's scratch (no memory traffic), not recomputed
    (softmax's exp), unless the kernel has no scratch (`scratch=False`: the Triton
    target) or the C++ printer tiles columns (a reduction over an outer dim); and
    x / d with a row-level d costs one reciprocal per row and a multiply per point;
    a loop phase folding a max/min/argmax/argmin (row schedule) runs unvectorized.
  - A fold across rows (partition/domains.py) costs one update per row (a fold of a
    full-shape value also a row fold); what depends on it is computed once. A column
    fold costs one column-kind fold per point, in the loop phase of its input's level;
    what depends on it is computed once per column.
  - Bytes: each input once over what the group touches of it, except that a pointwise
    kernel reading it with a stride s along its innermost loop (x.t()) moves
    min(64, s * itemsize) bytes per element read that way.
"""
from __future__ import annotations

import torch

from brrr_compiler import ops
from brrr_compiler.cost.from_kernel import LINE
from brrr_compiler.partition.domains import after_rows
from brrr_compiler.cost.stats import (SCALAR_FOLDS, CostModelError, KernelStats, as_int,
                                      itemsize, prod, size_hints)
from brrr_compiler.reduction_spec import reduction_spec

aten = torch.ops.aten


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
        self.final: set = set()         # members computed once, after a fold across rows
        self.col_final: set = set()     # members computed once per column, after all rows
        self.seen: set = set()
        self.loads: dict = {}          # input node -> set of phases (None: row-level)
        self.level: dict = {}
        self.first_phase: dict = {}    # member -> loop phase it was first computed in
        self.scalar_phases: set = set()   # loop phases folding a max/min (not vectorized)
        self.columns = False           # the column schedule (reductions over outer dims)
        self.use_scratch = True
        self.inner = None              # innermost loop dim of a pointwise kernel

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

    def set_levels(self, nodes) -> None:
        """Reductions on the longest path to each member (`nodes` in topological order)."""
        for n in nodes:
            deps = [self.level[a] for a in n.all_input_nodes if a in self.members]
            self.level[n] = max(deps, default=0) + (reduction_spec(n) is not None)

    def visit(self, root, full_ctx: bool, phase) -> None:
        """Count what evaluating `root` in `phase` costs (full: at every reduced point)."""
        todo = [(root, full_ctx)]
        while todo:
            node, ctx = todo.pop()
            full = ctx and self.is_full(node)
            key = (node, phase if full else None)
            if key in self.seen:
                continue
            self.seen.add(key)
            if node not in self.members:
                self.loads.setdefault(node, set()).add(phase if full else None)
            elif _is_view(node):
                todo.append((node.args[0], full))
            elif reduction_spec(node) is None and not (full and self.from_scratch(node, phase)):
                self.count(node, full, full and phase in self.scalar_phases)
                if full:
                    self.first_phase.setdefault(node, phase)
                todo += [(a, full) for a in node.all_input_nodes]

    def from_scratch(self, node, phase) -> bool:
        first = self.first_phase.get(node)
        return (self.use_scratch and first is not None and first < phase
                and ops.info(node.target).cost >= ops.TRANSCENDENTAL)

    def count(self, node, full: bool, scalar: bool = False) -> None:
        info = ops.info(node.target)
        if info.kind is not ops.Kind.POINTWISE:
            raise CostModelError(f"brrr: {node.name} ({node.target}) is not pointwise; no cost")
        dtype = _compute_dtype(_val(node).dtype)
        if full and self.row_divisor(node):
            self.stats.add_op("mul", dtype, self.stats.points)
            self.stats.add_op("reciprocal", dtype, self.rows)
            return
        count = (self.stats.points if full else 1 if node in self.final
                 else self.red if node in self.col_final else self.rows)
        cost = ops.node_cost(node)
        if cost >= ops.TRANSCENDENTAL:           # lowered to one scalar op of that name
            self.stats.add_op(info.scalar, dtype, count, scalar=scalar)
        else:
            self.stats.add_flops(cost, dtype, count)

    def row_divisor(self, node) -> bool:
        """x / d with d constant along the reduced dims (the lowering multiplies by 1 / d)."""
        x, d = (tuple(node.args) + (None, None))[:2]
        return (node.target is aten.div.Tensor and isinstance(x, torch.fx.Node)
                and isinstance(d, torch.fx.Node) and not self.is_full(d))

    def column_schedule(self, inputs, reductions) -> bool:
        """Will the schedule tile columns (schedule/cpp.py: transforms/loops.reduces_outer_dim)?
        Read from the first full-shape input: its innermost kept dim contiguous, its reduced
        ones not."""
        kept = [d for d, s in enumerate(self.domain) if d not in self.dims and s != 1]
        red = [d for d in self.dims if self.domain[d] != 1]
        if not kept or not red or any(reduction_spec(r).kind in ("argmax", "argmin")
                                      for r in reductions):
            return False
        for n in inputs:
            if self.shape(n) == tuple(self.domain):
                st = [as_int(x, self.hints) for x in _val(n).stride()]
                return min(st[d] for d in kept) == 1 and min(st[d] for d in red) != 1
        return False

    def fold(self, node, phase: int) -> None:
        spec = reduction_spec(node)
        kind = "sum" if spec.kind == "mean" else spec.kind
        dtype = _compute_dtype(_val(node).dtype)
        self.stats.add_op(kind, dtype, self.stats.points, reduce=True, columns=self.columns)
        if spec.kind == "mean":                  # the lowering divides once per row
            self.stats.add_op("truediv", dtype, self.rows)
        self.visit(spec.input, True, phase)

    def fold_across(self, node) -> None:
        """A fold across rows: one update per row, finished once after all rows (a fold of
        a full-shape value: a row fold first, in the loop phase of its input's level)."""
        spec = reduction_spec(node)
        dtype = _compute_dtype(_val(node).dtype)
        kind = "sum" if spec.kind == "mean" else spec.kind
        self.stats.add_op(kind, dtype, self.rows, reduce=True)
        if spec.kind == "mean":
            self.stats.add_op("truediv", dtype, 1)
        if self.shape(spec.input) == tuple(self.domain):
            self.stats.add_op(kind, dtype, self.stats.points, reduce=True, columns=self.columns)
            self.visit(spec.input, True, self.level.get(spec.input, 0))
        else:
            self.visit(spec.input, False, None)

    def fold_column(self, node) -> None:
        """A column fold: one update per point, finished once per column."""
        spec = reduction_spec(node)
        dtype = _compute_dtype(_val(node).dtype)
        self.stats.add_op("sum", dtype, self.stats.points, reduce=True, columns=True)
        if spec.kind == "mean":
            self.stats.add_op("truediv", dtype, self.red)
        self.visit(spec.input, True, self.level.get(spec.input, 0))

    def reads(self, node) -> list:
        """(elements, innermost-loop stride, layout) of each way the group reads `node`:
        directly, or through views inside it (which may read only part, or transposed)."""
        out = []
        for u in node.users:
            if u not in self.members:
                continue
            if _is_view(u) and u.args[0] is node:
                out += [(min(self.numel(u), e), s, lay) for e, s, lay in self.reads(u)]
            else:
                v = _val(node)
                out.append((self.numel(node), self.inner_stride(node),
                            str((tuple(v.shape), tuple(v.stride()), v.storage_offset()))))
        return out

    def inner_stride(self, node) -> int:
        """Stride of `node` along the innermost loop of a pointwise kernel (the lowering
        orders loops by the first output's strides, smallest innermost); 1 otherwise."""
        if self.inner is None:
            return 1
        shape, k = self.shape(node), len(self.domain) - len(self.shape(node))
        d = self.inner - k
        if d < 0 or shape[d] == 1:
            return 0
        return abs(as_int(_val(node).stride()[d], self.hints))

    def read_bytes(self, node) -> int:
        """Bytes of `node` the kernel moves: dense reads once over what they touch,
        strided ones a share of a cache line per element (from_kernel.buffer_bytes)."""
        size, reads = itemsize(_val(node).dtype), self.reads(node)
        dense = sum(e for e, s, _ in reads if s in (0, 1))
        strided = {(e, s, lay) for e, s, lay in reads if s not in (0, 1)}
        return (min(self.numel(node), dense) * size
                + sum(e * min(LINE, s * size) for e, s, _ in strided))

    def set_inner(self, outputs) -> None:
        """The innermost loop dim of a pointwise kernel: the first output's smallest
        stride among dims of extent > 1 (the last of equals)."""
        self.inner = None
        if self.dims or not outputs:
            return
        st = [as_int(x, self.hints) for x in _val(outputs[0]).stride()]
        dims = [d for d, n in enumerate(self.domain) if n != 1]
        if dims and len(st) == len(self.domain):
            self.inner = sorted(dims, key=lambda d: -st[d])[-1]


def group_stats(nodes, outputs, inputs, domain, reduced_dims=(), scratch: bool = True,
                across=(), columns=()) -> KernelStats:
    """What the kernel for this group will compute and move (see the note above);
    `nodes` in topological order, as a Group has them; `scratch`: lowered with
    use_scratch (the C++ target); `across`: its folds across rows; `columns`: its
    column folds."""
    members = set(nodes)
    hints = size_hints(_val(n) for n in list(members) + list(inputs) if "val" in n.meta)
    walk = _GroupWalk(members, [as_int(s, hints) for s in domain], tuple(reduced_dims), hints)
    walk.final = after_rows(members, across)
    walk.col_final = after_rows(members, columns)
    after = walk.final | walk.col_final
    reductions = [n for n in nodes if reduction_spec(n) is not None and n not in after]
    walk.columns = not (columns or across) and walk.column_schedule(inputs, reductions)
    walk.use_scratch = scratch and not walk.columns
    walk.set_inner(outputs)
    walk.set_levels([n for n in nodes if n not in after])
    walk.scalar_phases = set() if walk.columns else {
        walk.level[r] - 1 for r in reductions if reduction_spec(r).kind in SCALAR_FOLDS}
    depth = max(walk.level.values(), default=0)
    for j in range(depth + 1):
        for r in reductions:
            if walk.level[r] == j + 1:
                walk.fold(r, j)
        for o in outputs:
            if o not in after and walk.is_full(o) and walk.level[o] == j:
                walk.visit(o, True, j)
    for r in across:
        walk.fold_across(r)
    for r in columns:
        walk.fold_column(r)
    for o in outputs:
        if o in after or not walk.is_full(o):
            walk.visit(o, False, None)
    return _with_bytes(walk, outputs)


def _with_bytes(walk: _GroupWalk, outputs) -> KernelStats:
    stats = walk.stats
    for node, phases in walk.loads.items():
        nbytes = walk.read_bytes(node)
        stats.bytes_read += nbytes
        full_phases = {p for p in phases if p is not None}
        if len(full_phases) > 1 and walk.dims:
            stats.reread_bytes += (len(full_phases) - 1) * nbytes
            stats.reread_row_bytes += walk.red * itemsize(_val(node).dtype)
    for o in outputs:
        size, stride = itemsize(_val(o).dtype), walk.inner_stride(o)
        stats.bytes_written += walk.numel(o) * (size if stride in (0, 1) else min(LINE, stride * size))
    return stats
