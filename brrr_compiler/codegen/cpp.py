"""C++ printer for the kernel IR: pure string production, testable without a compiler.

One translation unit per compiled graph (or a few: cpp_units.py): the prelude
(cpp_prelude.h) and one `extern "C"` function per kernel. The outer loops and tiles of
the innermost loop are spread over OpenMP threads; the innermost loop is `omp simd`,
contiguous where the data is, so gcc vectorizes it — transcendental calls included
(float exp and erf are the prelude's own, the rest go through libmvec), without
-ffast-math. Each SSA value is one `const` line; a scalar op's right-hand side is its C++
form from the scalar-op table (scalar_ops.py), which also declares the libm functions
the prelude lists.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

import torch

from brrr_compiler import scalar_ops
from brrr_compiler.codegen.cpp_index import cexpr
from brrr_compiler.codegen.cpp_invariant import invariant_tables, row_tables
from brrr_compiler.codegen.cpp_outer_reduce import OuterReductionPrinter
from brrr_compiler.codegen.cpp_parallel import parallel_loop
from brrr_compiler.codegen.cpp_reduce import ReductionPrinter
from brrr_compiler.codegen.cpp_replicate import replicated_loops
from brrr_compiler.codegen.cpp_half import staged_halves, staged_loop
from brrr_compiler.codegen.cpp_staging import staged_row
from brrr_compiler.codegen.cpp_stream import NextRows, chunked_loop
from brrr_compiler.codegen.cpp_tiled import tiled_loops
from brrr_compiler.codegen.cpp_types import CTYPE, STORAGE
from brrr_compiler.codegen.cpp_unswitch import condition_lines, copies
from brrr_compiler.kernel_ir import Kernel, Stmt
from brrr_compiler.schedule import choose_cpp
from brrr_compiler.schedule_ir import CppSchedule
from brrr_compiler.transforms.period import periodic
from brrr_compiler.transforms.split import specialize


# Per library: set when a kernel met an out-of-bounds index (eager raises for those);
# the runtime reads and clears it after such kernels and raises.
ERROR_FLAG = """static int brrr_error_flag = 0;
static inline bool brrr_in_bounds(int64_t i, int64_t n) {
  const bool ok = (uint64_t)i < (uint64_t)n;
  if (!ok) __atomic_store_n(&brrr_error_flag, 1, __ATOMIC_RELAXED);
  return ok;
}
extern "C" int brrr_take_error(void) { return __atomic_exchange_n(&brrr_error_flag, 0, __ATOMIC_RELAXED); }
"""

@functools.cache
def _prelude_text() -> str:
    here = Path(__file__).parent
    return (here / "cpp_prelude.h").read_text().replace(
        "BRRR_LOW_PRECISION\n", (here / "cpp_prelude_lowp.h").read_text())


def prelude(kernels_source: str | None = None) -> str:
    """cpp_prelude.h, with the libm wrappers `kernels_source` calls (all of them without
    it) in place of its BRRR_LIBM_DECLARATIONS line: each wrapper defines a few small
    functions, so a unit defines only the ones its kernels call."""
    text = _prelude_text().replace("BRRR_LIBM_DECLARATIONS",
                                   scalar_ops.libm_declarations(kernels_source))
    if kernels_source is None or re.search(r"\bbrrr_(fmod|floordiv|remainder)\(",
                                           kernels_source):
        text = "#define BRRR_FMOD_CLONES\n" + text   # the prelude's note on brrr_fmodf_v
    return text


# ---- scalar statements ---------------------------------------------------------------

def const_literal(value, dtype: torch.dtype) -> str:
    ct = CTYPE[dtype]
    if dtype is torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        if dtype in (torch.bfloat16, torch.float16):   # its value exactly (stores keep the bits)
            value = torch.tensor(value, dtype=dtype).item()
        if value != value:
            return f"(({ct})__builtin_nan(\"\"))"
        if value in (float("inf"), float("-inf")):
            return f"({'-' if value < 0 else ''}({ct})__builtin_inf())"
        return f"(({ct}){float(value)!r})"
    if value == -(2**63):
        return "(-INT64_C(9223372036854775807) - 1)"
    return f"(({ct})INT64_C({int(value)}))"


def cast_expr(x: str, src: torch.dtype, dst: torch.dtype) -> str:
    if dst is torch.bool:
        return f"({x} != 0)"
    if src is torch.bool and dst.is_floating_point:   # gcc 12 vectorizes no (float)bool
        return f"({x} ? ({CTYPE[dst]})1 : ({CTYPE[dst]})0)"
    if dst is torch.bfloat16:
        return f"brrr_round_bf16((float){x})"
    if dst is torch.float16:
        return f"brrr_round_f16((float){x})"
    return f"(({CTYPE[dst]}){x})"


def _suffix(dtype: torch.dtype) -> str:
    return "" if dtype is torch.float64 else "f"


def op_expr(s: Stmt, args: list[str], arg_dtypes: list[torch.dtype]) -> str:
    """A scalar op's C++ form (scalar_ops.py) for arguments of `arg_dtypes`."""
    row = scalar_ops.TABLE.get(s.op)
    dt = row.form_dtype(arg_dtypes, s.dtype) if row else s.dtype
    form = row.cpp.template(dt, s.value) if row and row.accepts(dt) else None
    if form is None:
        raise NotImplementedError(f"brrr: the C++ printer has no rule for scalar op {s.op!r}")
    return form.format(*args, f=_suffix(dt), ct=CTYPE[dt])


