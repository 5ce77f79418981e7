"""Faults and concurrency, end to end through torch.compile: nothing is lost.

Threads sharing one compiled model; processes compiling one graph into one cache dir;
damaged cache entries; an unusable cache dir; no C++ compiler on PATH; a kernel that
fails to build. In every case the model's answers match eager. test_build.py tests the
same faults one level down (build_library on hand-written C++).
"""
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import brrr_compiler
from brrr_compiler import log as brrr_log
from brrr_compiler.backend import lower_plan
from brrr_compiler.codegen import cpp
from brrr_compiler.config import build_config
from brrr_compiler.partition.plan import FusionPlan, Group
from brrr_compiler.runtime.kernels import build_kernels
from brrr_compiler.runtime.runner import build_runner
from tests.helpers import aten_graph, check_against_eager, spy_builds

REPO = Path(__file__).resolve().parents[2]


def _f(x, w):
    h = F.gelu(x * 2 + 1) @ w
    return torch.softmax(h, -1) * h.sum(-1, keepdim=True)


def _inputs(seed=0, rows=16):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 12, generator=gen), torch.randn(12, 8, generator=gen)


@pytest.fixture
def builds(monkeypatch):
    """Counts C++ compiler runs (cache misses)."""
    return spy_builds(monkeypatch)


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """warn_once is once per process: each test sees its own warnings."""
    monkeypatch.setattr(brrr_log, "_warned", set())


def _compiled(cache_dir, **options):
    torch._dynamo.reset()
    return torch.compile(_f, backend="brrr", options={"cache_dir": str(cache_dir), **options})


def _brrr_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith("brrr:")]


# ---- threads -------------------------------------------------------------------------

def test_two_threads_call_one_compiled_model(tmp_path):
    compiled = _compiled(tmp_path)
    compiled(*_inputs())                          # compiled and built once, up front
    errors, barrier = [], threading.Barrier(2)

    def work(seed):
        try:
            barrier.wait()
            for i in range(30):
                args = _inputs(seed * 100 + i)
                assert_close(compiled(*args), _f(*args))
        except BaseException as err:  # noqa: BLE001  (reported below)
            errors.append(err)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    torch._dynamo.reset()


