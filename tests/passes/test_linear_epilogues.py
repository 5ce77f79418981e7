"""linear_epilogues: a linear layer whose only user is its activation (ReLU, tanh,
sigmoid, SiLU, exact GELU, as brrr's decompositions leave them) becomes one oneDNN
`_linear_pointwise` call; anything else stays as it was."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from brrr_compiler.passes import run_pipeline
from brrr_compiler.passes.linear_epilogues import MIN_OUTPUT, WITH_EPILOGUES
from tests.helpers import aten_graph, check_against_eager

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(),
                                reason="torch built without oneDNN")

LINEAR_POINTWISE = torch.ops.mkldnn._linear_pointwise.default
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
               "swish": F.silu, "gelu": F.gelu}


def _fused_attrs(fn, *args) -> list[str]:
    gm = run_pipeline(aten_graph(fn, *args), WITH_EPILOGUES)
    return [n.args[3] for n in gm.graph.nodes if n.target is LINEAR_POINTWISE]


ON = {"passes": WITH_EPILOGUES}


def _weights(n_in=64, n_out=1024):     # with 512 rows: MIN_OUTPUT elements
    g = torch.Generator().manual_seed(0)
    return torch.randn(n_out, n_in, generator=g), torch.randn(n_out, generator=g)


@pytest.mark.parametrize("attr", list(ACTIVATIONS))
@pytest.mark.parametrize("shape", [(512, 64), (2, 256, 64)])
@pytest.mark.parametrize("bias", [True, False])
def test_an_activation_after_a_linear_layer_is_folded_and_matches_eager(attr, shape, bias):
    w, b = _weights()
    act = ACTIVATIONS[attr]

    def f(x, w, b):
        return act(F.linear(x, w, b if bias else None)) * 2   # a kernel reads the result

    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    assert _fused_attrs(f, x, w, b) == [attr]
    check_against_eager(f, x, w, b, grad=False, options=ON)


def test_a_pre_activation_read_elsewhere_is_not_folded():
    def f(x, w, b):
        y = F.linear(x, w, b)
        return F.gelu(y), y * 2

    x = torch.randn(512, 64)
    assert _fused_attrs(f, x, *_weights()) == []
    check_against_eager(f, x, *_weights(), grad=False, options=ON)


@pytest.mark.parametrize("fn", [
    lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"),   # not the erf GELU
    lambda x, w, b: F.relu(torch.addmm(b, x, w.t(), beta=0.5)),     # not a plain linear
    lambda x, w, b: F.relu(x @ w.t() + b),                          # the add stays brrr's
    lambda x, w, b: torch.sigmoid(F.linear(x, w, b)) * F.linear(x, w, b).sin(),
])
def test_what_is_not_a_linear_layer_and_its_activation_is_left(fn):
    w, b = _weights()
    x = torch.randn(512, 64)
    assert _fused_attrs(fn, x, w, b) == []
    check_against_eager(fn, x, w, b, grad=False, options=ON)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_other_dtypes_are_left(dtype):
    w, b = (t.to(dtype) for t in _weights())
    x = torch.randn(512, 64, dtype=dtype)
    assert _fused_attrs(lambda x, w, b: F.silu(F.linear(x, w, b)), x, w, b) == []


def test_small_layers_are_left():
    """The cost rule (the pass's note): below MIN_OUTPUT output elements oneDNN's fixed
    cost per call exceeds the activation pass it saves."""
    w, b = _weights(768, 3072)
    x = torch.randn(MIN_OUTPUT // 3072, 768)          # one row short of MIN_OUTPUT
    assert _fused_attrs(lambda x, w, b: F.gelu(F.linear(x, w, b)), x, w, b) == []


def test_it_is_not_in_the_default_pipeline():
    w, b = _weights()
    gm = run_pipeline(aten_graph(lambda x, w, b: F.relu(F.linear(x, w, b)), torch.randn(512, 64), w, b))
    assert not any(n.target is LINEAR_POINTWISE for n in gm.graph.nodes)


def test_training_keeps_the_pre_activation_for_the_backward():
    """The forward graph saves the linear output for GELU's backward: nothing folds, and
    the gradients match eager."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.SiLU())
    x = torch.randn(512, 64, requires_grad=True)
    graphs = check_against_eager(model, x, grad=True, options=ON)
    assert not any("_linear_pointwise" in op for g in graphs for _, op in g.aten_nodes)


def test_an_inference_mlp_runs_each_layer_as_one_call():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 8)).eval()
    x = torch.randn(2, 512, 64)
    with torch.no_grad():
        graphs = check_against_eager(model, x, grad=False, kernels=False, options=ON)
    ops = [op for g in graphs for _, op in g.aten_nodes]
    assert sum("_linear_pointwise" in op for op in ops) == 2, ops
