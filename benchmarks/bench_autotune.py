"""mode="max-autotune" against the default mode, per fusion policy, on kernel-suite cases
and the cost-model suite's policy workloads: compile time (cold: a fresh cache dir;
warm: the same dir again, the measurements read back), the decisions measured and how
many of them went against the policy or the default thread count, and the steady-state
time of the two compiled functions (interleaved rounds, medians).

    python benchmarks/bench_autotune.py [--cases NAME,...] [--fusion greedy,cost]
                                        [--rounds R] [--threads 1,2] [--quick]

Writes benchmarks/results/autotune_runs.md and .json (results/autotune.md is the note
that reads them).
"""
from __future__ import annotations

import functools
import json
import statistics
import sys
import tempfile
import time

import harness
import reporting
import machine_env
import torch
from bench_cost_model import time_round_robin
from cost_model_cases import WORKLOADS
from workloads import KERNEL_CASES

from brrr_compiler.backend import brrr_backend
from brrr_compiler.partition import MeasuredChoice

DEFAULT_CASES = ("bias_gelu 1024x1024", "chain10 1024x1024", "silu_mul 1024x1024",
                 "layer_norm_residual 256x1024", "softmax 256x1024", "cross_entropy 64x32000",
                 "rotary 1x128x8x64", "transpose_bcast 256", "sum_dim0 4096x4096",
                 "broadcast_blowup", "expensive_softmax", "cheap_four_ways")
QUICK_CASES = ("bias_gelu 256x256",)
AUTOTUNE = "max-autotune-no-cudagraphs"


def parse_args(argv=None):
    p = reporting.base_parser(__doc__, "autotune_runs.md")
    p.add_argument("--cases", default=None, help="comma-separated kernel-suite case names "
                   "or cost-model workload names (default: a dozen)")
    p.add_argument("--fusion", default="greedy,cost", help="fusion policies (greedy,cost)")
    p.add_argument("--rounds", type=int, default=9, help="interleaved timing rounds")
    p.add_argument("--threads", default="", help="comma-separated torch and kernel thread "
                   "counts, each a run of every case (default: torch's setting)")
    p.add_argument("--quick", action="store_true",
                   help="one small case, the greedy policy, 3 rounds (a smoke test)")
    args = p.parse_args(argv)
    args.results_dir = reporting.results_dir(args.results_dir, args.quick)
    names = QUICK_CASES if args.quick else DEFAULT_CASES
    args.cases = args.cases.split(",") if args.cases else list(names)
    args.rounds = 3 if args.quick else args.rounds
    args.fusion = ["greedy"] if args.quick else args.fusion.split(",")
    args.threads = [int(t) for t in args.threads.split(",") if t] or [torch.get_num_threads()]
    return args


def case_inputs(name: str) -> tuple:
    """(function, inputs) of a kernel-suite case or a cost-model policy workload."""
    if name in KERNEL_CASES:
        case = KERNEL_CASES[name]
        return case.fn, case.inputs()
    workload = {w.name: w for w in WORKLOADS}.get(name)
    if workload is None:
        sys.exit(f"unknown case {name!r}; kernel-suite cases: {', '.join(KERNEL_CASES)}; "
                 f"workloads: {', '.join(w.name for w in WORKLOADS)}")
    return workload.fn, workload.make_inputs()


def compile_once(fn, inputs, options: dict) -> tuple:
    """(compiled fn, seconds of its first call, its GraphReports), checked against eager."""
    harness.fresh_dynamo()
    sink: list = []
    compiled = torch.compile(fn, backend=functools.partial(brrr_backend, options=options,
                                                           _sink=sink), dynamic=False)
    with torch.no_grad():
        start = time.perf_counter()
        out = compiled(*inputs)
        seconds = time.perf_counter() - start
        err = harness.max_abs_error(out, fn(*inputs))
    if not err <= 2e-2:
        raise AssertionError(f"brrr output differs from eager (max err {err:.2e})")
    return compiled, seconds, sink


def decisions_of(graphs, threads: int) -> dict:
    """Counts: measured merges, those that went against the policy's verdict, measured
    thread counts and those that left the default, merges not measured with a reason."""
    ds = [d for g in graphs for d in g.decisions]
    merges = [d for d in ds if not isinstance(d, MeasuredChoice)
              and d.reason.startswith("measured")]
    schedules = [d for d in ds if isinstance(d, MeasuredChoice) and d.kind == "schedule"
                 and d.reason.startswith("measured")]
    plans = [d for d in ds if isinstance(d, MeasuredChoice) and d.kind == "plan"]
    default = f"{threads} thread{'s' if threads != 1 else ''}"
    return {"merges": len(merges),
            "flipped": sum(bool(d.metrics.get("against_policy")) for d in merges),
            "schedules": len(schedules),
            "fewer": sum(d.choice != default for d in schedules),
            "plans": ", ".join("policy's" if "plan" in d.choice else "measured"
                               for d in plans) or "-",
            "examples": [str(d).split(" unfused_us=")[0].split(" measured_")[0]
                         for d in [m for m in merges if m.metrics.get("against_policy")]
                         + plans + [c for c in schedules if c.choice != default]][:2]}


