"""The kernel-IR verifier: the invariants every reader of a Kernel (the printers, the
byte/flop counter) relies on, checked on the IR itself so a lowering bug shows up as a
named broken rule instead of as C++ that fails to build or computes something else.

Rules:
- loops: one range per loop variable and per reduction variable;
- buffers: names unique over inputs, outputs and scratch; loads read inputs or scratch,
  stores write outputs or scratch (scratch only inside loop phases);
- SSA: every value is defined once and before its use, and is visible where it is used:
  a scalar phase's values in every later non-`once` phase, a loop phase's only in that
  phase except its `reduce` results (accumulators), which later phases read; a `once`
  phase (at most one, not a loop) reads the folds across rows and its own values; a
  `columns` phase (a once phase that is a loop, at most one, last) reads the column
  folds (`column_reduce`, only in per-row loop phases) and its own values, and indexes
  no loop variable (it runs once, after every row);
- ops: every op is a row of the scalar-op table (scalar_ops.py), with its arity and
  operands and result of the dtypes its result rule names, or a structural one with its
  own shape (load/const/index: no args; store/cast/bounded/column_reduce: one; reduce:
  one, or two for argmax/argmin's value and index) and a known reduction kind;
- indices: only loop and reduction variables, size variables and SSA values used as
  indices (gather's bounded index); a scalar phase's index has no reduction variable.
"""
from __future__ import annotations

import sympy

from brrr_compiler import scalar_ops
from brrr_compiler.kernel_ir import ARG_FOLDS, REDUCTIONS, STRUCTURAL, Kernel, Phase, Stmt

_NO_ARGS = frozenset({"load", "const", "index"})
_ONE_ARG = frozenset({"store", "cast", "bounded", "column_reduce"})


class KernelIRError(ValueError):
    """A Kernel that breaks the IR's rules; the message lists every broken rule."""


def verify(kernel: Kernel) -> Kernel:
    """`kernel` if it keeps every rule above, else KernelIRError naming each break."""
    problems = _loops(kernel) + _buffers(kernel) + _phase_order(kernel)
    visible: set[str] = set()            # values later phases may read
    across: set[str] = set()             # folds across rows: read by the once phase only
    columns: set[str] = set()            # column folds: read by the columns phase only
    defined: set[str] = set()
    dtypes = {s.out: s.dtype for s in kernel.body if s.out is not None}
    for n, phase in enumerate(kernel.phases):
        seen = set(columns if phase.loop else across) if phase.once else set(visible)
        for stmt in phase.body:
            where = f"phase {n} `{stmt.out or stmt.op}`"
            problems += [f"{where}: {p}" for p in _stmt(kernel, phase, stmt, seen, dtypes)]
            if stmt.out is not None:
                if stmt.out in defined:
                    problems.append(f"{where}: {stmt.out} is defined twice")
                defined.add(stmt.out)
                seen.add(stmt.out)
        visible |= _exported(phase, seen)
        across |= {s.out for s in phase.body if s.op == "reduce" and not phase.loop}
        columns |= {s.out for s in phase.body if s.op == "column_reduce"}
    if problems:
        raise KernelIRError(f"kernel {kernel.name}:\n  " + "\n  ".join(problems))
    return kernel


def _loops(k: Kernel) -> list[str]:
    problems = []
    if len(k.loop_vars) != len(k.ranges):
        problems.append(f"{len(k.loop_vars)} loop variables, {len(k.ranges)} ranges")
    if len(k.reduction_vars) != len(k.reduction_ranges):
        problems.append(f"{len(k.reduction_vars)} reduction variables, "
                        f"{len(k.reduction_ranges)} ranges")
    return problems


def _buffers(k: Kernel) -> list[str]:
    names = [b.name for b in k.buffers + k.scratch]
    return [f"buffer name {n} used twice" for n in sorted({n for n in names if names.count(n) > 1})]


def _phase_order(k: Kernel) -> list[str]:
    once = [n for n, p in enumerate(k.phases) if p.once and not p.loop]
    cols = [n for n, p in enumerate(k.phases) if p.once and p.loop]
    tail = list(range(len(k.phases) - len(once) - len(cols), len(k.phases)))
    if len(once) > 1 or len(cols) > 1 or once + cols != tail:
        return [f"once phases at {once}, columns phases at {cols}: at most one each, "
                "last, the columns phase after the once phase"]
    return []


def _exported(phase: Phase, seen: set[str]) -> set[str]:
    if phase.once:
        return set()
    if phase.loop:
        return {s.out for s in phase.body if s.op == "reduce"}
    return {s.out for s in phase.body if s.out is not None and s.op != "reduce"}


def _stmt(k: Kernel, phase: Phase, s: Stmt, seen: set[str], dtypes: dict) -> list[str]:
    problems = _shape(s) or _dtypes(s, dtypes)
    problems += [f"reads {a} where it is not visible" for a in s.args if a not in seen]
    if s.op == "load" and s.buffer not in _names(k.inputs + k.scratch):
        problems.append(f"loads {s.buffer}, not an input or scratch buffer")
    if s.op == "store" and s.buffer not in _names(k.outputs + k.scratch):
        problems.append(f"stores to {s.buffer}, not an output or scratch buffer")
    if s.buffer in _names(k.scratch) and not phase.per_row_loop:
        problems.append(f"scratch {s.buffer} used outside a loop phase")
    if s.op == "column_reduce" and (not phase.per_row_loop or s.value != "sum"):
        problems.append(f"column_reduce_{s.value} outside a per-row loop phase, or not a sum")
    if s.index is not None:
        problems += _index(k, phase, s.index, seen)
    return problems


def _shape(s: Stmt) -> list[str]:
    if s.op == "reduce":
        if s.value not in REDUCTIONS:
            return [f"unknown reduction {s.value!r}"]
        want = 2 if s.value in ARG_FOLDS else 1
        return [] if len(s.args) == want else [f"reduce_{s.value} takes {want} args"]
    if s.op in STRUCTURAL:
        want = 0 if s.op in _NO_ARGS else 1 if s.op in _ONE_ARG else None
        bad = want is not None and len(s.args) != want
        return [f"{s.op} takes {want} args, has {len(s.args)}"] if bad else []
    if s.op not in scalar_ops.TABLE:
        return [f"unknown op {s.op!r}"]
    want = scalar_ops.arity(s.op)
    return [] if len(s.args) == want else [f"{s.op} takes {want} args, has {len(s.args)}"]


def _dtypes(s: Stmt, dtypes: dict) -> list[str]:
    """A scalar op's operands and result keep its row's result-dtype rule."""
    if s.op in STRUCTURAL or any(a not in dtypes for a in s.args):
        return []
    args = [dtypes[a] for a in s.args]
    if scalar_ops.row(s.op).result_dtype(args) == s.dtype:
        return []
    shown = ", ".join(str(d).removeprefix("torch.") for d in args)
    return [f"{s.op}({shown}) is {str(s.dtype).removeprefix('torch.')}, against its "
            f"rule ({scalar_ops.row(s.op).result})"]


def _index(k: Kernel, phase: Phase, index, seen: set[str]) -> list[str]:
    allowed = set(k.size_vars) | (set() if phase.once and phase.loop else set(k.loop_vars))
    if phase.loop:
        allowed |= set(k.reduction_vars)
    free = sympy.sympify(index).free_symbols
    stray = sorted(str(s) for s in free if s not in allowed and s.name not in seen)
    return [f"index {index} uses {', '.join(stray)}"] if stray else []


def _names(buffers) -> set[str]:
    return {b.name for b in buffers}
