"""Mark the float libm calls of a kernel to be evaluated in double and rounded once
(Config.libm="accurate").

libmvec's float kernels, which the C++ printer calls by default, are 2-4 ulp off (log
up to 3.9, cos 1.9) where eager's are within 1: close enough for float32's tolerance, but
a comparison or an argmax of values a few ulp apart can then come out otherwise than
eager's. A marked call is printed through the double function and rounded, correctly
rounded but at 2-6x the function's cost (benchmarks/results/notes/float32_libm.md). The
statement carries `value="rounded"`; readers that do not care (Triton, whose functions
are its own; the evaluator; the cost counter) see a plain call.
"""
from __future__ import annotations

import dataclasses

import torch

from brrr_compiler import scalar_ops
from brrr_compiler.kernel_ir import Kernel, Phase, Stmt
from brrr_compiler.scalar_ops import ROUNDED


def _rounds(s: Stmt) -> bool:
    row = scalar_ops.TABLE.get(s.op)
    return (row is not None and s.value is None and s.dtype.is_floating_point
            and s.dtype is not torch.float64 and ROUNDED in dict(row.cpp.marked))


def round_libm_calls(k: Kernel) -> Kernel:
    """`k` with every float call that has a rounded form marked (see the module note)."""
    if not any(_rounds(s) for s in k.body):
        return k

    def mark(s: Stmt) -> Stmt:
        return dataclasses.replace(s, value=ROUNDED) if _rounds(s) else s

    return dataclasses.replace(k, phases=[Phase(p.loop, [mark(s) for s in p.body], p.once)
                                          for p in k.phases])
