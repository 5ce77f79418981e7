"""isposinf and isneginf, ops added through the scalar-op table alone (a row each in
scalar_ops.py, their ATen mapping in ops.py): C++ and Triton kernels against eager."""
import pytest
import torch
from torch.testing import FileCheck

from tests.e2e.test_triton_interpret import check, interpreter  # noqa: F401  (fixture)
from tests.helpers import check_against_eager

SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e38, -1e38, 3.0e38, -2.5]


def _x(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.tensor(SPECIAL), torch.randn(55, generator=g)]).reshape(8, 8)
    return x.to(dtype)


def _fn(x):
    hit = torch.isposinf(x * 2) | torch.isneginf(x - 1)
    return hit, torch.where(hit, 0.5, x * 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64],
                         ids=lambda d: str(d).split(".")[-1])
def test_cpp_kernel(dtype):
    x = _x(dtype) if dtype.is_floating_point else torch.arange(-32, 32).reshape(8, 8)
    graphs = check_against_eager(_fn, x, grad=False, strict=True)
    assert sum(len(g.kernels) for g in graphs) == 1
    if dtype.is_floating_point:
        inf = "__builtin_inf()" if dtype is torch.float64 else "__builtin_inff()"
        FileCheck().check(f"== {inf})").check(f"== -{inf})").run(graphs[0].source)


def test_cpp_kernel_noncontiguous():
    x = _x(torch.float32)
    graphs = check_against_eager(lambda x: _fn(x.t()[::2]), x, grad=False, strict=True)
    assert sum(len(g.kernels) for g in graphs) == 1


def test_triton_kernel(interpreter):  # noqa: F811
    graphs = check(_fn, _x(torch.float32), grad=False)
    FileCheck().check('== float("inf")').check('== float("-inf")').run(graphs[0].source)
