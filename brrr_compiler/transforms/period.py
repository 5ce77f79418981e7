"""A pointwise kernel's short trailing dims flattened into one inner loop; the values that
repeat along it (per-channel parameters) are read at their period.

Note on why. A kernel keeps a short innermost dim apart from the one before it where an
input broadcasts along one of them: batch_norm's normalizing pass over (80000, 5, 5)
reads its per-channel mean, rstd, weight and bias at i1 only, so its loops were
[80000, 5] work items of a 5-element inner loop, each loading four parameters first:
1.96 ms of the bfloat16 batch norm's 3.7 (eager's whole batch norm: 3.1), for 8 MB
moved; flattened, 0.38 ms. Here the trailing dims S = [first, ...) whose inputs and
outputs are contiguous across them (flat: index = rest + c * their flat position) become
one loop `j` over P = prod(S) elements; when every flat access also continues across the
dim before them (its coefficient c * P), `rows` consecutive indices of that dim join the
loop too, which then runs rows * P elements. An access that depends on S (the
parameters) reads position (j // stride) % extent of each dim: the printer tables such
values over the loop once per call (codegen/cpp_invariant.py, every=True), so the loop
reads them contiguously. A parameter that also depends on outer dims (x2 of (1, 16, 1,
31) over (8, 16, 16, 31)) gets a table spanning those dims too (table_dims) where that
stays small (MAX_TABLE, TABLE_SHARE): a generated pattern's fused kernel of such a shape,
an erf among its ops, ran its 2,048 rows of 31 bfloat16 values in 96 us (its ops, one
kernel each, in 80); flattened, with a [16][496] table, in 41. The same ops run on the
same elements, so values are bit for bit unchanged. Only where the inner loop covers
less than a cache line (SHORT_ROW) of the tensors it walks: a table load per parameter
per element then costs less than the work item it saves (x * w + b, relu, over (N, 24,
L): bfloat16 L = 8 2.7 -> 1.3 ms, L = 24 1.85 -> 1.15, float32 L = 8 1.5 -> 1.1; float32
L = 16, a full line, no faster, and batch_norm's pass over (4096, 32, 16) float32 ~8%
slower with four tables).
"""
from __future__ import annotations

import dataclasses
import math

import sympy

from brrr_compiler.kernel_ir import Kernel, Stmt
from brrr_compiler.symbolic import static_sizes
from brrr_compiler.transforms.loops import linear_coeff

SHORT_ROW = 64        # bytes: an inner loop over less than a cache line of its tensors
#                       pays per work item more than a table load per element costs
MAX_LOOP = 1024       # rows * P: the tables' extent (each read once per loop, from L1/L2)
MAX_TABLE = 8192      # entries of a table that also spans outer dims (the stack holds it)
TABLE_SHARE = 4       # ... and at most 1/TABLE_SHARE of the kernel's elements to fill
INDEXED = ("load", "store", "index")


@dataclasses.dataclass(frozen=True)
class _Access:
    stmt: Stmt
    coeffs: tuple[int, ...]          # per loop var


def choose(k: Kernel) -> tuple[int, int] | None:
    """(first, rows) for `k`, or None where its inner loop is long enough or the trailing
    dims do not flatten (module note)."""
    sizes = static_sizes(k.ranges) if len(k.loop_vars) >= 2 else None
    if k.is_reduction or sizes is None or 0 in sizes:
        return None
    accesses = _accesses(k)
    if accesses is None or sizes[-1] * _itemsize(k, accesses) >= SHORT_ROW:
        return None
    best = None
    for first in range(len(sizes) - 1, 0, -1):
        period = math.prod(sizes[first:])
        if period > MAX_LOOP:
            break
        if _flattens(accesses, sizes, first):
            rows = _rows(accesses, sizes, first, period)
            if _table_fits(accesses, sizes, first, rows):
                best = (first, rows)
    if best is None or math.prod(sizes[best[0]:]) * best[1] < 2 * sizes[-1]:
        return None
    return best