def test_two_threads_compile_at_once(tmp_path, builds):
    """Both threads make the first call: one graph is built once and both are right."""
    compiled = _compiled(tmp_path)
    results, barrier = {}, threading.Barrier(2)

    def work(seed):
        barrier.wait()
        args = _inputs(seed)
        results[seed] = (compiled(*args), _f(*args))

    threads = [threading.Thread(target=work, args=(s,)) for s in (3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2
    for got, want in results.values():
        assert_close(got, want)
    assert len(builds) == len(set(builds)) >= 1
    torch._dynamo.reset()


def test_bounds_error_in_one_thread_does_not_leak_into_another(tmp_path):
    """Kernels with indirect loads report an out-of-range index through a flag per
    library: one thread's bad index must raise in that thread only."""
    def f(x, i):
        return torch.gather(x * 2, 1, i).sum(-1)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="brrr", options={"cache_dir": str(tmp_path)})
    x = torch.randn(64, 4096)
    good = torch.randint(0, 4096, (64, 4096))
    bad = good.clone()
    bad[-1, -1] = 4096
    compiled(x, good)
    with pytest.raises(IndexError):
        compiled(x, bad)
    wrong, barrier = [], threading.Barrier(2)

    def work(index, should_raise):
        barrier.wait()
        for _ in range(40):
            try:
                compiled(x, index)
                raised = False
            except IndexError:
                raised = True
            if raised != should_raise:
                wrong.append(("good" if not should_raise else "bad", raised))

    threads = [threading.Thread(target=work, args=(good, False)),
               threading.Thread(target=work, args=(bad, True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, f"{len(wrong)} calls raised in the wrong thread: {wrong[:5]}"
    torch._dynamo.reset()


# ---- processes -----------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {repo!r})
    import torch
    from tests.runtime.test_faults import _f, _inputs
    from brrr_compiler.runtime.build import find_toolchain
    find_toolchain()                     # probe first, so that the builds themselves race
    compiled = torch.compile(_f, backend="brrr")
    deadline = time.time() + 60
    while not os.path.exists({go!r}) and time.time() < deadline:
        time.sleep(0.001)
    x, w = _inputs()
    x.requires_grad_()
    out = compiled(x, w)
    torch.testing.assert_close(out, _f(x, w))
    out.sum().backward()
    xe = x.detach().clone().requires_grad_()
    _f(xe, w).sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)
    print("OK")
""")


def test_two_processes_compile_one_graph_into_one_cache(tmp_path):
    cache, go = tmp_path / "cache", tmp_path / "go"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO), go=str(go)))
    env = dict(os.environ, BRRR_CACHE_DIR=str(cache), PYTHONPATH=str(REPO))
    children = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env)
                for _ in range(2)]
    go.touch()
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0 and out.strip() == "OK", err[-3000:]
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert not [p for p in files if p.name.endswith(".tmp")], "temporary files left behind"
    sos = [p for p in files if p.suffix == ".so"]
    assert sos and all(p.with_suffix(".sha256").exists() for p in sos)


# ---- damaged cache entries -------------------------------------------------------------

def _populate_in_subprocess(cache):
    """Build the kernels of _f (forward and backward) into `cache` in another process
    (this one must not have the libraries mapped: damaging a mapped .so is not a cache
    fault but a crash)."""
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(REPO)!r})
        import torch
        from tests.runtime.test_faults import _f, _inputs
        x, w = _inputs()
        torch.compile(_f, backend="brrr", options={{"cache_dir": {str(cache)!r}}})(x, w)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    sos = sorted(cache.rglob("*.so"))
    assert sos
    return sos


def _truncate(so):
    so.write_bytes(so.read_bytes()[:100])


def _garbage(so):
    so.write_bytes(os.urandom(8192))


def _empty_sidecar(so):
    so.with_suffix(".sha256").write_text("")


@pytest.mark.parametrize("damage", [_truncate, _garbage, _empty_sidecar])
def test_damaged_cache_entry_is_rebuilt(tmp_path, builds, damage):
    cache = tmp_path / "cache"
    sos = _populate_in_subprocess(cache)
    for so in sos:
        damage(so)
    x, w = _inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _compiled(cache)(x, w)
    assert_close(out, _f(x, w))
    assert sorted(map(str, sos)) == sorted(builds), "every damaged entry is rebuilt, once"
    assert not _brrr_warnings(caught)
    torch._dynamo.reset()


# ---- cache dir -------------------------------------------------------------------------

def test_unusable_cache_dir_falls_back_with_one_warning(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("a regular file where a directory should be")
    cache = blocker / "cache"         # never creatable (tests run as root: chmod blocks nothing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphs = check_against_eager(_f, *_inputs(), options={"cache_dir": str(cache)},
                                     allow_fallback=True)
        check_against_eager(_f, *_inputs(rows=5), options={"cache_dir": str(cache)},
                            allow_fallback=True)
    msgs = _brrr_warnings(caught)
    assert len(msgs) == 1 and "not usable" in msgs[0] and str(cache) in msgs[0], msgs
    assert all(g.kernels for g in graphs), "kernels still built, in a temporary dir"


def test_missing_cache_dir_is_created(tmp_path):
    cache = tmp_path / "not" / "yet" / "there"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphs = check_against_eager(_f, *_inputs(), options={"cache_dir": str(cache)})
    assert not _brrr_warnings(caught)
    assert all(g.kernels for g in graphs) and list(cache.rglob("*.so"))


# ---- no compiler -----------------------------------------------------------------------

NO_CXX_CHILD = textwrap.dedent("""
    import sys, warnings
    sys.path.insert(0, {repo!r})
    import torch
    from tests.runtime.test_faults import _f, _inputs
    x, w = _inputs()
    x.requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(_f, backend="brrr")
        out = compiled(x, w)
        out.sum().backward()
        compiled(*_inputs(1, rows=7))      # a second shape: new graphs, no new warning
    xe = x.detach().clone().requires_grad_()
    ref = _f(xe, w)
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
    msgs = _brrr_warnings(caught)
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
