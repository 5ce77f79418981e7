"""The kernel cache's directory: trusted before use, capped in size, inspected, cleared.

Note on trust. The cache holds libraries brrr loads (dlopen), Triton modules it imports
and toolchain records that name the compiler it runs: whoever can write there can run
code as this user (the sha256 sidecars catch truncation, not tampering). So a directory
is used only when it is owned by this user and writable by nobody else; brrr creates it
0700, and what it writes inside is private too (folders 0700, files 0600, libraries 0700),
so a cache dir made by older versions (0755) stays safe to use. Any other directory gets
one warning, and the process builds in a private temporary one instead (mkdtemp makes it
0700; it is removed at exit).

Note on eviction. An entry is the files of one key: `<key>.cpp`, `.so`, `.sha256`, a
Triton `<key>.py` and its bytecode, or a max-autotune measurement `autotune/<key>.json`. Its last use is its newest mtime (a cache hit touches
it). When a build takes the cache past `max_bytes`, entries go, least recently used first,
until it is under EVICT_TO of the cap (so that the next build does not walk the cache
again). Entries used in the last KEEP_RECENT_S are kept even over the cap: another
process may be between building one and loading it. Evicting unlinks files: a library
a live process has loaded stays mapped (Linux and macOS keep an unlinked file's pages
until they are unmapped), so no running process breaks; one that needs the entry again
rebuilds it.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass

from brrr_compiler.log import warn_once

EVICT_TO = 0.9
KEEP_RECENT_S = 60.0
# what brrr writes into a cache directory; `clear` removes these and nothing else
_ENTRY_FILE = re.compile(r"([0-9a-f]{64})\.(cpp|so|sha256|py|cpython-\d+\.pyc|json)")
_OTHER_FILE = re.compile(r"toolchain-[0-9a-f]{16}\.json(\.\d+\.tmp)?|\..+\.\d+\.[0-9a-f]+\.tmp")
_LAYOUT_DIR = re.compile(r"[0-9a-f]{2}|triton|autotune|__pycache__")

_lock = threading.Lock()
_usable: dict[str, str] = {}        # cache dir -> the directory this process uses for it
_private: list[str] = []            # the per-process private directory, once made
_known_bytes: dict[str, int] = {}   # cache dir -> bytes at the last walk + added since


# ---- trust ------------------------------------------------------------------------------

def usable_dir(cache_dir: str) -> str:
    """`cache_dir`, created 0700 if missing, when this user may trust it; else (one
    warning) this process's private directory."""
    cache_dir = os.fspath(cache_dir)
    with _lock:
        if cache_dir in _usable:
            return _usable[cache_dir]
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        problem = distrust(cache_dir)
    except OSError as err:
        problem = f"is not usable ({err})"
    chosen = cache_dir if problem is None else fallback_dir(cache_dir, problem)
    with _lock:
        return _usable.setdefault(cache_dir, chosen)


def distrust(path: str) -> str | None:
    """Why `path` must not be loaded from (None: it may): not a directory, owned by
    another user, or writable by group or others."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if not hasattr(os, "geteuid"):
        return None                 # no POSIX owners (Windows): nothing to compare
    if st.st_uid != os.geteuid():
        return f"is owned by another user (uid {st.st_uid}, this process runs as {os.geteuid()})"
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH))
               if st.st_mode & bit]
    if writers:
        return (f"is writable by {' and '.join(writers)} (mode {stat.S_IMODE(st.st_mode):o}): "
                "anyone there could plant code that brrr would load (once its contents "
                f"are checked, `chmod 700 {path}` makes brrr use it)")
    return None


def fallback_dir(cache_dir: str, problem: str) -> str:
    """This process's private directory, with one warning saying why `cache_dir` is not
    used."""
    with _lock:
        if not _private:
            try:
                _private.append(tempfile.mkdtemp(prefix="brrr-"))
            except OSError as err:
                raise OSError(f"brrr: cache dir {cache_dir!r} {problem}, and no private "
                              f"temporary directory could be made ({err})") from err
            atexit.register(shutil.rmtree, _private[0], ignore_errors=True)
        private = _private[0]
    warn_once(f"brrr-cache-dir:{cache_dir}",
              f"brrr: cache dir {cache_dir!r} {problem}; building kernels in {private} "
              "instead (options cache_dir / BRRR_CACHE_DIR choose another)")
    return private


def touch(path: str) -> None:
    """Mark a cache entry used now (its last use, for eviction)."""
    try:
        os.utime(path)
    except OSError:
        pass


# ---- entries, eviction, info, clear ---------------------------------------------------

@dataclass
class Entry:
    key: str
    files: list[str]
    size: int
    last_used: float


def entries(cache_dir: str) -> list[Entry]:
    """The cache's entries (files brrr did not write are not looked at)."""
    found: dict[str, Entry] = {}
    for path in _layout_files(cache_dir):
        match = _ENTRY_FILE.fullmatch(os.path.basename(path))
        if not match:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue                # removed meanwhile (another process evicting)
        e = found.setdefault(match.group(1), Entry(match.group(1), [], 0, 0.0))
        e.files.append(path)
        e.size += st.st_size
        e.last_used = max(e.last_used, st.st_mtime)
    return list(found.values())


