"""The OpenMP pragma of a kernel's parallel loop, or none when it would never fork.

Note on serial loops. Every parallel loop carries an `if` clause: with too little work
(PARALLEL_MIN_NUMEL elements) or a single work item it runs on one thread. When a
kernel's sizes are constants and the clause is false for them, the printer leaves the
pragma out and says so in a comment: the loop runs on one thread either way, and g++ no
longer outlines an OpenMP region for it. Measured with gcc 12 -O3 on the model zoo's
training graphs: 10-25 ms of compile time per region, about a tenth of the conv net's
build (its batch norms over 32 and 64 channels and its loss are one tile or one row of
work each). Kernels with symbolic sizes keep the pragma and decide at run time.
"""
from __future__ import annotations

import math

import sympy


def static_sizes(exprs) -> list[int] | None:
    """The values of `exprs` when every one is a constant, else None."""
    values = [sympy.sympify(e) for e in exprs]
    return [int(v) for v in values] if all(v.is_Integer for v in values) else None


def tiles(n: int, tile: int) -> int:
    return -(-n // tile)


def forks(nwork: int, numel_per_item: int, min_numel: int) -> bool:
    """The `if` clause every parallel loop carries, for constant sizes: more than one
    work item and at least `min_numel` elements of work."""
    return nwork * numel_per_item >= min_numel and nwork > 1


def pragma(indent: str, head: str, cond: str, static_fork: bool | None) -> list[str]:
    """`head if (cond)`, or, when the sizes are constants and the loop never forks
    (`static_fork` False), a comment in its place."""
    if static_fork is False:
        return [f"{indent}// one thread: {cond} is false for these sizes"]
    return [f"{indent}{head} if ({cond})"]


def product(values) -> int:
    return math.prod(values)
