"""Which row-kernel walks fold their sums, maxes and mins in a block of lanes
(codegen/cpp_sum_lanes.py).

An `omp simd reduction(+:c)` loop keeps one vector of partials: each vector add waits
for the one before it (3-4 cycles on the cores we run on, two loads a cycle), and after
each chunk gcc folds the lanes one at a time, in order (it may not reassociate a float
sum). A sum over a row in cache is then bound by that chain, not by loads. A walk named
here keeps LANES_BYTES of partials per sum instead (four AVX-512 vectors of floats, eight
AVX2 ones): independent chains the core overlaps, folded as a tree once per chunk.

Phases taken: a row's loop phase whose folds are all floating-point FOLDS, over an
innermost reduced dim of static extent at least MIN_ROW (shorter rows leave most of a
block to the remainder loop and pay the tree fold for little), not staged (its masks
are already copied into lanes of their own), not a phase of the one-walk max and sum of
exps (its exps, not the adds, bound it), without column folds or streamed stores, and
without a summand that is the same all along the row (gcc adds those one by one anyway).
A row of unknown length keeps the one-vector walk: at 200 floats a row (1310 rows, one
thread) the blocks took a row sum 28 -> 38 us and layer_norm 64 -> 100 (most of each row
in the remainder loop, a 64-lane fold per row); at 400 they were even, at 512 and above
ahead: x.sum() over 2M floats 102-111 -> 88-89 us, var_mean over (2048, 1024) 211 -> 168-178,
layer_norm over (2048, 768) 238-256 -> 203-230 (benchmarks/results/notes.md, "Sums in
blocks of lanes").

A shorter row of static length (MIN_SHORT_ROW <= n < MIN_ROW) takes a block of one vector's
lanes (SHORT_LANES_BYTES: 16 floats on AVX-512, two AVX2 vectors): the lanes are those
of the one-vector walk, element for element, but they fold as a tree. gcc's fold of a
sum's 16 lanes in order, 16 dependent scalar adds after each chunk, was half of a
softmax over rows of 100 floats: its sum walk's exps cost less than the fold
(benchmarks/results/notes.md, "Short rows fold as a tree"). Only walks that compute a
transcendental take it (a layer_norm over rows of 100, whose walks only add, ran 1.6x
slower in lanes), the sum of the one-walk max and sum of exps among them.

A float max or min is the same chain (vmaxps waits on the vector before it, 4 cycles),
and its NaN flag rides along as an int lane each: amax over 500K floats in cache, one
thread, 62 -> 33 us ("Maxes in blocks of lanes"). So is a product (vmulps); its block's
lanes run the whole segment as its one vector did (cpp_reduce.PROD_CHUNK: a lane that
underflows does so once). A walk whose folds are all of these kinds takes the block.
"""
from __future__ import annotations

import sympy

from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.scalar_ops import TABLE
from brrr_compiler.transforms.loops import inner_varying

LANES_BYTES = 256
MIN_ROW = 512
SHORT_LANES_BYTES = 64      # one AVX-512 vector: a short row's block (module note)
MIN_SHORT_ROW = 32          # two such blocks: a shorter row is mostly remainder
FOLDS = ("sum", "max", "min", "prod")      # the folds a block of lanes takes


def sum_lane_phases(k: Kernel, staged: tuple, online: int | None,
                    stream: frozenset) -> tuple[tuple[int, int], ...]:
    """(phase, lanes per sum) of the loop phases of row kernel `k` (as printed) whose
    sums add in a block of lanes (module note)."""
    if not k.reduction_vars:
        return ()
    row = sympy.sympify(k.reduction_ranges[-1])
    if not (row.is_Integer and int(row) >= MIN_SHORT_ROW):
        return ()
    short = int(row) < MIN_ROW
    block = SHORT_LANES_BYTES if short else LANES_BYTES
    pair = set() if online is None else {online} if short else {online, online + 1}
    skip = {i for i, _ in staged} | pair
    inner = k.reduction_vars[-1]
    out = []
    for i, p in enumerate(k.phases):
        reds = [s for s in p.body if s.op == "reduce"]
        if i in skip or not p.loop or p.once or not reds or any(
                r.value not in FOLDS or not r.dtype.is_floating_point for r in reds):
            continue
        if any(s.op == "column_reduce" or (s.op == "store" and s.buffer in stream)
               for s in p.body) or _invariant_summand(p.body, inner):
            continue
        if short and not any(s.op in TABLE and TABLE[s.op].transcendentals for s in p.body):
            continue
        widest = max(r.dtype.itemsize for r in reds)
        out.append((i, block // max(widest, 4)))
    return tuple(out)


def _invariant_summand(body, var) -> bool:
    """Some sum of `body` adds a value that does not depend on the loop variable `var`."""
    varying = inner_varying(body, str(var))
    return any(s.op == "reduce" and s.args and s.args[0] not in varying for s in body)
