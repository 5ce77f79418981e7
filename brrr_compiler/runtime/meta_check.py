"""The first call checks what the runner's kernels assume about the tensors ATen hands them.

A kernel indexes its inputs with the dtypes, sizes and strides of their FakeTensors,
baked into its code. Two kinds of tensor can arrive otherwise:
- the output of an ATen fallback whose fake kernel disagrees with its real one (the
  running statistics `_batch_norm_with_update_functional` returns are float32 to
  FakeTensor and bfloat16 in eager);
- a graph input that AOTAutograd passes with other strides than the placeholder's
  FakeTensor says.
Read blindly, such a tensor gives a silently wrong result. So the first call of each
compiled graph runs a checking runner: every such tensor is compared with its FakeTensor,
and one that disagrees in dtype or strides is copied into the assumed layout (the value is
the same, exactly as the traced graph describes it). If nothing disagreed, later calls run
the plain runner and pay nothing; otherwise the checking runner stays. A size that
disagrees cannot be repaired: that raises, naming the node.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.log import logger
from brrr_compiler.symbolic import shape, strides


class MetaMismatch(RuntimeError):
    """A tensor's real size differs from the one the graph was compiled for."""


def spec_of(val) -> tuple | None:
    """(dtype, shape, strides) to check a runtime tensor against: ints, or with dynamic
    shapes sympy expressions of the size symbols."""
    if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
        return None
    return val.dtype, shape(val), strides(val)


def _concrete(value, shape_exprs, stride_exprs) -> tuple:
    """The expected shape and strides for `value`, the size symbols read off its own
    shape; None where an expression has a symbol its shape does not give."""
    if all(isinstance(e, int) or e.is_Integer for e in (*shape_exprs, *stride_exprs)):
        return tuple(map(int, shape_exprs)), tuple(map(int, stride_exprs))
    known = {e: n for e, n in zip(shape_exprs, value.shape) if isinstance(e, sympy.Symbol)}
    def ints(exprs):
        subs = [sympy.sympify(e).subs(known) for e in exprs]
        return tuple(int(e) for e in subs) if all(e.is_Integer for e in subs) else None
    return ints(shape_exprs), ints(stride_exprs)


def checker(found: list, specs: dict):
    """The runner's check call: `expect` of the node named `name` against `specs[name]`,
    reporting to `found` (a closure: FX prints its arguments as literals, so a list would
    be new at every call and a sympy size would not survive)."""
    def check(value, name: str, repair: bool = True):
        return expect(value, name, specs[name], found, repair)
    check.__name__ = check.__qualname__ = "expect"
    check.__module__ = "brrr"      # the checking runner's code reads brrr_expect(...)
    return check


def expect(value, name: str, spec: tuple, found: list, repair: bool = True):
    """`value` as the compiled graph assumes it: itself, or a copy in the assumed dtype
    and strides. Each disagreement is appended to `found`. `repair=False` (an input the
    graph writes back into, which a copy would cut off) raises instead."""
    if not isinstance(value, torch.Tensor):
        return value
    dtype, (shape, stride) = spec[0], _concrete(value, spec[1], spec[2])
    if shape is not None and tuple(value.shape) != shape:
        raise MetaMismatch(f"brrr: {name} has shape {tuple(value.shape)} at run time where "
                           f"the graph was compiled for {shape}")
    same_stride = stride is None or _same_strides(value, stride)
    if value.dtype == dtype and same_stride:
        return value
    what = (f"{name} is {value.dtype} with strides {value.stride()} at run time where its "
            f"FakeTensor says {dtype} with strides {stride}")
    if not repair:
        raise MetaMismatch(f"brrr: {what}, and the graph writes into it")
    found.append(name)
    logger.info("brrr: %s; copied into the layout the kernels were compiled for", what)
    out = torch.empty_strided(value.shape, stride if stride is not None else value.stride(),
                              dtype=dtype, device=value.device)
    return out.copy_(value)


def _same_strides(value, stride) -> bool:
    # a dimension of size 0 or 1 is never stepped along: any stride there reads the same
    return all(s == t or n <= 1 for n, s, t in zip(value.shape, value.stride(), stride))


def first_call_checked(checking, plain):
    """A boxed callable: `checking` (a runner with expect() calls, whose `found` list is
    `checking.found`) for the first call, then `plain` if nothing disagreed."""
    state = {"run": None}

    def run(args):
        if state["run"] is not None:
            return state["run"](args)
        out = checking(args)
        state["run"] = checking if checking.found else plain
        return out

    return run
