"""Lowering: a fusion group (ATen nodes) -> a Kernel (loops, phases, SSA statements).

Each node is evaluated lazily at the index its consumer needs, memoized per (node,
index): a pointwise node maps the index to its inputs by broadcasting, an affine view
by its own index map, and a value from outside the group is loaded from its buffer
through the strides its FakeTensor records.

Note on phases. A group with reductions iterates its outer (kept) dims in parallel and,
per outer point, runs phases: a node's *level* is the number of reductions on its
longest path inside the group. Loop phase k walks the reduced dims, computing level-k
values, folding the level-(k+1) reductions and storing level-k full-shape outputs;
scalar phase k (after it) computes per-row values of level k+1 (mean = sum / n,
rstd = rsqrt(var + eps)) that the next loop phase reads. Values computed inside a loop
phase are recomputed in later loop phases rather than kept (they are per element) —
except, with `use_scratch` (the C++ row schedule), expensive ones (an exp) that go to a
per-row scratch array and are re-read (softmax computes each exp once). A fold across
rows (partition/domains.py) reads its per-row input in the last scalar phase; what
depends on it is computed in the kernel's `once` phase after all rows. A column fold
adds its input in the loop phase of the input's level; what depends on it is computed
in the `columns` phase, once per column after all rows.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler import ops
from brrr_compiler.kernel_ir import Buffer, Kernel, Phase, loop_symbol, reduction_symbol
from brrr_compiler.lower import index_rules, indexing
from brrr_compiler.lower.origins import describe_node
from brrr_compiler.transforms.loops import reduces_outer_dim, simplify_loops
from brrr_compiler.lower.reduce_rules import ReductionEmitter
from brrr_compiler.lower.row_division import row_reciprocal_div
from brrr_compiler.lower.scalar_rules import (LOW_PRECISION, Body, Namer, V, lower_node,
                                              opmath)
from brrr_compiler.transforms.rounded_libm import round_libm_calls
from brrr_compiler.transforms.exact_casts import mark_exact_casts
from brrr_compiler.transforms.signs import mark_nonpositive_exps
from brrr_compiler.transforms.unit_reductions import fold_unit_reductions
from brrr_compiler.partition.domains import after_rows
from brrr_compiler.reduction_spec import reduction_spec
from brrr_compiler.symbolic import free_size_symbols, free_symbols


def _levels(group, final: set) -> dict:
    """Per row-level node: the number of reductions on its longest path in the group."""
    members, level = set(group.nodes) - final, {}
    for n in group.nodes:
        if n in final:
            continue
        deps = [level[a] for a in n.all_input_nodes if a in members]
        level[n] = max(deps, default=0) + (1 if reduction_spec(n) is not None else 0)
    return level


class _GroupLowering:
    def __init__(self, group, red_vars, red_ranges=()):
        self.members = set(group.nodes)
        self.stored = set(group.outputs)
        self.red_var_list, self.red_ranges = list(red_vars), list(red_ranges)
        self.final = after_rows(self.members, group.across)   # computed once, after all rows
        self.col_final = after_rows(self.members, group.columns)   # once per column, after
        self.level = _levels(group, self.final | self.col_final)
        self.red_vars = set(red_vars)
        self.namer = Namer()
        depth = max(self.level.values(), default=0)
        self.phases = [Phase(False, [])] + [Phase(i % 2 == 0, []) for i in range(2 * depth + 2)]
        self.bodies = [Body(self.namer, p.body) for p in self.phases]
        self.once = Phase(False, [], once=True)
        self.once_body = Body(self.namer, self.once.body)
        self.in_once = False                  # evaluating what the once phase computes
        self.columns = Phase(True, [], once=True)
        self.columns_body = Body(self.namer, self.columns.body)
        self.in_columns = False               # evaluating what the columns phase computes
        self.buffers: dict[torch.fx.Node, Buffer] = {}
        self.buffer_counts = {False: 0, True: 0}     # inputs and outputs named so far
        self.memo: dict = {}
        self.acc: dict = {}
        self.cur_loop: int | None = None
        self.reducer = ReductionEmitter(self)
        self.sym_level: dict[str, int] = {}   # gather's index values: level they exist at
        self.loop_syms: set = set()           # gather's index values read per loop element
        self.first_loop: dict = {}            # (node, idx) -> (loop phase, value) first computed
        self.scratch: dict = {}               # (node, idx) -> scratch Buffer
        self.use_scratch = True
        self.round_results = True

    # phase 0 is the scalar prologue; loop phase k is 1+2k; scalar phase k is 2+2k
    def loop_body(self, k: int) -> Body:
        return self.bodies[1 + 2 * k]

    def scalar_body(self, level: int) -> Body:
        return self.bodies[0] if level == 0 else self.bodies[2 * level]

    def buffer(self, node, is_output: bool) -> Buffer:
        if node not in self.buffers:
            prefix = "out" if is_output else "in"
            count = self.buffer_counts[is_output]
            self.buffer_counts[is_output] += 1
            dtype = node.meta["val"].dtype
            self.buffers[node] = Buffer(f"{prefix}{count}", dtype, is_output, node.name)
        return self.buffers[node]

    def is_full(self, idx) -> bool:
        return any(free_symbols(e) & self.red_vars or free_symbols(e) & self.loop_syms
                   for e in idx)

    def level_at(self, node, idx) -> int:
        syms = {s.name for e in idx for s in free_symbols(e)}
        return max([self.level.get(node, 0)] + [self.sym_level.get(n, 0) for n in syms])

    def target(self, node, idx) -> tuple:
        """(body to emit into, memo scope) for evaluating `node` at `idx`."""
        if self.in_once:
            return self.once_body, ("once",)
        if self.in_columns:
            return self.columns_body, ("columns",)
        if self.is_full(idx):
            return self.loop_body(self.cur_loop), ("loop", self.cur_loop)
        return self.scalar_body(self.level_at(node, idx)), ("scalar",)

    def value(self, node, idx: tuple) -> V:
        body, scope = self.target(node, idx)
        key = (node, idx, scope)
        if key not in self.memo:
            v = self._from_scratch(node, idx, scope, body)
            if v is None:
                v = self._held(node, self._compute(node, idx, body), body)
            self.memo[key] = v
            if scope[0] == "loop":
                self.first_loop.setdefault((node, idx), (scope[1], self.memo[key]))
        return self.memo[key]

    def _held(self, node, v: V, body: Body) -> V:
        """`v` as eager holds `node`'s value: rounded to float16/bfloat16 when the node has
        that dtype (with round_results), else in the compute dtype the rules left it in.
        A value the kernel stores is rounded for its consumers here too: whatever reads
        the stored tensor later (the backward, recomputing from a saved softmax) must see
        the bits the consumers here saw. The backward recomputed an fp16 add from the
        saved, rounded softmax where the forward had added the unrounded one; amin's
        gradient then found no element equal to the saved minimum and divided by a count
        of 0 (NaN gradients, fuzz seed 79394)."""
        dtype = node.meta["val"].dtype
        if v.dtype == dtype or dtype not in LOW_PRECISION:
            return v
        rounds = self.round_results or node in self.stored
        return body.cast(v, dtype if rounds else opmath(dtype))

    def _from_scratch(self, node, idx, scope, body: Body) -> V | None:
        """Re-read an expensive value an earlier loop phase computed (softmax's exp)."""
        if not self.use_scratch or scope[0] != "loop" or node not in self.members:
            return None
        if ops.info(node.target).cost < ops.TRANSCENDENTAL:
            return None
        first = self.first_loop.get((node, idx))
        if first is None or first[0] >= scope[1]:
            return None
        phase, v = first
        flat = self.flat_reduction_index()
        if (node, idx) not in self.scratch:
            buf = Buffer(f"scratch{len(self.scratch)}", v.dtype, False, node.name)
            self.scratch[(node, idx)] = buf
            self.loop_body(phase).store(buf.name, flat, v)
        return body.emit("load", v.dtype, buffer=self.scratch[(node, idx)].name, index=flat)

    def flat_reduction_index(self):
        flat, scale = sympy.Integer(0), sympy.Integer(1)
        for v, n in reversed(list(zip(self.red_var_list, self.red_ranges))):
            flat += v * scale
            scale *= n
        return flat

    def _compute(self, node, idx: tuple, body: Body) -> V:
        val = node.meta["val"]
        if node not in self.members:
            buf = self.buffer(node, is_output=False)
            index = indexing.offset(idx, indexing.strides(val))
            return body.emit("load", val.dtype, buffer=buf.name, index=index)
        if node in self.acc:
            self._check_reduced_index(node, idx)
            return self.reducer.finish(node, body)
        if ops.kind_of(node) is ops.Kind.VIEW:
            src = node.args[0]
            src_idx = indexing.view_index(node, idx, indexing.shape(src.meta["val"]),
                                          indexing.shape(val))
            return self.value(src, src_idx)
        rule = index_rules.RULES.get(ops.info(node.target).scalar)
        if rule is not None:
            return rule(self, node, idx, body)
        recip = row_reciprocal_div(self, node, idx, body)
        if recip is not None:
            return recip
        args = {}
        for name, a in ops.normalized(node).items():
            if isinstance(a, torch.fx.Node):
                a = self.value(a, indexing.broadcast(idx, indexing.shape(a.meta["val"])))
            args[name] = a
        return lower_node(node, args, body, ops.info(node.target).scalar, self.round_results)

    def _check_reduced_index(self, node, idx: tuple) -> None:
        """A reduced value exists only at its own kept index: a consumer reading it at
        another (sum over dim 0, unsqueezed to [n, 1], broadcast over a square [n, n])
        would read the wrong row's value, so the group runs through ATen instead."""
        spec = reduction_spec(node)
        full = spec.full_shape()
        dims = range(len(full)) if spec.keepdim else [d for d in range(len(full)) if d not in spec.dims]
        for got, d in zip(idx, dims):
            want = sympy.Integer(0) if d in spec.dims else self.full_idx[d]
            if full[d] != 1 and got != want and sympy.expand(sympy.sympify(got) - want) != 0:
                raise NotImplementedError(f"brrr: {node.name} is read at {idx}, not at its "
                                          "own kept index (a reduced dim moved)")

    def store(self, node, idx: tuple) -> None:
        val = node.meta["val"]
        body, _ = self.target(node, idx)
        v = body.cast(self.value(node, idx), val.dtype)
        buf = self.buffer(node, is_output=True)
        body.store(buf.name, indexing.offset(idx, indexing.strides(val)), v)


def _store_index(node, full_idx: tuple, dims: tuple) -> tuple:
    """The index at which an output of `node`'s shape is stored, per outer point."""
    shape = indexing.shape(node.meta["val"])
    if len(shape) == len(full_idx):
        if all(shape[d] == 1 for d in dims) and dims:
            return tuple(sympy.Integer(0) if d in dims else i for d, i in enumerate(full_idx))
        return full_idx
    return tuple(i for d, i in enumerate(full_idx) if d not in dims)


def _is_reduced_output(node, domain, dims) -> bool:
    shape = indexing.shape(node.meta["val"])
    return bool(dims) and (len(shape) != len(domain) or all(shape[d] == 1 for d in dims)
                           and any(domain[d] != 1 for d in dims))


def lower_group(group, name: str, use_scratch: bool = False, round_results: bool = True,
                libm: str = "fast") -> Kernel:
    """The Kernel computing `group`'s outputs, loops ordered for its first output.
    `round_results` (Config.low_precision="eager"; the default here): every float16/
    bfloat16 node's value is rounded to its dtype, as eager holds it; without, values stay
    float32 between ops, and only the casts the program wrote and the stores round.
    `libm` (Config.libm): "accurate" marks the transcendental calls that have a
    correctly rounded form (transforms/rounded_libm.py)."""
    domain = [indexing.to_sympy(s) for s in group.domain]
    dims = tuple(group.reduced_dims)
    outer = [d for d in range(len(domain)) if d not in dims]
    loop_vars = [loop_symbol(k) for k in range(len(outer))]
    red_vars = [reduction_symbol(k) for k in range(len(dims))]
    it_o, it_r = iter(loop_vars), iter(red_vars)
    full_idx = tuple(next(it_r) if d in dims else next(it_o) for d in range(len(domain)))
    low = _GroupLowering(group, red_vars, [domain[d] for d in dims])
    low.full_idx = full_idx
    low.use_scratch = use_scratch
    low.round_results = round_results
    for out in group.outputs:            # output buffers in the order the runner allocates
        low.buffer(out, is_output=True)
    _emit_phases(low, group, full_idx, domain, dims)
    buffers = sorted(low.buffers.values(), key=lambda b: (b.is_output, int(b.name.lstrip("inout"))))
    phases = [p for p in low.phases + [low.once, low.columns] if p.body]
    kernel = Kernel(name, [describe_node(n) for n in group.nodes], loop_vars,
                    [domain[d] for d in outer], buffers, phases,
                    reduction_vars=red_vars, reduction_ranges=[domain[d] for d in dims],
                    scratch=list(low.scratch.values()))
    exprs = list(domain) + [s.index for s in kernel.body if s.index is not None]
    kernel.size_vars = free_size_symbols(exprs)
    first_out = group.outputs[0].meta["val"]
    out_strides = indexing.strides(first_out)
    if _is_reduced_output(group.outputs[0], domain, dims) or len(out_strides) != len(domain):
        out_strides = _outer_strides(group, domain, dims)
    else:
        out_strides = [s for d, s in enumerate(out_strides) if d not in dims]
    index_rules.check_clamps(kernel)
    kernel = mark_exact_casts(mark_nonpositive_exps(
        fold_unit_reductions(simplify_loops(kernel, out_strides))))
    low.__dict__.clear()    # a cycle (its reducer): freed now, not by the cycle collector
    if kernel.scratch and reduces_outer_dim(kernel):
        return lower_group(group, name, use_scratch=False,    # the tiled schedule recomputes
                           round_results=round_results, libm=libm)
    return round_libm_calls(kernel) if libm == "accurate" else kernel


def _outer_strides(group, domain, dims):
    """Strides of the kept dims in the first full-shape value the group touches."""
    for n in group.nodes + group.inputs:
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor) and indexing.shape(val) == tuple(domain):
            st = indexing.strides(val)
            return [s for d, s in enumerate(st) if d not in dims]
    return [0] * (len(domain) - len(dims))


