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

import torch

from brrr_compiler.log import logger


class MetaMismatch(RuntimeError):
    """A tensor's real size differs from the one the graph was compiled for."""


def spec_of(val) -> tuple | None:
    """(dtype, shape, strides) to check a runtime tensor against; sizes only when static."""
    if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
        return None
    static = all(isinstance(x, int) for x in (*val.shape, *val.stride()))
    return (val.dtype, tuple(val.shape) if static else None,
            tuple(val.stride()) if static else None)


def checker(found: list):
    """The runner's check call: `expect` reporting to `found` (a closure, since FX would
    print a list argument as a literal, new at every call)."""
    def check(value, name: str, spec: tuple, repair: bool = True):
        return expect(value, name, spec, found, repair)
    check.__name__ = check.__qualname__ = "expect"
    check.__module__ = "brrr"      # the checking runner's code reads brrr_expect(...)
    return check


def expect(value, name: str, spec: tuple, found: list, repair: bool = True):
    """`value` as the compiled graph assumes it: itself, or a copy in the assumed dtype
    and strides. Each disagreement is appended to `found`. `repair=False` (an input the
    graph writes back into, which a copy would cut off) raises instead."""
    dtype, shape, stride = spec
    if not isinstance(value, torch.Tensor):
        return value
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
