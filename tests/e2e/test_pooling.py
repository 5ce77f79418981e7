"""max_pool2d as strided views and selects (pool_decomposition.py): values, indices
(first maximum, NaN wins as in ATen's CPU kernel) and gradients against eager."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager, compute_calls

NAN = float("nan")


def _x(*shape, channels_last=False):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    x.view(-1)[5] = NAN
    x.view(-1)[6] = NAN
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    return x.requires_grad_()


@pytest.mark.parametrize("shape,k,s,cl", [
    ((2, 3, 8, 8), 2, 2, False), ((2, 3, 9, 7), 3, 2, False), ((1, 2, 6, 6), 2, 1, True),
    ((3, 5, 5), 2, 2, False), ((2, 3, 8, 8), 1, 1, False)], ids=str)
def test_max_pool_values_indices_and_gradients(shape, k, s, cl):
    x = _x(*shape, channels_last=cl)
    graphs = check_against_eager(lambda x: F.max_pool2d(x, k, s).relu(), x)
    assert compute_calls(graphs[0]) == [], graphs[0]          # forward: fused, no ATen pool
    check_against_eager(lambda x: F.max_pool2d(x, k, s, return_indices=True), x.detach(),
                        grad=False)


def test_ties_take_the_first_maximum():
    ties = torch.tensor([[[[1., 1.], [1., 0.]]]], requires_grad=True)
    check_against_eager(lambda x: F.max_pool2d(x, 2), ties)
    check_against_eager(lambda x: F.max_pool2d(x, 2, return_indices=True), ties.detach(), grad=False)


def test_batch_norm_relu_then_pool_inference_runs_no_aten_compute():
    """Two kernels: batch norm + relu streams contiguous rows; the pool reads its
    windows as strided views (fusing the two would compute the norm inside 16-wide
    strided window loops, measured 2x slower on the conv net)."""
    bn = torch.nn.BatchNorm2d(4).eval().requires_grad_(False)
    x = torch.randn(2, 4, 8, 8)
    graphs = check_against_eager(lambda x: F.max_pool2d(bn(x).relu(), 2), x, grad=False)
    assert len(graphs[0].kernels) == 2 and compute_calls(graphs[0]) == [], graphs[0]


def test_channels_last_batch_norm_relu_pool_is_one_kernel():
    """NHWC (as after a convolution, passes/conv_channels_last.py): the pool reads channels
    contiguously, so batch norm + relu are computed inside its windows; NaN still wins."""
    bn = torch.nn.BatchNorm2d(16).eval().requires_grad_(False)
    bn.running_mean.normal_()
    x = _x(2, 16, 8, 8, channels_last=True).detach()
    graphs = check_against_eager(lambda x: F.max_pool2d(bn(x).relu(), 2), x, grad=False)
    assert len(graphs[0].kernels) == 1 and compute_calls(graphs[0]) == [], graphs[0]


def test_padded_pool_stays_in_aten_and_matches():
    x = torch.randn(1, 2, 7, 7, requires_grad=True)
    graphs = check_against_eager(lambda x: F.max_pool2d(x, 3, 2, padding=1), x, kernels=False)
    assert any("max_pool2d_with_indices" in op for _, op in compute_calls(graphs[0])), graphs[0]
