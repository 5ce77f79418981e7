"""KernelStats: what one kernel must compute and move, independent of any machine.

from_kernel.py counts it from a kernel IR and its schedule (what codegen prints; the
cost policy counts a candidate group by lowering it). It counts
  - flops: flop-equivalents of the cheap ops (op table weights: add 1, div 4, ...),
  - transcendentals: evaluations of exp-class functions (an op costing k * TRANSCENDENTAL
    flop-equivalents counts k), each keyed by the dtype the arithmetic runs in,
  - bytes read (each input buffer once, at the extent the kernel touches: a broadcast
    operand at its own size) and bytes written,
  - re-read bytes: a later loop phase of a reduction kernel reading a row again, and the
    bytes one row of those buffers occupies (whether the re-read hits the cache),
  - scattered bytes: a column walk's transposed stores, a cache line per element, and
    the lines one work item spans (whether the next work item finds them cached),
  - transposed bytes: the operands a tiled kernel stages through block transposes
    (each dense once, and slower than a dense stream: DeviceSpec.transpose_cost).
Missing information (a symbolic size with no hint, an op the table does not price) raises
CostModelError; a count is never silently zero.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import sympy
import torch

from brrr_compiler import ops
from brrr_compiler.cost.device import dtype_key


class CostModelError(Exception):
    """The cost model lacks a number it needs (unknown op cost, size, dtype)."""


class KernelNotLowered(CostModelError):
    """The group would not lower to a kernel: its ops would run through ATen."""


@dataclass
class KernelStats:
    points: int                    # iteration points: rows * reduced extent
    rows: int                      # outer (parallel) points; == points without reductions
    flops: dict = field(default_factory=dict)      # dtype key -> flop-equivalents (cheap ops)
    special: dict = field(default_factory=dict)    # (dtype key, op) -> evaluations of each
    #   transcendental-class op ("exp", "erf", ...) and reduce fold ("reduce_sum", ...): a
    #   device may have measured its own rate for them
    bytes_read: int = 0
    bytes_written: int = 0
    reread_bytes: int = 0          # loop phases re-reading rows already read once
    reread_row_bytes: int = 0      # bytes of one row of the re-read buffers
    scattered_bytes: int = 0       # a column walk's stores stepping along its columns:
    #                                the lines they move beyond their footprint, paid when
    scattered_span: int = 0        # the lines one work item touches (bytes) outlast a core's
    #                                L2 before the next work item reuses them
    gathered_bytes: int = 0        # a column walk's loads strided along both its columns and
    #                                the reduced dim: a line per element in each phase
    transposed_bytes: int = 0      # of bytes_read and bytes_written: operands a tiled kernel
    #                                moves through block transposes
    forks: bool | None = None      # the schedule's word on running on several threads
    #                                (None: sizes known only at run time, or not a CPU kernel)

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def transcendentals(self) -> dict:
        """dtype key -> exp-class evaluations (an op costing k * TRANSCENDENTAL counts k)."""
        out: dict = {}
        for (key, op), count in self.special.items():
            if not op.startswith(REDUCE):
                out[key] = out.get(key, 0) + count * special_cost(op) / ops.TRANSCENDENTAL
        return out

    @property
    def total_flops(self) -> float:
        """All work in flop-equivalents (each op at its op-table weight)."""
        return sum(self.flops.values()) + sum(count * special_cost(op) for (_, op), count
                                              in self.special.items())

    def add_op(self, op: str, dtype: torch.dtype, count: int, reduce: bool = False,
               scalar: bool = False, columns: bool = False, chained: bool = False) -> None:
        """Count `count` evaluations of scalar op (or, with `reduce`, reduce kind) `op`;
        `scalar`: in a loop the C++ compiler does not vectorize (see SCALAR_FOLDS);
        `columns`: a fold of the column schedule (vectorized across columns); `chained`:
        a transcendental of another's result (from_kernel._chained)."""
        cost = op_cost(op, reduce)
        key = dtype_key(dtype)
        if reduce or cost >= ops.TRANSCENDENTAL:
            name = REDUCE + op + (COLUMNS if columns else "") if reduce else \
                op + (SCALAR if scalar else CHAINED if chained else "")
            self.special[(key, name)] = self.special.get((key, name), 0) + count
        elif cost > 0:
            self.flops[key] = self.flops.get(key, 0) + count * cost

    def add_flops(self, cost: float, dtype: torch.dtype, count: int) -> None:
        """Cheap work given only by its cost (an FX node the lowering expands)."""
        if cost >= ops.TRANSCENDENTAL:
            raise CostModelError(f"brrr: a cost of {cost} flop-equivalents needs an op name")
        if cost > 0:
            key = dtype_key(dtype)
            self.flops[key] = self.flops.get(key, 0) + count * cost


