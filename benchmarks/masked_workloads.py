"""The kernel suite's mixed-dtype cases: bool and uint8 masks, integer inputs and loaded
indices inside float kernels (masked softmax, masked_fill, where, a dropout mask,
integer dequantization, gather, an embedding), each in the L2 cache and past the
last-level cache.

A masked case names its unmasked twin: the same kernel on the same inputs without the
mask (the mask argument is ignored), timed with brrr beside it, so that the price of
the mask is one ratio. workloads.py turns `specs()` into KernelCases.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")
DROP_SCALE = 1 / 0.9
SOFTMAX_TOL = dict(rtol=1e-4, atol=1e-7)   # outputs ~1/row length (as workloads.py's)


# ---- the functions and their twins ---------------------------------------------------


def masked_softmax(s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Causal attention softmax: a bool (S, S) mask broadcast over (B, H, S, S)."""
    return torch.where(mask, s * 0.125, NEG_INF).softmax(-1)


def softmax_no_mask(s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (s * 0.125).softmax(-1)


def masked_fill(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x.masked_fill(mask, 0.0) * 2.0


def masked_fill_no_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x * 2.0


def where_mask(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, x, y)


def where_no_mask(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x + y


def dropout_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Dropout's scaling with a kept bool mask: mask.to(x.dtype) * x / (1 - p)."""
    return mask.to(x.dtype) * x * DROP_SCALE


def dropout_no_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x * DROP_SCALE


def where_gt(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """A comparison feeding a where (unfused, brrr:none, the bool is stored and re-read)."""
    return torch.where(a > b, a, c)


def dequant_int8(q: torch.Tensor, zp: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """int8 weights to float32 with a per-row zero point and scale."""
    return (q.float() - zp) * scale


def gather_scale(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Gather along the last dim at int64 indices (index arithmetic in a float loop)."""
    return x.gather(-1, idx) * 2.0


def embedding_pos(idx: torch.Tensor, table: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A decoder's input: token embedding rows, scaled, plus a position table."""
    return torch.nn.functional.embedding(idx, table) * 2.0 + pos


# ---- inputs --------------------------------------------------------------------------


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=_gen(seed)).to(dtype)


def _mask(shape, p: float = 0.5) -> torch.Tensor:
    return torch.rand(shape, generator=_gen(7)) < p


def _attention_inputs(dtype=torch.float32):
    def make(b: int, h: int, s: int) -> tuple:
        return _randn((b, h, s, s), 0, dtype), torch.ones(s, s, dtype=torch.bool).tril()

    return make


def _masked_inputs(rows: int, cols: int) -> tuple:
    return _randn((rows, cols), 0), _mask((rows, cols))


def _where_inputs(rows: int, cols: int) -> tuple:
    return _randn((rows, cols), 0), _randn((rows, cols), 1), _mask((rows, cols))


def _dropout_inputs(rows: int, cols: int) -> tuple:
    return _randn((rows, cols), 0), _mask((rows, cols), p=0.9)


def _three(rows: int, cols: int) -> tuple:
    return tuple(_randn((rows, cols), seed) for seed in range(3))


def _dequant_inputs(rows: int, cols: int) -> tuple:
    q = torch.randint(-128, 128, (rows, cols), generator=_gen(0), dtype=torch.int8)
    return q, _randn((rows, 1), 1).round(), _randn((rows, 1), 2).abs() * 0.01


def _gather_inputs(rows: int, cols: int) -> tuple:
    return _randn((rows, cols), 0), torch.randint(0, cols, (rows, cols // 2), generator=_gen(3))


def _embedding_inputs(batch: int, seq: int, dim: int) -> tuple:
    idx = torch.randint(0, 50257, (batch, seq), generator=_gen(4))
    return idx, _randn((50257, dim), 0), _randn((seq, dim), 1)


def specs() -> list[dict]:
    """KernelCase fields per case: one size in L2 and one past a 32 MB last-level cache."""
    def case(workload, fn, make, dims, twin=None, dtype=torch.float32, **kw):
        return dict(workload=workload, fn=fn, make_inputs=make, dims=dims, dtype=dtype,
                    twin=twin, **kw)

    cases = [
        case("masked_softmax", masked_softmax, _attention_inputs(), (1, 4, 128),
             softmax_no_mask, tolerance=SOFTMAX_TOL, quick=True),
        case("masked_softmax", masked_softmax, _attention_inputs(), (4, 6, 512),
             softmax_no_mask, tolerance=SOFTMAX_TOL),
        case("masked_softmax", masked_softmax, _attention_inputs(torch.bfloat16), (4, 6, 512),
             softmax_no_mask, dtype=torch.bfloat16),
    ]
    for rows, cols in ((256, 256), (4096, 4096)):
        cases += [
            case("masked_fill", masked_fill, _masked_inputs, (rows, cols), masked_fill_no_mask),
            case("where_mask", where_mask, _where_inputs, (rows, cols), where_no_mask),
            case("dropout_mask", dropout_mask, _dropout_inputs, (rows, cols), dropout_no_mask),
            case("where_gt", where_gt, _three, (rows, cols)),
            case("dequant_int8", dequant_int8, _dequant_inputs, (rows, cols)),
            case("gather", gather_scale, _gather_inputs, (rows, cols)),
        ]
    cases += [case("embedding_pos", embedding_pos, _embedding_inputs, (1, 128, 256)),
              case("embedding_pos", embedding_pos, _embedding_inputs, (8, 1024, 768))]
    return cases


DESCRIPTIONS = {
    "masked_softmax": "where(mask, s * 0.125, -inf).softmax(-1), a bool causal (S, S) mask "
    "broadcast over (B, H, S, S); twin: (s * 0.125).softmax(-1)",
    "masked_fill": "x.masked_fill(mask, 0) * 2 with a bool mask; twin: x * 2",
    "where_mask": "where(mask, x, y) with a bool mask; twin: x + y",
    "dropout_mask": "mask.to(x.dtype) * x / 0.9 with a bool mask; twin: x / 0.9",
    "where_gt": "where(a > b, a, c): a comparison feeding a where (brrr:none stores the bool)",
    "dequant_int8": "(q.float() - zero_point) * scale, int8 q, per-row zero point and scale",
    "gather": "x.gather(-1, idx) * 2, int64 indices, half as many columns as x",
    "embedding_pos": "embedding(idx, table) * 2 + pos, (batch, seq) int64 tokens into a "
    "(50257, dim) table, a (seq, dim) position table",
}
