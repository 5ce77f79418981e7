"""The user-facing surface: backend="brrr" by name, options, debug dumps, explain,
training a module, and a missing compiler."""
import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

import brrr_compiler
from brrr_compiler import log as brrr_log
from tests.helpers import check_against_eager

REPO = Path(__file__).resolve().parents[2]


def _f(x, w):
    return torch.sin(x * 2 + 1) @ w * 0.5


def _inputs():
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(8, 6, generator=gen, requires_grad=True),
            torch.randn(6, 4, generator=gen, requires_grad=True))


@pytest.fixture(scope="module")
def fresh_interpreter(tmp_path_factory):
    """(stdout, stderr, dump dir) of one fresh interpreter that compiles by name, then
    trains: the two tests below read it (one interpreter start, not two)."""
    tmp = tmp_path_factory.mktemp("fresh-interpreter")
    script = textwrap.dedent("""
        import sys
        import torch
        # `import torch` loads only brrr's log names (torch_logs.py's note), not the backend
        assert "brrr_compiler.backend" not in sys.modules
        def f(x):
            return (x * 2).sin() + 1
        x = torch.randn(8, 5)
        torch.testing.assert_close(torch.compile(f, backend="brrr")(x), f(x))
        assert "brrr_compiler.backend" in sys.modules
        print("BRRR_BY_NAME_OK")

        lin = torch.nn.Linear(6, 4)
        def g(x):
            return torch.sin(lin(x) * 2 + 1).sum() + torch.sin(lin(x) * 2 + 1).mean()
        x = torch.randn(8, 6, requires_grad=True)
        g(x).backward()
        expected = x.grad.clone()
        x.grad = None
        torch.compile(g, backend="brrr")(x).backward()
        torch.testing.assert_close(x.grad, expected)
        assert "torch._inductor.pattern_matcher" not in sys.modules
        print("NO_INDUCTOR_OK")
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO), BRRR_DEBUG_DIR=str(tmp / "dumps"),
               BRRR_CACHE_DIR=str(tmp / "cache"))
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=300)
    return proc.stdout, proc.stderr, tmp / "dumps"


def test_backend_by_name_in_fresh_interpreter(fresh_interpreter):
    """The torch_dynamo_backends entry point finds brrr; nothing imports it first."""
    out, err, dumps = fresh_interpreter
    assert "BRRR_BY_NAME_OK" in out, err[-3000:]
    assert list(dumps.glob("run_*/*/kernels.cpp")), "brrr made no kernel"


def test_training_step_leaves_inductor_unimported(fresh_interpreter):
    """The joint graph's CSE is brrr's own (capture.py's note): a training step imports
    none of inductor's pattern matcher, whose import alone costs about a second."""
    out, err, _ = fresh_interpreter
    assert "NO_INDUCTOR_OK" in out, err[-3000:]


DOCUMENTED_KEYS = ("fusion", "cache_dir", "debug_dir", "cxx", "num_threads", "passes")


def test_unknown_option_lists_valid_keys():
    with pytest.raises(ValueError, match="fusoin") as err:
        brrr_compiler.explain(_f, *_inputs(), fusoin="none")
    assert all(k in str(err.value) for k in DOCUMENTED_KEYS), str(err.value)

    torch._dynamo.reset()
    compiled = torch.compile(_f, backend="brrr", options={"fusoin": "none"})
    with pytest.raises(Exception, match="fusoin") as err:
        compiled(*_inputs())
    assert all(k in str(err.value) for k in DOCUMENTED_KEYS), str(err.value)


DUMPS = ("aten_before.py", "aten_after.py", "fusion_plan.txt", "kernels.cpp", "runner.py")


def test_debug_dir_dumps_every_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("BRRR_DEBUG_DIR", str(tmp_path))
    graphs = check_against_eager(_f, *_inputs())
    assert sorted(g.kind for g in graphs) == ["backward", "forward"]
    (run,) = tmp_path.glob("run_*-pid_*")          # one folder per process run
    for g in graphs:
        folder = run / g.name
        assert sorted(p.name for p in folder.iterdir()) == sorted(DUMPS + (f"{g.name}.py",))
        assert "aten.mm" in (folder / "aten_before.py").read_text()
        assert "FusionPlan" in (folder / "fusion_plan.txt").read_text()
        assert all(k.name in (folder / "kernels.cpp").read_text() for k in g.kernels)
        assert all(k.name in (folder / "runner.py").read_text() for k in g.kernels)


def test_explain_prints_kernels_and_aten_ops(capsys):
    report = brrr_compiler.explain(_f, *_inputs())
    print(report)
    out = capsys.readouterr().out
    assert report.kernels
    for k in report.kernels:
        assert k.name in out
        assert all(op in out for op in k.aten_ops)
    assert "aten.mm.default" in out and "aten.sin.default" in out


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                               torch.nn.Linear(32, 8), torch.nn.LayerNorm(8))


def test_module_trains_like_eager():
    gen = torch.Generator().manual_seed(1)
    x, target = torch.randn(12, 16, generator=gen), torch.randn(12, 8, generator=gen)
    check_against_eager(_model(), x)

    eager, model = _model(), _model()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="brrr")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (eager, model)]
    for _ in range(3):
        losses = []
        for m, opt in zip((eager, compiled), opts):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        assert_close(losses[1], losses[0])
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, msg=lambda m: f"parameter {name} after 3 steps: {m}")
    torch._dynamo.reset()


def test_missing_compiler_warns_and_runs_through_aten(monkeypatch):
    monkeypatch.setattr(brrr_log, "_warned", set())     # the warning is once per process
    with pytest.warns(RuntimeWarning, match="no working C\\+\\+ compiler"):
        graphs = check_against_eager(
            _f, *_inputs(), options={"cxx": "/nonexistent/brrr-test-backend-api/g++"},
            allow_fallback=True)
    assert graphs and all(not g.kernels for g in graphs)
