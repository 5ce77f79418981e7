"""Pointwise suite: eager vs inductor vs brrr on memory-bound float32 workloads.

    python benchmarks/bench_pointwise.py [--rounds R] [--iters I] [--size N]
                                         [--backends eager,inductor,brrr]

Prints a markdown table and writes it to benchmarks/results/pointwise.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import harness
import reporting
import machine_env
from workloads import WORKLOADS, bytes_moved


def parse_args(argv=None) -> argparse.Namespace:
    names = ",".join(WORKLOADS)
    p = reporting.suite_parser(__doc__, "eager,inductor,brrr", names, "pointwise.md")
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    p.add_argument("--iters", type=int, default=3, help="calls per backend per round")
    return p.parse_args(argv)


def _speedup(times: dict, num: str, den: str) -> str:
    if num in times and den in times:
        return f"{times[num] / times[den]:.2f}x"
    return "n/a"


def measure_workload(workload, args) -> dict:
    """Bytes moved, median seconds per call of each working backend, every status."""
    inputs = workload.make_inputs(args.size)
    nbytes = bytes_moved(inputs, workload.fn(*inputs))
    fns, status = harness.compile_backends(workload.fn, inputs, args.backends.split(","))
    per_round = harness.interleaved(fns, inputs, rounds=args.rounds, iters=args.iters)
    times = {name: statistics.median(ts) for name, ts in per_round.items()}
    return {"nbytes": nbytes, "times": times, "status": status}


def table_row(name: str, result: dict, backends: list[str], bandwidth: float) -> dict:
    nbytes, times = result["nbytes"], result["times"]
    row = {"workload": name, "MB moved": f"{nbytes / 1e6:.0f}"}
    for b in backends:
        if b in times:
            gbs = nbytes / times[b]
            row[f"{b} ms"] = f"{times[b] * 1e3:.2f}"
            row[f"{b} GB/s (% stream)"] = f"{gbs / 1e9:.1f} ({gbs / bandwidth:.0%})"
        else:
            row[f"{b} ms"] = result["status"][b]
            row[f"{b} GB/s (% stream)"] = "n/a"
    row["brrr vs eager"] = _speedup(times, "eager", "brrr")
    row["brrr vs inductor"] = _speedup(times, "inductor", "brrr")
    return row


def columns_for(backends: list[str]) -> list[str]:
    cols = ["workload", "MB moved"] + [f"{b} ms" for b in backends]
    cols += ["brrr vs eager", "brrr vs inductor"]
    return cols + [f"{b} GB/s (% stream)" for b in backends]


def render(args, results: dict, bandwidths: list[float]) -> str:
    bandwidth = statistics.median(bandwidths)
    backends = args.backends.split(",")
    rows = [table_row(name, r, backends, bandwidth) for name, r in results.items()]
    samples = ", ".join(f"{b / 1e9:.1f}" for b in bandwidths)
    facts = {
        "stream bandwidth (copy_ of 256 MB, read+write)": f"{bandwidth / 1e9:.1f} GB/s, "
        f"median of samples before each workload and at the end: {samples} GB/s",
        "timing": f"{args.rounds} interleaved rounds x {args.iters} calls per backend, "
        f"median of per-round means; inputs {args.size}x{args.size} float32",
    }
    table = reporting.markdown_table(rows, columns_for(backends))
    status = ["Backend status (first call checked against eager):"]
    status += [
        f"- {name}: " + "; ".join(f"{b} {s}" for b, s in r["status"].items())
        for name, r in results.items()
    ]
    workloads = ["Workloads:"] + [f"- {name}: {WORKLOADS[name].description}" for name in results]
    notes = ["\n".join(status), "\n".join(workloads)]
    return reporting.report("Pointwise suite", facts, table, notes)


def main(argv=None) -> None:
    machine_env.ensure_malloc_env()
    args = parse_args(argv)
    results, bandwidths = {}, []
    for name in args.workloads.split(","):
        bandwidths.append(harness.stream_bandwidth())
        results[name] = measure_workload(WORKLOADS[name], args)
        print(f"{name}: {results[name]['status']}", file=sys.stderr, flush=True)
    bandwidths.append(harness.stream_bandwidth())
    reporting.publish(args.out, render(args, results, bandwidths), args.results_dir)


if __name__ == "__main__":
    main()
