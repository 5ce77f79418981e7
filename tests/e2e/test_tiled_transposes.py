"""Pointwise kernels that read an operand transposed (codegen/cpp_tiled.py) against eager:
16-bit blocks moved bit for bit, short inner dims in flat tiles."""
from __future__ import annotations

import pytest
import torch

from tests.helpers import check_against_eager, kernel_sources, one_kernel_source


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(300, 200), (2, 256, 128), (64, 48)],
                         ids=["edges", "batched", "partial_tile"])
def test_16_bit_transposed_operands_move_every_bit(shape, dtype):
    """16-bit operands stage whole 16 x 16 blocks through brrr_transpose16h (widened to
    32-bit lanes and narrowed back), the rest element by element: a select between the
    transposed values and a constant moves each value's bits unchanged, NaN payloads,
    inf and -0.0 included."""
    gen = torch.Generator().manual_seed(12)
    y = torch.randn(shape[:-2] + shape[-2:][::-1], generator=gen).to(dtype)
    bits = y.view(torch.int16).view(-1)
    bits[::37] = 0x7E01            # NaN payloads (float16; a NaN in bfloat16 too)
    bits[3::41] = -0x8000          # -0.0
    bits[7::53] = 0x7C00 if dtype is torch.float16 else 0x7F80   # inf

    def fn(b):
        t = b.transpose(-1, -2)
        return torch.where(t > 0.5, torch.tensor(-1.5, dtype=dtype), t).contiguous()

    got = torch.compile(fn, backend="brrr", dynamic=False)(y)
    want = fn(y)
    assert got.stride() == want.stride()
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert "brrr_transpose16h(" in one_kernel_source(fn, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shape", [(5, 32, 31), (3, 17, 64), (2, 40, 16), (4, 130, 33)],
                         ids=["odd", "whole_tile", "sixteen", "partial_rows"])
def test_flat_tiles_against_eager(shape, dtype):
    """A short inner dim (16 to 64, whole in a tile) runs one flat loop over each tile
    (cpp_tiled's note): a bool mask, a transposed operand, one broadcast over the batch,
    and one whose rows are not end to end (kept per row), against eager, with NaN, inf
    and -0.0 among the values."""
    gen = torch.Generator().manual_seed(3)
    b, m, n = shape
    x = torch.randn(b, m, n, generator=gen).to(dtype)
    x.view(-1)[::29] = float("nan")
    x.view(-1)[5::31] = float("inf")
    x.view(-1)[7::37] = -0.0
    t = torch.randn(b, n, m, generator=gen).to(dtype).transpose(1, 2)
    u = torch.randn(1, n, m, generator=gen).to(dtype).transpose(1, 2)
    wide = torch.randn(b, m, n + 3, generator=gen).to(dtype)[..., :n]
    mask = torch.randn(b, m, n, generator=gen) > 0

    def fn(x, t, u, wide, mask):
        return torch.where(mask, x * 2, t) + u, torch.where(mask, wide, t)

    check_against_eager(fn, x, t, u, wide, mask, grad=False)
    flat = ["for (int64_t tf = " in src for src in kernel_sources(fn, x, t, u, wide, mask)]
    assert sorted(flat) == [False, True]        # the second kernel reads `wide` per row
    if dtype is torch.float32:
        check_against_eager(lambda x, t, u: (x * t).sigmoid() + u,
                            *(v.requires_grad_() for v in (x.clone(), t.clone(), u.clone())))
