"""Each generated kernel of a workload timed on its own, as the runner's segments call it.

A workload runs once under torch.profiler inside `profiling.kernel_calls()`, which keeps
every kernel call's arguments and outputs; each call is then replayed alone by
brrr_compiler/runtime/replay.py: static-size kernels many times in one native call of the
segment trampoline (as segments call kernels: no Python per repeat), others in a Python
loop over their ctypes call (marked "python"). Timing the kernel alone, rather than in the
profiler's events, keeps out the profiler's own threads (on 2 cores they preempt a
2-thread kernel for milliseconds) and the per-event ctypes and recording cost.
"""
from __future__ import annotations

import statistics
from typing import NamedTuple

from brrr_compiler.config import build_config
from brrr_compiler.runtime import replay, trampoline
from brrr_compiler.runtime.profiling import KernelCall
from harness import steady_heap

CALL_S = 0.01        # one timed call (or Python loop) lasts about this long


def trampoline_lib():
    """The segment trampoline for the default configuration's cache and compiler (None
    where it cannot be built: every call is then replayed in Python)."""
    cfg = build_config(None)
    return trampoline.load(cfg.cache_dir, cfg.cxx, cfg.cache_max_bytes)


class Timed(NamedTuple):
    graph: str
    kernel: str
    seconds: list          # per call of the kernel, one per round
    how: str               # "native" (trampoline) or "python"


def time_calls(calls: list[KernelCall], lib, rounds: int,
               from_python: frozenset = frozenset()) -> list[Timed]:
    """Each call's time per kernel run: the median of each round's one timed batch. The
    kernels named in `from_python` ((graph, kernel) pairs: those the runner calls from
    Python, outside its segments) are replayed through their Python call, as they run."""
    runners = [(call, *replay.replayer(call, None if (call.graph, call.call.brrr_kernel.name)
                                       in from_python else lib)) for call in calls]
    repeats = []
    for _, run, _ in runners:
        steady_heap(run, (1,))          # warm: pages, caches, threads, the heap (harness.py)
        once = replay.per_repeat(run, 1)
        repeats.append(max(1, min(100_000, int(CALL_S / max(once, 1e-7)))))
    times = [[] for _ in runners]
    for _ in range(rounds):                             # rounds interleave the kernels
        for i, (_, run, _) in enumerate(runners):
            times[i].append(replay.per_repeat(run, repeats[i]))
    return [Timed(call.graph, call.call.brrr_kernel.name, t, how)
            for (call, _, how), t in zip(runners, times)]


def median_by_kernel(timed: list[Timed]) -> dict[tuple[str, str], tuple[list, str]]:
    """(graph, kernel) -> (its round times, how), a kernel called more than once in a run
    keeping the median of its calls per round."""
    grouped: dict = {}
    for t in timed:
        grouped.setdefault((t.graph, t.kernel), []).append(t)
    return {key: ([statistics.median(c.seconds[r] for c in ts) for r in range(len(ts[0].seconds))],
                  ts[0].how) for key, ts in grouped.items()}
