"""Tests for runtime/build.py and runtime/toolchain.py: real compiles with the real g++."""
import ctypes
import hashlib
import os
import subprocess
import sys
import threading
import warnings

import pytest
import torch

from brrr_compiler.runtime import build
from brrr_compiler.runtime.build import (BuildError, build_and_load, build_library,
                                         find_toolchain, load_library)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ADD_SRC = r"""
#include <cstdint>
extern "C" void add_f32(const float* __restrict a, const float* __restrict b,
                        float* __restrict out, int64_t n) {
  #pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
"""

MVEC_SRC = r"""
#include <cstdint>
extern "C" {
#pragma omp declare simd notinbranch
float expf(float);
}
extern "C" void exp_f32(const float* __restrict a, float* __restrict out, int64_t n) {
  #pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = expf(a[i]);
}
"""

# Under -ffast-math both lines fold away: (x != x) to 0, and x + 0.0f to x (keeping -0.0).
IEEE_SRC = r"""
#include <cstdint>
extern "C" void ieee_f32(const float* __restrict a, float* __restrict isnan_out,
                         float* __restrict plus_zero, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    isnan_out[i] = (a[i] != a[i]) ? 1.0f : 0.0f;
    plus_zero[i] = a[i] + 0.0f;
  }
}
"""


@pytest.fixture(scope="module")
def toolchain():
    tc = find_toolchain()
    if tc is None:
        pytest.skip("no usable C++ compiler with OpenMP")
    return tc


@pytest.fixture
def compiler_calls(toolchain, monkeypatch):
    """Counts compiler invocations (the toolchain is probed before the spy goes in)."""
    calls = []
    real_run = subprocess.run

    def spy(cmd, *args, **kwargs):
        if cmd and cmd[0] == toolchain.cxx:
            calls.append(cmd)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(build.subprocess, "run", spy)
    return calls


def _fn(lib, name, nargs):
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * (nargs - 1) + [ctypes.c_int64]
    fn.restype = None
    return fn


def _check_add(lib, n=1003):
    a, b = torch.randn(n), torch.randn(n)
    out = torch.empty(n)
    _fn(lib, "add_f32", 4)(a.data_ptr(), b.data_ptr(), out.data_ptr(), n)
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)


def _cache_files(path):
    return sorted(os.listdir(os.path.dirname(path)))


def test_build_and_load_add(tmp_path, toolchain):
    path = build_library(ADD_SRC, str(tmp_path))
    _check_add(load_library(path))
    key = os.path.basename(path)[:-3]
    assert path == os.path.join(str(tmp_path), key[:2], key + ".so")
    assert _cache_files(path) == [key + ".cpp", key + ".sha256", key + ".so"]
    with open(path, "rb") as f:
        assert open(path[:-3] + ".sha256").read() == hashlib.sha256(f.read()).hexdigest()
    assert open(path[:-3] + ".cpp").read() == ADD_SRC


def test_toolchain_flags(toolchain):
    assert find_toolchain() is toolchain  # probed once, cached
    for flag in ("-O3", "-fopenmp", "-fno-math-errno", "-fPIC", "-shared", "-std=c++17"):
        assert flag in toolchain.flags
    assert not any("fast-math" in f for f in toolchain.flags)
    assert os.path.isabs(toolchain.cxx) and toolchain.version


def test_ieee_semantics_kept(tmp_path, toolchain):
    lib = load_library(build_library(IEEE_SRC, str(tmp_path)))
    a = torch.tensor([float("nan"), -0.0, float("inf"), 1.5])
    isnan, plus_zero = torch.empty(4), torch.empty(4)
    _fn(lib, "ieee_f32", 4)(a.data_ptr(), isnan.data_ptr(), plus_zero.data_ptr(), 4)
    assert isnan.tolist() == [1.0, 0.0, 0.0, 0.0]
    torch.testing.assert_close(plus_zero, a + 0.0, equal_nan=True)
    assert not torch.signbit(plus_zero[1])  # -0.0 + 0.0 is +0.0 in IEEE


def test_second_build_hits_cache(tmp_path, compiler_calls):
    first = build_library(ADD_SRC, str(tmp_path))
    assert len(compiler_calls) == 1
    assert build_library(ADD_SRC, str(tmp_path)) == first
    assert len(compiler_calls) == 1
    _check_add(load_library(first))