def evict(cache_dir: str, max_bytes: int, added: int = 0, now: float | None = None) -> list[str]:
    """After a build added `added` bytes: if the cache is over `max_bytes` (0: no cap),
    remove least recently used entries (the module note). Returns the keys removed."""
    if max_bytes <= 0:
        return []
    with _lock:
        known = _known_bytes.get(cache_dir)
        if known is not None and known + added <= max_bytes:
            _known_bytes[cache_dir] = known + added
            return []
    found = sorted(entries(cache_dir), key=lambda e: e.last_used)
    total, removed = sum(e.size for e in found), []
    now = time.time() if now is None else now
    for e in found:
        if total <= max_bytes * EVICT_TO or now - e.last_used < KEEP_RECENT_S:
            break
        _remove_files(e.files)
        total -= e.size
        removed.append(e.key)
    with _lock:
        _known_bytes[cache_dir] = total
    return removed


@dataclass
class CacheInfo:
    location: str
    entries: int
    bytes: int
    max_bytes: int
    problem: str | None     # why brrr would not load from it (None: it would)


def info(cache_dir: str, max_bytes: int) -> CacheInfo:
    found = entries(cache_dir) if os.path.isdir(cache_dir) else []
    try:
        problem = distrust(cache_dir)
    except FileNotFoundError:
        problem = None                          # made (0700) at the first build
    except OSError as err:
        problem = f"is not usable ({err})"
    return CacheInfo(cache_dir, len(found), sum(e.size for e in found), max_bytes, problem)


def clear(cache_dir: str) -> tuple[int, int]:
    """Remove every entry, toolchain record and leftover temporary file brrr wrote in
    `cache_dir` (nothing else: a calibration kept there by older versions stays).
    Returns (entries removed, bytes freed)."""
    found = entries(cache_dir) if os.path.isdir(cache_dir) else []
    for e in found:
        _remove_files(e.files)
    _remove_files([p for p in _layout_files(cache_dir)
                   if _OTHER_FILE.fullmatch(os.path.basename(p))])
    for folder, _ in reversed(list(_walk(cache_dir))[1:]):   # deepest first
        try:
            os.rmdir(folder)                    # only when empty
        except OSError:
            pass
    with _lock:
        _known_bytes.pop(cache_dir, None)
    return len(found), sum(e.size for e in found)


def _walk(cache_dir: str):
    """(folder, file names) for `cache_dir` and its layout subfolders (`ab/`, `triton/`,
    `autotune/`, `__pycache__/`), top down, never entering folders brrr did not make or following
    links out of the cache."""
    for root, dirs, files in os.walk(cache_dir):
        dirs[:] = [d for d in dirs if _LAYOUT_DIR.fullmatch(d)]
        yield root, files


def _layout_files(cache_dir: str):
    for folder, files in _walk(cache_dir):
        yield from (os.path.join(folder, f) for f in files)


def _remove_files(paths) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
