"""Mark the casts to float16/bfloat16 whose argument that type already represents exactly.

Note on the mark. Values of a half-precision tensor live in registers as float: a load
widens, the op computes in float (op math), and a cast back rounds (scalar_rules.py,
group.py `_held`). Rounding a value the target type represents exactly changes nothing,
and for some ops that is always the case: abs, neg, copysign, sign, a max or min (fmax,
fmin too), a select, floor, ceil, trunc and round of values the type holds (an exact load, an earlier rounding, a constant
it represents) are values it holds too. Their rounding costs a bfloat16 loop 7 vector
ops per 16 elements, and a float16 loop more, where the op itself costs one:
`x.abs()` over 2M bfloat16 values ran 2.5x eager's time. The cast's statement carries
`value="exact"`; the C++ printer keeps the float as it is, and readers that do not care
(Triton, the evaluator) round it, which gives the same bits.

Exactness comes from one pass over the statements in order (SSA: arguments come first).
A value is exact in a set of types: a load of a float16/bfloat16 buffer or a cast to one
is exact in that type; a float constant in every type that represents it; a
floating-point cast keeps its argument's types (float32 and float64 hold every half
value, and a narrowing cast of a value the narrow type holds is exact); the ops above
keep the types both or all their float operands share. NaN needs no rule: every NaN
the ops above return is one of their operands (or a constant NaN), and a store keeps
only the high bits, as rounding would (the prelude's note on brrr_bf16_bits and
brrr_f16_bits).
"""
from __future__ import annotations

import dataclasses
import struct

import torch

from brrr_compiler.kernel_ir import Kernel, Phase, Stmt
from brrr_compiler.scalar_ops import EXACT

HALVES = (torch.float16, torch.bfloat16)
# ops whose result is one of their float operands, or an integer-valued rounding of one:
# a type that holds the operands holds the result
_KEEPS = frozenset({"abs", "neg", "maximum", "minimum", "fmax", "fmin", "where", "floor",
                    "ceil", "trunc", "round", "copysign", "sign"})


def mark_exact_casts(k: Kernel) -> Kernel:
    """`k` with every cast to float16/bfloat16 of a value that type holds marked (the note)."""
    exact = exact_types(k)

    def mark(s: Stmt) -> Stmt:
        if s.op == "cast" and s.dtype in HALVES and s.dtype in exact.get(s.args[0], ()):
            return dataclasses.replace(s, value=EXACT)
        return s

    if not any(mark(s) is not s for s in k.body):
        return k
    return dataclasses.replace(k, phases=[Phase(p.loop, [mark(s) for s in p.body], p.once)
                                          for p in k.phases])


def exact_types(k: Kernel) -> dict[str, frozenset]:
    """Per float value of `k`, the half-precision types that represent it exactly."""
    dtypes = {s.out: s.dtype for s in k.body if s.out is not None}
    exact: dict[str, frozenset] = {}
    for s in k.body:
        if s.out is None or not s.dtype.is_floating_point:
            continue
        types = _types(s, exact, dtypes)
        if types:
            exact[s.out] = types
    return exact


def _types(s: Stmt, exact: dict, dtypes: dict) -> frozenset:
    if s.op == "load":
        return frozenset({s.dtype}) & frozenset(HALVES)
    if s.op == "const":
        return frozenset(t for t in HALVES if _holds(t, s.value))
    if s.op == "cast":
        kept = exact.get(s.args[0], frozenset()) if dtypes[s.args[0]].is_floating_point \
            else frozenset()
        return kept | (frozenset({s.dtype}) & frozenset(HALVES))
    if s.op in _KEEPS:
        floats = [a for a in s.args if dtypes[a].is_floating_point]
        if floats:
            return frozenset.intersection(*(exact.get(a, frozenset()) for a in floats))
    return frozenset()


def _holds(dtype: torch.dtype, value) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    v = float(value)
    if v != v:
        return True
    # struct, not a torch round trip: this runs for every constant of every kernel the
    # cost model lowers to price a merge (a tensor round trip took 1.6 of a ResNet's 4 s)
    try:
        if dtype is torch.float16:
            return struct.unpack("e", struct.pack("e", v))[0] == v
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return False
    return struct.unpack("<f", struct.pack("<I", bits))[0] == v and bits & 0xFFFF == 0
