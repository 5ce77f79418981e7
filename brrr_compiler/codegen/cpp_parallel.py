"""The OpenMP pragma of a kernel's parallel loop, or none when it would never fork.

Note on serial loops. Every parallel loop carries an `if` clause: with too little work
(PARALLEL_MIN_NUMEL elements) or a single work item it runs on one thread. When a
kernel's sizes are constants and the clause is false for them (the schedule evaluates
it: CppSchedule.forks, schedule/parallel.py), the printer leaves the
pragma out and says so in a comment: the loop runs on one thread either way, and g++ no
longer outlines an OpenMP region for it, which costs compile time (a tenth of a conv
net's build: benchmarks/results/notes.md, "Serial loops without a pragma"). Kernels
with symbolic sizes keep the pragma and decide at run time.
"""
from __future__ import annotations


def pragma(indent: str, head: str, cond: str, static_fork: bool | None) -> list[str]:
    """`head if (cond)`, or, when the sizes are constants and the loop never forks
    (`static_fork` False), a comment in its place."""
    if static_fork is False:
        return [f"{indent}// one thread: {cond} is false for these sizes"]
    return [f"{indent}{head} if ({cond})"]


def parallel_loop(indent: str, num_threads: int, cond: str, static_fork: bool | None,
                  loop: list[str], fence: bool) -> list[str]:
    """`loop` (a `for` over work items, as lines) split over the threads by a static
    schedule. `fence`: the loop streams stores past the caches (cpp_stream.py), so each
    thread ends its share with one brrr_stream_fence(), in a parallel region around an
    `omp for nowait`: one fence per thread, not one per work item (a fence waits for the
    write-combining buffers to drain; per row of a bf16 norm it cost 12%, measured)."""
    tail = [f"{indent}brrr_stream_fence();"] if fence else []
    if static_fork is False or not fence:
        head = f"#pragma omp parallel for num_threads({num_threads}) schedule(static)"
        return pragma(indent, head, cond, static_fork) + loop + tail
    return ([f"{indent}#pragma omp parallel num_threads({num_threads}) if ({cond})",
             f"{indent}{{", f"{indent}#pragma omp for schedule(static) nowait"]
            + loop + tail + [f"{indent}}}"])
