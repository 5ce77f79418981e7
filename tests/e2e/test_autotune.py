"""mode="max-autotune": merges the cost model is unsure of and each kernel's thread count
are measured; the results match eager (values, strides, gradients) whatever the
measurements chose; each measured decision says so; a second compile reads the
measurements from the cache; the other modes measure nothing. No timing is asserted:
which candidate wins depends on the machine."""
import functools
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from brrr_compiler import explain
from brrr_compiler.backend import brrr_backend
from brrr_compiler.partition import Decision, MeasuredChoice
from tests.helpers import check_against_eager

# autotune_margin this large measures every merge the policy weighs
EVERY = {"mode": "max-autotune", "autotune_margin": 1e9, "num_threads": 2}


def _x(*shape, grad=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).requires_grad_(grad)


def broadcast_blowup(x, v):
    return (v.sin().exp().erf() * x).sum(-1)


def norm_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, x.shape[-1:], w, b)) * 2


def masked_softmax(x, mask):
    return torch.softmax(x.masked_fill(mask, -1e4) * 0.5, -1)


def _decisions(graphs) -> list:
    return [d for g in graphs for d in g.decisions]


def _measured(graphs) -> list:
    return [d for d in _decisions(graphs) if d.reason.startswith("measured")]


@pytest.mark.parametrize("fusion", ["greedy", "cost"])
def test_broadcast_blowup_matches_eager_and_says_measured(fusion, tmp_path):
    options = dict(EVERY, fusion=fusion, cache_dir=str(tmp_path))
    graphs = check_against_eager(broadcast_blowup, _x(64, 256), _x(256, grad=True),
                                 options=options, strict=True)
    measured = _measured(graphs)     # merges, or the plan choice that overruled them
    assert measured, "\n".join(map(str, _decisions(graphs)))
    for d in measured:
        assert d.metrics["measured_cached"] is False, str(d)
        if isinstance(d, MeasuredChoice):
            assert d.kind in ("plan", "schedule"), str(d)
            continue
        assert {"measured_fused_us", "measured_unfused_us", "unfused_us", "fused_us"} \
            <= set(d.metrics), str(d)
        assert " vs separate " in d.reason or " vs materialized " in d.reason, str(d)
        if "a tie within" not in d.reason:
            faster = d.metrics["measured_fused_us"] < d.metrics["measured_unfused_us"]
            assert d.accepted == faster, str(d)


def test_training_graphs_match_eager_with_gradients(tmp_path):
    x, w, b = _x(32, 128, grad=True), _x(128, grad=True, seed=1), _x(128, grad=True, seed=2)
    graphs = check_against_eager(norm_gelu, x, w, b, strict=True,
                                 options=dict(EVERY, fusion="cost", cache_dir=str(tmp_path)))
    assert {g.kind for g in graphs} == {"forward", "backward"}
    assert _measured(graphs), "\n".join(map(str, _decisions(graphs)))


def test_masked_softmax_matches_eager(tmp_path):
    x, mask = _x(8, 4, 64, grad=True), _x(8, 4, 64, seed=3) > 0.5
    graphs = check_against_eager(masked_softmax, x, mask, strict=True,
                                 options=dict(EVERY, cache_dir=str(tmp_path)))
    assert all("not measured" not in d.reason for d in _decisions(graphs))


def test_thread_counts_are_measured_decisions(tmp_path):
    x = _x(512, 1024)      # past PARALLEL_MIN_NUMEL: the kernel's loop can fork
    graphs = check_against_eager(lambda t: (t * 2 + 1).relu(), x, grad=False, strict=True,
                                 options={"mode": "max-autotune", "num_threads": 2,
                                          "cache_dir": str(tmp_path)})
    assert len(graphs[0].kernels) == 1      # the model backs fusing this chain: no merge timed
    (schedule,) = [d for d in _decisions(graphs)
                   if isinstance(d, MeasuredChoice) and d.kind == "schedule"]
    assert schedule.subject == graphs[0].kernels[0].name
    assert schedule.choice in ("1 thread", "2 threads")
    assert schedule.reason.startswith("measured: 1 thread ") and " vs 2 threads " in schedule.reason
    assert {"measured_1t_us", "measured_2t_us"} <= set(schedule.metrics)
    chosen = "num_threads(1)" if schedule.choice == "1 thread" else "num_threads(2)"
    assert chosen in graphs[0].source
    assert str(schedule).startswith(f"schedule {schedule.subject}: {schedule.choice}: measured")


