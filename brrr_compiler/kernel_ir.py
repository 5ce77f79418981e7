"""The kernel IR: loops over an iteration domain with an SSA body of scalar ops.

A Kernel reads and writes flat buffers at sympy index expressions over its loop
variables (sizes and strides, broadcasts and views already folded in). For each point
of its outer domain (`loop_vars`) it runs its phases in order: a scalar phase runs its
statements once; a loop phase runs them for every point of the reduction domain
(`reduction_vars`), and its `reduce` statements fold a value into an accumulator whose
name is visible to later phases. A `reduce` in a scalar phase folds a per-row value
across all rows instead; its result exists only in the kernel's last phase, a `once`
phase that runs a single time after every row is done (cross-entropy's mean over the
batch). A `column_reduce` in a loop phase folds a value across rows too, one
accumulator per point of the reduction domain (its `index`, a flat position there):
its result exists only in the kernel's `columns` phase, a once phase that is a loop
(runs one time after every row, over the reduction domain) and computes and stores what
depends on it (LayerNorm's weight and bias gradients beside its row kernel). A
pointwise kernel is one scalar phase and no reduction domain. Statements are SSA, one
value each; a statement that is not structural (STRUCTURAL) is a scalar op of the
scalar-op table (scalar_ops.py). Several readers walk the same IR: the C++ and Triton
printers, the byte/flop counter, the verifier (kernel_verify.py), which states these
rules as checks, and the reference evaluator (kernel_eval.py), which runs a kernel with
torch ops.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import sympy
import torch

# statements that are not scalar ops (scalar ops, their arity and meaning: scalar_ops.py)
STRUCTURAL = frozenset({"load", "store", "const", "cast", "reduce", "index", "bounded",
                        "column_reduce"})
# "bounded": out = args[0] if 0 <= args[0] < index (an extent) else 0, and the kernel
# reports an out-of-bounds error to the runtime (eager raises for such indices)
# reduce kinds: Stmt(op="reduce", value=kind, args=(x,)); argmax/argmin fold (value, index)
# column_reduce: Stmt(op="column_reduce", value="sum", args=(x,), index=position in a row)
REDUCTIONS = frozenset({"sum", "prod", "max", "min", "any", "all", "argmax", "argmin"})
ARG_FOLDS = ("argmax", "argmin")    # the folds that keep an index beside the value


@dataclass(frozen=True)
class Buffer:
    """A kernel argument: a flat array of `dtype`, read (input) or written (output)."""
    name: str
    dtype: torch.dtype
    is_output: bool
    origin: str            # the FX node whose tensor this is


@dataclass(frozen=True)
class Stmt:
    """`out = op(args)`; loads/stores name a buffer and an index; const holds `value`."""
    out: Optional[str]
    dtype: torch.dtype
    op: str
    args: tuple[str, ...] = ()
    buffer: Optional[str] = None
    index: Optional[sympy.Expr] = None
    value: Any = None


@dataclass
class Phase:
    loop: bool                         # True: runs once per point of the reduction domain
    body: list[Stmt]
    once: bool = False                 # runs one time, after all rows; a loop: over the
    #                                    reduction domain (the columns phase)

    @property
    def per_row_loop(self) -> bool:
        """A loop phase run for every row (not the columns phase)."""
        return self.loop and not self.once


@dataclass
class Kernel:
    name: str
    origins: list[str]                 # "name = aten.op(args)" lines of the fused nodes
    loop_vars: list[sympy.Symbol]      # outer (parallel) domain, outermost first
    ranges: list[sympy.Expr]           # extent of each loop variable
    buffers: list[Buffer]
    phases: list[Phase]
    size_vars: list[sympy.Symbol] = field(default_factory=list)   # runtime size arguments
    reduction_vars: list[sympy.Symbol] = field(default_factory=list)
    reduction_ranges: list[sympy.Expr] = field(default_factory=list)
    # per-row scratch arrays (one element per point of the reduction domain, private to
    # the thread working on the row): an expensive value computed in one loop phase is
    # stored there and re-read by later loop phases instead of being recomputed
    scratch: list[Buffer] = field(default_factory=list)
    # buffers the runner may pass one tensor for (an input and the output written back
    # into it, stored in place: runtime/inplace.py): printed without __restrict
    may_alias: frozenset = frozenset()

    @property
    def body(self) -> list[Stmt]:
        """All statements, phase after phase."""
        return [s for p in self.phases for s in p.body]

    @property
    def checks_bounds(self) -> bool:
        return any(s.op == "bounded" for s in self.body)

    @property
    def folds_across(self) -> bool:
        """Does the kernel fold values across rows into single values (and end with a
        scalar `once` phase)?"""
        return any(p.once and not p.loop for p in self.phases)

    @property
    def folds_columns(self) -> bool:
        """Does the kernel fold values across rows per column (and end with a `columns`
        phase)?"""
        return any(p.once and p.loop for p in self.phases)

    @property
    def is_reduction(self) -> bool:
        return any(p.loop for p in self.phases)

    def all_vars(self) -> list[sympy.Symbol]:
        return list(self.loop_vars) + list(self.reduction_vars)

    @property
    def inputs(self) -> list[Buffer]:
        return [b for b in self.buffers if not b.is_output]

    @property
    def outputs(self) -> list[Buffer]:
        return [b for b in self.buffers if b.is_output]

    def numel(self) -> sympy.Expr:
        return sympy.Mul(*self.ranges) if self.ranges else sympy.Integer(1)

    def accesses(self) -> list[Stmt]:
        """Statements with an index expression (loads, stores, index values)."""
        return [s for s in self.body if s.index is not None]

    def __str__(self) -> str:
        loops = ", ".join(f"{v} < {r}" for v, r in zip(self.loop_vars, self.ranges))
        red = ", ".join(f"{v} < {r}" for v, r in zip(self.reduction_vars, self.reduction_ranges))
        lines = [f"kernel {self.name} over [{loops}]" + (f" reducing [{red}]" if red else "")]
        for p in self.phases:
            lines.append("  columns:" if p.loop and p.once else "  loop:" if p.loop
                         else "  once:" if p.once else "  scalar:")
            lines += ["    " + format_stmt(s) for s in p.body]
        return "\n".join(lines)


def format_stmt(s: Stmt) -> str:
    dt = str(s.dtype).replace("torch.", "")
    if s.op == "load":
        return f"{s.out}: {dt} = load {s.buffer}[{s.index}]"
    if s.op == "store":
        return f"store {s.buffer}[{s.index}] = {s.args[0]}"
    if s.op == "const":
        return f"{s.out}: {dt} = const {s.value!r}"
    if s.op == "index":
        return f"{s.out}: {dt} = index {s.index}"
    if s.op == "bounded":
        return f"{s.out}: {dt} = bounded({s.args[0]}, {s.index})"
    if s.op == "reduce":
        return f"{s.out}: {dt} = reduce_{s.value}({', '.join(s.args)})"
    if s.op == "column_reduce":
        return f"{s.out}: {dt} = column_{s.value}[{s.index}]({s.args[0]})"
    return f"{s.out}: {dt} = {s.op}({', '.join(s.args)})"


def loop_symbol(i: int) -> sympy.Symbol:
    return sympy.Symbol(f"i{i}", integer=True, nonnegative=True)


def reduction_symbol(i: int) -> sympy.Symbol:
    return sympy.Symbol(f"r{i}", integer=True, nonnegative=True)
