"""The schedule stage: (Kernel, target, threads) -> how the kernel runs, as a value.

One function chooses it (`choose`); the printers print the (Kernel, schedule) pair and
the cost model counts it. The types are leaves (schedule_ir.py): CppSchedule (cpp.py,
rows.py, stream.py, online.py, parallel.py have the rules) and TritonSchedule
(triton.py).
"""
from __future__ import annotations

from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.schedule.cpp import choose_cpp
from brrr_compiler.schedule.triton import DEFAULT_SM_COUNT, choose_triton
from brrr_compiler.schedule_ir import CppSchedule, TritonSchedule


def choose(k: Kernel, target: str = "cpp", num_threads: int = 1,
           sm_count: int = DEFAULT_SM_COUNT, prefetch: bool = False
           ) -> CppSchedule | TritonSchedule:
    """`k`'s schedule on `target` ("cpp": `num_threads` OpenMP threads, input streams
    prefetched where `prefetch`; "triton": a GPU of `sm_count` SMs)."""
    if target == "cpp":
        return choose_cpp(k, num_threads, prefetch)
    if target == "triton":
        return choose_triton(k, sm_count)
    raise ValueError(f"brrr: no schedule for target {target!r} (cpp or triton)")


__all__ = ["choose", "choose_cpp", "choose_triton", "CppSchedule", "TritonSchedule"]
