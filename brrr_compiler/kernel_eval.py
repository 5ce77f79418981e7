"""The reference evaluator: runs a Kernel with torch ops, so that tests check the lowering
apart from the printers and the compilers (tests/helpers.py: lowered_vs_eager).

Note on the evaluation. The whole iteration domain is evaluated at once, as tensors over
rows (the outer domain, flattened: R points, the last loop variable fastest) by points
of the reduction domain (flattened: N points). A value of a scalar phase is an [R, 1]
tensor, of a loop phase [R, N]; a `reduce` in a loop phase folds along N into [R, 1]; a
`reduce` in a scalar phase folds across rows into [1, 1], the shape of the `once`
phase's values; a `column_reduce` folds across rows into one accumulator per position,
read back in the `columns` phase, whose values are [1, N]. Loads and stores index flat
buffers, each tensor's memory from its first element (what the compiled kernel gets as
its data pointer), at the statements' sympy indices evaluated on those grids; a scratch
buffer is one row of values per row. Scalar ops run their scalar-op table row's
reference semantics (scalar_ops.py); casts are `.to(dtype)` (a float16/bfloat16 value is
held in its own dtype: rounded, as the IR means it); folds are torch's reductions (max
and min propagate NaN, argmax/argmin take the first extreme, a NaN first). An index out
of bounds at a `bounded` statement raises IndexError, as the runtime does.
"""
from __future__ import annotations

import math
from typing import Sequence

import sympy
import torch

from brrr_compiler import scalar_ops
from brrr_compiler.kernel_ir import ARG_FOLDS, Kernel, Phase, Stmt


def run_kernel(kernel: Kernel, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
               sizes: dict | None = None) -> None:
    """Evaluate `kernel` reading `inputs` (in kernel.inputs order) and writing `outputs`
    (kernel.outputs order) in place, through their memory as the compiled kernel would;
    `sizes` maps each of kernel.size_vars (or its name) to its value."""
    _Evaluation(kernel, inputs, outputs, sizes or {}).run()


