"""Tangents AOTAutograd hands the backward as None.

A function that writes into an input returns the written input as an extra output of the
forward, and the backward takes a tangent for it. When the loss does not depend on the
input's new value, autograd has no gradient for that output, and torch 2.13's AOTAutograd
passes None where the backward graph expects a tensor (its aot_eager and Inductor raise
then; eager computes the gradients). The missing gradient is zero: the backward below gets
zeros of the traced tangent's size, strides and dtype in its place.
"""
from __future__ import annotations

import torch

from brrr_compiler.symbolic import is_static


def zero_missing_tangents(gm: torch.fx.GraphModule, run):
    """`run` (a boxed backward callable for `gm`) with every None it may receive for the
    tangent of a mutated input replaced by zeros. Returns `run` itself when `gm` takes no
    such tangent, or when its size is symbolic (not known before the call)."""
    slots = [(i, n.meta["val"]) for i, n in enumerate(gm.graph.find_nodes(op="placeholder"))
             if _mutation_tangent(n) and is_static(n.meta.get("val"))]
    if not slots:
        return run
    slots = [(i, tuple(v.shape), tuple(v.stride()), v.dtype, v.device) for i, v in slots]

    def run_with_zeros(args):
        for i, size, stride, dtype, device in slots:
            if args[i] is None:
                args[i] = torch.empty_strided(size, stride, dtype=dtype,
                                              device=device).zero_()
        return run(args)

    run_with_zeros.__dict__.update(getattr(run, "__dict__", {}))
    run_with_zeros._boxed_call = True
    return run_with_zeros


def _mutation_tangent(node) -> bool:
    desc = node.meta.get("desc")
    return type(getattr(desc, "output", None)).__name__ == "InputMutationAOTOutput"
