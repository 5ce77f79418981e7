"""Faults and concurrency, end to end through torch.compile: nothing is lost.

Threads sharing one compiled model; processes compiling one graph into one cache dir;
damaged cache entries; an unusable cache dir. In every case the model's answers match
eager. No C++ compiler and kernels that fail to build are in test_build_faults.py;
test_build.py tests the same faults one level down (build_library on hand-written C++).
"""
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
import torch
from torch.testing import assert_close

from tests.helpers import check_against_eager, spy_builds
from tests.runtime.fault_model import REPO, brrr_warnings, fresh_warnings, inputs, model  # noqa: F401


@pytest.fixture
def builds(monkeypatch):
    """Counts C++ compiler runs (cache misses)."""
    return spy_builds(monkeypatch)


def _compiled(cache_dir, **options):
    torch._dynamo.reset()
    return torch.compile(model, backend="brrr", options={"cache_dir": str(cache_dir), **options})


# ---- threads -------------------------------------------------------------------------

def test_two_threads_call_one_compiled_model(tmp_path):
    compiled = _compiled(tmp_path)
    compiled(*inputs())                          # compiled and built once, up front
    errors, barrier = [], threading.Barrier(2)

    def work(seed):
        try:
            barrier.wait()
            for i in range(30):
                args = inputs(seed * 100 + i)
                assert_close(compiled(*args), model(*args))
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
        args = inputs(seed)
        results[seed] = (compiled(*args), model(*args))

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
    from tests.runtime.fault_model import model, inputs
    from brrr_compiler.runtime.build import find_toolchain
    find_toolchain()                     # probe first, so that the builds themselves race
    compiled = torch.compile(model, backend="brrr")
    deadline = time.time() + 60
    while not os.path.exists({go!r}) and time.time() < deadline:
        time.sleep(0.001)
    x, w = inputs()
    x.requires_grad_()
    out = compiled(x, w)
    torch.testing.assert_close(out, model(x, w))
    out.sum().backward()
    xe = x.detach().clone().requires_grad_()
    model(xe, w).sum().backward()
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

@pytest.fixture(scope="module")
def populated_cache(tmp_path_factory):
    """A cache holding the kernels of `model` (forward and backward), built once in
    another process (this one must not have the libraries mapped: damaging a mapped .so
    is not a cache fault but a crash); each test damages a copy of it."""
    cache = tmp_path_factory.mktemp("populated") / "cache"
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(REPO)!r})
        import torch
        from tests.runtime.fault_model import model, inputs
        x, w = inputs()
        torch.compile(model, backend="brrr", options={{"cache_dir": {str(cache)!r}}})(x, w)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(cache.rglob("*.so"))
    return cache


def _truncate(so):
    so.write_bytes(so.read_bytes()[:100])


def _garbage(so):
    so.write_bytes(os.urandom(8192))


def _empty_sidecar(so):
    so.with_suffix(".sha256").write_text("")


@pytest.mark.parametrize("damage", [_truncate, _garbage, _empty_sidecar])
def test_damaged_cache_entry_is_rebuilt(tmp_path, builds, damage, populated_cache):
    cache = tmp_path / "cache"
    shutil.copytree(populated_cache, cache)        # modes too: the copy is as trusted
    sos = sorted(cache.rglob("*.so"))
    for so in sos:
        damage(so)
    x, w = inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _compiled(cache)(x, w)
    assert_close(out, model(x, w))
    assert sorted(map(str, sos)) == sorted(builds), "every damaged entry is rebuilt, once"
    assert not brrr_warnings(caught)
    torch._dynamo.reset()


# ---- cache dir -------------------------------------------------------------------------

def test_unusable_cache_dir_falls_back_with_one_warning(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("a regular file where a directory should be")
    cache = blocker / "cache"         # never creatable (tests run as root: chmod blocks nothing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphs = check_against_eager(model, *inputs(), options={"cache_dir": str(cache)},
                                     allow_fallback=True)
        check_against_eager(model, *inputs(rows=5), options={"cache_dir": str(cache)},
                            allow_fallback=True)
    msgs = brrr_warnings(caught)
    assert len(msgs) == 1 and "not usable" in msgs[0] and str(cache) in msgs[0], msgs
    assert all(g.kernels for g in graphs), "kernels still built, in a temporary dir"


def test_missing_cache_dir_is_created(tmp_path):
    cache = tmp_path / "not" / "yet" / "there"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphs = check_against_eager(model, *inputs(), options={"cache_dir": str(cache)})
    assert not brrr_warnings(caught)
    assert all(g.kernels for g in graphs) and list(cache.rglob("*.so"))
