"""The machine a benchmark runs on: glibc's malloc environment (set by re-exec), the CPU,
its last-level cache and the facts every result file states about it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

# glibc serves allocations >= 32 MB with a fresh mmap that is page-faulted on every call;
# keeping them on the heap (and never trimming it) makes repeated runs measure the kernel,
# not the kernel plus first-touch page faults.
MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "17179869184"}


def malloc_env_is_set() -> bool:
    return all(os.environ.get(k) == v for k, v in MALLOC_ENV.items())


def ensure_malloc_env() -> None:
    """Re-exec this script with MALLOC_ENV set, unless it already is."""
    if malloc_env_is_set():
        return
    if os.environ.get("BRRR_BENCH_REEXEC"):  # exec'd once already: never loop
        raise RuntimeError(f"could not set {MALLOC_ENV} by re-exec")
    env = dict(os.environ, **MALLOC_ENV, BRRR_BENCH_REEXEC="1")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def malloc_env_statement() -> str:
    settings = " ".join(f"{k}={v}" for k, v in MALLOC_ENV.items())
    state = "set" if malloc_env_is_set() else "NOT set"
    return f"glibc malloc env {settings}: {state} for the whole process"


def _read_cpu_model() -> str:
    from brrr_compiler.calibration import cpu_model_name
    return cpu_model_name(platform.processor() or "unknown")


def _read_l3_size() -> str:
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() == "3":
                return (index / "size").read_text().strip()
        except OSError:
            continue
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("L3 cache:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def source_commit() -> str:
    """The commit of this checkout the run measured (with "+ local changes" when tracked
    files differ from it), or "unknown" outside a git checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + (" + local changes" if dirty else "")) if head else "unknown"


def machine_info() -> dict:
    return {
        "commit": source_commit(),
        "cpu": _read_cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "l3": _read_l3_size(),
        "torch": torch.__version__,
        "torch threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "load average at start (1, 5, 15 min)": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def llc_bytes() -> int:
    """The last-level (L3) cache size in bytes, 0 if unknown."""
    text = _read_l3_size().replace("(", " ").split()
    if not text or text[0] == "unknown":
        return 0
    units = {"K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "MB": 1 << 20}
    number = text[0].rstrip("KMiB")
    unit = text[0][len(number):] or (text[1] if len(text) > 1 else "")
    try:
        return int(float(number) * units.get(unit, 1))
    except ValueError:
        return 0


def machine_markdown(extra: dict | None = None) -> str:
    """A bullet list of machine_info, extra facts and the malloc env statement."""
    facts = {**machine_info(), **(extra or {})}
    lines = [f"- {k}: {v}" for k, v in facts.items()]
    lines.append(f"- {malloc_env_statement()}")
    return "\n".join(lines)
