"""Each generated kernel of a workload timed on its own, as the runner's segments call it.

A workload runs once under torch.profiler inside `profiling.kernel_calls()`, which keeps
every kernel call's arguments and outputs. Each call is then replayed on copies of them:
a kernel with static sizes runs `repeats` times in one native call of the segment
trampoline (runtime/trampoline.py; the per-kernel overhead the cost model calibrates,
tens of nanoseconds), others in a Python loop over their ctypes call (a microsecond or
more of overhead each, marked "python"). Timing the kernel alone, rather than in the
profiler's events, keeps out the profiler's own threads (on 2 cores they preempt a
2-thread kernel for milliseconds) and the per-event ctypes and recording cost.

Copies: each input's and output's storage is cloned, so a kernel that reads what an
earlier call wrote (the runner reuses dead buffers) sees the same values on every repeat.
"""
from __future__ import annotations

import ctypes
import statistics
import time
from typing import NamedTuple

import torch

from brrr_compiler.runtime import trampoline
from brrr_compiler.runtime.profiling import KernelCall, kernel_calls

CALL_S = 0.01        # one timed call (or Python loop) lasts about this long


class Timed(NamedTuple):
    graph: str
    kernel: str
    seconds: list          # per call of the kernel, one per round
    how: str               # "native" (trampoline) or "python"


def capture(run) -> list[KernelCall]:
    """Every kernel call of one run of `run`, in order."""
    with kernel_calls() as calls, torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]):
        run()
    return list(calls)


def _copy(t):
    if not isinstance(t, torch.Tensor):
        return t
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    return out.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())


def _native(call: KernelCall, lib):
    """A function running the kernel `repeats` times in one native call, or None when
    the trampoline cannot call it (symbolic sizes, an error flag, too many arguments)."""
    k, fn = call.call.brrr_kernel, call.call
    n = len(k.input_names) + len(k.out_specs)
    if lib is None or k.size_vars or k.take_error is not None or k.tensor_args \
            or k.device is not None or n > trampoline.MAX_ARGS or n > trampoline.MAX_SLOTS \
            or len(call.args) != len(k.input_names):
        return None
    tensors = [_copy(t) for t in (*call.args, *call.outputs)]
    offsets = list(fn.brrr_offsets or [0] * len(call.args)) + [0] * len(call.outputs)
    entry = trampoline.entry(lib, len(tensors))
    pointers = [t.data_ptr() for t in tensors]
    one = [trampoline.address(k.fn), n]
    for slot, off in enumerate(offsets):
        one += [slot, off]
    programs = {}

    def run(repeats: int):
        if repeats not in programs:
            words = [repeats] + one * repeats
            programs[repeats] = (ctypes.c_int64 * len(words))(*words)
        entry(ctypes.addressof(programs[repeats]), *pointers)

    run.keep = tensors              # the copies live as long as the runner
    return run


def _python(call: KernelCall):
    args = tuple(_copy(a) for a in call.args)

    def run(repeats: int):
        for _ in range(repeats):
            call.call(*args)
    return run


def _per_call(run, repeats: int) -> float:
    start = time.perf_counter()
    run(repeats)
    return (time.perf_counter() - start) / repeats


def time_calls(calls: list[KernelCall], lib, rounds: int) -> list[Timed]:
    """Each call's time per kernel run: the median of each round's one timed batch."""
    runners = []
    for call in calls:
        native = _native(call, lib)
        runners.append((call, native or _python(call), "native" if native else "python"))
    repeats = []
    for _, run, _ in runners:
        run(1)                                          # warm: pages, caches, threads
        once = _per_call(run, 1)
        repeats.append(max(1, min(100_000, int(CALL_S / max(once, 1e-7)))))
    times = [[] for _ in runners]
    for _ in range(rounds):                             # rounds interleave the kernels
        for i, (_, run, _) in enumerate(runners):
            times[i].append(_per_call(run, repeats[i]))
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
