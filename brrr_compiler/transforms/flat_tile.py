"""Flat tiles: a tiled kernel (codegen/cpp_tiled.py) whose inner dim is whole in every tile
and whose every access is contiguous across the tile's rows runs the tile as one flat
loop (the variable FLAT = a * n + inner). The schedule records the choice
(CppSchedule.flat_tile); the printer prints it and the cost model counts the conversions
that loop makes (cost/conversions.py).
"""
from __future__ import annotations

import dataclasses

import sympy

from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.schedule_ir import TRANSPOSE_BLOCK
from brrr_compiler.transforms.loops import linear_coeff

FLAT = sympy.Symbol("tf", integer=True)      # a tile's flat index: a * n_inner + inner


def transposed_loads(k: Kernel, a, inner) -> list:
    """The loads contiguous along `a` and strided along `inner`: staged into tile arrays."""
    allv = k.all_vars()
    out = []
    for s in k.body:
        if s.op == "load":
            ci = linear_coeff(s.index, inner, allv)
            if ci not in (None, 0, 1) and linear_coeff(s.index, a, allv) == 1:
                out.append(s)
    return out


def whole_inner(k: Kernel, tile_inner: int) -> int | None:
    """The inner dim's length where one tile holds it whole (a static length no longer
    than the tile), else None."""
    n = k.ranges[-1]
    if not isinstance(n, (int, sympy.Integer)) or not TRANSPOSE_BLOCK <= int(n) <= tile_inner:
        return None
    return int(n)


def flattened(k: Kernel, a, inner, n: int):
    """`k` with every index written in the flat variable FLAT (= a * n + inner), or None
    where some index is not contiguous across rows (its stride along `a` is not n times
    its stride along inner, so `a` stays in it)."""
    to_flat = {inner: FLAT - n * a}
    phases = []
    for p in k.phases:
        body = []
        for s in p.body:
            if s.index is not None:
                index = sympy.expand(s.index.xreplace(to_flat))
                if a in index.free_symbols:
                    return None
                s = dataclasses.replace(s, index=index)
            body.append(s)
        phases.append(dataclasses.replace(p, body=body))
    return dataclasses.replace(k, phases=phases)


def flat_tile(k: Kernel, d: int, tile_inner: int) -> int:
    """The inner dim's length where a tiled kernel over (outer dim d, innermost) runs its
    tiles flat: the dim is whole in a tile and every access but the transposed loads
    (staged with that length as their row pitch, so flat by construction) is contiguous
    across rows; else 0."""
    n = whole_inner(k, tile_inner)
    if n is None:
        return 0
    *outer, inner = k.loop_vars
    a = outer[d]
    staged = {id(s) for s in transposed_loads(k, a, inner)}
    rest = [dataclasses.replace(p, body=[s for s in p.body if id(s) not in staged])
            for p in k.phases]
    return n if flattened(dataclasses.replace(k, phases=rest), a, inner, n) else 0