def periodic(k: Kernel, first: int, rows: int) -> Kernel:
    """`k` over loops [outer..., dim first-1 in blocks of `rows`, j] (module note)."""
    sizes = static_sizes(k.ranges)
    accesses = {id(a.stmt): a for a in _accesses(k)}
    strides = _strides(sizes, first)
    j, a = k.loop_vars[first], k.loop_vars[first - 1]

    def rewrite(s: Stmt) -> Stmt:
        acc = accesses.get(id(s))
        if acc is None:
            return s
        tail, kind = acc.coeffs[first:], _kind(acc, strides, first)
        rest = sympy.expand(s.index).subs({v: 0 for v in k.loop_vars[first - 1:]})
        if kind == "row":
            index = rest + acc.coeffs[first - 1] * a
        elif kind == "flat":
            index = rest + acc.coeffs[first - 1] * rows * a + tail[-1] * j
        else:       # a period of the trailing dims, at the outer dims it reads (rows 1)
            index = rest + acc.coeffs[first - 1] * a + sum(
                c * _position(j, st, n, rows > 1 or d > first)
                for d, (c, st, n) in enumerate(zip(tail, strides, sizes[first:]), first))
        return dataclasses.replace(s, index=index)

    phases = [dataclasses.replace(p, body=[rewrite(s) for s in p.body]) for p in k.phases]
    ranges = [*k.ranges[:first - 1], sympy.Integer(sizes[first - 1] // rows),
              sympy.Integer(rows * math.prod(sizes[first:]))]
    return dataclasses.replace(k, loop_vars=list(k.loop_vars[:first + 1]), ranges=ranges,
                               phases=phases)


def _position(j, stride: int, extent: int, wraps: bool):
    q = sympy.floor(j / stride) if stride > 1 else j
    return sympy.Mod(q, extent) if wraps else q


def _accesses(k: Kernel) -> list[_Access] | None:
    """Every indexed statement with integer coefficients per loop var; None where an
    index is not affine in the loop vars alone (a gather) or an output is read."""
    loop = set(k.loop_vars)
    outputs = {b.name for b in k.outputs}
    out = []
    for s in k.body:
        if s.op not in INDEXED:
            continue
        index = sympy.sympify(s.index)
        if not index.free_symbols <= loop or (s.op == "load" and s.buffer in outputs):
            return None
        coeffs = [linear_coeff(index, v, k.loop_vars) for v in k.loop_vars]
        if any(c is None or not sympy.sympify(c).is_Integer for c in coeffs):
            return None
        out.append(_Access(s, tuple(int(c) for c in coeffs)))
    return out


def _itemsize(k: Kernel, accesses: list[_Access]) -> int:
    """The widest element among the tensors the inner loop walks (not the parameters)."""
    dtypes = {b.name: b.dtype for b in k.buffers}
    return max((dtypes[a.stmt.buffer].itemsize for a in accesses if a.stmt.buffer in dtypes
                and a.coeffs[-1] and any(a.coeffs[:-1])), default=0)


def _strides(sizes: list[int], first: int) -> list[int]:
    return [math.prod(sizes[d + 1:]) for d in range(first, len(sizes))]


def _flat_coeff(tail: tuple[int, ...], strides: list[int]) -> int | None:
    """c where the trailing coefficients are c * the flat strides, c != 0."""
    c = tail[-1]
    return c if c and all(t == c * st for t, st in zip(tail, strides)) else None


def _kind(acc: _Access, strides: list[int], first: int) -> str:
    """"flat" (contiguous across S, continuing an outer dim), "row" (independent of S),
    else "period" (depending on S; legal as a load of S alone: _flattens)."""
    tail = acc.coeffs[first:]
    if _flat_coeff(tail, strides) is not None and any(acc.coeffs[:first]):
        return "flat"
    return "period" if any(tail) else "row"


def _flattens(accesses: list[_Access], sizes: list[int], first: int) -> bool:
    """Every access is flat over S, independent of S, or a period (a load depending on
    S, and maybe on outer dims: table_dims). Stores are flat."""
    strides = _strides(sizes, first)
    for acc in accesses:
        kind, op = _kind(acc, strides, first), acc.stmt.op
        if kind != "flat" and (op == "store" or (kind == "period" and op != "load")):
            return False
    return True


def table_dims(k: Kernel, first: int) -> tuple[int, ...]:
    """The outer dims (before `first`) that `k`'s period loads also read: the tables of
    the flattened kernel span them (transforms/tables.py). A parameter of (1, B, 1, D)
    over (A, B, C, D) with D short: its table is [B][C * D], filled once per call."""
    return tuple(sorted(_period_dims(_accesses(k) or [], static_sizes(k.ranges), first)))


def _period_dims(accesses: list[_Access], sizes: list[int], first: int) -> set[int]:
    strides = _strides(sizes, first)
    return {d for acc in accesses if _kind(acc, strides, first) == "period"
            for d, c in enumerate(acc.coeffs[:first]) if c}


def _table_fits(accesses: list[_Access], sizes: list[int], first: int, rows: int) -> bool:
    """Tables over outer dims stay on the stack and cost a fraction of the kernel to fill."""
    dims = _period_dims(accesses, sizes, first)
    if not dims:
        return True
    entries = rows * math.prod(sizes[first:]) * math.prod(sizes[d] for d in dims)
    return entries <= MAX_TABLE and entries * TABLE_SHARE <= math.prod(sizes)


def _rows(accesses: list[_Access], sizes: list[int], first: int, period: int) -> int:
    """How many indices of dim first-1 one loop takes: the largest divisor of its extent
    keeping the loop within MAX_LOOP, where every flat access continues across it and no
    access reads it apart from S; else 1."""
    strides = _strides(sizes, first)
    for acc in accesses:
        a = acc.coeffs[first - 1]
        if a != (acc.coeffs[-1] * period if _kind(acc, strides, first) == "flat" else 0):
            return 1
    n = sizes[first - 1]
    return max(r for r in range(1, MAX_LOOP // period + 1) if n % r == 0)
