"""Compile-time suite: cold and warm first-call time of each backend per workload and per
model, and brrr's compile time as the graph grows.

    python benchmarks/bench_compile.py [--quick] [--workloads bias_gelu,...]
                                       [--models gpt2:training,...] [--backends ...]
                                       [--scaling 1,2,4,8,16,32,64] [--repeats R]

Cold: a new python process with new, empty BRRR_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR.
Warm: a second new process on the same cache dirs (what a user pays on the second launch
of a program). The child builds its inputs, runs eagerly once (eager kernels' own
first-use costs are not compile time), then times the first call of torch.compile(...):
Dynamo capture, backend compilation and one run (training: forward, loss and backward).
aot_eager keeps no cache, so its warm run would repeat its cold one: it runs once.

Scaling (compile_scaling.py): in this process, a chain of N blocks (LayerNorm, matmul,
GELU, residual) compiled for inference by brrr, aot_eager and (unless --quick) inductor
with fresh caches for each compile; the least-squares line through brrr's and inductor's
times, R^2, and a quadratic term as a check on brrr's.
Writes benchmarks/results/compile.md, compile.json (the numbers, which replot.py redraws from) and
compile_scaling.png.
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
import reporting
import machine_env
from compile_scaling import plot_scaling, scaling, scaling_section

CHILD_TIMEOUT_S = 600
WORKLOADS = "bias_gelu,chain10,silu_mul,softmax"
MODELS = "gpt2:training,bert:training,llama:training,mlp:training,resnet:training"
SCALING = "1,2,4,8,16,32,64"


def parse_args(argv=None) -> argparse.Namespace:
    p = reporting.base_parser(__doc__, "compile.md")
    p.add_argument("--quick", action="store_true",
                   help="one workload, no model, aot_eager and brrr, N = 1, 2, 4 once "
                        "(a smoke test)")
    p.add_argument("--workloads", default=None,
                   help=f"kernel-suite workloads at their smallest size (default {WORKLOADS}); "
                        "'all' for every one; '' for none")
    p.add_argument("--models", default=None,
                   help=f"model:mode pairs (default {MODELS}); 'all' for both modes of every "
                        "model; '' for none")
    p.add_argument("--backends", default=None, help="default aot_eager,inductor,brrr")
    p.add_argument("--scaling", default=None, help=f"chain lengths N (default {SCALING}); '' skips")
    p.add_argument("--repeats", type=int, default=1, help="fresh processes per cell (median)")
    p.add_argument("--scaling-repeats", type=int, default=None,
                   help="compiles per N, the fastest counts (default 2; --quick: 1)")
    p.add_argument("--child", nargs=3, metavar=("KIND", "NAME", "BACKEND"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return args
    quick = args.quick
    args.results_dir = reporting.results_dir(args.results_dir, args.quick)
    args.workloads = _pick(args.workloads, "bias_gelu" if quick else WORKLOADS, _all_workloads())
    args.models = _model_specs(_pick(args.models, "" if quick else MODELS, _all_models()))
    default_backends = "aot_eager,brrr" if quick else "aot_eager,inductor,brrr"
    args.backends = (args.backends or default_backends).split(",")
    args.scaling = [int(n) for n in _pick(args.scaling, "1,2,4" if quick else SCALING, [])]
    args.scaling_repeats = args.scaling_repeats or (1 if quick else 2)
    return args


def _pick(value: str | None, default: str, everything: list[str]) -> list[str]:
    value = default if value is None else value
    return everything if value == "all" else [v for v in value.split(",") if v]


def _model_specs(names: list[str]) -> list[str]:
    """name:mode pairs; a bare model name stands for both of its modes."""
    known = _all_models()
    specs = [s for n in names for s in ([n] if ":" in n else (f"{n}:inference", f"{n}:training"))]
    unknown = [s for s in specs if s not in known]
    if unknown:
        raise SystemExit(f"unknown model:mode {', '.join(unknown)}; known: {', '.join(known)}")
    return specs


def _all_workloads() -> list[str]:
    from workloads import KERNEL_CASES

    return list(dict.fromkeys(c.workload for c in KERNEL_CASES.values()))


def _all_models() -> list[str]:
    from models import MODELS as ZOO

    return [f"{m}:{mode}" for m in ZOO for mode in ("inference", "training")]


# ---- the child process ----------------------------------------------------------------------


def _workload_call(name: str):
    """(eager call, compile-and-call) for the smallest float32 case of a workload."""
    import torch
    from workloads import KERNEL_CASES

    case = next(c for c in KERNEL_CASES.values()
                if c.workload == name and c.dtype is torch.float32)
    inputs = case.inputs()
    return (lambda: case.fn(*inputs)), (lambda compile: compile(case.fn)(*inputs))


def _model_call(spec: str):
    import torch
    from models import MODELS as ZOO
    from model_case import WithLoss

    name, mode = spec.split(":")
    case = ZOO[name]
    model = case.module()
    inputs, target = case.inputs()
    if mode == "inference":
        model.eval()

        def run(fn):
            with torch.no_grad():
                return fn(*inputs)

        return (lambda: run(model)), (lambda compile: run(compile(model)))
    module = WithLoss(model, case.loss)
    return (lambda: module(inputs, target).backward()), (
        lambda compile: compile(module)(inputs, target).backward())


def child(kind: str, name: str, backend: str) -> None:
    """In the fresh process: print {"seconds": first-call time} or {"error": ...}."""
    import torch

    eager, compiled = _workload_call(name) if kind == "workload" else _model_call(name)
    eager()  # eager kernels' own first-use costs are not compile time
    base, options = harness.backend_spec(backend)

    def compile(fn):
        return torch.compile(fn, backend=harness.resolve_backend(base), options=options or None,
                             dynamic=False)

    try:
        start = time.perf_counter()
        compiled(compile)
        result = {"seconds": time.perf_counter() - start}
    except Exception as exc:
        result = {"error": harness.describe_error(exc)}
    print(json.dumps(result))


def run_child(kind: str, name: str, backend: str, cache: Path) -> float | str:
    """Seconds of the first call in a new process using `cache`, or "failed: ..."."""
    env = dict(os.environ, BRRR_CACHE_DIR=str(cache / "brrr"),
               TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"))
    cmd = [sys.executable, __file__, "--child", kind, name, backend]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"failed: timed out after {CHILD_TIMEOUT_S} s"
    lines = proc.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed: exit {proc.returncode}: {tail[:120]}"
    return result["seconds"] if "seconds" in result else f"failed: {result['error']}"


def measure(kind: str, name: str, backend: str) -> tuple[float | str, float | str | None]:
    """(cold, warm) first-call times; warm reuses the cold run's cache (not for aot_eager)."""
    cache = Path(tempfile.mkdtemp(prefix="brrr-bench-compile-"))
    try:
        cold = run_child(kind, name, backend, cache)
        rerun = backend != "aot_eager" and isinstance(cold, float)
        warm = run_child(kind, name, backend, cache) if rerun else None
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return cold, warm


