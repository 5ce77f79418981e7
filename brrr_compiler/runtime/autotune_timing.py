"""Timing candidates for max-autotune (runtime/autotune.py): interleaved rounds, medians.

Note on the timing. Each candidate is a function running its kernels once, as the
runner would (outputs allocated per call). Every candidate first runs WARMUP times
(page faults on fresh outputs, cold caches, OpenMP's thread pool), then a few rounds,
the candidates alternating within each round and their order reversed every other round
so that neither always runs after the other. A round runs a candidate enough times to
take about ROUND_S (one call of a 5 us kernel is too short for the clock and too easily
hit by an interrupt), and the median over rounds of the seconds per call is its time:
on a shared machine a round that another process preempted is an outlier, which a median
ignores. Slow candidates get fewer rounds (at least MIN_ROUNDS) so that one decision
costs about BUDGET_S of compile time.

Note on the clock. Candidates that run on the calling thread alone (one OpenMP thread)
are timed by that thread's CPU time, which time spent preempted by other processes does
not inflate: on a 2-core machine shared by several jobs, wall-clock rounds of 20 us
kernels were preempted often enough to decide merges the wrong way
(benchmarks/results/autotune.md). Candidates on several
threads are timed by the wall clock, the only one that sees them wait for each other
(and for a preempted thread at the closing barrier, which is real on such a machine).
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

WARMUP = 2
ROUNDS = 9
MIN_ROUNDS = 3
ROUND_S = 2e-3
BUDGET_S = 0.4
MAX_CALLS = 1000


def median_seconds(candidates: dict[str, Callable[[], object]],
                   clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """{name: median seconds per call} of each candidate by `clock` (the module notes:
    time.thread_time for candidates on one thread)."""
    for fn in candidates.values():
        for _ in range(WARMUP):
            fn()
    start = clock()
    for fn in candidates.values():
        fn()
    one_each = max(clock() - start, 1e-9)
    calls = max(1, min(MAX_CALLS, int(ROUND_S * len(candidates) / one_each)))
    rounds = max(MIN_ROUNDS, min(ROUNDS, int(BUDGET_S / (one_each * calls))))
    per_round: dict[str, list[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            fn = candidates[name]
            start = clock()
            for _ in range(calls):
                fn()
            per_round[name].append((clock() - start) / calls)
    return {name: statistics.median(times) for name, times in per_round.items()}