def test_a_second_compile_reads_the_measurements_from_the_cache(tmp_path):
    options = dict(EVERY, cache_dir=str(tmp_path))
    args = (_x(64, 256), _x(256))
    first = _measured(explain(broadcast_blowup, *args, options=options).graphs)
    again = _measured(explain(broadcast_blowup, *args, options=options).graphs)
    assert first and len(again) == len(first)
    assert not any(d.metrics["measured_cached"] for d in first)
    assert all(d.metrics["measured_cached"] and "measured, cached:" in d.reason for d in again)
    key = lambda d: (str(type(d)), d.reason.replace(", cached", ""))   # noqa: E731
    assert sorted(map(key, again)) == sorted(map(key, first))
    records = list((tmp_path / "autotune").glob("*/*.json"))
    assert len(records) >= len(first), records
    explain(broadcast_blowup, *args, options=options)
    assert sorted((tmp_path / "autotune").glob("*/*.json")) == sorted(records)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_other_modes_measure_nothing(mode, tmp_path):
    report = explain(broadcast_blowup, _x(64, 256), _x(256),
                     options={"mode": mode, "autotune_margin": 1e9, "cache_dir": str(tmp_path)})
    decisions = _decisions(report.graphs)
    assert decisions and not any("measured" in d.reason for d in decisions)
    assert not any(isinstance(d, MeasuredChoice) for d in decisions)
    assert not (tmp_path / "autotune").exists()


def test_a_merge_the_model_backs_is_not_measured(tmp_path):
    """A chain of cheap pointwise ops: fusing saves a round trip through memory per op,
    far beyond the default margin, so greedy's merges stand without a measurement."""
    report = explain(lambda t: ((t * 2 + 1) * 3 - t).abs(), _x(1024, 1024),
                     options={"mode": "max-autotune-no-cudagraphs", "cache_dir": str(tmp_path)})
    merges = [d for d in _decisions(report.graphs) if isinstance(d, Decision)]
    assert merges and all(d.accepted and "measured" not in d.reason for d in merges)


def test_symbolic_sizes_are_not_measured(tmp_path):
    torch._dynamo.reset()
    sink = []
    backend = functools.partial(brrr_backend, options=dict(EVERY, cache_dir=str(tmp_path)),
                                _sink=sink)
    compiled = torch.compile(broadcast_blowup, backend=backend, dynamic=True)
    x, v = _x(64, 256), _x(256)
    torch.testing.assert_close(compiled(x, v), broadcast_blowup(x, v))
    reasons = [d.reason for d in _decisions(sink)]
    assert any("not measured: the graph has symbolic sizes" in r for r in reasons), reasons
    torch._dynamo.reset()


def test_a_bad_mode_is_still_an_error():
    torch._dynamo.reset()
    compiled = torch.compile(broadcast_blowup, backend="brrr",
                             options={"mode": "max-autotune-no-graphs"})
    with pytest.raises(Exception, match="'max-autotune-no-cudagraphs'"):
        compiled(_x(4, 8), _x(8))
    torch._dynamo.reset()


def test_measuring_leaves_the_random_stream_alone(tmp_path):
    torch.manual_seed(7)
    explain(broadcast_blowup, _x(64, 256), _x(256), options=dict(EVERY, cache_dir=str(tmp_path)))
    after = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(torch.rand(3), after)


def test_the_fusion_artifact_and_the_plan_dump_show_measured_decisions(tmp_path):
    """TORCH_LOGS=brrr_fusion (a fresh interpreter: torch reads it at import) and the
    debug dump's fusion_plan.txt carry the measured decisions, thread counts included."""
    script = ("import torch\n"
              "def f(x, v):\n"
              "    return (v.sin().exp().erf() * x).sum(-1)\n"
              "x, v = torch.randn(512, 256), torch.randn(256)\n"
              "torch.testing.assert_close(torch.compile(f, backend='brrr')(x, v), f(x, v))\n")
    env = dict(os.environ, TORCH_LOGS="brrr_fusion", BRRR_MODE="max-autotune",
               BRRR_AUTOTUNE_MARGIN="1e9", BRRR_NUM_THREADS="2",
               BRRR_CACHE_DIR=str(tmp_path / "cache"), BRRR_DEBUG_DIR=str(tmp_path / "dumps"))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a measured merge, or the plan choice that kept the policy's plan over measured ones
    merge_or_plan = re.compile(r"(-> \S+|plan graph0_inference: .*): measured: (fused|with) ")
    assert "[__brrr_fusion]" in proc.stderr and merge_or_plan.search(proc.stderr)
    (plan,) = (tmp_path / "dumps").glob("run_*/graph0_inference/fusion_plan.txt")
    text = plan.read_text()
    assert merge_or_plan.search(text) and "schedule k" in text and ": measured: 1 thread " in text
