"""floor, ceil, trunc and round of integers: the identity, bit for bit, in a kernel (C++
once computed them through float, losing int64's low bits past 2^24)."""
import pytest
import torch
from torch.testing import FileCheck

from tests.helpers import check_against_eager


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_rounding_is_exact(dtype):
    big = 2**40 if dtype is torch.int64 else 2**30
    x = torch.tensor([big + 1, -big - 3, 5, -7, 2**24 + 1, 0], dtype=dtype)

    def fn(x):
        return x.floor() * 2 + x.ceil() - x.trunc() + x.round() * 3

    graphs = check_against_eager(fn, x, grad=False, strict=True)
    assert sum(len(g.kernels) for g in graphs) == 1
    FileCheck().check_not("__builtin_floorf").check_not("nearbyintf").run(graphs[0].source)
