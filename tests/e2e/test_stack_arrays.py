"""Kernels whose small local arrays gcc 12.2 stored to with aligned vector stores at a
misaligned red-zone address (runtime/toolchain.py, `-mno-red-zone`): fuzz seed 178355's
backward crashed with a segmentation fault. Values and gradients against eager."""
import torch

from tests.helpers import check_against_eager


def _seed_178355(x0, x1, x2, x3):
    v0 = x0.permute((1, 0, 3, 2))
    v2 = v0 / (x2.abs() + 1)
    v3 = x0.narrow(1, 1, 2)
    v6 = v3.clamp(-0.5, 0.7)
    v8 = -v3 * 2 - v3
    v6.relu_()
    v10 = v6.norm(dim=-1, keepdim=False)
    v11 = v8.std(-4, keepdim=True)
    v13 = v10 / (x3.abs() + 1)
    return (x3.transpose(0, 2), v2, v11, v13)


def test_a_backward_with_five_column_tiles_runs():
    g = torch.Generator().manual_seed(178355)
    x0 = torch.randn((2, 1, 5, 5), generator=g).expand((2, 5, 5, 5)).requires_grad_()
    x1 = torch.randn((5, 5), generator=g).transpose(-1, -2).requires_grad_()
    x2 = torch.randn((1, 2, 5, 1), generator=g).expand((5, 2, 5, 1))
    x3 = torch.randn((2, 1, 1), generator=g).expand((2, 1, 5))
    check_against_eager(_seed_178355, x0, x1, x2, x3, reference=True)
