"""max-autotune's schedule choice: how many OpenMP threads each C++ kernel runs on.

Note on the choice. Every parallel loop the C++ printer writes carries an `if` clause
(codegen/cpp_parallel.py): below PARALLEL_MIN_NUMEL elements of work it runs on one
thread. That threshold is one guess for every machine and kernel; a kernel just past it
may lose more to the fork and the closing barrier than its threads gain, and on a
machine shared with other jobs a thread may wait for a core. So each kernel whose code
depends on the thread count (a loop that can fork; a kernel that never forks prints the
same for any count and is left alone) is printed for 1 thread, for half the threads
(with 4 or more) and for all of them, the variants are built side by side in one batch
of translation units (runtime/kernels.py), and each kernel keeps its fastest variant
(times within cost/measured.py's TIE of the default count's keep the default).
Kernels that fold across rows keep per-thread partials, so their sums follow the
chosen count (deterministic, as the fold_across_rows option says).
"""
from __future__ import annotations

import dataclasses

from brrr_compiler.codegen import cpp
from brrr_compiler.cost.measured import TIE
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.partition import MeasuredChoice
from brrr_compiler.report import fmt_time
from brrr_compiler.runtime.kernels import build_units


def counts(threads: int) -> list[int]:
    """The thread counts tried: 1, half of `threads` (with 4 or more) and all of them."""
    return sorted({1, max(1, threads // 2) if threads >= 4 else 1, threads})


def _label(n: int) -> str:
    return f"{n} thread{'s' if n != 1 else ''}"


def choose_threads(tuner, kernels: dict, outputs: dict, printed: dict) -> tuple[dict, list]:
    """(`printed` with each measured kernel's source for its fastest thread count, the
    MeasuredChoices of kind "schedule"). `kernels`: {group id: Kernel}; `outputs`:
    {group id: its output nodes}; `tuner`: the graph's Autotuner (runtime/autotune.py)."""
    if tuner.why_not() is not None or tuner.threads <= 1:
        return printed, []
    choices = {}                # group id -> {label: (variant Kernel, its source)}
    for gid, k in kernels.items():
        if not k.size_vars:
            variants = _variants(k, counts(tuner.threads), tuner.prefetch)
            if len({cpp.code_key(v, src) for v, src in variants.values()}) > 1:
                choices[gid] = variants
    measured = _measure(tuner, choices, outputs)
    printed, decisions = dict(printed), []
    for gid, (seconds, cached) in measured.items():
        k = kernels[gid]
        if isinstance(seconds, str):
            decisions.append(MeasuredChoice("schedule", k.name, _label(tuner.threads),
                                            f"not measured: {seconds}"))
            continue
        best, default = min(seconds, key=seconds.get), _label(tuner.threads)
        if seconds.get(default, float("inf")) < TIE * seconds[best]:
            best = default              # a tie keeps the default count
        n = int(best.split()[0])
        if n != tuner.threads:
            printed[k.name] = cpp.kernel_source(k, n, prefetch=tuner.prefetch)
        times = " vs ".join(f"{label} {fmt_time(s)}" for label, s in seconds.items())
        decisions.append(MeasuredChoice(
            "schedule", k.name, best, f"measured{', cached' if cached else ''}: {times}",
            {f"measured_{label.split()[0]}t_us": round(s * 1e6, 3) for label, s in seconds.items()}
            | {"measured_cached": cached}))
    return printed, decisions


def _variants(k: Kernel, threads: list[int], prefetch: bool) -> dict:
    """{label: (k renamed for n threads, its source printed for n threads)}."""
    out = {}
    for n in threads:
        v = dataclasses.replace(k, name=f"{k.name}_t{n}")
        out[_label(n)] = (v, cpp.kernel_source(v, n, prefetch=prefetch))
    return out


def _measure(tuner, choices: dict, outputs: dict) -> dict:
    """{group id: ({label: seconds} or why not, whether cached)}: from the disk cache, else
    built (every variant at once) and timed."""
    results, pending = {}, {}
    for gid, variants in choices.items():
        codes = {label: [cpp.code_key(v, src)] for label, (v, src) in variants.items()}
        reads = list(dict.fromkeys(b.origin for b in _kernels_of(variants)[0].inputs))
        _, seconds = tuner.lookup("threads", codes, reads)
        if seconds is not None:
            results[gid] = (seconds, True)
        else:
            pending[gid] = (codes, reads)
    libs = _build(tuner, {gid: choices[gid] for gid in pending})
    for gid, (codes, reads) in pending.items():
        variants = choices[gid]
        if any(libs.get(v.name) is None for v in _kernels_of(variants)):
            results[gid] = ("a variant did not build", False)
            continue
        runs = {label: tuner.side_run([(v, outputs[gid])], libs[v.name])
                for label, (v, _) in variants.items()}
        results[gid] = tuner.measured("threads", codes, reads,
                                      lambda runs=runs: tuner.timed(runs, one_thread=False))
    return results


def _kernels_of(variants: dict) -> list[Kernel]:
    return [v for v, _ in variants.values()]


def _build(tuner, choices: dict) -> dict:
    """{variant name: its library or None} for every variant of `choices`."""
    variants = [v for vs in choices.values() for v, _ in vs.values()]
    printed = {v.name: src for vs in choices.values() for v, src in vs.values()}
    units, libs = build_units(variants, tuner.cfg, tuner.threads, printed)
    return {k.name: lib for (members, _), lib in zip(units, libs) for k in members}
