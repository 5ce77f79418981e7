"""Kernel counts of the norms, softmaxes and losses built from fused reductions, and a
training step of a Linear/LayerNorm/GELU/Linear block.

Forward kernel counts of softmax/log_softmax (scale and mask), layer_norm (residual),
rms_norm, cross_entropy (ignore_index), batch_norm in inference, group_norm; backward
kernel counts of layer_norm and softmax.
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from tests.e2e.graph_checks import dtype_id, graph_of, one_kernel, randn
from tests.helpers import check_against_eager, compute_calls

# backward kernels now (greedy policy); at most two each are allowed
LAYER_NORM_BACKWARD_KERNELS = 1      # the input gradient's rows fold the weight/bias column sums
SOFTMAX_BACKWARD_KERNELS = 1         # one row kernel: sum of grad*out, then the input gradient
BACKWARD_LIMIT = 2

NORM_SHAPES = [(8, 33), (3, 1024), (64, 7)]


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_masked_scaled_softmax_kernels(op, shape):
    mask = torch.zeros(shape)
    mask[:, ::3] = float("-inf")
    mask[:, 0] = 0.0                  # no row is all -inf

    def fn(x, mask):
        return getattr((x * 0.125) + mask, op)(-1)

    graphs = check_against_eager(fn, randn(*shape), mask)
    one_kernel(graph_of(graphs, "forward"))
    bw = graph_of(graphs, "backward")
    assert len(bw.kernels) <= BACKWARD_LIMIT and compute_calls(bw) == [], str(bw)
    assert len(bw.kernels) == SOFTMAX_BACKWARD_KERNELS, str(bw)


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
def test_residual_layer_norm_kernels(shape):
    d = shape[-1]

    def fn(x, res, w, b):
        return F.layer_norm(x + res, (d,), w, b)

    graphs = check_against_eager(fn, randn(*shape), randn(*shape, seed=1),
                                 randn(d, seed=2), randn(d, seed=3))
    one_kernel(graph_of(graphs, "forward"))
    bw = graph_of(graphs, "backward")
    assert len(bw.kernels) <= BACKWARD_LIMIT and compute_calls(bw) == [], str(bw)
    assert len(bw.kernels) == LAYER_NORM_BACKWARD_KERNELS, str(bw)


def _rms_norm_by_hand(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rms_norm_functional(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, 1e-6)


RMS_NORMS = [
    pytest.param(_rms_norm_by_hand, id="by_hand"),
    pytest.param(_rms_norm_functional, id="F.rms_norm", marks=pytest.mark.skipif(
        not hasattr(F, "rms_norm"), reason="F.rms_norm is not in this torch (added in 2.4)")),
]


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("rms_norm", RMS_NORMS)
def test_rms_norm_forward_one_kernel(rms_norm, shape):
    graphs = check_against_eager(rms_norm, randn(*shape), randn(shape[-1], seed=1))
    one_kernel(graph_of(graphs, "forward"))


@pytest.mark.parametrize("shape", [(16, 50), (5, 1023)], ids=str)
def test_cross_entropy_ignore_index_mean_one_kernel(shape):
    n, c = shape
    gen = torch.Generator().manual_seed(0)
    t = torch.randint(0, c, (n,), generator=gen)
    t[1] = t[n - 1] = 7 if c > 7 else 0
    t[2] = -1                          # the ignored class

    def fn(x):
        return F.cross_entropy(x * 2, t, ignore_index=-1, reduction="mean")

    graphs = check_against_eager(fn, randn(n, c))
    one_kernel(graph_of(graphs, "forward"))


def test_batch_norm_module_eval_one_kernel():
    bn = nn.BatchNorm2d(6)
    with torch.no_grad():
        bn.running_mean.copy_(randn(6, seed=1, grad=False))
        bn.running_var.copy_(randn(6, seed=2, grad=False).abs() + 0.5)
        bn.weight.copy_(randn(6, seed=3, grad=False))
        bn.bias.copy_(randn(6, seed=4, grad=False))
    bn.eval()
    graphs = check_against_eager(bn, randn(3, 6, 5, 7))
    one_kernel(graph_of(graphs, "forward"))


def test_functional_batch_norm_inference_one_kernel():
    mean, var = randn(6, seed=1, grad=False), randn(6, seed=2, grad=False).abs() + 0.5

    def fn(x, w, b):
        return F.batch_norm(x * 2, mean, var, w, b, training=False, eps=1e-3) + 1

    graphs = check_against_eager(fn, randn(3, 6, 5, 7), randn(6, seed=3), randn(6, seed=4))
    one_kernel(graph_of(graphs, "forward"))


@pytest.mark.parametrize("groups", [1, 3, 6])
def test_group_norm_forward_one_kernel(groups):
    def fn(x, w, b):
        return F.group_norm(x, groups, w, b)

    graphs = check_against_eager(fn, randn(2, 6, 5, 4), randn(6, seed=1), randn(6, seed=2))
    one_kernel(graph_of(graphs, "forward"))


# ---- 4. a training step ----------------------------------------------------------------

def _block(dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(),
                         nn.Linear(64, 16)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_layer_norm_gelu_block_gradients(dtype):
    graphs = check_against_eager(_block(dtype), randn(12, 32, dtype=dtype))
    assert graph_of(graphs, "forward").kernels and graph_of(graphs, "backward").kernels


def test_layer_norm_gelu_block_training_steps():
    """Two SGD steps under brrr and eager leave the same parameters."""
    eager = _block(torch.float32)
    model = copy.deepcopy(eager)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="brrr")
    gen = torch.Generator().manual_seed(1)
    batches = [(torch.randn(12, 32, generator=gen), torch.randint(0, 16, (12,), generator=gen))
               for _ in range(2)]
    for net, m in ((eager, eager), (compiled, model)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for x, t in batches:
            opt.zero_grad()
            F.cross_entropy(net(x), t).backward()
            opt.step()
    torch._dynamo.reset()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, msg=lambda m, name=name: f"{name} after two steps: {m}")
    assert not all(torch.equal(p, q) for p, q in zip(model.parameters(),
                                                     _block(torch.float32).parameters()))


def test_normalize_is_one_kernel_with_its_norm():
    # linalg_vector_norm decomposes, so F.normalize's norm, clamp and division fuse
    import torch.nn.functional as F
    x = torch.randn(64, 300, generator=torch.Generator().manual_seed(0))
    graphs = check_against_eager(lambda x: F.normalize(x, dim=-1), x.requires_grad_())
    forward = next(g for g in graphs if g.kind == "forward")
    assert len(forward.kernels) == 1 and not forward.compute_calls, forward


@pytest.mark.parametrize("ord_", [2, 1, float("inf"), 0, 3])
def test_vector_norm_orders(ord_):
    x = torch.randn(6, 33, 5, generator=torch.Generator().manual_seed(1))
    check_against_eager(lambda x: torch.linalg.vector_norm(x, ord_, dim=-1, keepdim=True) * 2,
                        x.requires_grad_(), allow_fallback=True, kernels=False)
