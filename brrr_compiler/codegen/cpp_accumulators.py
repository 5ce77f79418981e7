"""C++ accumulators of reductions: their initial values, updates and C types.

A reduction `r` (a `reduce` statement) is folded into named partials: `c_<r>` per chunk
(one per simd lane inside the chunk's loop), `sp_<r>[t]` per thread, `acc_<r>` per row,
with `cn_`/`spn_`/`nan_` flags for max/min (OpenMP's max/min drop NaN; torch propagates
it) and `ci_`/`spi_`/`ai_` indices for argmax/argmin (the first extreme and the first NaN,
as eager). float32 sums add in float inside a chunk and in double beyond it, except
short ones (`short`: a row or column of fewer than SHORT values), which add in double
throughout. A short float partial would add its values one after another (too few for a
partial per vector lane), where eager's sums keep four interleaved partials: the mean of
8 equal values came out an ulp off where eager's is exact, and (x - mean) * rsqrt(var +
1e-5) made that 316 ulps. In double a sum of fewer than 2^29 float values is exact.

A sum of a value that is the same all along the innermost reduced dim (an input expanded
along it) adds in double in the lanes too (`invariant`): gcc turns the simd loop over a
loop-invariant summand into scalar adds one after another, and a mean over 64 copies of
one float came out 12 ulp off, 3x eager's error (fuzz seed 25873). Those loops run no
vector adds either way, so double costs nothing there.

A float32 row sum whose result goes on into a sum across rows (a full sum reached
through rows: `((x - mean) * rstd).sum()`) adds in double in the lanes too (`into_total`),
unless its summand has a known sign. Eager materializes such a tensor and sums it whole,
in a cascade whose error stays near the ulp of the values; brrr's float lanes erred by
about sqrt(32) ulp of the running partial per row, and where the rows' values cancel
(each normalized row sums to 0) those errors are the whole result: 5x eager's on
213,824 values (fuzz seed 51660). A summand of one sign (the exps of a cross entropy's
logsumexp, squares) cannot cancel, so its lanes keep full-width float vectors.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.kernel_ir import ARG_FOLDS, Kernel, Stmt


def init_value(kind: str, ct: str, dtype: torch.dtype) -> str:
    if kind == "sum":
        return f"({ct})0"
    if kind == "prod":
        return f"({ct})1"
    if kind in ("any", "all"):
        return "0" if kind == "any" else "1"
    low = kind in ("max", "argmax")
    if dtype.is_floating_point:
        return f"({'-' if low else ''}({ct})__builtin_inf())"
    if dtype is torch.bool:
        return "false" if low else "true"
    info = torch.iinfo(dtype)
    return f"(({ct}){info.min if low else info.max}LL)" if info.min > -(2**63) or not low \
        else "(-INT64_C(9223372036854775807) - 1)"


# A row walk's segments hold at most CHUNK elements (cpp_reduce.py, whose module note
# has why; cpp_online.py walks in them too)
CHUNK = 1024
CLAUSE = {"sum": "+", "prod": "*", "max": "max", "min": "min", "any": "|", "all": "&"}


def update(kind: str, acc: str, x: str) -> str:
    return {"sum": f"{acc} += {x};", "prod": f"{acc} *= {x};",
            "max": f"{acc} = {x} > {acc} ? {x} : {acc};",
            "min": f"{acc} = {x} < {acc} ? {x} : {acc};",
            "any": f"{acc} |= (int){x};", "all": f"{acc} &= (int){x};"}[kind]


def arg_update(kind: str, acc: str, idx: str, x: str, i: str) -> str:
    better = ">" if kind == "argmax" else "<"
    return f"if (!({acc} != {acc}) && ({x} {better} {acc} || {x} != {x})) {{ {acc} = {x}; {idx} = {i}; }}"


SHORT = 32    # fewer values than two float vectors of AVX-512 lanes (module note)


def is_short(extent) -> bool:
    """A reduced extent known to hold fewer than SHORT values."""
    e = sympy.sympify(extent)
    return bool(e.is_Integer and int(e) < SHORT)


# A column (an outer reduced dim) of at most this many rows adds in float, in order: for
# 2 or 3 rows that is what eager computes in every layout (its interleaved partials hold
# one row each), bit for bit, and the double lanes of a short column cost its kernel up
# to 1.8x ((2000, 3, 128).sum(1)). From 4 rows on, eager's order depends on the kept inner
# dim; two orders are known (benchmarks/results/notes.md, "Float sums over short
# columns"), and where neither applies a short column adds in double (exact).
EAGER_IN_ORDER_COLUMN = 3
# Eager adds the columns of its kept inner dim's whole groups of EAGER_CHUNK_WIDTH in
# float in chunks of EAGER_CHUNK_ROWS rows, in order, and the chunks' totals in order: the
# columns schedule's blocks do the same for a short column (at most two blocks, whose
# double total rounds as their float sum; cpp_column_order.py), bit for bit at 4-31 rows
# over 32-2048 columns on the AMD EPYC VM. The double tile arrays took a variance over
# the middle dim of (512, 16, 128) ~2x the float kernel's time.
EAGER_CHUNK_WIDTH = 32
EAGER_CHUNK_ROWS = 16
# The columns past the last whole group (all of them under EAGER_CHUNK_WIDTH) eager adds
# in PARTIALS interleaved partials (`eager_interleaved`), whose mean of 8 or 16 equal
# values is exact: column lanes (cpp_row_lanes.py) and the columns schedule
# (cpp_column_order.py) add so too, bit for bit at 4-31 rows over 8-31 columns and past
# the groups of 33-200 columns.
PARTIALS = 4


def adds_in_order(column) -> bool:
    """A column known to be short enough that eager adds it in float, in order."""
    e = sympy.sympify(column)
    return bool(e.is_Integer and int(e) <= EAGER_IN_ORDER_COLUMN)


def eager_interleaved(n: int) -> list[int]:
    """The partial each of a column's n values adds into, in eager's interleaved order:
    the first n // PARTIALS * PARTIALS values round-robin, the rest into the first; the
    partials are then added in order."""
    whole = n // PARTIALS * PARTIALS
    return [e % PARTIALS if e < whole else 0 for e in range(n)]


class Accumulators:
    """Declarations, folds and results of a kernel's reductions' partials."""

    def __init__(self, ctype: dict, arg_dtype: dict, short: bool = False,
                 double_lanes: frozenset = frozenset()):
        self.ctype, self.arg_dtype, self.short = ctype, arg_dtype, short
        # sums that add in double in the lanes: `invariant` and `into_total` (module note)
        self.double_lanes = double_lanes

    def partials(self, r: Stmt, indent: str, nt: int) -> list[str]:
        """Per-thread partial results sp_*[t] (and NaN flags, arg indices), initialised."""
        dt = self.arg_dtype[r.out] if r.value in ARG_FOLDS else r.dtype
        ct = self.total_ctype(r) or self.ctype[dt]
        decl, init = [f"{ct} sp_{r.out}[{nt}];"], [f"sp_{r.out}[t] = {init_value(r.value, ct, dt)};"]
        if r.value in ("max", "min"):
            decl.append(f"int spn_{r.out}[{nt}];")
            init.append(f"spn_{r.out}[t] = 0;")
        if r.value in ARG_FOLDS:
            decl.append(f"int64_t spi_{r.out}[{nt}];")
            init.append(f"spi_{r.out}[t] = 0;")
        return ([indent + d for d in decl] + [f"{indent}for (int t = 0; t < {nt}; ++t) {{"]
                + [f"{indent}  {i}" for i in init] + [f"{indent}}}"])

    def total_ctype(self, r: Stmt, lanes: bool = False) -> str | None:
        """float32 sums: the simd lanes of one chunk (at most CHUNK / lanes elements each)
        add in float; chunk totals, thread partials and row totals in double. A 10M-
        element sum then stays within a few ulp of the exact value, and the exp-and-sum
        loop of softmax keeps full-width float vectors (double lanes cost it ~12%).
        Short sums add in double in the lanes too (the module note)."""
        if r.value == "sum" and r.dtype is torch.float32 and \
                (self.short or not lanes or r.out in self.double_lanes):
            return "double"
        if r.value in ("any", "all"):
            return "int"          # int, not bool: bool accumulators stop gcc vectorizing
        return None

    def float_lanes_sum(self, r: Stmt) -> bool:
        """A float32 sum whose simd lanes add in float (cpp_reduce.SUM_CHUNK): also the one
        kind that adds a short column in eager's order (cpp_column_order.py,
        cpp_row_lanes._slots)."""
        return r.value == "sum" and r.dtype is torch.float32 and self.total_ctype(r, True) is None

    def decls(self, r: Stmt, indent: str, acc: str, nan: str, idx: str,
              lanes: bool = False) -> list[str]:
        dt = self.arg_dtype[r.out] if r.value in ARG_FOLDS else r.dtype
        ct = self.total_ctype(r, lanes) or self.ctype[dt]
        lines = [f"{indent}{ct} {acc}{r.out} = {init_value(r.value, ct, dt)};"]
        if r.value in ("max", "min"):
            lines.append(f"{indent}int {nan}{r.out} = 0;   // int, not bool: a bool flag stops gcc vectorizing")
        if r.value in ARG_FOLDS:
            lines.append(f"{indent}int64_t {idx}{r.out} = 0;")
        return lines

    def combine(self, r: Stmt, indent: str, c: str, cn: str, ci: str, sub: str = "") -> list[str]:
        """Fold a partial (c_*, or per-thread sp_*[t]) into the total acc_*."""
        part, pidx, pnan = f"{c}{r.out}{sub}", f"{ci}{r.out}{sub}", f"{cn}{r.out}{sub}"
        if r.value in ARG_FOLDS:
            return [indent + arg_update(r.value, f"acc_{r.out}", f"ai_{r.out}", part, pidx)]
        lines = [indent + update(r.value, f"acc_{r.out}", part)]
        if r.value in ("max", "min"):
            lines.append(f"{indent}nan_{r.out} |= {pnan};")
        return lines

    def finish(self, r: Stmt) -> str:
        ct = self.ctype[r.dtype]
        if r.value in ARG_FOLDS:
            return f"const int64_t {r.out} = ai_{r.out};"
        if r.value in ("max", "min"):
            return f"const {ct} {r.out} = nan_{r.out} ? ({ct})__builtin_nan(\"\") : acc_{r.out};"
        return f"const {ct} {r.out} = ({ct})acc_{r.out};"


def invariant_sums(stmts: list[Stmt], var) -> frozenset:
    """The sums in `stmts` whose summand does not depend on the loop variable `var`."""
    varying = set()
    for s in stmts:
        own = s.index is not None and var in sympy.sympify(s.index).free_symbols
        if s.out and (own or any(a in varying for a in s.args)):
            varying.add(s.out)
    return frozenset(s.out for s in stmts if s.op == "reduce" and s.value == "sum"
                     and s.args and s.args[0] not in varying)


def signed_sums(k: Kernel, signed: frozenset) -> frozenset:
    """The sums whose summand has a known sign (`signed`: transforms.signs.known_signs of
    `k`): they cannot cancel, so their float lanes keep long chunks (cpp_reduce.SUM_CHUNK)."""
    return frozenset(s.out for s in k.body if s.op == "reduce" and s.value == "sum"
                     and s.args and s.args[0] in signed)


def sums_into_totals(k: Kernel, signed: frozenset) -> frozenset:
    """float32 row sums of a summand of unknown sign (not in `signed`, as above) whose
    result reaches a float32 sum across rows (module note)."""
    defs = {s.out: s for s in k.body if s.out is not None}
    row_sums = {s.out for p in k.phases if p.per_row_loop for s in p.body
                if s.op == "reduce" and s.value == "sum" and s.dtype is torch.float32}
    across = [s for p in k.phases if not p.loop and not p.once for s in p.body
              if s.op == "reduce" and s.value == "sum" and s.dtype is torch.float32]
    if not row_sums or not across:
        return frozenset()
    found, seen, todo = set(), set(), [a for s in across for a in s.args[:1]]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        if name in row_sums:
            found.add(name)
        elif defs[name].op != "reduce":
            todo += defs[name].args
    return frozenset(r for r in found if defs[r].args[0] not in signed)
