"""A chunk of a reduction walk whose sums (maxes, mins) fold in a block of lanes
(schedule/sum_lanes.py names the walks and has the note on why).

Each fold keeps `c_<r>[L]`, L partials (four AVX-512 vectors of floats), and a max or
min its NaN flags `cn_<r>[L]` beside them. The chunk runs as
blocks of L consecutive elements, element `lane` of a block added to partial `lane` in a
plain `omp simd` loop that gcc unrolls into independent vector adds, then a remainder
loop of fewer than L elements into the first partials, then one tree fold
(brrr_fold_lanes and its max, min and or twins, cpp_prelude.h) into the chunk's total, which goes on into the row total
as before (cpp_accumulators.py). Chunks hold PER_LANE (or PER_LANE_SIGNED) elements per
lane: float lanes of a sum that may cancel add as many values each as the one-vector
walk's 16 lanes of a SUM_CHUNK did, so the error stays where it was.
"""
from __future__ import annotations

from brrr_compiler.codegen.cpp_accumulators import init_value

FOLD = {"sum": "brrr_fold_lanes", "max": "brrr_fold_max_lanes", "min": "brrr_fold_min_lanes",
        "prod": "brrr_fold_prod_lanes"}

PER_LANE = 16           # values per float lane of a sum that may cancel (SUM_CHUNK / 16)
PER_LANE_SIGNED = 64    # of a sum of one sign, or in double lanes (CHUNK / 16)


def lanes_chunk(printer, reds, lanes: int) -> int:
    """The segment length of a walk in blocks of `lanes`."""
    cancels = any(printer.acc.float_lanes_sum(r) and r.out not in printer.signed for r in reds)
    return lanes * (PER_LANE if cancels else PER_LANE_SIGNED)


def lanes_walk(printer, body, reds, indent: str, inner: str, lo: str, hi: str,
               lanes: int) -> list[str]:
    """The chunk [lo, hi) of `inner` running the statements `body` (a phase's, or the
    same reading staged arrays: cpp_staging.py), its sums folded into c_*[0]."""
    lines = []
    for r in reds:
        ct = printer.acc.total_ctype(r, lanes=True) or printer.ctype[r.dtype]
        flag = r.value in ("max", "min")
        lines += [f"{indent}{ct} c_{r.out}[{lanes}];"]
        lines += [f"{indent}int cn_{r.out}[{lanes}];"] if flag else []
        lines += [f"{indent}#pragma omp simd",
                  f"{indent}for (int64_t lane = 0; lane < {lanes}; ++lane) {{",
                  f"{indent}  c_{r.out}[lane] = {init_value(r.value, ct, r.dtype)};"]
        lines += [f"{indent}  cn_{r.out}[lane] = 0;"] if flag else []
        lines += [f"{indent}}}"]
    body = printer.body_lines(body, indent + "    ", True, acc_sub="[lane]")
    lines += [f"{indent}int64_t lb = {lo};",
              f"{indent}for (; lb + {lanes} <= {hi}; lb += {lanes}) {{",
              f"{indent}  #pragma omp simd",
              f"{indent}  for (int64_t lane = 0; lane < {lanes}; ++lane) {{",
              f"{indent}    const int64_t {inner} = lb + lane;"] + body
    lines += [f"{indent}  }}", f"{indent}}}",
              f"{indent}#pragma omp simd",
              f"{indent}for (int64_t lane = 0; lane < {hi} - lb; ++lane) {{",
              f"{indent}  const int64_t {inner} = lb + lane;"]
    lines += [ln[2:] for ln in body] + [f"{indent}}}"]
    lines += [f"{indent}{FOLD[r.value]}<{lanes}>(c_{r.out});" for r in reds]
    lines += [f"{indent}brrr_fold_or_lanes<{lanes}>(cn_{r.out});" for r in reds
              if r.value in ("max", "min")]
    return lines
