"""Build one generated C++ translation unit into a shared library, cached by content hash.

Note on the cache. The key is the sha256 of the source and the toolchain (compiler path,
version, flags, libs, CPU fingerprint). `<cache_dir>/<key[:2]>/` holds `<key>.cpp` (the
source, for debugging), `<key>.so` and `<key>.sha256` (the .so's own sha256). Every file is
written under a unique temporary name in the same directory and moved into place with
`os.replace`, so readers see either nothing or a whole file, and two processes building one
key both succeed. A hit must have a .so whose sha256 matches its sidecar; anything else
(truncated, garbage, sidecar missing) is rebuilt. Replacing, never rewriting in place,
also keeps a library that another process has mapped intact. The directory is checked
before use and capped in size by runtime/cache.py (its notes: trust, eviction); a hit
marks its entry used.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import secrets
import shlex
import subprocess
import threading

from brrr_compiler.runtime import cache
from brrr_compiler.runtime.toolchain import Toolchain, find_toolchain

__all__ = ["BuildError", "Toolchain", "find_toolchain", "build_library", "load_library",
           "build_and_load", "cache_key"]

BUILD_TIMEOUT_S = 600
STDERR_LIMIT = 4000


class BuildError(RuntimeError):
    """A kernel failed to build; carries the compiler command, its (truncated) stderr and
    the source file's path."""

    def __init__(self, message: str, command: list[str] | tuple[str, ...] = (), stderr: str = "",
                 source: str = ""):
        self.command = tuple(command)
        self.source = source
        if len(stderr) > STDERR_LIMIT:
            stderr = stderr[:STDERR_LIMIT] + f"\n... [{len(stderr) - STDERR_LIMIT} more chars]"
        self.stderr = stderr
        text = message
        if source:
            text += f"\nsource: {source}"
        if self.command:
            text += f"\ncommand: {shlex.join(self.command)}"
        if stderr:
            text += f"\nstderr:\n{stderr}"
        super().__init__(text)

    @property
    def first_error(self) -> str:
        """The compiler's first error line (else the message's first line)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if re.search(r"\berror\b", line, re.IGNORECASE)]
        return (errors or lines or [str(self).splitlines()[0]])[0]


def cache_key(source: str, toolchain: Toolchain) -> str:
    parts = [source, toolchain.cxx, toolchain.version, *toolchain.flags, "--libs--",
             *toolchain.libs, toolchain.cpu]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def build_library(source: str, cache_dir: str, cxx: str | None = None,
                  max_bytes: int = 0) -> str:
    """Compile `source` (unless cached) and return the path of its shared library.
    `max_bytes`: the cache's size cap (0: none; runtime/cache.py's note)."""
    root = cache.usable_dir(cache_dir)
    toolchain = find_toolchain(cxx, root)
    if toolchain is None:
        raise BuildError(f"brrr: no usable C++ compiler with OpenMP (asked for {cxx or 'default'})")
    key = cache_key(source, toolchain)
    with _key_lock(key):
        so = _so_path(root, key)
        if _is_valid(so):
            cache.touch(so)
            return so
        try:
            _write_atomic(so[:-3] + ".cpp", source.encode())
        except OSError as err:
            root = cache.fallback_dir(root, f"is not usable ({err})")
            so = _so_path(root, key)
            if _is_valid(so):
                return so
            try:
                _write_atomic(so[:-3] + ".cpp", source.encode())
            except OSError as err2:
                raise BuildError(f"brrr: cannot write kernel source: {err2}") from err2
        _compile(toolchain, so)
    cache.evict(root, max_bytes, added=_entry_bytes(so))
    return so


def load_library(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def build_and_load(source: str, cache_dir: str, cxx: str | None = None,
                   max_bytes: int = 0) -> ctypes.CDLL:
    """build_library + load_library; a cached library that fails to load is rebuilt once."""
    path = build_library(source, cache_dir, cxx, max_bytes)
    try:
        return load_library(path)
    except OSError:
        _invalidate(path)
        return load_library(build_library(source, cache_dir, cxx, max_bytes))


def _compile(toolchain: Toolchain, so: str) -> None:
    tmp = _tmp_name(so)
    command = toolchain.command(so[:-3] + ".cpp", tmp)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if proc.returncode != 0 or not os.path.exists(tmp):
            raise BuildError(f"brrr: C++ compile failed (exit {proc.returncode})",
                             command, proc.stderr, so[:-3] + ".cpp")
        with open(tmp, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        _write_atomic(so[:-3] + ".sha256", digest.encode())
        os.chmod(tmp, 0o700)          # private, whatever the umask (cache.py: trust)
        os.replace(tmp, so)
    except subprocess.TimeoutExpired as err:
        stderr = err.stderr or ""
        if isinstance(stderr, bytes):
            stderr = stderr.decode(errors="replace")
        raise BuildError(f"brrr: C++ compile timed out after {BUILD_TIMEOUT_S}s", command,
                         stderr, so[:-3] + ".cpp") from err
    except OSError as err:
        raise BuildError(f"brrr: C++ compile failed: {err}", command, "", so[:-3] + ".cpp") from err
    finally:
        _remove(tmp)


def _is_valid(so: str) -> bool:
    try:
        with open(so[:-3] + ".sha256") as f:
            expected = f.read().strip()
        with open(so, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest() == expected
    except OSError:
        return False


def _invalidate(so: str) -> None:
    with _key_lock(os.path.basename(so)[:-3]):
        _remove(so[:-3] + ".sha256")


def _entry_bytes(so: str) -> int:
    return sum(os.path.getsize(so[:-3] + ext) for ext in (".so", ".cpp", ".sha256")
               if os.path.exists(so[:-3] + ext))


def _so_path(root: str, key: str) -> str:
    return os.path.join(root, key[:2], key + ".so")


def _write_atomic(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = _tmp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        _remove(tmp)


def _tmp_name(path: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_key_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    with _locks_lock:
        return _key_locks.setdefault(key, threading.Lock())
