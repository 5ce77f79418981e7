"""Next-row prefetch for row kernels with several loop phases (softmax, cross-entropy).

A row kernel's first loop phase reads its row from memory (softmax's max); later loop
phases re-read it from cache and are bound by compute (the exp and sum). Memory then
sits idle during the compute and the core sits idle during the next row's first phase.
While the second loop phase runs, the printer asks the cache for the next row's
first-phase inputs, one prefetch per 64-byte line, chunk by chunk as it walks the row:
by the time the next row starts, its first phase reads from cache. Only loads that are
contiguous along the innermost reduced dim qualify (schedule/rows.py picks them), and
only rows short enough that the prefetched row and the current one both stay in the
per-core L2.
"""
from __future__ import annotations

import sympy

from brrr_compiler.kernel_ir import Kernel, Phase
from brrr_compiler.schedule.rows import next_row_loads

MAX_ROW_ELEMS = 65536   # a row of this many elements per buffer (256 KB of fp32) still fits
LOCALITY = 1            # __builtin_prefetch locality: into L2 (0-3: nta, t2, t1, t0)


class NextRowPrefetch:
    def __init__(self, k: Kernel, cexpr, buffers: frozenset[str]):
        """Prefetch the next row's loads of `buffers` (CppSchedule.prefetch)."""
        self.k, self.cexpr = k, cexpr
        loop_phases = [p for p in k.phases if p.per_row_loop]
        self.phase: Phase | None = loop_phases[1] if len(loop_phases) > 1 else None
        self.loads: dict[tuple, int] = {key: step for key, step in next_row_loads(k).items()
                                        if key[0] in buffers}   # (buffer, index) -> per line

    @property
    def active(self) -> bool:
        return bool(self.loads)

    def next_row(self, indent: str) -> list[str]:
        """Decode the next row's outer indices (p_i*) and decide whether to prefetch."""
        k = self.k
        lines = [f"{indent}const bool pf_row = w + 1 < n_outer && n_red <= {MAX_ROW_ELEMS};",
                 f"{indent}int64_t prest = w + 1;"]
        for i in reversed(range(len(k.ranges))):
            lines.append(f"{indent}const int64_t p_{k.loop_vars[i]} = prest % n{i}; prest /= n{i};")
        return lines

    def segment(self, phase: Phase, indent: str, lo: str, hi: str) -> list[str]:
        """Prefetch lines for the next row's [lo, hi) of the innermost reduced dim."""
        if phase is not self.phase or not self.loads:
            return []
        k, inner = self.k, self.k.reduction_vars[-1]
        pf = sympy.Symbol("pf", integer=True)
        subs = {v: sympy.Symbol(f"p_{v}", integer=True) for v in k.loop_vars}
        subs[inner] = pf
        return [prefetch_loop(indent, "pf_row", lo, hi, step, buf, self.cexpr(index.xreplace(subs)))
                for (buf, index), step in self.loads.items()]


def prefetch_loop(indent: str, cond: str, lo: str, hi: str, step: int, buf: str, addr: str) -> str:
    """One line: if `cond`, ask for `buf`'s elements `addr` for pf in [lo, hi), one request
    per cache line (`step` elements), into L2 (LOCALITY)."""
    return (f"{indent}if ({cond}) for (int64_t pf = {lo}; pf < {hi}; pf += {step}) "
            f"__builtin_prefetch(&{buf}[{addr}], 0, {LOCALITY});")

