"""What brrr's profiler events cost a call when no profiler runs.

    python benchmarks/bench_profiler_overhead.py [--rounds R]

Two copies of each workload are compiled in this process: one with the runner's
profiler-aware boxed call (runtime/profiling.py), one with the plain boxed call it
replaced (no profiler check). They alternate within every round, each timed over enough
calls to take a few ms; the median ns per call of each and their difference are quoted.
Workloads at small sizes, where per-call overhead is all there is: a compiled `x + 1` on
16 floats, and a chain of 20 pointwise ops compiled with fusion="none" (20 kernels).
Then the same graph once under torch.profiler, to show the events it records.
Writes benchmarks/results/profiler_overhead.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import timeit
import types

import harness
import torch

from brrr_compiler import backend
from brrr_compiler.runtime import runner

CALLS_TARGET_S = 0.005


def _plain_boxed(gm, name="graph"):
    """The boxed call before profiler events: no check at all."""
    forward = gm.forward

    def run(args):
        return forward(list(args) if not isinstance(args, list) else args)

    run._boxed_call = True
    run.runner = gm
    return run


def add_one(x):
    return x + 1


def chain20(x):
    for _ in range(10):
        x = (x * 1.01).sin()
    return x


def _fresh(fn):
    """A copy of `fn` with its own code object, so Dynamo compiles it apart."""
    code = fn.__code__.replace(co_name=fn.__name__ + "_copy")
    return types.FunctionType(code, fn.__globals__, fn.__name__ + "_copy")


def _compiled(fn, x, options, plain: bool):
    """(the torch.compile'd function, the boxed call brrr returned for its graph)."""
    made = []

    def boxed(gm, name="graph"):
        made.append((_plain_boxed if plain else runner.boxed)(gm, name))
        return made[-1]

    saved, backend.boxed = backend.boxed, boxed
    try:
        compiled = torch.compile(_fresh(fn), backend="brrr", options=options)
        compiled(x)
    finally:
        backend.boxed = saved
    return compiled, made[0]


def _ns_per_call(fn, args, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter_ns() - start) / calls


def _interleaved(variants: dict, args, rounds: int) -> dict[str, float]:
    """Median ns per call; the order of the variants flips every round (ABBA...)."""
    first = next(iter(variants.values()))
    calls = max(10, int(CALLS_TARGET_S * 1e9 / _ns_per_call(first, args, 50)))
    per_round = {name: [] for name in variants}
    for r in range(rounds):
        for name, fn in (list(variants.items())[::-1] if r % 2 else variants.items()):
            per_round[name].append(_ns_per_call(fn, args, calls))
    return {name: statistics.median(ts) for name, ts in per_round.items()}


def measure(fn, x, options, rounds: int) -> tuple[dict, dict]:
    """Per-call ns of (the whole torch.compile'd call, brrr's boxed call alone)."""
    (plain, plain_run), (aware, aware_run) = (_compiled(fn, x, options, p) for p in (True, False))
    whole = _interleaved({"plain": plain, "profiling-aware": aware}, (x,), rounds)
    # the boxed call clears its argument list: each call gets a new one
    alone = _interleaved({"plain": lambda: plain_run([x]), "profiling-aware": lambda: aware_run([x])},
                         (), rounds)
    return whole, alone


def check_ns(number: int = 200_000, repeat: int = 15) -> float:
    """ns the profiler check adds to a call, timed alone: a closure with it against one
    without, the fastest of `repeat` timings each (a few ns are below this machine's
    noise otherwise)."""
    from torch.autograd import profiler as autograd_profiler

    def with_check(args):
        if autograd_profiler._is_profiler_enabled:
            return None
        return args

    def without(args):
        return args

    best = {fn: min(timeit.repeat(lambda: fn(1), number=number, repeat=repeat)) / number * 1e9
            for fn in (with_check, without)}
    return best[with_check] - best[without]


def profiled_events(fn, x, options) -> list[str]:
    compiled = torch.compile(_fresh(fn), backend="brrr", options=options)
    compiled(x)
    with torch.profiler.profile() as prof:
        compiled(x)
    return sorted({e.name for e in prof.events() if e.name.startswith("brrr::")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    harness.ensure_malloc_env()
    workloads = [("x + 1, 16 floats", add_one, torch.randn(16), {}),
                 ("20 kernels (fusion='none'), 64 floats", chain20, torch.randn(64),
                  {"fusion": "none"})]
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    lines = ["# Profiler events: cost per call without a profiler", "",
             harness.malloc_env_statement(), "",
             f"{os.cpu_count()} cores, load average {load} when it started.", "",
             f"Median ns per call over {args.rounds} interleaved rounds; "
             "plain = the boxed call without the profiler check.", "",
             "| workload | call | plain ns | profiling-aware ns | difference ns | ratio |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for label, fn, x, options in workloads:
        for what, t in zip(("torch.compile'd", "brrr's boxed call"), measure(fn, x, options, args.rounds)):
            plain, aware = t["plain"], t["profiling-aware"]
            lines.append(f"| {label} | {what} | {plain:.0f} | {aware:.0f} | {aware - plain:+.0f} | "
                         f"{aware / plain:.3f} |")
    lines += ["", f"The check alone (fastest of 15 timings of a closure with it and of one without): "
              f"{check_ns():.0f} ns per call."]
    events = profiled_events(chain20, torch.randn(64), {"fusion": "none"})
    lines += ["", f"Under torch.profiler one call of the 20-kernel graph records {len(events)} "
              "distinct brrr events: " + ", ".join(events[:3]) + ", ..."]
    text = "\n".join(lines) + "\n"
    print(text)
    (harness.RESULTS_DIR / "profiler_overhead.md").write_text(text)


if __name__ == "__main__":
    main()
