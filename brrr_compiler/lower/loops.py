"""Loop simplification on the kernel IR: order loops for the output, collapse dims.

Loops are ordered by the first output's strides (largest outermost), so stores walk
memory forward. Unit-extent loops disappear. Two adjacent loops (a outer, b inner)
collapse into one when every access is linear in both and a's coefficient equals b's
times b's extent — then `ca*a + cb*b == cb*(a*nb + b)` and one variable walks both.
A contiguous 4096x4096 pointwise kernel becomes one loop of 16M iterations.
"""
from __future__ import annotations

import sympy

from brrr_compiler.kernel_ir import Kernel, Stmt, loop_symbol


def linear_coeff(expr: sympy.Expr, var: sympy.Symbol, all_vars) -> sympy.Expr | None:
    """d(expr)/d(var) if expr is linear in var with a loop-invariant coefficient."""
    c = sympy.expand(expr).coeff(var)
    rest = sympy.expand(expr - c * var)
    if c.free_symbols & set(all_vars) or var in rest.free_symbols:
        return None
    return c


def _substitute(kernel: Kernel, mapping: dict, loop_vars, ranges) -> Kernel:
    body = [Stmt(s.out, s.dtype, s.op, s.args, s.buffer,
                 sympy.expand(s.index.xreplace(mapping)) if s.index is not None else None,
                 s.value) for s in kernel.body]
    return Kernel(kernel.name, kernel.origins, loop_vars, ranges, kernel.buffers, body,
                  kernel.size_vars)


def _reorder(kernel: Kernel, out_strides) -> Kernel:
    dims = [d for d, r in enumerate(kernel.ranges) if r != 1]
    dims.sort(key=lambda d: -_as_number(out_strides[d]) if d < len(out_strides) else 0)
    mapping = {v: sympy.Integer(0) for d, v in enumerate(kernel.loop_vars) if d not in dims}
    new_vars = [loop_symbol(k) for k in range(len(dims))]
    # rename through temporaries so i0 -> i1 and i1 -> i0 do not collide
    tmp = {kernel.loop_vars[d]: sympy.Symbol(f"t{k}", integer=True, nonnegative=True)
           for k, d in enumerate(dims)}
    stage = _substitute(kernel, {**mapping, **tmp}, kernel.loop_vars, kernel.ranges)
    final = {tmp[kernel.loop_vars[d]]: new_vars[k] for k, d in enumerate(dims)}
    return _substitute(stage, final, new_vars, [kernel.ranges[d] for d in dims])


def _as_number(x) -> float:
    try:
        return float(x)
    except TypeError:
        return float("inf")     # symbolic strides are large


def _can_collapse(kernel: Kernel, k: int) -> bool:
    a, b, nb = kernel.loop_vars[k], kernel.loop_vars[k + 1], kernel.ranges[k + 1]
    for s in kernel.accesses():
        ca = linear_coeff(s.index, a, kernel.loop_vars)
        cb = linear_coeff(s.index, b, kernel.loop_vars)
        if ca is None or cb is None or sympy.expand(ca - cb * nb) != 0:
            return False
    return True


def _collapse(kernel: Kernel, k: int) -> Kernel:
    a, b = kernel.loop_vars[k], kernel.loop_vars[k + 1]
    ranges = kernel.ranges[:k] + [kernel.ranges[k] * kernel.ranges[k + 1]] + kernel.ranges[k + 2:]
    kernel = _substitute(kernel, {a: sympy.Integer(0)}, kernel.loop_vars, kernel.ranges)
    loop_vars = kernel.loop_vars[:k] + kernel.loop_vars[k + 1:]
    kernel = Kernel(kernel.name, kernel.origins, loop_vars, ranges, kernel.buffers,
                    kernel.body, kernel.size_vars)
    return _renumber(kernel)


def _renumber(kernel: Kernel) -> Kernel:
    new_vars = [loop_symbol(k) for k in range(len(kernel.loop_vars))]
    tmp = {v: sympy.Symbol(f"t{k}", integer=True, nonnegative=True)
           for k, v in enumerate(kernel.loop_vars)}
    stage = _substitute(kernel, tmp, kernel.loop_vars, kernel.ranges)
    final = {tmp[v]: new_vars[k] for k, v in enumerate(kernel.loop_vars)}
    return _substitute(stage, final, new_vars, kernel.ranges)


def simplify_loops(kernel: Kernel, out_strides) -> Kernel:
    kernel = _reorder(kernel, out_strides)
    k = len(kernel.loop_vars) - 2
    while k >= 0:
        if _can_collapse(kernel, k):
            kernel = _collapse(kernel, k)
        k -= 1
    return kernel