def _emit_phases(low: _GroupLowering, group, full_idx, domain, dims) -> None:
    _emit_rows(low, group, full_idx, domain, dims)
    for r in group.across:       # folded after the row's phases, finished once at the end
        x = reduction_spec(r).input
        if indexing.shape(x.meta["val"]) == tuple(domain):
            low.reducer.fold_full(r, full_idx)
        else:
            low.reducer.fold(r, _store_index(x, full_idx, dims), low.bodies[-1])
    for r in group.columns:
        low.reducer.fold_column(r, full_idx)
    low.in_once = True
    for out in group.outputs:
        if out in low.final:
            low.store(out, tuple(sympy.Integer(0) for _ in indexing.shape(out.meta["val"])))
    low.in_once, low.in_columns = False, True
    for out in group.outputs:
        if out in low.col_final:
            low.store(out, _column_index(out, full_idx, dims))
    low.in_columns = False


def _column_index(node, full_idx: tuple, dims: tuple) -> tuple:
    """Where a value of a column fold's shape (kept or dropped outer dims) is stored."""
    if len(indexing.shape(node.meta["val"])) == len(full_idx):
        return tuple(i if d in dims else sympy.Integer(0) for d, i in enumerate(full_idx))
    return tuple(full_idx[d] for d in dims)


def _emit_rows(low: _GroupLowering, group, full_idx, domain, dims) -> None:
    depth = max(low.level.values(), default=0)
    after = low.final | low.col_final
    reductions = [n for n in group.nodes if reduction_spec(n) is not None and n not in after]
    outputs = [out for out in group.outputs if out not in after]
    for out in outputs:
        if _is_reduced_output(out, domain, dims) and low.level[out] == 0:
            low.store(out, _store_index(out, full_idx, dims))
    for k in range(depth + 1):
        low.cur_loop = k
        for r in reductions:
            if low.level[r] == k + 1:
                low.reducer.fold(r, full_idx)
        for out in outputs:
            if not _is_reduced_output(out, domain, dims) and low.level[out] == k:
                low.store(out, _store_index(out, full_idx, dims))
        low.cur_loop = None
        for out in outputs:
            if _is_reduced_output(out, domain, dims) and low.level[out] == k + (1 if dims else 0):
                low.store(out, _store_index(out, full_idx, dims))