def measure_case(name: str, fusion: str, threads: int, rounds: int) -> dict:
    fn, inputs = case_inputs(name)
    row, compiled = {"case": name, "fusion": fusion, "threads": threads}, {}
    for label, mode in (("default", "default"), ("autotune", AUTOTUNE)):
        with tempfile.TemporaryDirectory(prefix="brrr-bench-autotune-") as cache:
            options = {"fusion": fusion, "mode": mode, "cache_dir": cache,
                       "num_threads": threads}
            _, cold, graphs = compile_once(fn, inputs, options)
            compiled[label], warm, again = compile_once(fn, inputs, options)
            row[f"{label} cold s"], row[f"{label} warm s"] = cold, warm
            if label == "autotune":
                row.update(decisions_of(graphs, threads))
                row["warm cached"] = all(d.metrics.get("measured_cached", True)
                                         for g in again for d in g.decisions)
            row["device"] = graphs[0].device if graphs else ""
    # one thread: its CPU time, which preemption by other jobs does not inflate
    clock = time.thread_time if threads == 1 else time.perf_counter
    times = time_round_robin(compiled, {k: inputs for k in compiled}, rounds, clock)
    row["default us"] = statistics.median(times["default"]) * 1e6
    row["autotune us"] = statistics.median(times["autotune"]) * 1e6
    return row


COLUMNS = ["case", "fusion", "threads", "default cold s", "autotune cold s", "cold ratio",
           "autotune warm s", "measured merges", "against policy", "plan kept",
           "measured threads",
           "fewer threads", "default us", "autotune us", "autotune / default"]


def table_row(r: dict) -> dict:
    return {"case": r["case"], "fusion": r["fusion"], "threads": r["threads"],
            "default cold s": f"{r['default cold s']:.2f}",
            "autotune cold s": f"{r['autotune cold s']:.2f}",
            "cold ratio": f"{r['autotune cold s'] / r['default cold s']:.2f}",
            "autotune warm s": f"{r['autotune warm s']:.2f}" + ("" if r["warm cached"] else " *"),
            "measured merges": r["merges"], "against policy": r["flipped"],
            "plan kept": r["plans"],
            "measured threads": r["schedules"], "fewer threads": r["fewer"],
            "default us": f"{r['default us']:.1f}", "autotune us": f"{r['autotune us']:.1f}",
            "autotune / default": f"{r['autotune us'] / r['default us']:.3f}"}


def render(args, rows: list[dict]) -> str:
    facts = {"threads": "the threads column: torch's and brrr's kernels' (num_threads)",
             "cost model's device": ", ".join(sorted({r["device"] for r in rows})) or "n/a",
             "timing": f"{args.rounds} interleaved rounds, per round the median call; "
                       "quoted: the median over rounds; clock: with 1 thread the calling "
                       "thread's CPU time (time.thread_time), else the wall clock",
             "load average (1 min) at the end": f"{_load():.2f}"}
    examples = [f"- {r['case']} ({r['fusion']}, {r['threads']} thread(s)): `{e}`"
                for r in rows for e in r["examples"]]
    notes = ["`cold`: first call (compile + one run) with an empty cache dir; `warm`: the "
             "same compile again in the same process after torch._dynamo.reset(), its "
             "kernels and measurements cached (`*`: some decision was measured again). "
             "`against policy`: measured merges decided against the wrapped policy's "
             "verdict (in the plan kept); `plan kept`: where a merge went against the "
             "policy, which finished plan measured faster as a whole graph and was kept "
             "(`-`: no such merge); `fewer threads`: kernels the measurement moved off the default "
             "thread count. `autotune / default` below 1: max-autotune's compiled "
             "function is faster. Where no decision went against the policy and no "
             "thread count changed, both compile the same kernels and the ratio is noise.",
             "Measured decisions that changed something (went against the policy, chose "
             "a finished plan, or moved a kernel off the default thread count), at most "
             "two per row:\n\n" + "\n".join(examples) if examples else ""]
    return reporting.report("max-autotune vs default", facts,
                          reporting.markdown_table([table_row(r) for r in rows], COLUMNS),
                          [n for n in notes if n])


def _load() -> float:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return float("nan")


def main(argv=None) -> None:
    args = parse_args(argv)
    machine_env.ensure_malloc_env()
    rows, start = [], time.perf_counter()
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name in args.cases:
            for fusion in args.fusion:
                rows.append(measure_case(name, fusion, threads, args.rounds))
                print(f"[{time.perf_counter() - start:5.0f} s] {table_row(rows[-1])}",
                      file=sys.stderr, flush=True)
    path = reporting.publish(args.out, render(args, rows), args.results_dir)
    path.with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
