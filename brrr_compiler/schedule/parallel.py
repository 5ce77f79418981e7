"""Whether a C++ parallel loop ever forks, for constant sizes.

Every parallel loop the C++ printer emits carries an `if` clause: with too little work
(CppSchedule.min_parallel elements) or a single work item it runs on one thread. For
constant sizes the schedule evaluates the clause once; the printer then leaves the
pragma out where it is false (codegen/cpp_parallel.py says why that pays).
"""
from __future__ import annotations

import math

from brrr_compiler.symbolic import static_sizes  # noqa: F401  (the schedules import it from here)


def tiles(n: int, tile: int) -> int:
    return -(-n // tile)


def forks(nwork: int, numel_per_item: int, min_numel: int) -> bool:
    """The `if` clause every parallel loop carries, for constant sizes: more than one
    work item and at least `min_numel` elements of work."""
    return nwork * numel_per_item >= min_numel and nwork > 1


def product(values) -> int:
    return math.prod(values)
