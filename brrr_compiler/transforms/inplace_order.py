"""Stores after loads in a kernel whose output may be its input (runtime/inplace.py).

Note on why. A kernel that stores a mutated input's new value into the input itself
relies on reading each element in the iteration that stores it, before the store. The
lowering emits statements in graph order, and one element can be loaded twice: a cat
specialized per piece reads `x` once for the stored value and again for another output
computed from it (fuzz seed 301942: `x.mul_(0.5); v = minimum(x, y); x[:1] = 0.5`
stored x * 0.5 into x and then loaded x again for `minimum`, scaling it twice). With
every store of a loop body after its last load, all reads of the iteration see the old
value, whatever the order the graph gave.
"""
from __future__ import annotations

import dataclasses

from brrr_compiler.kernel_ir import Kernel


def stores_last(k: Kernel) -> Kernel:
    """`k` with each phase's stores moved after its other statements (their order kept)."""
    phases = [dataclasses.replace(p, body=[s for s in p.body if s.op != "store"]
                                  + [s for s in p.body if s.op == "store"])
              for p in k.phases]
    return dataclasses.replace(k, phases=phases)