def stmt_line(s: Stmt, dtypes: dict[str, torch.dtype], decl: str | None = None,
              bits: frozenset[str] = frozenset()) -> str:
    """One statement as one line of C++; `decl`: the declared type of its value, when
    not its dtype's C type (a bool held in an int: cpp_reduce.py's shared values);
    `bits`: stored values whose float16 bits were computed before the loop
    (cpp_hoist.invariant_bits)."""
    if s.op == "store":
        v = s.args[0]
        if v in bits and s.dtype is torch.float16:   # not into a staged float array
            v = f"{v}_bits"
        elif s.dtype is torch.bfloat16:
            v = f"brrr_bf16_bits({v})"   # already rounded: see cpp_prelude.h
        elif s.dtype is torch.float16:
            v = f"brrr_f16_bits({v})"    # already rounded: see cpp_prelude_lowp.h
        elif s.dtype is torch.bool:
            # a select, not the bool itself: gcc 12 vectorizes no loop that stores the OR
            # of a float compare and a byte load's compare next to a libm call (its masks
            # differ in width), and kept generated seed 6's loop scalar (2.6x eager)
            v = f"(uint8_t)({v} ? 1 : 0)"
        return f"{s.buffer}[{cexpr(s.index)}] = {v};"
    if s.op == "load":
        x = f"{s.buffer}[{cexpr(s.index)}]"
        if s.dtype is torch.bfloat16:
            x = f"brrr_bf16_to_f32({x})"
        elif s.dtype is torch.float16:
            x = f"brrr_f16_to_f32({x})"
        elif s.dtype is torch.bool:
            x = f"({x} != 0)"   # uint8_t storage (STORAGE)
        rhs = x
    elif s.op == "const":
        rhs = const_literal(s.value, s.dtype)
    elif s.op == "index":
        rhs = cexpr(s.index)
    elif s.op == "bounded":
        v = s.args[0]
        return (f"const int64_t {s.out} = brrr_in_bounds({v}, {cexpr(s.index)}) ? {v} : 0;")
    elif s.op == "cast" and s.value == scalar_ops.EXACT:   # transforms/exact_casts.py
        rhs = f"((float){s.args[0]})"
    elif s.op == "cast":
        rhs = cast_expr(s.args[0], dtypes[s.args[0]], s.dtype)
    else:
        rhs = op_expr(s, list(s.args), [dtypes[a] for a in s.args])
    return f"const {decl or CTYPE[s.dtype]} {s.out} = {rhs};"


# ---- loops and functions -------------------------------------------------------------

def signature(k: Kernel) -> str:
    params = []
    for b in k.buffers:
        qual = "" if b.is_output else "const "
        restrict = "" if b.name in k.may_alias else " __restrict"   # Kernel.may_alias
        params.append(f"{qual}{STORAGE[b.dtype]}*{restrict} {b.name}")
    params += [f"int64_t {s}" for s in k.size_vars]
    wide = "BRRR_WIDE " if wide_vectors(k) else ""     # the prelude's note on BRRR_WIDE
    return f'extern "C" {wide}void {k.name}({", ".join(params)})'


_HALVES = (torch.bfloat16, torch.float16)


