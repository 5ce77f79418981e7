"""Triton printer for the kernel IR: pure string production, testable without a GPU.

A sibling of cpp.py reading the same Kernel. One Python module per compiled graph: the
prelude (imports, a few @triton.jit helpers), then per kernel a comment listing the ATen
nodes it fuses and its schedule, the @triton.jit kernel (named like the C++ one), and a
host function `launch_<name>` that computes the grid and launches it.

Values live in registers in their op-math type: float16/bfloat16 are loaded, widened to
float32 and narrowed only where the IR casts or stores. Each SSA value is one line, and
every load and store is masked (triton_body.py: statements, masks, expressions).
Tiling (1-D, 2-D, persistent or looped reductions) and index width are decided in
schedule/triton.py (a TritonSchedule, printed with the kernel); reduction phases are printed by triton_reduce.py.
"""
from __future__ import annotations

import sympy

from brrr_compiler.codegen.triton_body import Body, decode, texpr
from brrr_compiler.codegen.triton_prelude import PRELUDE
from brrr_compiler.codegen.triton_reduce import reduction_lines
from brrr_compiler.schedule.triton import DEFAULT_SM_COUNT, choose_triton
from brrr_compiler.schedule_ir import TritonSchedule as Schedule
from brrr_compiler.kernel_ir import Kernel


def _pid(s: Schedule) -> str:
    return "tl.program_id(0).to(tl.int64)" if s.int64 else "tl.program_id(0)"


def _pointwise(k: Kernel, s: Schedule) -> list[str]:
    lines = [f"xnumel = {texpr(k.numel())}",
             f"xoffset = {_pid(s)} * XBLOCK",
             "xindex = xoffset + tl.arange(0, XBLOCK)",
             "xmask = xindex < xnumel"]
    lines += decode(k.loop_vars, k.ranges, "xindex")
    body = Body(k, {v: "x" for v in k.loop_vars})
    return lines + [ln for st in k.body for ln in body.stmt(st)]


def _pointwise_2d(k: Kernel, s: Schedule) -> list[str]:
    *outer, inner = k.loop_vars
    *outer_n, inner_n = k.ranges
    arange = "tl.arange(0, {b}){sub}" + (".to(tl.int64)" if s.int64 else "")
    lines = [f"ynumel = {texpr(sympy.Mul(*outer_n))}",
             f"xnumel = {texpr(inner_n)}",
             "xtiles = (xnumel + XBLOCK - 1) // XBLOCK",
             f"pid = {_pid(s)}",
             "yindex = (pid // xtiles) * YBLOCK + " + arange.format(b="YBLOCK", sub="[:, None]"),
             "xindex = (pid % xtiles) * XBLOCK + " + arange.format(b="XBLOCK", sub="[None, :]"),
             "ymask = yindex < ynumel",
             "xmask = xindex < xnumel"]
    lines += decode(outer, outer_n, "yindex") + [f"{inner} = xindex"]
    groups = {**{v: "y" for v in outer}, inner: "x"}
    body = Body(k, groups)
    return lines + [ln for st in k.body for ln in body.stmt(st)]


def signature(k: Kernel, s: Schedule) -> list[str]:
    params = [b.name for b in k.buffers] + [v.name for v in k.size_vars]
    return params + (["err"] if k.checks_bounds else [])


def constexprs(s: Schedule) -> dict[str, int]:
    if s.kind == "pointwise":
        return {"XBLOCK": s.xblock}
    if s.kind == "pointwise2d":
        return {"YBLOCK": s.yblock, "XBLOCK": s.xblock}
    return {"XBLOCK": s.xblock, "RBLOCK": s.rblock}


def _grid(k: Kernel, s: Schedule) -> list[str]:
    if s.kind == "pointwise2d":
        ny = texpr(sympy.Mul(*k.ranges[:-1]), host=True)
        nx = texpr(k.ranges[-1], host=True)
        return [f"    ynumel, xnumel = {ny}, {nx}",
                "    if ynumel <= 0 or xnumel <= 0:", "        return",
                f"    grid = (triton.cdiv(ynumel, {s.yblock}) * triton.cdiv(xnumel, {s.xblock}),)"]
    return [f"    xnumel = {texpr(k.numel(), host=True)}",
            "    if xnumel <= 0:", "        return",
            f"    grid = (triton.cdiv(xnumel, {s.xblock}),)"]


def launcher(k: Kernel, s: Schedule) -> list[str]:
    params = signature(k, s)
    consts = ", ".join(f"{n}={v}" for n, v in constexprs(s).items())
    return ([f"def launch_{k.name}({', '.join(params)}):"] + _grid(k, s)
            + [f"    {k.name}[grid]({', '.join(params)}, {consts}, num_warps={s.num_warps})"])


def header(k: Kernel, s: Schedule) -> list[str]:
    head = [f"# {k.name}: fuses {len(k.origins)} ATen node(s)"]
    head += [f"#   {o}" for o in k.origins]
    head.append("#   domain: [" + ", ".join(str(r) for r in k.ranges) + "]"
                + (" reducing [" + ", ".join(str(r) for r in k.reduction_ranges) + "]"
                   if k.is_reduction else ""))
    head.append(f"#   schedule: {s.describe()}")
    return head


def kernel_source(k: Kernel, sm_count: int = DEFAULT_SM_COUNT, sched: Schedule | None = None) -> str:
    """The kernel's comment, @triton.jit function and launcher, as text, printed with
    `sched` (chosen here for a GPU of `sm_count` SMs when not given)."""
    if k.scratch:
        raise NotImplementedError(f"brrr: the Triton printer keeps no scratch rows ({k.name})")
    if k.folds_across or k.folds_columns:
        raise NotImplementedError(f"brrr: the Triton printer does not fold across rows ({k.name})")
    s = sched or choose_triton(k, sm_count)
    if k.is_reduction:
        lines = reduction_lines(k, s)
    elif s.kind == "pointwise2d":
        lines = _pointwise_2d(k, s)
    else:
        lines = _pointwise(k, s)
    params = signature(k, s) + [f"{n}: tl.constexpr" for n in constexprs(s)]
    fn = ["@triton.jit", f"def {k.name}({', '.join(params)}):"] + ["    " + ln for ln in lines]
    return "\n".join(header(k, s) + fn + ["", ""] + launcher(k, s)) + "\n"


def module_source(kernels: list[Kernel], sm_count: int = DEFAULT_SM_COUNT) -> str:
    """One importable Python module holding every kernel of a graph."""
    return "\n\n".join([PRELUDE] + [kernel_source(k, sm_count) for k in kernels])
