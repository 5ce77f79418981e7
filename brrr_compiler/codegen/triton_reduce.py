"""Triton reduction kernels: XBLOCK rows per program, phases as in the kernel IR.

Per program, `xindex` is an [XBLOCK, 1] column of rows and `rindex` a [1, RBLOCK] row of
reduced points. Scalar phases are straight-line code over [XBLOCK, 1] values. A loop
phase is, in a persistent kernel, straight-line code over the whole row (RBLOCK >= the
reduced extent, masked by `rmask`), each `reduce` one `tl.reduce` along axis 1;
in a looped kernel, a for-loop over RBLOCK-wide chunks updating [XBLOCK, RBLOCK]
accumulators lane by lane (`acc = tl.where(xrmask, combine(acc, x), acc)`), folded along
axis 1 after the loop. Results are [XBLOCK, 1], visible to later phases.

A float sum over more than RSTEPS chunks adds its lanes in blocks: an inner loop of at most
RSTEPS chunks into `blk_` accumulators, each block's lanes then added into `acc_`. A lane
of a column sum (RBLOCK = 16 rows) over 64K rows otherwise added 4096 values in a row in
float32, its rounding error growing with the column; in blocks, with RSTEPS plus the
number of blocks (the C++ schedules keep their blocks' totals in double instead).

max/min keep a NaN flag beside the value (a max of floats drops NaN; torch propagates it).
argmax/argmin fold (value, index) pairs with a combine function that prefers the first
NaN, then the extreme with the smallest index, as eager does; masked lanes carry the
identity value and an index no real one loses to.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.codegen.triton_body import Body, decode, reg, texpr
from brrr_compiler.schedule_ir import TritonSchedule as Schedule
from brrr_compiler.kernel_ir import ARG_FOLDS, Kernel, Phase, Stmt

LOSING_INDEX = "4611686018427387904"     # 2**62: any real index wins a tie against it
RSTEPS = 64                              # chunks a float sum's lane adds per block


def fold(kind: str, x: str) -> str:
    """`x` folded along the reduced axis into an [XBLOCK, 1] column.

    With this module's own combine functions rather than tl.sum/tl.max: those are
    @triton.jit functions made when triton.language is imported, so a process that
    imported Triton (torch._dynamo does) before setting TRITON_INTERPRET=1 could not run
    them in the interpreter; on a GPU both compile to the same reduction."""
    return f"tl.reduce({x}, 1, _brrr_{kind})[:, None]"


def _is_arg(kind: str) -> bool:
    return kind in ARG_FOLDS


def _extreme(kind: str, dtype: torch.dtype) -> str:
    """The identity of max/min (argmax/argmin) for values of `dtype`."""
    low = kind in ("max", "argmax")
    if dtype.is_floating_point:
        return 'float("-inf")' if low else 'float("inf")'
    if dtype is torch.bool:
        return "-1" if low else "2"            # bools are compared as int8
    info = torch.iinfo(dtype)
    return str(info.min if low else info.max)


class ReductionPrinter:
    def __init__(self, k: Kernel, s: Schedule):
        self.k, self.s = k, s
        self.blocked: set[str] = set()       # the loop phase's sums added in blocks
        groups = {**{v: "x" for v in k.loop_vars}, **{v: "r" for v in k.reduction_vars}}
        self.body = Body(k, groups)
        self.dtypes = self.body.dtypes

    # ---- values folded by a reduce ----------------------------------------------------

    def _value(self, r: Stmt) -> tuple[str, torch.dtype]:
        """The folded value's text and dtype (bools become int8 for max/min/arg*)."""
        x = r.args[0]
        dt = self.dtypes[x]
        if dt is torch.bool and r.value not in ("any", "all", "sum", "prod"):
            return f"{x}.to(tl.int8)", torch.int8
        return x, dt

    def _kind(self, r: Stmt) -> str:
        if self.dtypes[r.args[0]] is torch.bool and r.value in ("max", "min"):
            return "any" if r.value == "max" else "all"
        return r.value

    # ---- persistent: the whole row in one block ---------------------------------------

    def persistent(self, r: Stmt) -> list[str]:
        kind, (x, dt), out = self._kind(r), self._value(r), r.out
        if kind in ("sum", "prod"):
            fill = "0" if kind == "sum" else "1"
            return [f"{out} = {fold(kind, f'tl.where(xrmask, {x}, {fill})')}"]
        if kind in ("any", "all"):
            fill = "0" if kind == "any" else "1"
            x8 = f"tl.where(xrmask, {x}, {fill}).to(tl.int8)"
            return [f"{out} = {fold('max' if kind == 'any' else 'min', x8)} != 0"]
        if _is_arg(kind):
            idx = r.args[1]
            return [f"a_{out} = tl.where(xrmask, {x}, {_extreme(kind, dt)})",
                    f"ai_{out} = tl.where(xrmask, {idx}, {LOSING_INDEX})",
                    f"av_{out}, ri_{out} = tl.reduce((a_{out}, ai_{out}), 1, _brrr_{kind})",
                    f"{out} = ri_{out}[:, None]"]
        folded = fold(kind, f"tl.where(xrmask, {x}, {_extreme(kind, dt)})")
        if not dt.is_floating_point:
            return [f"{out} = {folded}"]
        return [f"m_{out} = {folded}",
                f"n_{out} = {fold('max', f'(xrmask & ({x} != {x})).to(tl.int8)')}",
                f'{out} = tl.where(n_{out} != 0, float("nan"), m_{out})']

    # ---- looped: accumulators over RBLOCK-wide chunks ---------------------------------

    def init(self, r: Stmt, acc: str = "acc_") -> list[str]:
        kind, (_, dt), out = self._kind(r), self._value(r), r.out
        shape = "[XBLOCK, RBLOCK]"
        if kind in ("any", "all"):
            return [f"acc_{out} = tl.full({shape}, {0 if kind == 'any' else 1}, tl.int1)"]
        fill = {"sum": "0", "prod": "1"}.get(kind) or _extreme(kind, dt)
        lines = [f"{acc}{out} = tl.full({shape}, {fill}, {reg(dt)})"]
        if _is_arg(kind):
            lines.append(f"acci_{out} = tl.full({shape}, {LOSING_INDEX}, tl.int64)")
        elif kind in ("max", "min") and dt.is_floating_point:
            lines.append(f"nan_{out} = tl.full({shape}, 0, tl.int1)")
        return lines

    def update(self, r: Stmt) -> list[str]:
        kind, (x, dt) = self._kind(r), self._value(r)
        acc = f"{'blk' if r.out in self.blocked else 'acc'}_{r.out}"
        if _is_arg(kind):
            t, ti, idx = f"t_{r.out}", f"ti_{r.out}", r.args[1]
            return [f"{t}, {ti} = _brrr_{kind}({acc}, acci_{r.out}, {x}, {idx})",
                    f"{acc} = tl.where(xrmask, {t}, {acc})",
                    f"acci_{r.out} = tl.where(xrmask, {ti}, acci_{r.out})"]
        combine = {"sum": f"{acc} + {x}", "prod": f"{acc} * {x}", "any": f"{acc} | {x}",
                   "all": f"{acc} & {x}", "max": f"tl.maximum({acc}, {x})",
                   "min": f"tl.minimum({acc}, {x})"}[kind]
        lines = [f"{acc} = tl.where(xrmask, {combine}, {acc})"]
        if kind in ("max", "min") and dt.is_floating_point:
            lines.append(f"nan_{r.out} = nan_{r.out} | (xrmask & ({x} != {x}))")
        return lines

    def final(self, r: Stmt) -> list[str]:
        kind, (_, dt), out, acc = self._kind(r), self._value(r), r.out, f"acc_{r.out}"
        if kind in ("any", "all"):
            return [f"{out} = {fold('max' if kind == 'any' else 'min', f'{acc}.to(tl.int8)')} != 0"]
        if _is_arg(kind):
            return [f"av_{out}, ri_{out} = tl.reduce(({acc}, acci_{out}), 1, _brrr_{kind})",
                    f"{out} = ri_{out}[:, None]"]
        if kind in ("sum", "prod") or not dt.is_floating_point:
            return [f"{out} = {fold(kind, acc)}"]
        return [f"m_{out} = {fold(kind, acc)}",
                f"n_{out} = {fold('max', f'nan_{out}.to(tl.int8)')}",
                f'{out} = tl.where(n_{out} != 0, float("nan"), m_{out})']

    # ---- phases ----------------------------------------------------------------------

    def _stmts(self, stmts: list[Stmt], fold) -> list[str]:
        lines = []
        for st in stmts:
            if st.op == "reduce":
                lines += fold(st)
                self.body.groups[st.out] = frozenset({"x"})
            else:
                lines += self.body.stmt(st)
        return lines

    def _r_lines(self, start: str) -> list[str]:
        k = self.k
        return ([f"rindex = {start}", "rmask = rindex < rnumel", "xrmask = xmask & rmask"]
                + decode(k.reduction_vars, k.reduction_ranges, "rindex"))

    def loop_phase(self, p: Phase) -> list[str]:
        if self.s.kind == "persistent":
            return self._stmts(p.body, self.persistent)
        reds = [st for st in p.body if st.op == "reduce"]
        self.blocked = {r.out for r in reds if self._in_blocks(r)}
        lines = [ln for r in reds for ln in self.init(r)]
        inner = self._r_lines("roffset + rbase") + self._stmts(p.body, self.update)
        if not self.blocked:
            lines += ["for roffset in range(0, rnumel, RBLOCK):"] + ["    " + ln for ln in inner]
        else:
            blocked = [r for r in reds if r.out in self.blocked]
            lines += [f"for rblock in range(0, rnumel, RBLOCK * {RSTEPS}):"]
            lines += ["    " + ln for r in blocked for ln in self.init(r, "blk_")]
            lines += [f"    rend = tl.minimum(rblock + RBLOCK * {RSTEPS}, rnumel)",
                      "    for roffset in range(rblock, rend, RBLOCK):"]
            lines += ["        " + ln for ln in inner]
            lines += [f"    acc_{r.out} = acc_{r.out} + blk_{r.out}" for r in blocked]
        for r in reds:
            lines += self.final(r)
        return lines

    def _in_blocks(self, r: Stmt) -> bool:
        """A float sum whose loop may run more than RSTEPS chunks (module note)."""
        if self._kind(r) != "sum" or not self._value(r)[1].is_floating_point:
            return False
        n = sympy.sympify(_product(self.k.reduction_ranges))
        return not (n.is_Integer and int(n) <= RSTEPS * self.s.rblock)

    def lines(self) -> list[str]:
        k, s = self.k, self.s
        pid = "tl.program_id(0).to(tl.int64)" if s.int64 else "tl.program_id(0)"
        rbase = "tl.arange(0, RBLOCK)[None, :]" + (".to(tl.int64)" if s.int64 else "")
        rnumel = texpr(_product(k.reduction_ranges))
        lines = [f"xnumel = {texpr(k.numel())}",
                 f"rnumel = {rnumel}",
                 f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)[:, None]",
                 "xmask = xindex < xnumel",
                 f"rbase = {rbase}"]
        lines += decode(k.loop_vars, k.ranges, "xindex")
        if s.kind == "persistent":
            lines += self._r_lines("rbase")
        for p in k.phases:
            lines += self.loop_phase(p) if p.loop else self._stmts(p.body, None)
        return lines


def _product(ranges):
    return sympy.Mul(*ranges) if ranges else sympy.Integer(1)


def reduction_lines(k: Kernel, s: Schedule) -> list[str]:
    """The body of reduction kernel `k` under schedule `s` (persistent or looped)."""
    return ReductionPrinter(k, s).lines()

