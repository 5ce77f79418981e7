"""The split-row walk of a reduction kernel: fewer rows than threads, each row long
(n_red >= the schedule's split_min_red), so the threads share one row instead of
taking rows. A loop phase with folds gives each thread a contiguous slice of the row;
the slices' partials are combined in thread order, so results do not depend on timing.
A loop phase without folds runs its slices of SPLIT_SLICE elements as an `omp for`.
Within a slice, the walk is cpp_reduce.py's segment walk.
"""
from __future__ import annotations

from brrr_compiler.codegen.cpp_accumulators import ARG_FOLDS

SPLIT_SLICE = 16384     # a split row's non-reducing loop phase: the slice a thread takes


def split_plain(printer, phase, indent: str) -> list[str]:
    """A loop phase without reductions over one long row: threads take slices."""
    return ([f"{indent}#pragma omp parallel for num_threads({printer.threads}) schedule(static)",
             f"{indent}for (int64_t sb = 0; sb < n_red; sb += {SPLIT_SLICE}) {{",
             f"{indent}  const int64_t se = brrr_min_i64(sb + {SPLIT_SLICE}, n_red);"]
            + printer.segments(phase, [], indent + "  ", "sb", "se", fence=True)
            + [f"{indent}}}"])


def split_folds(printer, phase, reds, indent: str) -> list[str]:
    """One long row: each thread folds a slice, partials are combined in order."""
    nt, acc = printer.threads, printer.acc
    lines = [ln for r in reds for ln in acc.partials(r, indent, nt)]
    lines += [f"{indent}#pragma omp parallel num_threads({nt})", f"{indent}{{",
              f"{indent}  const int64_t tid = omp_get_thread_num(), nth = omp_get_num_threads();",
              f"{indent}  const int64_t per = (n_red + nth - 1) / nth;",
              f"{indent}  const int64_t r_lo = brrr_min_i64(tid * per, n_red), r_hi = brrr_min_i64(r_lo + per, n_red);"]
    for r in reds:
        lines += acc.decls(r, indent + "  ", "acc_", "nan_", "ai_")
    lines += printer.segments(phase, reds, indent + "  ", "r_lo", "r_hi")
    for r in reds:
        lines.append(f"{indent}  sp_{r.out}[tid] = acc_{r.out};")
        if r.value in ("max", "min"):
            lines.append(f"{indent}  spn_{r.out}[tid] = nan_{r.out};")
        if r.value in ARG_FOLDS:
            lines.append(f"{indent}  spi_{r.out}[tid] = ai_{r.out};")
    lines += [f"{indent}}}", f"{indent}for (int t = 0; t < {nt}; ++t) {{"]
    for r in reds:
        lines += acc.combine(r, indent + "  ", "sp_", "spn_", "spi_", "[t]")
    return lines + [f"{indent}}}"]
