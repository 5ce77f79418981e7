"""Workloads the suites share: the pointwise trio (WORKLOADS, sized by --size) and the
kernel suite's cases (KERNEL_CASES: each workload at fixed shapes, from cache-resident to
far beyond the last-level cache, some in bfloat16).

Every function is memory-bound (chain10's transcendentals make it compute-heavy on a
2-core CPU) and deterministic; inputs come from seeded generators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

import masked_workloads
import reduce_workloads


# ---- the functions ----------------------------------------------------------------------


def bias_gelu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Bias add then exact (erf) GELU."""
    return F.gelu(x + b)


def bias_relu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Bias add then ReLU (a linear layer's epilogue)."""
    return torch.relu(x + b)


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


def chain10_arith(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Ten cheap pointwise ops on two inputs, no transcendentals: memory-bound on any CPU
    (chain10's sin/exp/log1p/tanh/sigmoid make it compute-bound on this 2-core machine).
    mul, add, sub, abs, add, div, neg, maximum, clamp, where.
    """
    t = x * y  # 1 mul
    t = t + 1.0  # 2 add
    t = t - y  # 3 sub
    d = y.abs() + 1.0  # 4 abs, 5 add
    t = t / d  # 6 div
    t = torch.maximum(-t, x)  # 7 neg, 8 maximum
    t = t.clamp(-4.0, 4.0)  # 9 clamp
    return torch.where(t > 0, t, 0.5 * t)  # 10 where (with its compare and scale)


def silu_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """SwiGLU-style gate: silu(a) * b."""
    return F.silu(a) * b


def layer_norm_residual(x, r, w, b) -> torch.Tensor:
    """LayerNorm over the last dim, with weight and bias, of a residual sum."""
    return F.layer_norm(x + r, (x.shape[-1],), w, b, 1e-5)


def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """LLaMA's RMSNorm, written out as models write it (statistics in float32)."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return h.type_as(x) * w


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of (rows, classes) logits against int64 class targets."""
    return F.cross_entropy(logits, target)


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of (batch, seq, heads, head_dim) by (seq, head_dim) tables,
    with the rotate-half formulation (a cat of the two negated/swapped halves)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=10)


def adam_step(p, g, m, v):
    """One Adam update of a flat parameter: returns (new param, new exp_avg, new exp_avg_sq)."""
    b1, b2, step = ADAM["beta1"], ADAM["beta2"], ADAM["step"]
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1**step)
    v_hat = v / (1 - b2**step)
    return p - ADAM["lr"] * m_hat / (torch.sqrt(v_hat) + ADAM["eps"]), m, v


def sum_dim0(x: torch.Tensor) -> torch.Tensor:
    """A reduction over the outer dim: column sums."""
    return x.sum(dim=0)


def sum_all(x: torch.Tensor) -> torch.Tensor:
    """A full reduction to one scalar."""
    return x.sum()


def transpose_bcast(x, y, s) -> torch.Tensor:
    """Broadcasting with a non-contiguous operand: (x + y.T) * s[:, None]."""
    return (x + y.t()) * s[:, None]


# ---- the pointwise trio, sized by --size (bench_pointwise.py) -----------------------------


@dataclass(frozen=True)
class Workload:
    name: str
    fn: Callable
    make_inputs: Callable[[int], tuple]  # N -> inputs
    description: str


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _matrix(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, n, generator=_gen(seed))


def _matrix_and_bias(n: int) -> tuple:
    return _matrix(n, 0), torch.randn(n, generator=_gen(1))


def _two_matrices(n: int) -> tuple:
    return _matrix(n, 0), _matrix(n, 1)


WORKLOADS = {
    w.name: w
    for w in (
        Workload("bias_gelu", bias_gelu, _matrix_and_bias, "gelu(x + b), exact erf GELU"),
        Workload("chain10", chain10, _two_matrices,
                 "10 pointwise ops on x, y, five of them transcendental (compute-bound here)"),
        Workload("chain10_arith", chain10_arith, _two_matrices,
                 "10 cheap pointwise ops on x, y, no transcendentals (memory-bound)"),
        Workload("silu_mul", silu_mul, _two_matrices, "silu(a) * b"),
    )
}


# ---- the kernel suite's cases (bench_kernels.py, bench_compile.py) ------------------------

# Reductions sum thousands of elements in an order that differs between backends, so their
# outputs are compared with rtol 1e-4 (a float32 sum of n terms may differ by ~n * 6e-8
# relative in the worst case; blocked/pairwise sums stay far below 1e-4).
REDUCTION_TOL = dict(rtol=1e-4, atol=1e-5)
# softmax outputs are ~1/row_length: an atol of 1e-5 would accept anything for long rows
SOFTMAX_TOL = dict(rtol=1e-4, atol=1e-7)


def _randn(shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=_gen(seed)).to(dtype)


def _pointwise2(dtype=torch.float32, bias=False):
    """inputs for f(x, b) (bias of the last dim) or f(x, y) of shape (rows, cols)"""

    def make(rows: int, cols: int) -> tuple:
        second = (cols,) if bias else (rows, cols)
        return _randn((rows, cols), 0, dtype), _randn(second, 1, dtype)

    return make


def _layer_norm_inputs(dtype=torch.float32):
    def make(rows: int, cols: int) -> tuple:
        w = 1 + 0.1 * _randn((cols,), 2)
        b = 0.1 * _randn((cols,), 3)
        x, r = _randn((rows, cols), 0, dtype), _randn((rows, cols), 1, dtype)
        return x, r, w.to(dtype), b.to(dtype)

    return make


def _rms_norm_inputs(dtype=torch.float32):
    def make(rows: int, cols: int) -> tuple:
        return _randn((rows, cols), 0, dtype), (1 + 0.1 * _randn((cols,), 2)).to(dtype)

    return make


def _softmax_inputs(dtype=torch.float32):
    return lambda rows, cols: (_randn((rows, cols), 0, dtype),)


def _cross_entropy_inputs(rows: int, classes: int) -> tuple:
    target = torch.randint(0, classes, (rows,), generator=_gen(4))
    return _randn((rows, classes), 0), target


def _rotary_inputs(batch: int, seq: int, heads: int, dim: int) -> tuple:
    pos = torch.arange(seq, dtype=torch.float32)[:, None]
    inv_freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = torch.cat((pos * inv_freq, pos * inv_freq), dim=-1)
    return _randn((batch, seq, heads, dim), 0), angles.cos(), angles.sin()


def _adam_inputs(n: int) -> tuple:
    return _randn((n,), 0), _randn((n,), 1), 0.1 * _randn((n,), 2), _randn((n,), 3).abs() * 0.01


def _positive_inputs(*shape: int) -> tuple:
    """uniform [0, 1): a well-conditioned sum, so a relative tolerance means something"""
    return (torch.rand(shape, generator=_gen(0)),)


def _transpose_inputs(n: int) -> tuple:
    return _randn((n, n), 0), _randn((n, n), 1), _randn((n,), 2)


@dataclass(frozen=True)
class KernelCase:
    """One workload at one shape: `make_inputs(*dims)` builds its inputs."""

    workload: str                 # the function's name (a family of cases)
    fn: Callable
    make_inputs: Callable[..., tuple]
    dims: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    tolerance: dict | None = None  # None: harness.TOLERANCES by output dtype
    heavy: bool = False            # large enough that the suite times it for fewer rounds
    quick: bool = False            # one of the --quick cases
    twin: Callable | None = None   # the same kernel without its mask, timed beside it
    note: str = field(default="", compare=False)

    @property
    def shape(self) -> str:
        return "x".join(str(d) for d in self.dims)

    @property
    def name(self) -> str:
        suffix = "" if self.dtype is torch.float32 else f" {_DTYPE_NAMES[self.dtype]}"
        return f"{self.workload} {self.shape}{suffix}"

    def inputs(self) -> tuple:
        return self.make_inputs(*self.dims)


_DTYPE_NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
BF16 = torch.bfloat16


def _cases() -> list[KernelCase]:
    K = KernelCase
    cases = []
    for rows, cols in ((256, 256), (1024, 1024), (4096, 4096)):   # 64K, 1M, 16M elements
        cases += [
            K("bias_gelu", bias_gelu, _pointwise2(bias=True), (rows, cols), quick=rows == 256),
            K("chain10", chain10, _pointwise2(), (rows, cols)),
            K("silu_mul", silu_mul, _pointwise2(), (rows, cols)),
        ]
    cases += [
        K("bias_relu", bias_relu, _pointwise2(bias=True), (256, 256)),
        K("bias_relu", bias_relu, _pointwise2(bias=True), (4096, 4096)),
        K("layer_norm_residual", layer_norm_residual, _layer_norm_inputs(), (256, 1024),
          tolerance=REDUCTION_TOL, quick=True),
        K("layer_norm_residual", layer_norm_residual, _layer_norm_inputs(), (8192, 1024),
          tolerance=REDUCTION_TOL),
        K("rms_norm", rms_norm, _rms_norm_inputs(), (256, 1024), tolerance=REDUCTION_TOL),
        K("rms_norm", rms_norm, _rms_norm_inputs(), (8192, 1024), tolerance=REDUCTION_TOL),
        K("softmax", softmax, _softmax_inputs(), (256, 1024), tolerance=SOFTMAX_TOL),
        K("softmax", softmax, _softmax_inputs(), (4096, 4096), tolerance=SOFTMAX_TOL),
        K("softmax", softmax, _softmax_inputs(), (64, 50257), tolerance=SOFTMAX_TOL),
        K("cross_entropy", cross_entropy, _cross_entropy_inputs, (64, 32000),
          tolerance=REDUCTION_TOL, quick=True),
        K("cross_entropy", cross_entropy, _cross_entropy_inputs, (8192, 32000),
          tolerance=REDUCTION_TOL, heavy=True, note="1 GB of logits"),
        K("rotary", rotary, _rotary_inputs, (1, 128, 8, 64)),
        K("rotary", rotary, _rotary_inputs, (4, 2048, 16, 64)),
        K("adam_step", adam_step, _adam_inputs, (65536,)),
        K("adam_step", adam_step, _adam_inputs, (16 << 20,)),
        K("sum_dim0", sum_dim0, _positive_inputs, (256, 256), tolerance=REDUCTION_TOL),
        K("sum_dim0", sum_dim0, _positive_inputs, (4096, 4096), tolerance=REDUCTION_TOL),
        K("sum_all", sum_all, _positive_inputs, (256, 256), tolerance=REDUCTION_TOL),
        K("sum_all", sum_all, _positive_inputs, (4096, 4096), tolerance=REDUCTION_TOL),
        K("transpose_bcast", transpose_bcast, _transpose_inputs, (256,), quick=True),
        K("transpose_bcast", transpose_bcast, _transpose_inputs, (4096,)),
        # bfloat16 variants: bf16 in and out, float32 math inside
        K("bias_gelu", bias_gelu, _pointwise2(BF16, bias=True), (4096, 4096), BF16),
        K("silu_mul", silu_mul, _pointwise2(BF16), (4096, 4096), BF16),
        K("layer_norm_residual", layer_norm_residual, _layer_norm_inputs(BF16), (8192, 1024),
          BF16),
        K("rms_norm", rms_norm, _rms_norm_inputs(BF16), (8192, 1024), BF16),
        K("softmax", softmax, _softmax_inputs(BF16), (4096, 4096), BF16),
    ]
    return cases + [K(**spec) for spec in masked_workloads.specs() + reduce_workloads.specs()]


KERNEL_CASES = {c.name: c for c in _cases()}

DESCRIPTIONS = {
    "bias_gelu": "gelu(x + b), exact erf GELU, bias over the last dim",
    "bias_relu": "relu(x + b), bias over the last dim",
    "chain10": "10 pointwise ops on x, y (mul, add, sin, exp, log1p, sub, tanh, sigmoid, "
    "sqrt, maximum); transcendental-heavy",
    "silu_mul": "silu(a) * b",
    "layer_norm_residual": "layer_norm(x + r) with weight and bias over the last dim",
    "rms_norm": "x * rsqrt(mean(x^2, -1) + eps) * w, statistics in float32",
    "softmax": "softmax over the last dim",
    "cross_entropy": "F.cross_entropy(logits, int64 targets), mean over rows",
    "rotary": "rotary embedding (rotate-half with cat) of (batch, seq, heads, dim) by "
    "(seq, dim) cos/sin tables",
    "adam_step": "Adam update of a flat fp32 parameter: (p, g, m, v) -> (p', m', v')",
    "sum_dim0": "x.sum(0): a reduction over the outer dim, uniform [0, 1) inputs",
    "sum_all": "x.sum(): a full reduction, uniform [0, 1) inputs",
    "transpose_bcast": "(x + y.T) * s[:, None]: a transposed operand and a column broadcast",
    **masked_workloads.DESCRIPTIONS,
    **reduce_workloads.DESCRIPTIONS,
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

