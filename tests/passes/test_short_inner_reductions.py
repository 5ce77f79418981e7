"""short_inner_reductions: a reduction over dims on both sides of a kept dim, whose
innermost reduced run is short, reduces the outer dims first, then the run (the batch
norm of an (N, C, L) input: bench_sweep's 2.4-3x slower than eager)."""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from brrr_compiler.passes import run_pipeline
from tests.helpers import check_against_eager

aten = torch.ops.aten
_REDUCTIONS = (aten.sum.dim_IntList, aten.mean.dim, aten.amax.default, aten.amin.default)


def _reductions(fn, *args):
    """[(dims, input shape)] of the graph's reductions after the pass, in graph order."""
    gm = run_pipeline(make_fx(fn, tracing_mode="fake")(*args), ("short_inner_reductions",))
    return [(list(n.args[1]), tuple(n.args[0].meta["val"].shape)) for n in gm.graph.nodes
            if n.op == "call_function" and n.target in _REDUCTIONS]


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


@pytest.mark.parametrize("fn", [
    lambda x: x.sum((0, 2)), lambda x: x.amax((0, 2)), lambda x: x.amin((2, 0)),
    lambda x: x.mean((0, 2)),
])
def test_reduces_the_outer_dims_first(fn):
    assert _reductions(fn, _x(64, 5, 5)) == [([0], (64, 5, 5)), ([1], (5, 5))]


def test_keepdim_keeps_the_dims_numbered():
    assert _reductions(lambda x: x.sum((0, 2, 3), keepdim=True), _x(16, 3, 2, 2)) == \
        [([0], (16, 3, 2, 2)), ([2, 3], (1, 3, 2, 2))]


@pytest.mark.parametrize("fn, x", [
    (lambda x: x.sum((0, 2)), _x(64, 5, 128)),          # a run of 512 bytes is long enough
    (lambda x: x.sum(2), _x(64, 5, 5)),                 # no reduced dim outside a kept one
    (lambda x: x.sum((0, 2)), _x(4, 5, 5)),             # too few outer elements
    (lambda x: x.sum((0, 1, 2)), _x(64, 5, 5)),         # every dim
    # channels-last: the kept channels are innermost in memory, a column reduction as it is
    (lambda x: x.sum((0, 2, 3)), _x(16, 3, 4, 4).to(memory_format=torch.channels_last)),
])
def test_leaves(fn, x):
    assert len(_reductions(fn, x)) == 1


def test_no_outer_dim_is_left_even_with_the_thresholds_open(monkeypatch):
    # an empty first-step dim list would reduce every dim (an op sweep with the
    # thresholds forced open sent such graphs to ATen)
    import importlib
    module = importlib.import_module("brrr_compiler.passes.short_inner_reductions")
    monkeypatch.setattr(module, "MIN_OUTER", 1)
    assert len(_reductions(lambda x: x.sum(1), _x(5, 5))) == 1


def test_follows_the_memory_order():
    # x.transpose(1, 2) of a (64, 5, 6) tensor: dim 1 (size 6) is innermost in memory
    x = _x(64, 5, 6).transpose(1, 2)
    assert _reductions(lambda x: x.sum((0, 1)), x) == [([0], (64, 6, 5)), ([0], (6, 5))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("fn", [
    lambda x: x.sum((0, 2)) * 2, lambda x: x.sum((0, 2), keepdim=True).exp(),
    lambda x: x.mean((0, 2)), lambda x: x.amax((0, 2)), lambda x: x.amin((0, 2), keepdim=True),
    lambda x: x.sum((0, 2), dtype=torch.float64),
])
def test_matches_eager(fn, dtype):
    check_against_eager(fn, _x(300, 5, 7, dtype=dtype), grad=False, strict=True, reference=True)


def test_integers_and_special_values():
    ints = torch.randint(-100, 100, (64, 5, 3), generator=torch.Generator().manual_seed(1),
                         dtype=torch.int32)
    check_against_eager(lambda x: x.sum((0, 2)) + x.amax((0, 2)), ints, grad=False, strict=True)
    x = _x(64, 5, 3)
    x[3, 1, 2], x[7, 2, 0], x[9, 4, 1] = float("nan"), float("inf"), float("-inf")
    check_against_eager(lambda x: (x.amax((0, 2)), x.amin((0, 2)), x.sum((0, 2))), x,
                        grad=False, strict=True)


@pytest.mark.parametrize("shape", [(200, 5, 5), (40, 3, 2, 2), (33, 4, 1, 3)])
def test_batch_norm_training_with_gradients(shape):
    x = _x(*shape).requires_grad_()
    c = shape[1]
    w, b = _x(c).requires_grad_(), _x(c).requires_grad_()

    def fn(x, w, b):
        return F.batch_norm(x, None, None, w, b, training=True).sin()

    check_against_eager(fn, x, w, b)