# ---- cold/warm table ------------------------------------------------------------------------


def median_or_failure(values: list) -> float | str | None:
    failures = [v for v in values if isinstance(v, str)]
    values = [v for v in values if v is not None]
    return failures[0] if failures else (statistics.median(values) if values else None)


def fmt(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def measure_item(kind: str, name: str, args) -> dict:
    """{backend: (cold, warm)} for one workload or model, backends interleaved per repeat."""
    cold: dict[str, list] = {b: [] for b in args.backends}
    warm: dict[str, list] = {b: [] for b in args.backends}
    for _ in range(args.repeats):
        for b in args.backends:
            c, w = measure(kind, name, b)
            cold[b].append(c)
            warm[b].append(w)
    return {b: (median_or_failure(cold[b]), median_or_failure(warm[b])) for b in args.backends}


def _timed(*values) -> bool:
    return all(isinstance(v, float) for v in values)


def item_row(name: str, cells: dict) -> dict:
    row = {"item": name}
    for b, (cold, warm) in cells.items():
        row[f"{b} cold s"] = fmt(cold)
        if b != "aot_eager":
            row[f"{b} warm s"] = fmt(warm)
    floor = cells.get("aot_eager", (None, None))[0]
    brrr_cold, brrr_warm = cells.get("brrr", (None, None))
    ind_cold = cells.get("inductor", (None, None))[0]
    row["brrr - aot_eager s"] = f"{brrr_cold - floor:.2f}" if _timed(brrr_cold, floor) else "n/a"
    row["brrr cold / inductor cold"] = (f"{brrr_cold / ind_cold:.2f}"
                                        if _timed(brrr_cold, ind_cold) else "n/a")
    row["brrr warm / aot_eager"] = f"{brrr_warm / floor:.2f}" if _timed(brrr_warm, floor) else "n/a"
    return row


def item_columns(backends: list[str]) -> list[str]:
    cols = ["item"]
    for b in backends:
        cols += [f"{b} cold s"] + ([] if b == "aot_eager" else [f"{b} warm s"])
    return cols + ["brrr - aot_eager s", "brrr cold / inductor cold", "brrr warm / aot_eager"]


def _ratio_verdict(rows: list[dict], column: str, limit: float, names: list[str]) -> str:
    values = [(r["item"], r[column]) for r in rows if r["item"] in names]
    timed = [(n, float(v)) for n, v in values if v != "n/a"]
    if not timed:
        return "NOT MEASURED"
    misses = [f"{n} ({v:.2f})" for n, v in timed if v > limit]
    untimed = [n for n, v in values if v == "n/a"]
    text = "MET" if not misses else f"MISSED on {len(misses)} of {len(timed)}: " + ", ".join(misses)
    return text + (f" (not measured: {', '.join(untimed)})" if untimed else "")


def targets(rows: list[dict], models: list[str], workloads: list[str],
            fit: dict | None) -> list[str]:
    lines = ["## Targets", ""]
    lines.append("- cold brrr compile at most 1/5 of inductor's cold compile, per model: "
                 + _ratio_verdict(rows, "brrr cold / inductor cold", 0.2, models))
    lines.append("- warm brrr compile at most 1.3x aot_eager's, per model: "
                 + _ratio_verdict(rows, "brrr warm / aot_eager", 1.3, models))
    trio = [w for w in workloads if w in ("bias_gelu", "chain10", "silu_mul")]
    extra = [(r["item"], r["brrr - aot_eager s"]) for r in rows if r["item"] in trio]
    timed = [(n, float(v)) for n, v in extra if v != "n/a"]
    if timed:
        over = [f"{n} ({v:.2f} s)" for n, v in timed if v >= 1.0]
        lines.append("- brrr's extra cost over aot_eager under 1 s for the pointwise trio: "
                     f"{'MET' if not over else 'MISSED on ' + ', '.join(over)}")
    if fit:
        lines.append(f"- compile time vs graph size fits a line: {fit['verdict']}")
    return lines


# ---- main -----------------------------------------------------------------------------------


def render(args, rows: list[dict], scale: dict | None, plot_note: str) -> str:
    facts = {"measurement": f"first call (compile + one run) in a fresh process, median of "
                            f"{args.repeats}; workloads at their smallest kernel-suite size"}
    parts = ["\n".join(targets(rows, args.models, args.workloads,
                               scale["fits"] if scale else None))]
    if rows:
        parts.append("## Cold and warm first call\n\n"
                     + reporting.markdown_table(rows, item_columns(args.backends)))
    if scale:
        parts.append(scaling_section(scale, plot_note))
    note = ("`cold`: fresh process, empty cache dirs. `warm`: a second fresh process reusing "
            "them. `brrr - aot_eager`: brrr's cost over the capture floor (Dynamo + "
            "AOTAutograd, no code generation). Models compile in training mode (forward, "
            "loss and backward graphs) unless the item says inference. Every child process "
            "also pays python and torch start-up, which no cell includes.")
    return reporting.report("Compile-time suite", facts, "\n\n".join(parts), [note])


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child:
        child(*args.child)
        return
    machine_env.ensure_malloc_env()
    start = time.perf_counter()
    rows = []
    for kind, names in (("workload", args.workloads), ("model", args.models)):
        for name in names:
            rows.append(item_row(name, measure_item(kind, name, args)))
            print(f"[{time.perf_counter() - start:5.0f} s] {rows[-1]}", file=sys.stderr, flush=True)
    scale = scaling(args.scaling, args.scaling_repeats, args.backends) if args.scaling else None
    directory = Path(args.results_dir)
    plot_note = plot_scaling(scale, directory) if scale else ""
    reporting.publish(args.out, render(args, rows, scale, plot_note), directory)
    raw = {"backends": args.backends, "items": rows, "scaling": scale}
    (directory / Path(args.out).with_suffix(".json").name).write_text(json.dumps(raw, indent=1))
    print(f"wrote {directory / args.out} in {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
