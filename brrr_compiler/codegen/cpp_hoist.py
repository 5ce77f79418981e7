"""float16 stores of values computed before their loop (transforms/hoist.py moves them
there): the bits converted once, before the loop too."""
from __future__ import annotations

import torch

from brrr_compiler.kernel_ir import Stmt


def invariant_bits(body: list[Stmt], invariant: set[str],
                   indent: str) -> tuple[list[str], frozenset[str]]:
    """float16 stores of a loop's `body` whose values were computed before it
    (`invariant`): their bits, converted once before the loop; stmt_line(bits=...) stores
    `<value>_bits`. gcc 12, with
    the toolchain's -fno-unswitch-loops and -fno-code-hoisting, vectorizes no loop that
    converts a loop-invariant float to float16 bits inside it: the conversion's integer
    selects on an invariant condition are "not supported", and the whole loop, its sums
    included, stays scalar (generated pattern 22: a column walk at 3.8x Inductor's time).
    bfloat16's conversion is a shift, and rounding (float selects) vectorizes: neither moves."""
    names = sorted({s.args[0] for s in body if s.op == "store" and s.dtype is torch.float16
                    and s.args[0] in invariant})
    return ([f"{indent}const uint16_t {v}_bits = brrr_f16_bits({v});" for v in names],
            frozenset(names))
