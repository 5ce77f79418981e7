"""A graph's kernels split over several translation units, each compiled by its own
compiler process, so that the processes run side by side on the machine's cores.

Note on the split. Kernels are dealt, largest source first, to the unit with the least
source so far (kernels with the same code go together: one is an alias of the other,
and an alias must live in its target's unit). A unit is worth its compiler start-up and
prelude only with enough code in it: `min_lines` lines of kernel source per unit.
Each unit is a whole translation unit (prelude and error flag included) and keeps the
graph's kernel order, so its text, and with it its cache key, is the same from run to run.
"""
from __future__ import annotations

from brrr_compiler.codegen.cpp import code_key, kernel_source, translation_unit
from brrr_compiler.kernel_ir import Kernel


def translation_units(kernels: list[Kernel], num_threads: int, printed: dict[str, str] | None,
                      max_units: int, min_lines: int) -> list[tuple[list[Kernel], str]]:
    """[(kernels, source)] per unit: at most `max_units` units, each with about
    `min_lines` lines of kernel source or more (one unit when the graph is small)."""
    printed = {k.name: (printed or {}).get(k.name) or kernel_source(k, num_threads)
               for k in kernels}
    same_code: dict[str, list[Kernel]] = {}
    for k in kernels:
        same_code.setdefault(code_key(k, printed[k.name]), []).append(k)
    size = {key: printed[ks[0].name].count("\n") for key, ks in same_code.items()}
    n = max(1, min(max_units, len(same_code), sum(size.values()) // max(min_lines, 1)))
    units: list[list[Kernel]] = [[] for _ in range(n)]
    lines = [0] * n
    for key in sorted(same_code, key=lambda key: -size[key]):
        i = lines.index(min(lines))
        units[i] += same_code[key]
        lines[i] += size[key]
    order = {k.name: i for i, k in enumerate(kernels)}
    units = [sorted(u, key=lambda k: order[k.name]) for u in units]
    return [(u, translation_unit(u, num_threads, printed)) for u in units]
