"""One generated kernel call run again, many times in one native call: how calibration and
the benchmarks time a kernel alone.

A call kept by `profiling.kernel_calls()` (its kernel, arguments and outputs) is replayed
on copies of its tensors: each input's and output's storage is cloned, so a kernel reading
what an earlier call wrote (the runner reuses dead buffers) sees the same values on every
repeat. A kernel with static sizes runs `repeats` times in one call of the segment
trampoline (trampoline.py), which is how segments run kernels: the time per repeat has no
Python in it. Others (symbolic sizes, an error flag, Triton) run in a Python loop over
their call, a microsecond or more of overhead each.
"""
from __future__ import annotations

import ctypes
import time

import torch

from brrr_compiler.runtime import segments, trampoline
from brrr_compiler.runtime.profiling import KernelCall, kernel_calls


def capture(run) -> list[KernelCall]:
    """Every kernel call of one run of `run()` (a compiled function's call), in order."""
    with kernel_calls() as calls, torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]):
        run()
    return list(calls)


def _copy(t):
    if not isinstance(t, torch.Tensor):
        return t
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    return out.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())


def native(call: KernelCall, lib):
    """run(repeats): the kernel `repeats` times in one native call; None when the
    trampoline `lib` cannot call it (symbolic sizes, an error flag, too many arguments)."""
    k, fn = call.call.brrr_kernel, call.call
    n = len(k.input_names) + len(k.out_specs)
    if lib is None or not segments.natively_callable(k) or n > trampoline.MAX_SLOTS \
            or len(call.args) != len(k.input_names):
        return None
    tensors = [_copy(t) for t in (*call.args, *call.outputs)]
    offsets = list(fn.brrr_offsets or [0] * len(call.args)) + [0] * len(call.outputs)
    entry = trampoline.entry(lib, len(tensors))
    pointers = [t.data_ptr() for t in tensors]
    one = [trampoline.address(k.fn), n]
    for slot, off in enumerate(offsets):
        one += [slot, off]
    programs: dict = {}

    def run(repeats: int):
        if repeats not in programs:
            words = [repeats] + one * repeats
            programs[repeats] = (ctypes.c_int64 * len(words))(*words)
        entry(ctypes.addressof(programs[repeats]), *pointers)

    run.keep = tensors              # the copies live as long as `run`
    return run


def in_python(call: KernelCall):
    """run(repeats): the kernel's own call `repeats` times in a Python loop."""
    args = tuple(_copy(a) for a in call.args)

    def run(repeats: int):
        for _ in range(repeats):
            call.call(*args)
    return run


def replayer(call: KernelCall, lib):
    """(run, how): `native` where it can, else `in_python`; how is "native" or "python"."""
    run = native(call, lib)
    return (run, "native") if run is not None else (in_python(call), "python")


def per_repeat(run, repeats: int, clock=time.perf_counter) -> float:
    """Seconds per kernel run over one batch of `repeats`."""
    start = clock()
    run(repeats)
    return (clock() - start) / repeats
