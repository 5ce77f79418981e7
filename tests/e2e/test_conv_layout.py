"""Convolutions run channels-last inside brrr (passes/conv_channels_last.py): models still
match eager, and what the user sees (outputs, gradients) has eager's strides, in
inference and in training, where the forward's saved activations change layout."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from tests.helpers import check_against_eager


class _Net(nn.Module):
    def __init__(self, flatten: bool):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, bias=False),
                                  nn.BatchNorm2d(16), nn.SiLU())
        self.flatten = flatten
        self.head = nn.Linear(16 * 6 * 6 if flatten else 16, 5)

    def forward(self, x):
        y = self.body(x)
        return self.head(y.flatten(1) if self.flatten else y.mean((2, 3))), y


@pytest.mark.parametrize("flatten", [False, True])
def test_conv_net_inference_matches_eager(flatten):
    torch.manual_seed(0)
    graphs = check_against_eager(_Net(flatten).eval(), torch.randn(4, 3, 16, 16), grad=False,
                                 atol=1e-4, rtol=1e-4)
    copies = [k for k in graphs[0].kernels if k.aten_ops == ["aten.clone.default"]]
    assert len(copies) == 3, graphs[0]       # x and both weights go channels-last


# training: eager and brrr each get their own copy of the net, since a batch norm's
# running statistics are updated in place and eager's autograd saves them
@pytest.mark.parametrize("flatten,input_format", [(True, torch.contiguous_format),
                                                  (False, torch.channels_last)])
def test_training_outputs_and_gradients_keep_eager_strides(flatten, input_format):
    torch.manual_seed(0)
    net = _Net(flatten).train()
    twin = copy.deepcopy(net)
    x = torch.randn(4, 3, 16, 16).contiguous(memory_format=input_format).requires_grad_()
    x2 = x.detach().clone(memory_format=torch.preserve_format).requires_grad_()
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend="brrr")
    expected, actual = net(x), compiled(x2)
    for a, e in zip(actual, expected, strict=True):
        assert a.stride() == e.stride()
        assert_close(a, e, atol=1e-4, rtol=1e-4)
    sum(o.square().sum() for o in expected).backward()
    sum(o.square().sum() for o in actual).backward()
    for (name, p), p2 in zip(net.named_parameters(), twin.parameters()):
        assert p2.grad.stride() == p.grad.stride(), name
        assert_close(p2.grad, p.grad, atol=1e-3, rtol=1e-3, msg=name)
    assert x2.grad.stride() == x.grad.stride()
    assert_close(x2.grad, x.grad, atol=1e-4, rtol=1e-4)
    assert_close(twin.body[1].running_var, net.body[1].running_var)
    torch._dynamo.reset()


def test_bfloat16_conv_inference():
    torch.manual_seed(0)
    net = _Net(flatten=False).eval().to(torch.bfloat16)
    check_against_eager(net, torch.randn(2, 3, 16, 16, dtype=torch.bfloat16), grad=False)


class _Residual(nn.Module):
    """A residual block: the skip path (NCHW input) meets the NHWC convolution output."""

    def __init__(self, c=8, groups=1, stride=1, dilation=1):
        super().__init__()
        self.a = nn.Conv2d(c, c, 3, stride=stride, padding=dilation, dilation=dilation,
                           groups=groups)
        self.b = nn.Conv2d(c, c, 1)
        self.stride = stride

    def forward(self, x):
        skip = x[:, :, ::self.stride, ::self.stride]
        return F.gelu(self.b(F.relu(self.a(x))) + skip)


@pytest.mark.parametrize("groups,stride,dilation", [(1, 1, 1), (8, 1, 1), (2, 2, 1), (1, 1, 2)],
                         ids=["plain", "depthwise", "grouped-strided", "dilated"])
def test_residual_blocks_match_eager_with_gradients(groups, stride, dilation):
    torch.manual_seed(0)
    block = _Residual(groups=groups, stride=stride, dilation=dilation)
    check_against_eager(block, torch.randn(2, 8, 9, 9, requires_grad=True), atol=1e-4,
                        rtol=1e-4)


@pytest.mark.parametrize("groups", [1, 8], ids=["plain", "depthwise"])
def test_batch_one_blocks_with_both_convolution_paths_match_eager(groups):
    """At batch 1 ATen runs small convolutions through its own path and others in oneDNN:
    both read NHWC inputs here, and outputs and gradients keep eager's strides."""
    torch.manual_seed(0)
    block = _Residual(groups=groups)
    graphs = check_against_eager(block, torch.randn(1, 8, 9, 9, requires_grad=True),
                                 atol=1e-4, rtol=1e-4)
    assert any(g.kernels for g in graphs)
