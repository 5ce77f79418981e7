"""runtime/cache.py: a cache dir brrr may trust (created 0700; one owned by another user or
writable by others is never loaded from), the size cap and its least-recently-used
eviction (never breaking a loaded library), and `info` / `clear`."""
import ctypes
import os
import re
import shutil
import stat
import warnings

import pytest
import torch
from torch.testing import assert_close

from brrr_compiler import log as brrr_log
from brrr_compiler.runtime import cache, toolchain as toolchain_mod, triton_launch
from brrr_compiler.runtime.build import build_library, load_library
from tests.runtime.test_build import ADD_SRC, _check_add, toolchain  # noqa: F401

KEY = "ab" + "0" * 62


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(brrr_log, "_warned", set())
    monkeypatch.setattr(cache, "_usable", {})
    monkeypatch.setattr(cache, "_known_bytes", {})


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _entry(root, key, size, mtime, exts=(".so", ".cpp", ".sha256")):
    folder = root / key[:2]
    folder.mkdir(parents=True, exist_ok=True)
    for ext in exts:
        path = folder / (key + ext)
        path.write_bytes(b"x" * size)
        os.utime(path, (mtime, mtime))


# ---- trust ------------------------------------------------------------------------------

def test_a_new_cache_dir_is_private(tmp_path, toolchain):
    root = tmp_path / "new" / "cache"
    path = build_library(ADD_SRC, str(root))
    assert _mode(root) == 0o700 and path.startswith(str(root))
    assert _mode(os.path.dirname(path)) == 0o700
    assert _mode(path) == 0o700 and _mode(path[:-3] + ".cpp") == 0o600


