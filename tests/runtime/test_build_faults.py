"""Build faults end to end: no C++ compiler on PATH, a kernel that fails to build (its
group alone falls back; explain says so), and a plan whose kernels would wait on each
other through an ATen call. The model's answers match eager in every case.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from torch.testing import assert_close

import brrr_compiler
from brrr_compiler.backend import lower_plan
from brrr_compiler.codegen import cpp
from brrr_compiler.config import build_config
from brrr_compiler.partition.plan import FusionPlan, Group
from brrr_compiler.runtime.kernels import build_kernels
from brrr_compiler.runtime.runner import build_runner
from tests.helpers import aten_graph, check_against_eager
from tests.runtime.fault_model import REPO, brrr_warnings, fresh_warnings  # noqa: F401


# ---- no compiler -----------------------------------------------------------------------

NO_CXX_CHILD = textwrap.dedent("""
    import sys, warnings
    sys.path.insert(0, {repo!r})
    import torch
    from tests.runtime.fault_model import model, inputs
    x, w = inputs()
    x.requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(model, backend="brrr")
        out = compiled(x, w)
        out.sum().backward()
        compiled(*inputs(1, rows=7))      # a second shape: new graphs, no new warning
    xe = x.detach().clone().requires_grad_()
    ref = model(xe, w)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, xe.grad)
    msgs = [str(w.message) for w in caught if str(w.message).startswith("brrr:")]
    print("WARNINGS", len(msgs))
    print(msgs[0] if msgs else "")
""")


def test_no_compiler_on_path_runs_through_aten_with_one_warning(tmp_path):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "BRRR_CXX", "CC")}
    env.update(PATH=str(empty_bin), PYTHONPATH=str(REPO), BRRR_CACHE_DIR=str(tmp_path / "c"))
    proc = subprocess.run([sys.executable, "-c", NO_CXX_CHILD.format(repo=str(REPO))],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == "WARNINGS 1", proc.stdout
    assert "no working C++ compiler" in lines[-1]
    assert not (tmp_path / "c").exists() or not list((tmp_path / "c").rglob("*.so"))


# ---- a kernel that fails to build ------------------------------------------------------

def _two_kernel_fn(x, w):
    a = torch.sin(x) * 2 + 1              # kernel before the matmul
    return torch.softmax(a @ w, -1)       # kernel after it


@pytest.mark.parametrize("split", [False, True])
def test_kernel_build_error_falls_back_for_its_group_only(tmp_path, monkeypatch, split):
    """One translation unit, or (split) two: the unit with the broken kernel falls back
    kernel by kernel, the other one's kernel is untouched."""
    from brrr_compiler.runtime import kernels as kernels_module
    monkeypatch.setattr(kernels_module, "UNIT_MIN_LINES", 1 if split else 10**9)
    monkeypatch.setattr(kernels_module, "_cores", lambda: 2)
    real = cpp.print_kernel

    def broken(k, sched):
        src = real(k, sched)
        return src.replace("{", "{ this is not C++;", 1) if "softmax" in k.name or \
            "amax" in k.name else src

    monkeypatch.setattr(cpp, "print_kernel", broken)
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 5, generator=gen), torch.randn(5, 7, generator=gen)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (graph,) = check_against_eager(_two_kernel_fn, x, w, grad=False, allow_fallback=True,
                                       options={"cache_dir": str(tmp_path)})
    msgs = brrr_warnings(caught)
    assert len(msgs) == 1 and "failed to build" in msgs[0], msgs
    assert ("translation unit 2 of 2" in graph.source) == split
    assert [k.name for k in graph.kernels] and all("sin" in k.name for k in graph.kernels)
    ops = [op for _, op in graph.aten_nodes]
    assert "aten.amax.default" in ops and "aten.exp.default" in ops, ops


def test_explain_reports_the_fallback(tmp_path, monkeypatch):
    real = cpp.print_kernel
    monkeypatch.setattr(cpp, "print_kernel",
                        lambda k, sched: real(k, sched).replace("{", "{ #error broken\n", 1))
    gen = torch.Generator().manual_seed(0)
    with pytest.warns(RuntimeWarning, match="failed to build"):
        report = brrr_compiler.explain(_two_kernel_fn, torch.randn(4, 5, generator=gen),
                                       torch.randn(5, 3, generator=gen),
                                       options={"cache_dir": str(tmp_path)})
    assert not report.kernels
    assert "aten.sin.default" in str(report)
    reasons = {c.op: c.reason for c in report.graphs[0].aten_calls}
    assert "was not built" in reasons["aten.sin.default"], reasons


# ---- a plan whose kernels would wait on each other -----------------------------------

def test_kernels_on_a_cycle_through_aten_run_through_aten(tmp_path):
    """A group whose nodes are not connected inside it can feed, through an ATen call,
    itself (here) or another group that feeds it; the partitioner checks cycles node by
    node, so it once made such a plan (index_reduce(prod)'s backward). The runner finds
    the cycle and runs that group through ATen, with one warning, instead of failing."""
    def f(x):
        a = x + 1
        b = torch.cumsum(a, 0)            # ATen, between the group's two nodes
        return b * 2

    x = torch.randn(5, 3)
    gm = aten_graph(f, x)
    add, cumsum, mul = [n for n in gm.graph.nodes if n.op == "call_function"]
    group = Group(0, [add, mul], [add, mul], [add.args[0], cumsum], (5, 3))
    plan = FusionPlan(gm, [group], [], "by hand")
    kernels, specs, *_ = lower_plan(plan)
    compiled, _ = build_kernels(kernels, specs, build_config({"cache_dir": str(tmp_path)}), 1)
    assert list(compiled) == [0]
    with pytest.warns(RuntimeWarning, match="on a cycle"):
        runner = build_runner(plan, compiled)
    assert "k0" not in runner.code and "cumsum" in runner.code
    assert_close(runner([x]), f(x))     # the runner takes a list (boxed)


def test_index_reduce_prod_gradients():
    """The model that exposed the cycle (see above): results match eager."""
    gen = torch.Generator().manual_seed(0)
    x, src = torch.randn((), generator=gen), torch.randn((), generator=gen)

    def f(x, idx, src):
        return torch.index_reduce(x, 0, idx, src, "prod", include_self=True)

    check_against_eager(f, x.requires_grad_(), torch.tensor([0]), src.requires_grad_(),
                        allow_fallback=True)
