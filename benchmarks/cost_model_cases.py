"""The cases benchmarks/bench_cost_model.py measures: kernel cases (one brrr kernel each:
pointwise chains, reductions, norms, from cache-resident to 256 MB) whose predicted and
measured times it compares, and policy workloads it compiles under each fusion policy.
bench_autotune.py times the same workloads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from workloads import chain10


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    make_inputs: Callable[[], tuple]
    what: str


def _t(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _rms_norm(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _transc3(x):
    return x.exp().sin().tanh()


M, K64 = 1 << 20, 1 << 16
KERNELS = [
    Case("add_256KB", lambda x: x + 1, lambda: (_t(K64),), "x + 1, 64K floats"),
    Case("add_4MB", lambda x: x + 1, lambda: (_t(M),), "x + 1, 1M"),
    Case("add_64MB", lambda x: x + 1, lambda: (_t(16 * M),), "x + 1, 16M"),
    Case("add_256MB", lambda x: x + 1, lambda: (_t(64 * M),), "x + 1, 64M"),
    Case("fma_4MB", lambda x, y: x * y + 1, lambda: (_t(M), _t(M, seed=1)), "x * y + 1, 1M"),
    Case("fma_64MB", lambda x, y: x * y + 1, lambda: (_t(16 * M), _t(16 * M, seed=1)),
         "x * y + 1, 16M"),
    Case("bias_gelu_4MB", lambda x, b: F.gelu(x + b), lambda: (_t(1024, 1024), _t(1024)),
         "gelu(x + b), 1024x1024"),
    Case("bias_gelu_64MB", lambda x, b: F.gelu(x + b), lambda: (_t(4096, 4096), _t(4096)),
         "gelu(x + b), 4096x4096"),
    Case("silu_mul_1MB", lambda a, b: F.silu(a) * b, lambda: (_t(512, 512), _t(512, 512, seed=1)),
         "silu(a) * b, 512x512"),
    Case("silu_mul_64MB", lambda a, b: F.silu(a) * b,
         lambda: (_t(4096, 4096), _t(4096, 4096, seed=1)), "silu(a) * b, 4096x4096"),
    Case("transc3_4MB", _transc3, lambda: (_t(M),), "tanh(sin(exp(x))), 1M"),
    Case("transc3_64MB", _transc3, lambda: (_t(16 * M),), "tanh(sin(exp(x))), 16M"),
    Case("erf_16MB", lambda x: torch.erf(x) * 0.5, lambda: (_t(4 * M),), "erf(x) * 0.5, 4M"),
    Case("chain10_64MB", chain10, lambda: (_t(4096, 4096), _t(4096, 4096, seed=1)),
         "10 pointwise ops on x, y, 4096x4096"),
    Case("f64_fma_64MB", lambda x: x * 2 + 1, lambda: (_t(8 * M, dtype=torch.float64),),
         "float64 x * 2 + 1, 8M"),
    Case("f16_sigmoid_32MB", lambda x: (x * 2).sigmoid(),
         lambda: (_t(4096, 4096, dtype=torch.float16),), "float16 sigmoid(2x), 4096x4096"),
    Case("bcast_add_64MB", lambda x, b: x + b, lambda: (_t(4096, 4096), _t(4096)),
         "x + b, b broadcast over rows, 4096x4096"),
    Case("transpose_add_16MB", lambda x: x + x.t(), lambda: (_t(2048, 2048),),
         "x + x.t(), 2048x2048"),
    Case("rowsum_64MB", lambda x: x.sum(-1), lambda: (_t(4096, 4096),), "x.sum(-1), 4096x4096"),
    Case("colsum_64MB", lambda x: x.sum(0), lambda: (_t(4096, 4096),), "x.sum(0), 4096x4096"),
    Case("sum_all_256MB", lambda x: x.sum(), lambda: (_t(64 * M),), "x.sum(), 64M"),
    Case("amax_4MB", lambda x: x.amax(-1), lambda: (_t(1024, 1024),), "x.amax(-1), 1024x1024"),
    Case("meansq_32MB", lambda x: (x * x).mean(-1), lambda: (_t(8192, 1024),),
         "(x * x).mean(-1), 8192x1024"),
    Case("var_16MB", lambda x: x.var(-1), lambda: (_t(2048, 2048),), "x.var(-1), 2048x2048"),
    Case("softmax_4MB", lambda x: torch.softmax(x, -1), lambda: (_t(1024, 1024),),
         "softmax, 1024x1024"),
    Case("softmax_64MB", lambda x: torch.softmax(x, -1), lambda: (_t(4096, 4096),),
         "softmax, 4096x4096"),
    Case("softmax_256MB", lambda x: torch.softmax(x, -1), lambda: (_t(8192, 8192),),
         "softmax, 8192x8192"),
    Case("log_softmax_16MB", lambda x: torch.log_softmax(x, -1), lambda: (_t(256, 16384),),
         "log_softmax over rows of 16384, 256 rows"),
    Case("layer_norm_1MB", lambda x, w, b: F.layer_norm(x, (256,), w, b),
         lambda: (_t(1024, 256), _t(256), _t(256)), "layer_norm, 1024x256"),
    Case("layer_norm_32MB", lambda x, w, b: F.layer_norm(x, (1024,), w, b),
         lambda: (_t(8192, 1024), _t(1024), _t(1024)), "layer_norm, 8192x1024"),
    Case("rms_norm_64MB", _rms_norm, lambda: (_t(4096, 4096),), "rms_norm, 4096x4096"),
]


def expensive_vector_times(v, y):
    return v.sin().exp().erf() * y


def expensive_softmax(x):
    return torch.softmax(x.sin().exp().erf() * 4, -1)


def cheap_four_ways(x):
    p = x * 2 + 1
    return p.sum(0), p.amax(0), p.sum(1), p.amax(1)


def four_consumers(v, y1, y2, y3, y4):
    p = v.sin().exp().erf()
    return p * y1, p + y2, p - y3, p * y4 + 1


def _layer_norm_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


WORKLOADS = [
    Case("bias_gelu", lambda x, b: F.gelu(x + b), lambda: (_t(4096, 4096), _t(4096)),
         "gelu(x + b), 4096x4096"),
    Case("chain10", chain10, lambda: (_t(4096, 4096), _t(4096, 4096, seed=1)),
         "10 pointwise ops, 4096x4096"),
    Case("silu_mul", lambda a, b: F.silu(a) * b, lambda: (_t(4096, 4096), _t(4096, 4096, seed=1)),
         "silu(a) * b, 4096x4096"),
    Case("softmax", lambda x: torch.softmax(x, -1), lambda: (_t(4096, 4096),), "4096x4096"),
    Case("layer_norm_gelu", _layer_norm_gelu, lambda: (_t(8192, 1024), _t(1024), _t(1024)),
         "gelu(layer_norm(x)), 8192x1024"),
    Case("small_chain10", chain10, lambda: (_t(128, 128), _t(128, 128, seed=1)),
         "10 pointwise ops, 128x128 (overhead-bound)"),
    Case("broadcast_blowup", expensive_vector_times, lambda: (_t(4096), _t(4096, 4096)),
         "erf(exp(sin(v))) * y: v of 4096 broadcast over 4096 rows"),
    Case("four_consumers", four_consumers,
         lambda: (_t(4096),) + tuple(_t(1024, 4096, seed=i) for i in range(4)),
         "erf(exp(sin(v))) read by four 1024x4096 consumers"),
    Case("expensive_softmax", expensive_softmax, lambda: (_t(4096, 4096),),
         "softmax(4 erf(exp(sin(x)))), 4096x4096"),
    Case("cheap_four_ways", cheap_four_ways, lambda: (_t(4096, 4096),),
         "p = 2x + 1; sum and amax of p over dim 0 and over dim 1, 4096x4096"),
]