@pytest.mark.parametrize("spoil,reason", [
    (lambda p: os.chmod(p, 0o777), "writable by group and others (mode 777)"),
    (lambda p: os.chmod(p, 0o722), "writable by group and others (mode 722)"),
    (lambda p: os.chmod(p, 0o770), "writable by group (mode 770)"),
    (lambda p: os.chown(p, 12345, -1), "owned by another user (uid 12345"),
])
def test_an_untrusted_cache_dir_is_never_loaded_from(tmp_path, toolchain, spoil, reason):
    trusted = tmp_path / "trusted"
    planted = build_library(ADD_SRC, str(trusted))
    shared = tmp_path / "shared"
    shutil.copytree(trusted, shared)        # the same entry, as if someone planted it
    spoil(shared)
    with pytest.warns(brrr_log.BrrrWarning, match=re.escape(reason)) as caught:
        path = build_library(ADD_SRC, str(shared))
    assert len(caught) == 1 and "instead" in str(caught[0].message)
    assert not path.startswith(str(shared)) and os.path.basename(path) == os.path.basename(planted)
    assert _mode(os.path.dirname(os.path.dirname(path))) == 0o700     # the private dir
    _check_add(load_library(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # one warning per directory
        assert build_library(ADD_SRC, str(shared)) == path


def test_toolchain_records_are_not_read_from_an_untrusted_dir(tmp_path, toolchain):
    trusted, shared = tmp_path / "trusted", tmp_path / "shared"
    assert toolchain_mod._probe_on_disk(toolchain.cxx, str(trusted)) == toolchain
    shutil.copytree(trusted, shared)
    (record,) = shared.glob("toolchain-*.json")
    record.write_text(record.read_text().replace(toolchain.cxx, "/tmp/planted-compiler"))
    os.chmod(shared, 0o777)
    with pytest.warns(brrr_log.BrrrWarning, match="writable by"):
        assert toolchain_mod._probe_on_disk(toolchain.cxx, str(shared)).cxx == toolchain.cxx


def test_triton_modules_are_not_imported_from_an_untrusted_dir(tmp_path):
    shared = tmp_path / "shared"
    (shared / "triton" / KEY[:2]).mkdir(parents=True)
    (shared / "triton" / KEY[:2] / f"{KEY}.py").write_text("planted = True\n")
    os.chmod(shared, 0o777)
    with pytest.warns(brrr_log.BrrrWarning, match="writable by"):
        path = triton_launch._write("ours = True\n", str(shared), KEY)
    assert not path.startswith(str(shared)) and open(path).read() == "ours = True\n"


def test_untrusted_dir_is_a_warning_even_under_strict(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    torch._dynamo.reset()
    f = torch.compile(lambda x: x.sin() * 2, backend="brrr",
                      options={"cache_dir": str(shared), "strict": True})
    x = torch.randn(9)
    with pytest.warns(brrr_log.BrrrWarning, match="writable by"):
        assert_close(f(x), x.sin() * 2)
    assert os.listdir(shared) == []
    torch._dynamo.reset()


# ---- eviction ----------------------------------------------------------------------------

def test_eviction_removes_least_recently_used_entries_first(tmp_path):
    now = 1_000_000.0
    for i, age in enumerate([500, 100, 400, 300]):          # entries 0..3, 3 files of 1000 B
        _entry(tmp_path, f"{i:02x}" + "0" * 62, 1000, now - age)
    (tmp_path / "00" / "notes.txt").write_text("not brrr's")
    removed = cache.evict(str(tmp_path), max_bytes=8000, now=now)
    # 12000 B over a cap of 8000: down to 90% of it, 7200 B, oldest first (0, then 2)
    assert removed == ["00" + "0" * 62, "02" + "0" * 62]
    assert sorted(e.key[:2] for e in cache.entries(str(tmp_path))) == ["01", "03"]
    assert (tmp_path / "00" / "notes.txt").exists()


def test_eviction_keeps_recent_entries_and_respects_no_cap(tmp_path):
    now = 1_000_000.0
    _entry(tmp_path, KEY, 1000, now - 5)
    assert cache.evict(str(tmp_path), max_bytes=0, now=now) == []
    assert cache.evict(str(tmp_path), max_bytes=10, now=now) == []     # used 5 s ago
    assert cache.evict(str(tmp_path), max_bytes=10, now=now + 3600) == [KEY]


def test_a_build_evicts_and_a_hit_counts_as_use(tmp_path, toolchain, monkeypatch):
    monkeypatch.setattr(cache, "KEEP_RECENT_S", 0.0)
    first = build_library(ADD_SRC, str(tmp_path))
    size = sum(os.path.getsize(first[:-3] + ext) for ext in (".so", ".cpp", ".sha256"))
    os.utime(first, (1, 1))
    assert build_library(ADD_SRC, str(tmp_path)) == first          # a hit touches it
    assert os.path.getmtime(first) > 1
    for f in (first, first[:-3] + ".cpp", first[:-3] + ".sha256"):
        os.utime(f, (1, 1))                                         # long unused again
    second = build_library(ADD_SRC + "// another\n", str(tmp_path), max_bytes=size + size // 2)
    assert os.path.exists(second) and not os.path.exists(first)


def test_evicting_a_loaded_library_leaves_it_working(tmp_path, toolchain):
    path = build_library(ADD_SRC, str(tmp_path))
    lib = load_library(path)
    assert cache.evict(str(tmp_path), max_bytes=1, now=os.path.getmtime(path) + 3600)
    assert not os.path.exists(path)
    _check_add(lib)                                   # still mapped
    assert isinstance(lib, ctypes.CDLL)
    rebuilt = build_library(ADD_SRC, str(tmp_path))   # needed again: built again
    assert rebuilt == path and os.path.exists(path)


# ---- info and clear ------------------------------------------------------------------------

def test_info_and_clear_touch_only_what_brrr_wrote(tmp_path):
    _entry(tmp_path, KEY, 100, 1.0)
    (tmp_path / "triton" / "cd").mkdir(parents=True)
    (tmp_path / "triton" / "cd" / ("cd" + "1" * 62 + ".py")).write_text("x = 1\n")
    (tmp_path / "toolchain-0123456789abcdef.json").write_text("{}")
    (tmp_path / "device.json").write_text("{}")                 # an old calibration
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / ("ef" + "2" * 62 + ".so")).write_text("not brrr's")
    info = cache.info(str(tmp_path), 1 << 30)
    assert (info.entries, info.bytes, info.problem) == (2, 306, None)
    assert cache.clear(str(tmp_path)) == (2, 306)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["device.json", "mine"]
    assert (tmp_path / "mine" / ("ef" + "2" * 62 + ".so")).exists()
    assert cache.info(str(tmp_path), 0).entries == 0


def test_autotune_measurements_are_entries_info_and_clear_count(tmp_path):
    """max-autotune's records (runtime/autotune_cache.py) read back, count as cache
    entries and go with `brrr cache clear`."""
    from brrr_compiler.runtime import autotune_cache
    key = autotune_cache.key("merge", {"before": ["a", "b"], "after": ["ab"]},
                             [((4, 8), (8, 1), 0, "torch.float32", "cpu")], 2, "toolchain")
    assert autotune_cache.lookup(str(tmp_path), key) is None
    autotune_cache.store(str(tmp_path), key, {"before": 2e-6, "after": 1e-6})
    assert autotune_cache.lookup(str(tmp_path), key) == {"before": 2e-6, "after": 1e-6}
    other = autotune_cache.key("merge", {"before": ["a", "b"], "after": ["ab"]}, [], 1,
                               "toolchain")
    assert other != key and autotune_cache.lookup(str(tmp_path), other) is None
    path = tmp_path / "autotune" / key[:2] / f"{key}.json"
    assert cache.info(str(tmp_path), 0).entries == 1
    path.write_text("{not json")                    # a spoilt record is measured again
    assert autotune_cache.lookup(str(tmp_path), key) is None
    assert cache.clear(str(tmp_path))[0] == 1 and not path.exists()


def test_info_reports_an_untrusted_dir(tmp_path):
    os.chmod(tmp_path, 0o777)
    assert "writable by group and others" in cache.info(str(tmp_path), 0).problem
    assert cache.info(str(tmp_path / "not-yet"), 0).problem is None


def test_a_brrr_with_other_flags_does_not_reuse_an_older_probe_record(tmp_path, toolchain,
                                                                      monkeypatch):
    """The record on disk is keyed by the flag sets brrr tries: after an upgrade that
    changes them (as -fno-trapping-math did), the compiler is probed again."""
    tc_module = toolchain_mod
    monkeypatch.setattr(tc_module, "_probed", {})
    toolchain_mod.find_toolchain(toolchain.cxx, str(tmp_path))
    monkeypatch.setattr(tc_module, "_FLAG_SETS", tc_module._FLAG_SETS + (("-O2",),))
    monkeypatch.setattr(tc_module, "_probed", {})
    probes = []
    monkeypatch.setattr(tc_module, "_probe", lambda cxx: probes.append(cxx) or toolchain)
    toolchain_mod.find_toolchain(toolchain.cxx, str(tmp_path))
    assert probes == [toolchain.cxx] and len(list(tmp_path.glob("toolchain-*.json"))) == 2