REDUCE = "reduce_"
SCALAR = "@scalar"
COLUMNS = "@columns"
CHAINED = "@chained"
# a row-schedule loop phase folding these does not vectorize (argmax's first-index rule;
# max and min fold under `omp simd reduction`, their NaN flag an int): transcendentals
# in it run at scalar speed
SCALAR_FOLDS = frozenset({"argmax", "argmin"})


def special_cost(name: str) -> float:
    """Op-table flop-equivalents of a KernelStats.special entry."""
    if name.startswith(REDUCE):
        return op_cost(name[len(REDUCE):].removesuffix(COLUMNS), True)
    return op_cost(function_name(name))


def function_name(name: str) -> str:
    """The op of a transcendental's KernelStats.special entry, without its loop's mark."""
    return name.removesuffix(SCALAR).removesuffix(CHAINED)


@functools.cache
def op_cost(op: str, reduce: bool = False) -> float:
    try:
        return ops.scalar_cost(op, reduce)
    except KeyError as err:
        raise CostModelError(str(err)) from None


def itemsize(dtype) -> int:
    size = getattr(dtype, "itemsize", None)
    if not isinstance(dtype, torch.dtype) or not size:
        raise CostModelError(f"brrr: unknown element size for dtype {dtype!r}")
    return size


def as_int(expr, hints: dict | None = None) -> int:
    """A size as an int: a number, a SymInt with a hint, or a sympy expression whose
    symbols `hints` maps to numbers."""
    if isinstance(expr, torch.SymInt):
        hint = expr.node.hint
        if hint is None:
            raise CostModelError(f"brrr: symbolic size {expr} has no hint")
        return int(hint)
    e = sympy.sympify(expr)
    if not e.is_number and hints:
        e = e.xreplace({s: sympy.Integer(hints[s]) for s in e.free_symbols if s in hints})
    if not e.is_number:
        raise CostModelError(f"brrr: symbolic size {expr} has no hint")
    return int(e)


def size_hints(vals) -> dict:
    """symbol -> hint for every backed symbol of the shape environments of the FakeTensors
    `vals`. The whole environment, not only the symbols `vals` mention: a kernel's sizes
    name symbols its stored values do not have (x.sum(0) stores (s1,) and loops over s0)."""
    hints, envs = {}, set()
    for v in vals:
        if not isinstance(v, torch.Tensor):
            continue
        for s in list(v.shape) + list(v.stride()):
            if isinstance(s, torch.SymInt) and id(s.node.shape_env) not in envs:
                envs.add(id(s.node.shape_env))
                hints.update((sym, int(val)) for sym, val in
                             _backed_values(s.node.shape_env).items()
                             if isinstance(val, (int, sympy.Integer)))     # not SymFloats
    return hints


def _backed_values(shape_env) -> dict:
    """symbol -> example value (torch renamed var_to_val to backed_var_to_val)."""
    env = getattr(shape_env, "backed_var_to_val", None)
    return env if env is not None else getattr(shape_env, "var_to_val", {})


def prod(values) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out