def wide_vectors(k: Kernel) -> bool:
    """Whether `k` runs at the target's full vector width (the prelude's BRRR_WIDE): its
    work is transcendental functions, libm calls (libmvec's kernel has the widest lanes
    whatever the caller's width) or the prelude's inline exp and erf, or it converts
    float16/bfloat16 values, which the prelude does in integer code (a bfloat16 rounding
    is 7 vector ops): x * x over 2M bfloat16 values 168-188 -> 140 us kernel alone at 512
    bits, a fused add-relu-mul chain 400 -> 325, layer_norm over (2000, 1000) 528 -> 440
    (benchmarks/results/notes.md, "Half-precision kernels at full vector width")."""
    return any((s.op in scalar_ops.TABLE and scalar_ops.TABLE[s.op].transcendentals)
               or (s.op in ("load", "store") and s.dtype in _HALVES) for s in k.body)


def _body_lines(k: Kernel, indent: str, known: dict | None = None) -> list[str]:
    """`k`'s body, one line per statement; `known`: dtypes of values computed before it."""
    dtypes = {**(known or {}), **{s.out: s.dtype for s in k.body if s.out}}
    return [indent + stmt_line(s, dtypes) for s in k.body]


def _loops(k: Kernel, sched: CppSchedule) -> list[str]:
    if not k.loop_vars:
        return _body_lines(k, "  ")
    if sched.replicate is not None:
        return replicated_loops(k, sched, stmt_line, cexpr, STORAGE)
    if sched.period is not None:
        k = periodic(k, *sched.period)
    *outer, inner = k.loop_vars
    *outer_n, inner_n = [cexpr(r) for r in k.ranges]
    lines = [f"  const int64_t n{i} = {n};" for i, n in enumerate(outer_n)]
    lines += [f"  const int64_t n_inner = {inner_n};",
              f"  const int64_t tile = {sched.inner_tile};",
              "  const int64_t ntiles = (n_inner + tile - 1) / tile;",
              "  const int64_t nwork = " + "".join(f"n{i} * " for i in range(len(outer))) + "ntiles;",
              "  if (nwork == 0) return;"]
    pieces = [(lo, hi, specialize(k, inner, lo, hi)) for lo, hi in sched.pieces] or [(0, None, k)]
    if sched.tables:        # per-channel values, once per call (cpp_invariant.py)
        tables, k = invariant_tables(k, sched.tables, stmt_line, sched.table_dims)
        lines += tables
        pieces = [(0, None, k)]
    if sched.row_tables:    # values once per row, vectorized over the rows (cpp_invariant.py)
        tables, k = row_tables(k, sched.row_tables, stmt_line)
        lines += tables
        pieces = [(0, None, k)]
    loop = ["  for (int64_t w = 0; w < nwork; ++w) {", "    int64_t rest = w / ntiles;"]
    for i in reversed(range(len(outer))):
        loop.append(f"    const int64_t {outer[i]} = rest % n{i}; rest /= n{i};")
    loop += ["    const int64_t lo = (w % ntiles) * tile;",
             "    const int64_t hi = brrr_min_i64(lo + tile, n_inner);"]
    once = [s for s in k.body if s.out in sched.per_row]   # once per row (transforms/hoist.py)
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    loop += ["    " + stmt_line(s, dtypes) for s in once]
    before = {s.out for s in once}
    conds = [c for c in sched.unswitch if c in dtypes]     # cpp_unswitch.py's note
    if conds:
        computed, names = condition_lines(k, conds, before, lambda s: stmt_line(s, dtypes), "    ")
        loop += computed
        before |= names
        loop += copies(conds, _inner_loops(k, pieces, sched, before), "    ")
    else:
        loop += _inner_loops(k, pieces, sched, before)
    loop.append("  }")
    cond = f"nwork * (n_inner < tile ? n_inner : tile) >= {sched.min_parallel} && nwork > 1"
    return lines + parallel_loop("  ", sched.threads, cond, sched.forks, loop, bool(sched.stream))


