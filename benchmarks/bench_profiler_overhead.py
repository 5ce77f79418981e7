"""What brrr's profiler events cost a call when no profiler runs.

    python benchmarks/bench_profiler_overhead.py [--rounds R]

Each workload is compiled four times in this process, alternately with the runner's
profiler-aware boxed call (runtime/profiling.py) and with the plain boxed call it
replaced (no profiler check). The four alternate within every round, each timed over
enough calls to take a few ms; medians and fastest rounds are quoted, and the difference
between two copies of the same variant as the noise floor.
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

import reporting
import machine_env
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


def _interleaved(variants: dict, args, rounds: int) -> dict[str, tuple[float, float]]:
    """(median, fastest) ns per call over the rounds; the order of the variants flips
    every round (ABBA...). The fastest round is the steadier estimate of a few ns on a
    loaded machine: noise only ever adds time."""
    first = next(iter(variants.values()))
    calls = max(10, int(CALLS_TARGET_S * 1e9 / _ns_per_call(first, args, 50)))
    per_round = {name: [] for name in variants}
    for r in range(rounds):
        for name, fn in (list(variants.items())[::-1] if r % 2 else variants.items()):
            per_round[name].append(_ns_per_call(fn, args, calls))
    return {name: (statistics.median(ts), min(ts)) for name, ts in per_round.items()}


def measure(fn, x, options, rounds: int) -> tuple[dict, dict]:
    """Per-call ns of (the whole torch.compile'd call, brrr's boxed call alone), for two
    copies of each variant compiled alternately (plain, aware, plain, aware): two copies
    of the same code differ only by noise, which gives the noise floor."""
    copies = {f"{kind}{i}": _compiled(fn, x, options, kind == "plain")
              for i in (1, 2) for kind in ("plain", "aware")}
    whole = _interleaved({k: c for k, (c, _) in copies.items()}, (x,), rounds)
    # the boxed call clears its argument list: each call gets a new one
    alone = _interleaved({k: (lambda r=r: r([x])) for k, (_, r) in copies.items()}, (), rounds)
    return whole, alone


def _row(label: str, what: str, t: dict) -> str:
    """Medians, and the fastest rounds averaged over the two copies of each variant."""
    med = {k: (t[k + "1"][0] + t[k + "2"][0]) / 2 for k in ("plain", "aware")}
    fast = {k: (t[k + "1"][1] + t[k + "2"][1]) / 2 for k in ("plain", "aware")}
    floor = max(abs(t[k + "1"][1] - t[k + "2"][1]) for k in ("plain", "aware"))
    return (f"| {label} | {what} | {med['plain']:.0f} | {med['aware']:.0f} | {fast['plain']:.0f} | "
            f"{fast['aware']:.0f} | {fast['aware'] - fast['plain']:+.0f} | {floor:.0f} |")


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
    machine_env.ensure_malloc_env()
    workloads = [("x + 1, 16 floats", add_one, torch.randn(16), {}),
                 ("20 kernels (fusion='none'), 64 floats", chain20, torch.randn(64),
                  {"fusion": "none"})]
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    lines = ["# Profiler events: cost per call without a profiler", "",
             machine_env.malloc_env_statement(), "",
             f"{os.cpu_count()} cores, load average {load} when it started.", "",
             f"ns per call over {args.rounds} interleaved rounds: medians, and fastest rounds "
             "(noise only adds time), each averaged over two copies of the variant; plain = "
             "the boxed call without the profiler check, aware = with it; noise floor = the "
             "larger difference between the two copies of one variant.", "",
             "| workload | call | plain median | aware median | plain fastest | aware fastest "
             "| fastest: aware - plain | noise floor |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, fn, x, options in workloads:
        for what, t in zip(("torch.compile'd", "brrr's boxed call"), measure(fn, x, options, args.rounds)):
            lines.append(_row(label, what, t))
    lines += ["", f"The check alone (fastest of 15 timings of a closure with it and of one without): "
              f"{check_ns():.0f} ns per call."]
    events = profiled_events(chain20, torch.randn(64), {"fusion": "none"})
    lines += ["", f"Under torch.profiler one call of the 20-kernel graph records {len(events)} "
              "distinct brrr events: " + ", ".join(events[:3]) + ", ..."]
    text = "\n".join(lines) + "\n"
    print(text)
    (reporting.RESULTS_DIR / "profiler_overhead.md").write_text(text)


if __name__ == "__main__":
    main()
