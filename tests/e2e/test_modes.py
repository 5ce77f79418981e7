"""torch.compile(..., mode=...) with brrr: the four modes run like eager and reach the
Config; any other mode, or mode together with options, is a clear error."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from brrr_compiler import backend, log as brrr_log
from brrr_compiler.config import MODES
from brrr_compiler.runtime import triton_launch


def _f(x):
    return F.gelu(x * 2 + 1).sum(-1)


@pytest.fixture
def configs(monkeypatch):
    """The Configs the driver compiles graphs with."""
    seen, real = [], backend.compile_graph

    def spy(gm, cfg, *args, **kwargs):
        seen.append(cfg)
        return real(gm, cfg, *args, **kwargs)
    monkeypatch.setattr(backend, "compile_graph", spy)
    monkeypatch.setattr(brrr_log, "_warned", set())
    return seen


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_runs_like_eager_and_reaches_the_config(mode, configs):
    torch._dynamo.reset()
    x = torch.randn(6, 33)
    with warnings.catch_warnings():
        warnings.simplefilter("error", brrr_log.BrrrWarning)    # nothing to warn about on CPU
        assert_close(torch.compile(_f, backend="brrr", mode=mode)(x), _f(x))
    assert configs and all(cfg.mode == mode for cfg in configs)
    torch._dynamo.reset()


def test_mode_and_options_together_go_through_options(configs):
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="Either mode or options"):
        torch.compile(_f, backend="brrr", mode="max-autotune", options={"fusion": "cost"})
    x = torch.randn(4, 5)
    compiled = torch.compile(_f, backend="brrr",
                             options={"mode": "max-autotune", "fusion": "cost"})
    assert_close(compiled(x), _f(x))
    assert (configs[0].mode, configs[0].fusion) == ("max-autotune", "cost")
    torch._dynamo.reset()


def test_unknown_mode_lists_the_valid_ones():
    torch._dynamo.reset()
    compiled = torch.compile(_f, backend="brrr", mode="max_autotune")
    with pytest.raises(Exception) as info:
        compiled(torch.randn(3))
    message = str(info.value)
    assert "mode='max_autotune'" in message and "did you mean 'max-autotune'?" in message
    assert all(repr(m) in message for m in MODES)
    torch._dynamo.reset()


def test_a_mode_prefers_cuda_graphs_quietly_where_they_cannot_apply(caplog):
    """Under reduce-overhead a CPU graph gets no CUDA graph and no warning (only a log
    line); the cudagraphs option asking for one warns."""
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            n.meta["val"] = torch.empty(3)

    def run(args):
        return args
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level("INFO", logger="brrr"):
            assert triton_launch.cudagraphs(run, gm, {}, asked=False) is run
    assert "CUDA graphs not used" in caplog.text
    with pytest.raises(brrr_log.BrrrFallbackError, match="cudagraphs=True ignored"):
        triton_launch.cudagraphs(run, gm, {}, asked=True, strict=True)
