"""argmax/argmin folds of a row chunk in vector lanes.

The first extreme of a row is a fold of (value, index) pairs, which gcc does not
vectorize as a reduction: the scalar loop brrr printed took about 1.6 ns an element
(x.argmax(1) of (1024, 1024): 1645 us, eager 1010, Inductor 656). Here a chunk is walked
LANES elements at a time and each position mod LANES keeps its own pair (cl_*[lane],
cli_*[lane]); the update is a compare and two selects per lane, which vectorizes. After
the whole groups of LANES, the lanes are combined into the chunk's pair (c_*, ci_*): the
NaN of smallest index if a lane holds one, else the extreme value and, among lanes equal
to it, the smallest index. Each lane holds the first extreme (or first NaN) of its
positions, so that is the chunk's first extreme, as eager's. The elements past the last
whole group then fold one by one, in order, after the combine. Other folds of the same
loop (the max of torch.max(x, 1)) stay `omp simd` reductions, over the lanes.
"""
from __future__ import annotations

from brrr_compiler.codegen.cpp_accumulators import CLAUSE, init_value
from brrr_compiler.kernel_ir import ARG_FOLDS

LANES = 16          # one AVX-512 vector of floats; 8 and 32 timed alike on AVX-512


def lane_update(kind: str, r: str, x: str, i: str, indent: str) -> list[str]:
    """Fold x (at index i) into r's lane: selects, not a branch (a branch keeps the loop
    scalar)."""
    better = ">" if kind == "argmax" else "<"
    acc, idx, take = f"cl_{r}[lane]", f"cli_{r}[lane]", f"t_cl_{r}"
    return [f"{indent}const bool {take} = !({acc} != {acc}) && ({x} {better} {acc} || {x} != {x});",
            f"{indent}{acc} = {take} ? {x} : {acc};",
            f"{indent}{idx} = {take} ? {i} : {idx};"]


def lane_combine(kind: str, r: str, ct: str, init: str, indent: str) -> list[str]:
    """Fold the lanes of r into the chunk's fresh pair c_r/ci_r (the module note's
    order), in two vectorized passes: the extreme value (or a NaN flag), then the
    smallest index among the lanes that hold it. A branch per lane mispredicted on
    random data, and cost a row of 1024 floats a quarter of its time."""
    v, i = f"cl_{r}[lane]", f"cli_{r}[lane]"
    best, nan, at = f"lx_{r}", f"ln_{r}", f"li_{r}"
    pick = "max" if kind == "argmax" else "min"
    better = ">" if kind == "argmax" else "<"
    return [f"{indent}{ct} {best} = {init};",
            f"{indent}int {nan} = 0;",
            f"{indent}#pragma omp simd reduction({pick}:{best}) reduction(|:{nan})",
            f"{indent}for (int lane = 0; lane < {LANES}; ++lane) {{",
            f"{indent}  {best} = {v} {better} {best} ? {v} : {best};",
            f"{indent}  {nan} |= ({v} != {v});",
            f"{indent}}}",
            f"{indent}int64_t {at} = INT64_MAX;",
            f"{indent}#pragma omp simd reduction(min:{at})",
            f"{indent}for (int lane = 0; lane < {LANES}; ++lane) {{",
            f"{indent}  const bool hit = {nan} ? {v} != {v} : {v} == {best};",
            f"{indent}  {at} = hit && {i} < {at} ? {i} : {at};",
            f"{indent}}}",
            f"{indent}c_{r} = {nan} ? ({ct})__builtin_nan(\"\") : {best};",
            f"{indent}ci_{r} = {at};"]


def lane_chunk(printer, phase, reds, indent: str, inner: str, m: str) -> list[str]:
    """The chunk [cb - ro*m, ce - ro*m) of a loop phase with arg folds (cpp_reduce's
    `chunk`), into c_*/ci_*: whole groups of LANES in lanes, then the rest in order."""
    args = [r for r in reds if r.value in ARG_FOLDS]
    lines = []
    for r in args:
        dt = printer.arg_dtype[r.out]
        ct = printer.ctype[dt]
        lines += [f"{indent}{ct} cl_{r.out}[{LANES}];",
                  f"{indent}int64_t cli_{r.out}[{LANES}];",
                  f"{indent}for (int lane = 0; lane < {LANES}; ++lane) {{",
                  f"{indent}  cl_{r.out}[lane] = {init_value(r.value, ct, dt)};",
                  f"{indent}  cli_{r.out}[lane] = 0;",
                  f"{indent}}}"]
    lo, hi = f"cb - ro * {m}", f"ce - ro * {m}"
    lines += [f"{indent}const int64_t lb = {lo}, lv = lb + (({hi} - lb) / {LANES}) * {LANES};",
              f"{indent}for (int64_t gb = lb; gb < lv; gb += {LANES}) {{"]
    clauses = [f"reduction({CLAUSE[r.value]}:c_{r.out})" for r in reds if r not in args]
    clauses += [f"reduction(|:cn_{r.out})" for r in reds if r.value in ("max", "min")]
    lines += [f"{indent}  #pragma omp simd " + " ".join(clauses),
              f"{indent}  for (int64_t lane = 0; lane < {LANES}; ++lane) {{",
              f"{indent}    const int64_t {inner} = gb + lane;"]
    lines += printer.body_lines(phase.body, indent + "    ", True, lanes=True)
    lines += [f"{indent}  }}", f"{indent}}}"]
    for r in args:
        dt = printer.arg_dtype[r.out]
        ct = printer.ctype[dt]
        lines += lane_combine(r.value, r.out, ct, init_value(r.value, ct, dt), indent)
    lines.append(f"{indent}for (int64_t {inner} = lv; {inner} < {hi}; ++{inner}) {{")
    lines += printer.body_lines(phase.body, indent + "  ", True)
    return lines + [f"{indent}}}"]
