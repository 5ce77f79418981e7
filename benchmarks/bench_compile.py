"""Compile-time suite: first-call time of each backend in a fresh process and cache.

    python benchmarks/bench_compile.py [--repeats R] [--size N]
                                       [--backends aot_eager,inductor,brrr]

Every measurement runs in a new python subprocess with new, empty BRRR_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR (and TORCHINDUCTOR_FX_GRAPH_CACHE=0); it times the first call of
the compiled function, i.e. compilation plus one run. brrr is also timed warm: a second
process on the same cache dirs. Writes benchmarks/results/compile.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from workloads import WORKLOADS

CHILD_TIMEOUT_S = 600


def parse_args(argv=None) -> argparse.Namespace:
    names = ",".join(WORKLOADS)
    p = harness.suite_parser(__doc__, "aot_eager,inductor,brrr", names, "compile.md")
    p.add_argument("--repeats", type=int, default=1, help="fresh processes per cell")
    p.add_argument("--child", nargs=2, metavar=("WORKLOAD", "BACKEND"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(workload_name: str, backend: str, size: int) -> None:
    """In the fresh process: print {"seconds": first-call time} or {"error": ...}."""
    import torch

    workload = WORKLOADS[workload_name]
    inputs = workload.make_inputs(size)
    workload.fn(*inputs)  # eager kernels' own first-use costs are not compile time
    try:
        start = time.perf_counter()
        torch.compile(workload.fn, backend=harness.resolve_backend(backend))(*inputs)
        result = {"seconds": time.perf_counter() - start}
    except Exception as exc:
        result = {"error": harness.describe_error(exc)}
    print(json.dumps(result))


def run_child(workload: str, backend: str, size: int, cache: Path) -> float | str:
    """Seconds of the first call in a new process using `cache`, or "failed: ..."."""
    env = dict(
        os.environ,
        BRRR_CACHE_DIR=str(cache / "brrr"),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
        TORCHINDUCTOR_FX_GRAPH_CACHE="0",
    )
    cmd = [sys.executable, __file__, "--child", workload, backend, "--size", str(size)]
    try:
        proc = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"failed: timed out after {CHILD_TIMEOUT_S} s"
    lines = proc.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed: exit {proc.returncode}: {tail[:120]}"
    return result["seconds"] if "seconds" in result else f"failed: {result['error']}"


def measure(workload: str, backend: str, size: int) -> tuple[float | str, float | str]:
    """(cold, warm) first-call times; warm reuses the cold run's cache (brrr only)."""
    cache = Path(tempfile.mkdtemp(prefix="brrr-bench-compile-"))
    try:
        cold = run_child(workload, backend, size, cache)
        rerun = backend == "brrr" and isinstance(cold, float)
        warm = run_child(workload, backend, size, cache) if rerun else None
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return cold, warm


def median_or_failure(values: list) -> float | str:
    failures = [v for v in values if isinstance(v, str)]
    return failures[0] if failures else statistics.median(values)


def fmt(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def workload_row(name: str, args) -> dict:
    backends = args.backends.split(",")
    cold: dict[str, list] = {b: [] for b in backends}
    warm: list = []
    for _ in range(args.repeats):
        for b in backends:  # one fresh process per cell, backends interleaved
            c, w = measure(name, b, args.size)
            cold[b].append(c)
            if w is not None:
                warm.append(w)
    cold_s = {b: median_or_failure(v) for b, v in cold.items()}
    row = {"workload": name, **{f"{b} s": fmt(v) for b, v in cold_s.items()}}
    floor, brrr = cold_s.get("aot_eager"), cold_s.get("brrr")
    extra = brrr - floor if isinstance(floor, float) and isinstance(brrr, float) else "n/a"
    row["brrr - aot_eager s"] = fmt(extra)
    row["brrr warm s"] = fmt(median_or_failure(warm)) if warm else "n/a"
    return row


def render(args, rows: list[dict]) -> str:
    columns = ["workload"] + [f"{b} s" for b in args.backends.split(",")]
    columns += ["brrr - aot_eager s", "brrr warm s"]
    facts = {
        "measurement": f"first call (compile + one run) in a fresh process with empty "
        f"cache dirs, median of {args.repeats}; inputs {args.size}x{args.size} float32",
    }
    note = (
        "`brrr - aot_eager`: brrr's extra cost over the capture floor (Dynamo + "
        "AOTAutograd with no code generation). `brrr warm`: a second fresh process "
        "reusing the cold run's cache dirs."
    )
    table = harness.markdown_table(rows, columns)
    return harness.report("Compile-time suite", facts, table, [note])


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child:
        child(*args.child, args.size)
        return
    harness.ensure_malloc_env()
    rows = []
    for name in args.workloads.split(","):
        rows.append(workload_row(name, args))
        print(f"{name}: {rows[-1]}", file=sys.stderr, flush=True)
    harness.publish(args.out, render(args, rows))


if __name__ == "__main__":
    main()
