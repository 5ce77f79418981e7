"""Which pair of a row kernel's loop phases folds the row's max and its sum of
exp(x - max) in one walk (codegen/cpp_online.py has the note and prints the walk)."""
from __future__ import annotations

from typing import NamedTuple

from brrr_compiler.kernel_ir import Kernel, Phase, Stmt
from brrr_compiler.scalar_ops import NONPOSITIVE


class OnlinePair(NamedTuple):
    first: Phase       # folds max_ = max(a)
    second: Phase      # folds sum_ = sum(exp(a - max_))
    max_: Stmt
    sum_: Stmt


def online_pair(k: Kernel) -> OnlinePair | None:
    """The first pair of loop phases that one sweep can fold (see the module note)."""
    for first, second in zip(k.phases, k.phases[1:]):
        if first.per_row_loop and second.per_row_loop:
            pair = _pair(first, second)
            if pair is not None:
                return pair
    return None


def _pair(first: Phase, second: Phase) -> OnlinePair | None:
    reds1 = [s for s in first.body if s.op == "reduce"]
    reds2 = [s for s in second.body if s.op == "reduce"]
    if len(reds1) != 1 or len(reds2) != 1:
        return None
    mx, sm = reds1[0], reds2[0]
    if mx.value != "max" or not mx.dtype.is_floating_point or sm.value != "sum":
        return None
    defs = {s.out: s for s in second.body if s.out is not None}
    e = defs.get(sm.args[0])
    if e is None or e.op != "exp" or e.value != NONPOSITIVE:
        return None
    d = defs.get(e.args[0])
    readers = [s for s in second.body if mx.out in s.args]
    if d is None or d.op != "sub" or d.args[1] != mx.out or readers != [d]:
        return None
    if any(s.op == "store" for s in second.body):
        return None
    return OnlinePair(first, second, mx, sm)


def online_index(k: Kernel) -> int | None:
    """The index in k.phases of the first phase of online_pair(k), if any."""
    pair = online_pair(k)
    return None if pair is None else next(i for i, p in enumerate(k.phases) if p is pair.first)


def pair_at(k: Kernel, index: int | None) -> OnlinePair | None:
    """The pair whose first phase is k.phases[index] (CppSchedule.online)."""
    return None if index is None else _pair(k.phases[index], k.phases[index + 1])
