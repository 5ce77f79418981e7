"""Kernel suite: eager vs inductor vs brrr (and brrr's fusion policies) on memory-bound
kernels, from cache-resident sizes to far beyond the last-level cache.

    python benchmarks/bench_kernels.py [--quick] [--rounds R] [--cases NAME,...]
                                       [--backends eager,inductor,brrr,brrr:none,...]

Every case is compiled by every backend, checked against eager, then timed round-robin
(interleaved rounds, median over rounds of the median call). Writes benchmarks/results/kernels.md,
kernels.json and the PNGs kernels_speedup.png and kernels_bandwidth.png.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from pathlib import Path

import harness
import reporting
import machine_env
from kernels_report import TWIN, plot, render, targets  # noqa: F401  (targets: tests)
from workloads import KERNEL_CASES, bytes_moved

EXACT_BF16 = "brrr:low_precision=eager"   # bf16 rounded after every op, as eager (its bits)
TARGET_ROUND_S = 0.02  # calls per round are chosen so one backend's round takes about this
QUICK_ROUNDS = 2


def brrr_variants() -> tuple[str, list[str]]:
    """(brrr's default fusion policy, the suite names of the other policies that work)."""
    from brrr_compiler.config import build_config
    from brrr_compiler.cost.policy import policy_from_option
    from brrr_compiler.lowered_count import LoweredCount

    default = build_config().fusion
    default = default if isinstance(default, str) else getattr(default, "name", "custom")
    others = []
    for policy in ("greedy", "none", "cost"):
        if policy == default:
            continue
        try:
            policy_from_option(policy, count=LoweredCount())
        except Exception as exc:  # a policy still being written is skipped, and said so
            print(f"brrr:{policy} skipped: {harness.describe_error(exc)}", file=sys.stderr)
            continue
        others.append(f"brrr:{policy}")
    return default, others


def parse_args(argv=None):
    p = reporting.base_parser(__doc__, "kernels.md")
    p.add_argument("--quick", action="store_true",
                   help=f"the small quick cases, eager and brrr, {QUICK_ROUNDS} rounds "
                        "(a smoke test)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 10)")
    p.add_argument("--cases", default=None,
                   help="comma-separated case names or workload names (default: all)")
    p.add_argument("--backends", default=None,
                   help="comma-separated; default eager,floor,inductor,brrr, brrr's "
                        "other fusion policies as brrr:<policy> and brrr:low_precision=eager "
                        "(--quick: eager,brrr); floor: Dynamo's own per-call cost; "
                        "brrr:<option>=<value> sets one brrr option")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else 10)
    args.results_dir = reporting.results_dir(args.results_dir, args.quick)
    return args


def select_cases(args) -> list:
    if args.cases:
        wanted = args.cases.split(",")
        unknown = [w for w in wanted
                   if w not in KERNEL_CASES and all(c.workload != w for c in KERNEL_CASES.values())]
        if unknown:
            sys.exit(f"unknown cases {unknown}; cases: {', '.join(KERNEL_CASES)}")
        return [c for c in KERNEL_CASES.values() if c.name in wanted or c.workload in wanted]
    return [c for c in KERNEL_CASES.values() if c.quick or not args.quick]


def measure_case(case, backends: list[str], rounds: int) -> dict:
    """Bytes moved, median seconds per call per working backend, spread, statuses."""
    harness.fresh_dynamo()
    inputs = case.inputs()
    nbytes = bytes_moved(inputs, case.fn(*inputs))
    fns, status = harness.compile_backends(case.fn, inputs, backends, tolerance=case.tolerance)
    if case.twin is not None and "brrr" in fns:   # timed in the same rounds as the rest
        twin, twin_status = harness.compile_backends(case.twin, inputs, ["brrr"],
                                                     tolerance=case.tolerance)
        fns.update({TWIN: f for f in twin.values()})
        status[TWIN] = twin_status["brrr"]
    harness.prime_floor(fns, case.fn)
    iters = harness.iters_for(case.fn, inputs, TARGET_ROUND_S)   # eager sets the pace
    rounds = max(2, rounds // 3) if case.heavy else rounds
    per_round = harness.interleaved(fns, inputs, rounds=rounds, iters=iters,
                                   per_round=statistics.median)
    times = {name: statistics.median(ts) for name, ts in per_round.items()}
    spread = {name: _spread(ts) for name, ts in per_round.items()}
    del fns, inputs
    gc.collect()
    return {"nbytes": nbytes, "times": times, "spread": spread, "status": status,
            "rounds": rounds, "iters": iters}


def _spread(ts: list[float]) -> float:
    """Interquartile range of the per-round times over their median."""
    if len(ts) < 4:
        return (max(ts) - min(ts)) / statistics.median(ts)
    q = statistics.quantiles(ts, n=4)
    return (q[2] - q[0]) / statistics.median(ts)


def main(argv=None) -> None:
    machine_env.ensure_malloc_env()
    args = parse_args(argv)
    default_policy, others = brrr_variants()
    backends = (args.backends.split(",") if args.backends
                else ["eager", "brrr"] if args.quick
                else ["eager", harness.FLOOR, "inductor", "brrr"] + others + [EXACT_BF16])
    stream = harness.stream_bandwidth
    if args.quick:
        stream = lambda: harness.stream_bandwidth(64 << 20, 5)  # noqa: E731
    start = time.perf_counter()
    results, bandwidths = {}, []
    for case in select_cases(args):
        bandwidths.append(stream())
        results[case.name] = measure_case(case, backends, args.rounds)
        r = results[case.name]
        shown = {b: f"{t * 1e3:.3f} ms" for b, t in r["times"].items()}
        bad = {b: s for b, s in r["status"].items() if not s.startswith("ok")}
        print(f"[{time.perf_counter() - start:5.0f} s] {case.name}: {shown} {bad or ''}",
              file=sys.stderr, flush=True)
    bandwidths.append(stream())
    run_median = statistics.median(bandwidths)
    for i, r in enumerate(results.values()):   # drift followed, one odd sample ignored
        r["stream"] = statistics.median([bandwidths[i], bandwidths[i + 1], run_median])
    directory = Path(args.results_dir)
    plot_notes = plot(results, backends, run_median, directory)
    reporting.publish(args.out, render(args, results, backends, default_policy, bandwidths,
                                     plot_notes, TARGET_ROUND_S), directory)
    raw = {"bandwidths": bandwidths, "llc_bytes": machine_env.llc_bytes(), "backends": backends,
           "cases": results}
    (directory / Path(args.out).with_suffix(".json").name).write_text(json.dumps(raw, indent=1))
    print(f"wrote {directory} (kernels.md, .json, PNGs) in {time.perf_counter() - start:.0f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