def _inner_loops(k: Kernel, pieces: list, sched: CppSchedule, before: set[str]) -> list[str]:
    """The innermost loop over [lo, hi), or one loop per piece of it where it splits
    (CppSchedule.pieces: cat's inputs, each a plain contiguous load in its own piece); stores
    to the streamed buffers, outputs larger than the caches, stream past them, and
    gathers within rows prefetch the next row, in chunks (cpp_stream.py). The values named
    in `before` were computed before the loop."""
    v, stream, ahead = k.loop_vars[-1], set(sched.stream), sched.prefetch
    rows = NextRows(sched.gather_rows, k.loop_vars[-2], f"n{len(k.loop_vars) - 2}",
                    int(k.ranges[-1])) if sched.gather_rows else None
    lines, known = [], {s.out: s.dtype for s in k.body if s.out in before}
    for j, (a, b, piece) in enumerate(pieces):
        if before:
            piece = dataclasses.replace(piece, phases=[dataclasses.replace(
                p, body=[s for s in p.body if s.out not in before]) for p in piece.phases])
        start = "lo" if j == 0 else f"brrr_max_i64(lo, {a})"
        end = "hi" if j == len(pieces) - 1 else f"brrr_min_i64(hi, {b})"
        if stream or rows:
            dtypes = {**known, **{s.out: s.dtype for s in piece.body if s.out}}
            lines += chunked_loop(piece.body, stream, v, start, end,
                                  lambda s: stmt_line(s, dtypes), cexpr, "    ", ahead, rows,
                                  sched.copy_strided)
            continue
        if sched.staged:         # a short row's masks as int lanes (cpp_staging.py)
            dtypes = {**known, **{s.out: s.dtype for s in piece.body if s.out}}
            lines += staged_row(piece.body, v, start, end, int(piece.ranges[-1]),
                                lambda s: stmt_line(s, dtypes), cexpr, "    ",
                                sched.staged[0][1])
            continue
        if any(staged_halves(piece, piece.body)) or sched.copy_strided:
            # float16 through F16C (cpp_half.py), strided loads copied (cpp_strided.py)
            dtypes = {**known, **{s.out: s.dtype for s in piece.body if s.out}}
            lines += staged_loop(piece, piece.body, start, end, lambda s: stmt_line(s, dtypes),
                                 cexpr, "    ", sched.copy_strided)
            continue
        lines += ["    #pragma omp simd", f"    for (int64_t {v} = {start}; {v} < {end}; ++{v}) {{"]
        lines += _body_lines(piece, "      ", known) + ["    }"]
    return lines


def kernel_source(k: Kernel, num_threads: int, sched: CppSchedule | None = None,
                  prefetch: bool = False) -> str:
    """`k` printed with its schedule for `num_threads` threads (chosen here when not given,
    input streams prefetched where `prefetch`: DeviceSpec.stream_prefetch)."""
    return print_kernel(k, sched or choose_cpp(k, num_threads, prefetch))


def print_kernel(k: Kernel, sched: CppSchedule) -> str:
    """The (Kernel, CppSchedule) pair as one extern "C" function."""
    head = [f"// {k.name}: fuses {len(k.origins)} ATen node(s)"]
    head += [f"//   {o}" for o in k.origins]
    head.append("//   domain: [" + ", ".join(str(r) for r in k.ranges) + "]"
                + (" reducing [" + ", ".join(str(r) for r in k.reduction_ranges) + "]"
                   if k.is_reduction else ""))
    if sched.kind in ("rows", "columns"):
        printer = OuterReductionPrinter if sched.kind == "columns" else ReductionPrinter
        loops = printer(k, sched, CTYPE, stmt_line, cexpr).loops()
    elif sched.kind == "tiled":
        loops = tiled_loops(k, sched, cexpr, stmt_line, STORAGE)
    else:
        loops = _loops(k, sched)
    return "\n".join(head + [signature(k) + " {"] + loops + ["}"]) + "\n"


def translation_unit(kernels: list[Kernel], num_threads: int,
                     printed: dict[str, str] | None = None) -> str:
    """The prelude and every kernel (its source from `printed` by name when there, which
    must have been printed for `num_threads`). A kernel whose code equals an earlier one's
    (the same block in another layer) is an alias of it: compiled once, bound by its name."""
    parts, first, printed = [ERROR_FLAG], {}, printed or {}
    for k in kernels:
        src = printed.get(k.name) or kernel_source(k, num_threads)
        sig = signature(k)
        head = src.partition(sig)[0]
        key = code_key(k, src)
        if key in first:
            parts.append(f"{head}//   same code as {first[key]}\n"
                         f'{sig} __attribute__((alias("{first[key]}")));\n')
        else:
            first[key] = k.name
            parts.append(src)
    kernels_text = "\n".join(parts)
    return prelude(kernels_text) + "\n" + kernels_text


def code_key(k: Kernel, src: str) -> str:
    """What two kernels share when one can be an alias of the other: the code after the
    name (the signature less the name, and the body)."""
    sig = signature(k)
    return sig.replace(k.name, "", 1) + src.partition(sig)[2]
