"""The tables a flat row walk reads (schedule/flat_rows.py): each tabled load's values,
copied once per call before the rows into [its kept dims][flat row position], as stored
(bfloat16 as its bits, bool as a byte), so the walk converts them as it would the input."""
from __future__ import annotations

import math

from brrr_compiler.codegen.cpp_types import STORAGE
from brrr_compiler.schedule.flat_rows import tabled_loads


def table_fills(k, phases, cexpr, indent: str = "  ") -> list[str]:
    """The lines that declare and fill the tables of `k`'s flat `phases`."""
    tabled = tabled_loads(k, phases) if phases else []
    if not tabled:             # (a flat walk over symbolic outer reduced dims has none)
        return []
    rv, m = k.reduction_vars, [int(r) for r in k.reduction_ranges]
    n_red = math.prod(m)
    lines = []
    for s, dims in tabled:
        size = math.prod(n for _, n in dims) * n_red
        lines += [f"{indent}{STORAGE[s.dtype]} tab_{s.out}[{size}];",
                  f"{indent}for (int64_t t = 0; t < {size}; ++t) {{",
                  f"{indent}  int64_t rest = t / {n_red}, rrest = t % {n_red};"]
        lines += [f"{indent}  const int64_t {v} = rest % {n}; rest /= {n};"
                  for v, n in reversed(dims)]
        lines += [f"{indent}  const int64_t {rv[j]} = rrest % {m[j]}; rrest /= {m[j]};"
                  for j in reversed(range(len(rv)))]
        lines += [f"{indent}  tab_{s.out}[t] = {s.buffer}[{cexpr(s.index)}];", f"{indent}}}"]
    return lines
