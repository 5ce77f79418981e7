"""Sizes as sympy expressions: ints stay numbers, SymInts (dynamic shapes) their symbols.

A leaf module: partition, lowering and runtime all read shapes through it.
"""
from __future__ import annotations

import functools

import sympy
import torch


def to_sympy(x) -> sympy.Expr:
    """An int or SymInt as a sympy expression."""
    if isinstance(x, torch.SymInt):
        return x.node.expr
    if isinstance(x, sympy.Basic):
        return x
    return sympy.Integer(int(x))


@functools.lru_cache(maxsize=1 << 14)
def free_symbols(expr) -> frozenset:
    """`expr`'s free symbols. Sympy walks the whole tree on every ask, and lowering asks
    it of the same index expressions many times (the cost policy lowers each candidate
    group, so this is compile time)."""
    return frozenset(sympy.sympify(expr).free_symbols)


@functools.lru_cache(maxsize=1 << 12)
def clamp(i: sympy.Expr, low, high) -> sympy.Expr:
    """min(max(i, low), high). Made once per index, and numbers folded here: sympy asks
    its assumptions on every Min and Max it builds, and the cost policy lowers a slice or a
    cat again in every candidate group that holds it (0.3 s of a GPT-2's compile)."""
    i, low, high = sympy.sympify(i), sympy.sympify(low), sympy.sympify(high)
    if i.is_Integer and low.is_Integer and high.is_Integer:
        return sympy.Integer(min(max(int(i), int(low)), int(high)))
    return sympy.Min(sympy.Max(i, low), high)


def shape(val) -> tuple:
    return _sizes(val.shape)


def strides(val) -> tuple:
    return _sizes(val.stride())


def is_static(val) -> bool:
    """Whether `val` is a tensor whose sizes, strides and storage offset are plain ints
    (no SymInt): what a rewrite that bakes them in needs."""
    return isinstance(val, torch.Tensor) and all(
        isinstance(x, int) for x in (*val.shape, *val.stride(), val.storage_offset()))


def _sizes(sizes) -> tuple:
    try:
        return _int_sizes(tuple(sizes))     # a SymInt is unhashable: TypeError
    except TypeError:
        return tuple(to_sympy(s) for s in sizes)


@functools.lru_cache(maxsize=1 << 12)
def _int_sizes(sizes: tuple) -> tuple:
    """Static sizes as sympy Integers, made once: lowering reads every node's shape and
    strides at each use, in each candidate group the cost policy lowers."""
    return tuple(sympy.Integer(s) for s in sizes)


def free_size_symbols(exprs) -> list[sympy.Symbol]:
    """The size symbols in `exprs`, sorted by name: not loop variables (i, r, t) and not
    SSA values used as indices (v, from gather)."""
    syms = set()
    for e in exprs:
        syms |= {s for s in free_symbols(e) if not s.name.startswith(("i", "t", "r", "v"))}
    return sorted(syms, key=lambda s: s.name)


def size_sources(graph: torch.fx.Graph) -> dict:
    """symbol -> (placeholder node, dim): where a running graph can read each size.

    dim is None for a SymInt placeholder (the value itself), else a tensor dimension.
    """
    found: dict = {}
    for node in graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt) and isinstance(val.node.expr, sympy.Symbol):
            found.setdefault(val.node.expr, (node, None))
        elif isinstance(val, torch.Tensor):
            for d, s in enumerate(val.shape):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                    found.setdefault(s.node.expr, (node, d))
    return found


def static_sizes(exprs) -> list[int] | None:
    """The values of `exprs` when every one is a constant, else None."""
    values = [sympy.sympify(e) for e in exprs]
    return [int(v) for v in values] if all(v.is_Integer for v in values) else None
