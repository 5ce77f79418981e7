"""Inference BatchNorm (batch_norm_decomposition.py: one per-channel scale; on
channels-last data computed once per call, codegen/cpp_invariant.py) matches eager:
values and strides, for odd channel counts, batch 1, channels-last and contiguous inputs,
with and without affine parameters, followed by a residual add and an activation."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import LOW_PRECISION_TOL, check_against_eager

CL = torch.channels_last


def _bn(x, mean, var, w, b, r):
    y = F.batch_norm(x, mean, var, w, b, training=False, eps=1e-3)
    return F.relu6(y + r) if r is not None else F.relu(y)


@pytest.mark.parametrize("shape", [(1, 13, 7, 5), (3, 8, 4, 4), (2, 3, 1, 9)])
@pytest.mark.parametrize("fmt", [CL, torch.contiguous_format])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("residual", [True, False])
def test_inference_batch_norm_matches_eager(shape, fmt, affine, residual):
    torch.manual_seed(0)
    c = shape[1]
    x = torch.randn(shape).contiguous(memory_format=fmt)
    w, b = (torch.randn(c), torch.randn(c)) if affine else (None, None)
    r = torch.randn(shape).contiguous(memory_format=fmt) if residual else None
    check_against_eager(_bn, x, torch.randn(c), torch.rand(c) + 0.1, w, b, r, grad=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inference_batch_norm_matches_eager(dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 11, 6, 6, dtype=dtype).contiguous(memory_format=CL)
    params = [torch.randn(11, dtype=dtype), torch.rand(11, dtype=dtype) + 0.5,
              torch.randn(11, dtype=dtype), torch.randn(11, dtype=dtype)]
    check_against_eager(_bn, x, *params, None, grad=False, **LOW_PRECISION_TOL[dtype])


def test_batch_norm_module_in_eval_matches_eager():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 17, 3), torch.nn.BatchNorm2d(17),
                              torch.nn.ReLU()).eval()
    net[1].running_mean.normal_()
    net[1].running_var.uniform_(0.5, 2)
    check_against_eager(net, torch.randn(1, 3, 9, 9), grad=False, atol=1e-4, rtol=1e-4)