def flat(t: torch.Tensor) -> torch.Tensor:
    """`t`'s memory from its first element on, as a 1-d tensor sharing it."""
    n = max(t.untyped_storage().nbytes() // t.element_size() - t.storage_offset(), 0)
    return t.as_strided((n,), (1,))


class _Evaluation:
    def __init__(self, k: Kernel, inputs, outputs, sizes: dict):
        if len(inputs) != len(k.inputs) or len(outputs) != len(k.outputs):
            raise ValueError(f"brrr: {k.name} takes {len(k.inputs)} inputs and "
                             f"{len(k.outputs)} outputs")
        self.k = k
        self.sizes = {str(s): int(v) for s, v in sizes.items()}
        self.buffers = {b.name: flat(t) for b, t in zip(k.inputs + k.outputs,
                                                        list(inputs) + list(outputs))}
        self.rows = self._count(k.ranges)
        self.points = self._count(k.reduction_ranges)
        self.grid = {**self._decode(k.loop_vars, k.ranges, self.rows, 0),
                     **self._decode(k.reduction_vars, k.reduction_ranges, self.points, 1)}
        self.values: dict[str, torch.Tensor] = {}
        self.scratch: dict[str, torch.Tensor] = {}

    def _int(self, e) -> int:
        e = sympy.sympify(e)
        return int(e.xreplace({s: sympy.Integer(self.sizes[s.name]) for s in e.free_symbols}))

    def _count(self, ranges) -> int:
        return math.prod(self._int(r) for r in ranges)

    def _decode(self, vars_, ranges, count: int, axis: int) -> dict:
        """Each variable's value at every point of a flattened domain (last fastest)."""
        flat_index, out, div = torch.arange(count), {}, 1
        for v, r in reversed(list(zip(vars_, ranges))):
            n = self._int(r)
            value = torch.div(flat_index, div, rounding_mode="floor") % max(n, 1)
            out[v.name] = value.reshape((-1, 1) if axis == 0 else (1, -1))
            div *= n
        return out

    def run(self) -> None:
        for phase in self.k.phases:
            shape = (1 if phase.once else self.rows, self.points if phase.loop else 1)
            for s in phase.body:
                self.stmt(s, phase, shape)

    # ---- index expressions -----------------------------------------------------------

    def index(self, e) -> torch.Tensor:
        """A sympy index as an int64 tensor over the grid (its variables broadcast)."""
        e = sympy.sympify(e)
        if e.is_Integer:
            return torch.tensor(int(e)).reshape(1, 1)
        if e.is_Symbol:
            if e.name in self.grid:
                return self.grid[e.name]
            if e.name in self.sizes:
                return torch.tensor(self.sizes[e.name]).reshape(1, 1)
            return self.values[e.name].long()
        parts = [self.index(a) for a in e.args]
        if isinstance(e, sympy.Add):
            return sum(parts[1:], parts[0])
        if isinstance(e, sympy.Mul):
            return math.prod(parts[1:], start=parts[0])
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
            return parts[0] ** int(e.exp)
        if isinstance(e, (sympy.Min, sympy.Max)):
            fold = torch.minimum if isinstance(e, sympy.Min) else torch.maximum
            out = parts[0]
            for p in parts[1:]:
                out = fold(out, p)
            return out
        raise NotImplementedError(f"brrr: the evaluator cannot evaluate index {e}")

    # ---- statements ------------------------------------------------------------------

    def stmt(self, s: Stmt, phase: Phase, shape: tuple) -> None:
        args = [self.values[a] for a in s.args]
        if s.op == "store":
            return self.store(s, args[0], shape)
        if s.op == "load":
            out = self.load(s)
        elif s.op == "const":
            out = torch.tensor(s.value, dtype=s.dtype).reshape(1, 1)
        elif s.op == "index":
            out = self.index(s.index).to(s.dtype)
        elif s.op == "cast":
            out = args[0].to(s.dtype)
        elif s.op == "bounded":
            out = self.bounded(s, args[0])
        elif s.op == "reduce":
            out = fold(s.value, [a.expand(shape) for a in args], 1 if phase.loop else 0)
        elif s.op == "column_reduce":
            out = self.column_fold(s, args[0].expand(shape))
        elif s.op not in scalar_ops.TABLE:
            raise NotImplementedError(f"brrr: the evaluator has no rule for {s.op!r}")
        else:
            out = scalar_ops.row(s.op).ref(*args)
        self.values[s.out] = out if out.dtype == s.dtype else out.to(s.dtype)

    def load(self, s: Stmt) -> torch.Tensor:
        idx = self.index(s.index)
        if s.buffer in self.scratch:
            sc = self.scratch[s.buffer]
            return sc.gather(1, idx.expand(sc.shape[0], -1))
        return self.buffers[s.buffer][idx]

    def store(self, s: Stmt, value: torch.Tensor, shape: tuple) -> None:
        idx = self.index(s.index)
        if s.buffer in {b.name for b in self.k.scratch}:
            sc = self.scratch.setdefault(s.buffer, torch.zeros(
                (self.rows, max(self.points, 1)), dtype=value.dtype))
            idx, value = torch.broadcast_tensors(idx, value)
            sc.scatter_(1, idx.expand(self.rows, -1), value.expand(self.rows, -1))
            return
        buf = self.buffers[s.buffer]
        idx, value = torch.broadcast_tensors(idx, value)
        buf[idx.reshape(-1)] = value.reshape(-1).to(buf.dtype)

    def bounded(self, s: Stmt, x: torch.Tensor) -> torch.Tensor:
        ok = (x >= 0) & (x < self.index(s.index))
        if not bool(ok.all()):
            raise IndexError(f"brrr: {self.k.name} read an index out of bounds")
        return torch.where(ok, x, torch.zeros_like(x))

    def column_fold(self, s: Stmt, x: torch.Tensor) -> torch.Tensor:
        """One sum per position (the statement's index) over all rows, read back at the
        columns phase's points: a [1, N] value."""
        idx = self.index(s.index).expand(1, self.points).reshape(-1)
        acc = torch.zeros(int(idx.max()) + 1 if idx.numel() else 0, dtype=s.dtype)
        acc.index_add_(0, idx, x.to(s.dtype).sum(0))
        return acc[idx].reshape(1, -1)


def fold(kind: str, args: list[torch.Tensor], dim: int) -> torch.Tensor:
    """A reduce statement's fold of `args` (the value, and argmax/argmin's index) along
    `dim`, kept as a dimension of size 1."""
    x = args[0]
    if kind in ("sum", "prod"):
        fn = torch.sum if kind == "sum" else torch.prod
        return fn(x, dim, keepdim=True, dtype=x.dtype)
    if x.dtype is torch.bool and kind in ("max", "min"):
        kind = "any" if kind == "max" else "all"
    if kind in ("any", "all"):
        return getattr(torch, kind)(x.bool(), dim, keepdim=True)
    if kind in ("max", "min"):
        return (torch.amax if kind == "max" else torch.amin)(x, dim, keepdim=True)
    if kind in ARG_FOLDS:
        pos = getattr(torch, kind)(x.to(torch.int8) if x.dtype is torch.bool else x, dim,
                                   keepdim=True)
        return args[1].expand_as(x).gather(dim, pos)
    raise NotImplementedError(f"brrr: the evaluator has no fold {kind!r}")
