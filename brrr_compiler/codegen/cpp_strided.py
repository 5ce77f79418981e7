"""Strided loads of a pointwise loop that calls libm, copied a chunk at a time first.

Note on why. An input read at a stride along the inner loop (a step-sliced row
`x[..., 1::2]`, broadcast over the outer dims) makes gcc 12 build each vector of the
load element by element. Beside cheap arithmetic the loop stays bound by memory and that
costs nothing, but beside a libm call the loop's vectors wait for it: atan2 of a (66049,
1024) float tensor and a step-sliced bfloat16 row of 1024 took 56 ms, 34 with the row
contiguous (mul in place of atan2: 25 ms either way). The schedule names such inputs
(CppSchedule.copy_strided, schedule/cpp.py `strided_libm_loads`); before each chunk's
`omp simd` loop a plain loop copies their values into a local array (float16 and
bfloat16 converted to float as they are copied), which the loop reads at unit stride.
The copy keeps values as they are; the arrays hold one chunk (at most 2 KB: L1).
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from brrr_compiler.codegen.cpp_types import CTYPE
from brrr_compiler.kernel_ir import Stmt
from brrr_compiler.transforms.loops import linear_coeff

CONVERT = {torch.float16: "brrr_f16_to_f32", torch.bfloat16: "brrr_bf16_to_f32"}


def strided_copies(body: list[Stmt], buffers: frozenset, var, chunk: int, cexpr,
                   indent: str) -> tuple[list[str], list[Stmt]]:
    """Lines (inside a chunk loop over [c0, c1) of `var`) copying each load of
    `buffers` into a local array, and `body` reading those arrays instead."""
    loads = [s for s in body if s.op == "load" and s.buffer in buffers
             and linear_coeff(s.index, var, (var,)) not in (None, 0, 1)]
    if not loads:
        return [], body
    names: dict = {}
    lines = []
    for s in loads:
        key = (s.buffer, s.index)
        if key in names:
            continue
        names[key] = f"sd_{s.out}"
        value = f"{s.buffer}[{cexpr(s.index)}]"
        value = f"{CONVERT[s.dtype]}({value})" if s.dtype in CONVERT else value
        lines += [f"{indent}{CTYPE[s.dtype]} {names[key]}[{chunk}];",
                  f"{indent}#pragma omp simd",
                  f"{indent}for (int64_t {var} = c0; {var} < c1; ++{var}) "
                  f"{names[key]}[{var} - c0] = {value};"]
    at = sympy.Symbol(f"{var} - c0", integer=True)      # printed as is
    return lines, [_read(s, names, at) for s in body]


def _read(s: Stmt, names: dict, at) -> Stmt:
    key = (s.buffer, s.index)
    if s.op != "load" or key not in names:
        return s
    dtype = torch.float32 if s.dtype in CONVERT else s.dtype
    return dataclasses.replace(s, buffer=names[key], index=at, dtype=dtype)