def _truncate(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


def _garbage(path):
    open(path, "wb").write(os.urandom(4096))


def _drop_sidecar(path):
    os.unlink(path[:-3] + ".sha256")


def _drop_so(path):
    os.unlink(path)


@pytest.mark.parametrize("damage", [_truncate, _garbage, _drop_sidecar, _drop_so])
def test_damaged_cache_entry_is_rebuilt(tmp_path, compiler_calls, damage):
    path = build_library(ADD_SRC, str(tmp_path))  # not loaded: damage a file nobody maps
    damage(path)
    assert build_library(ADD_SRC, str(tmp_path)) == path
    assert len(compiler_calls) == 2
    _check_add(load_library(path))


def test_unloadable_cached_library_is_rebuilt_once(tmp_path, compiler_calls):
    path = build_library(ADD_SRC, str(tmp_path))
    garbage = os.urandom(4096)  # garbage whose sidecar matches: passes the hash check
    open(path, "wb").write(garbage)
    open(path[:-3] + ".sha256", "w").write(hashlib.sha256(garbage).hexdigest())
    with pytest.raises(OSError):
        load_library(path)
    _check_add(build_and_load(ADD_SRC, str(tmp_path)))
    assert len(compiler_calls) == 2


def test_unusable_cache_dir_falls_back_to_temp(tmp_path, toolchain):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    cache = str(blocker / "cache")  # can never be created: its parent is a file
    with pytest.warns(RuntimeWarning, match="not usable"):
        path = build_library(ADD_SRC, cache)
    assert not path.startswith(str(tmp_path)) and os.path.basename(
        os.path.dirname(os.path.dirname(path))).startswith("brrr-")
    _check_add(load_library(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning per bad dir, not one per build
        assert build_library(ADD_SRC, cache) == path
        build_library(ADD_SRC + "\n// another kernel\n", cache)


def test_syntax_error_raises_build_error(tmp_path, toolchain):
    bad = 'extern "C" void broken(int n) { int x = ; }\n'
    with pytest.raises(BuildError) as info:
        build_library(bad, str(tmp_path))
    err = info.value
    assert err.command[0] == toolchain.cxx and "-fopenmp" in err.command
    assert "error" in err.stderr and err.stderr in str(err)
    assert toolchain.cxx in str(err)
    shard = os.path.join(str(tmp_path), os.listdir(str(tmp_path))[0])
    assert [f for f in os.listdir(shard) if not f.endswith(".cpp")] == []  # no .so, no temps


def test_build_error_truncates_stderr():
    err = BuildError("failed", ["g++", "x.cpp"], "e" * 10_000)
    assert len(err.stderr) < 4100 and "more chars" in err.stderr
    assert "g++ x.cpp" in str(err)


def test_nonexistent_compiler(tmp_path):
    assert find_toolchain("/nonexistent/g++") is None
    with pytest.raises(BuildError, match="no usable C\\+\\+ compiler"):
        build_library(ADD_SRC, str(tmp_path), cxx="/nonexistent/g++")


def test_broken_cxx_env_falls_back_with_warning(tmp_path, toolchain, monkeypatch):
    fake = tmp_path / "fake-cxx"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    with pytest.warns(RuntimeWarning, match="not a usable"):
        tc = find_toolchain()
    assert tc is not None and tc.cxx != str(fake)


def test_threads_building_same_key_compile_once(tmp_path, compiler_calls):
    paths, barrier = [], threading.Barrier(4)

    def work():
        barrier.wait()
        paths.append(build_library(ADD_SRC, str(tmp_path)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1 and len(paths) == 4
    assert len(compiler_calls) == 1
    _check_add(load_library(paths[0]))


CHILD = r"""
import ctypes, os, sys, time
sys.path.insert(0, {repo!r})
from brrr_compiler.runtime.build import build_library, find_toolchain, load_library
find_toolchain()  # probe first, so that the compiles themselves race
deadline = time.time() + 60
while not os.path.exists({go!r}) and time.time() < deadline:
    time.sleep(0.001)
lib = load_library(build_library({src!r}, {cache!r}))
n = 257
a = (ctypes.c_float * n)(*range(n)); b = (ctypes.c_float * n)(*[2.0] * n)
out = (ctypes.c_float * n)()
fn = lib.add_f32
fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64]
fn(ctypes.addressof(a), ctypes.addressof(b), ctypes.addressof(out), n)
assert list(out) == [i + 2.0 for i in range(n)], list(out)
print("OK")
"""


def test_processes_building_same_key_all_succeed(tmp_path, toolchain):
    cache, go = str(tmp_path / "cache"), str(tmp_path / "go")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=REPO, go=go, src=ADD_SRC, cache=cache))
    children = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(3)]
    open(go, "w").close()
    results = [child.communicate(timeout=120) for child in children]
    for child, (out, err) in zip(children, results):
        assert child.returncode == 0 and out.strip() == "OK", err
    (shard,) = os.listdir(cache)
    names = sorted(os.listdir(os.path.join(cache, shard)))
    assert [os.path.splitext(n)[1] for n in names] == [".cpp", ".sha256", ".so"]  # no temps


def test_mvec_probe_is_consistent(tmp_path, toolchain):
    if "-lmvec" in toolchain.libs:
        path = build_library(MVEC_SRC, str(tmp_path))
        assert b"_ZGV" in open(path, "rb").read()  # calls a libmvec vector variant
        a = torch.linspace(-20, 20, 1001)
        out = torch.empty_like(a)
        _fn(load_library(path), "exp_f32", 3)(a.data_ptr(), out.data_ptr(), a.numel())
        torch.testing.assert_close(out, torch.exp(a))
    else:
        src = tmp_path / "mvec.cpp"
        src.write_text(MVEC_SRC)
        cmd = [*toolchain.command(str(src), str(tmp_path / "mvec.so")), "-lmvec"]
        assert subprocess.run(cmd, capture_output=True).returncode != 0


def test_probe_result_is_kept_in_the_cache_dir(tmp_path, toolchain, monkeypatch):
    """A later process (here: an emptied in-process table) reads the probe from disk;
    a damaged record is probed again."""
    from brrr_compiler.runtime import toolchain as tc_module
    monkeypatch.setattr(tc_module, "_probed", {})
    assert find_toolchain(toolchain.cxx, str(tmp_path)) == toolchain
    (record,) = tmp_path.glob("toolchain-*.json")
    monkeypatch.setattr(tc_module, "_probed", {})
    monkeypatch.setattr(tc_module, "_probe", lambda cxx: pytest.fail("probed again"))
    assert find_toolchain(toolchain.cxx, str(tmp_path)) == toolchain
    record.write_text("{garbage")
    monkeypatch.setattr(tc_module, "_probed", {})
    probes = []
    monkeypatch.setattr(tc_module, "_probe", lambda cxx: probes.append(cxx) or toolchain)
    assert find_toolchain(toolchain.cxx, str(tmp_path)) == toolchain and probes == [toolchain.cxx]


def test_prefetch_probes_once_in_the_background(tmp_path, toolchain, monkeypatch):
    """prefetch() probes in its own thread; a find_toolchain meanwhile waits for that
    probe instead of starting another, and gets the same toolchain."""
    from brrr_compiler.runtime import toolchain as tc_module
    monkeypatch.setattr(tc_module, "_probed", {})
    started, release, probes = threading.Event(), threading.Event(), []

    def slow_probe(cxx):
        probes.append(threading.current_thread().name)
        started.set()
        release.wait(10)
        return toolchain

    monkeypatch.setattr(tc_module, "_probe", slow_probe)
    thread = tc_module.prefetch(toolchain.cxx, str(tmp_path))
    assert started.wait(10)
    threading.Timer(0.2, release.set).start()
    assert find_toolchain(toolchain.cxx, str(tmp_path)) == toolchain
    thread.join(10)
    assert probes == ["brrr-toolchain-probe"]


def test_probe_compiles_once_and_falls_back_step_by_step(toolchain, monkeypatch):
    """A compiler where everything works is probed with one compile (OpenMP and libmvec in
    one TU); when that TU fails, the flag sets and libmvec are tried one by one and give
    the same toolchain."""
    from brrr_compiler.runtime import toolchain as tc_module
    real, stems = tc_module._compiles, []

    def compiles(cxx, flags, libs, source, tmp, stem):
        stems.append(stem)
        return None if stem == "both" and fail_both else real(cxx, flags, libs, source, tmp, stem)

    monkeypatch.setattr(tc_module, "_compiles", compiles)
    fail_both = False
    assert tc_module._probe(toolchain.cxx) == toolchain
    if "-lmvec" in toolchain.libs:
        assert stems == ["both"]
    stems.clear()
    fail_both = True
    assert tc_module._probe(toolchain.cxx) == toolchain
    assert stems[0] == "both" and "openmp" in stems and len(stems) >= 3
