"""Pointwise workloads shared by bench_pointwise.py and bench_compile.py.

All are float32 and memory-bound: an NxN input (default N=4096, 16M elements) and, where a
bias is used, a bias of N broadcast over the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


def bias_gelu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Bias add then exact (erf) GELU."""
    return F.gelu(x + b)


def chain10(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Ten distinct pointwise ops on two inputs, cheap and transcendental mixed:
    mul, add, sin, exp, log1p, sub, tanh, sigmoid, sqrt, maximum.
    Every intermediate stays finite for any finite input (sqrt sees a sigmoid in (0, 1)).
    """
    t = x * y  # 1 mul
    t = t + 1.0  # 2 add
    t = torch.sin(t)  # 3 sin
    t = torch.exp(t)  # 4 exp
    t = torch.log1p(t)  # 5 log1p
    t = t - y  # 6 sub
    t = torch.tanh(t)  # 7 tanh
    t = torch.sigmoid(t)  # 8 sigmoid
    t = torch.sqrt(t)  # 9 sqrt
    return torch.maximum(t, x)  # 10 maximum


def silu_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """SwiGLU-style gate: silu(a) * b."""
    return F.silu(a) * b


@dataclass(frozen=True)
class Workload:
    name: str
    fn: Callable
    make_inputs: Callable[[int], tuple]  # N -> inputs
    description: str


def _matrix(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, n, generator=torch.Generator().manual_seed(seed))


def _matrix_and_bias(n: int) -> tuple:
    return _matrix(n, 0), torch.randn(n, generator=torch.Generator().manual_seed(1))


def _two_matrices(n: int) -> tuple:
    return _matrix(n, 0), _matrix(n, 1)


WORKLOADS = {
    w.name: w
    for w in (
        Workload("bias_gelu", bias_gelu, _matrix_and_bias, "gelu(x + b), exact erf GELU"),
        Workload("chain10", chain10, _two_matrices, "10 pointwise ops on x, y"),
        Workload("silu_mul", silu_mul, _two_matrices, "silu(a) * b"),
    )
}


def bytes_moved(inputs, output) -> int:
    """Bytes that must move: each distinct input read once plus the output written once.

    A broadcast operand counts at its own size, not the broadcast size.
    """
    seen, total = set(), 0
    for t in list(inputs) + torch.utils._pytree.tree_leaves(output):
        if isinstance(t, torch.Tensor) and id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total
