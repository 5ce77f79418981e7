"""Compile time as the graph grows (bench_compile.py's scaling section): a chain of N
blocks compiled for inference in this process by brrr, aot_eager (the capture floor:
Dynamo and AOTAutograd, no code generation) and, unless --quick, inductor, each with
fresh cache dirs; the least-squares line through brrr's and inductor's times, R^2, and a
quadratic term as a check on brrr's.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import harness
import reporting
import plots

ALWAYS = ("brrr", "aot_eager")


def _chain(n_blocks: int, dim: int = 64):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Chain(nn.Module):
        """N blocks of x + gelu(layer_norm(x) @ W_i): each a library matmul between fusible
        groups, so the graph, the plan and the kernel count all grow with N."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(n_blocks))
            self.linears = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_blocks))

        def forward(self, x):
            for norm, linear in zip(self.norms, self.linears):
                x = x + F.gelu(linear(norm(x)))
            return x

    return Chain().eval(), torch.randn(64, dim)


@contextlib.contextmanager
def _cold_inductor(cache: str):
    """Inductor with its caches (FX graph, autotuning, built code) off and its cache dir
    a fresh one, as brrr gets a fresh cache_dir: a cold compile each time."""
    from torch._inductor import config

    old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    try:
        with config.patch(force_disable_caches=True):
            yield
    finally:
        if old is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = old


def time_chain(n: int, backend: str) -> float:
    """Seconds of the first call of a freshly compiled N-block chain, fresh caches."""
    import torch

    model, x = _chain(n)
    harness.fresh_dynamo()
    with tempfile.TemporaryDirectory(prefix="brrr-bench-scaling-") as cache:
        options = {"cache_dir": cache} if backend == "brrr" else None
        cold = _cold_inductor(cache) if backend == "inductor" else contextlib.nullcontext()
        with cold:
            compiled = torch.compile(model, backend=harness.resolve_backend(backend),
                                     options=options, dynamic=False)
            with torch.no_grad():
                start = time.perf_counter()
                compiled(x)
                return time.perf_counter() - start


def scaling(ns: list[int], repeats: int, backends=ALWAYS) -> dict:
    """Times per N for brrr, aot_eager and, if among `backends`, inductor (fastest of
    `repeats`: noise only adds), and fits."""
    timed = list(ALWAYS) + (["inductor"] if "inductor" in backends else [])
    for b in timed:
        time_chain(1, b)    # one-time imports and toolchain probes are not per-graph cost
    times = {b: [] for b in timed}
    for n in ns:
        for b in timed:
            times[b].append(min(time_chain(n, b) for _ in range(repeats)))
        print(f"scaling N={n}: " + ", ".join(f"{b} {t[-1]:.2f} s" for b, t in times.items()),
              file=sys.stderr, flush=True)
    own = [b - a for b, a in zip(times["brrr"], times["aot_eager"])]
    result = {"ns": ns, "times": times, "own": own, "fits": _fits(ns, times["brrr"], own)}
    if "inductor" in times and len(ns) >= 3:
        (slope, intercept), r2 = harness.polyfit(ns, times["inductor"], 1)
        result["inductor_fit"] = {"slope": slope, "intercept": intercept, "r2": r2,
                                  "line": [slope, intercept]}
    return result


def _fits(ns, total, own) -> dict | None:
    if len(ns) < 3:
        return None
    (slope, intercept), r2 = harness.polyfit(ns, total, 1)
    (quad, q_lin, q_c), q_r2 = harness.polyfit(ns, total, 2)
    (own_slope, own_intercept), own_r2 = harness.polyfit(ns, own, 1)
    n_max = max(ns)
    quad_share = quad * n_max**2 / max(total[ns.index(n_max)], 1e-9)
    linear = r2 >= 0.95 and quad_share < 0.2     # growth that slows down is not quadratic
    verdict = (f"{'MET' if linear else 'MISSED'}: R^2 = {r2:.3f}, quadratic term "
               f"{quad_share:+.0%} of the time at N = {n_max}")
    return {"slope": slope, "intercept": intercept, "r2": r2, "quad": quad, "q_lin": q_lin,
            "q_c": q_c, "q_r2": q_r2, "quad_share": quad_share, "own_slope": own_slope,
            "own_intercept": own_intercept, "own_r2": own_r2, "verdict": verdict,
            "line": [slope, intercept]}


def scaling_section(result: dict, plot_note: str) -> str:
    times = result["times"]
    columns = ["N blocks"] + [f"{b} s" for b in times] + ["brrr - aot_eager s"]
    rows = [{"N blocks": n, **{f"{b} s": f"{times[b][i]:.2f}" for b in times},
             "brrr - aot_eager s": f"{result['own'][i]:.2f}"}
            for i, n in enumerate(result["ns"])]
    lines = ["## Compile time vs graph size", "",
             "A chain of N blocks `x = x + gelu(linear(layer_norm(x)))` (64 x 64 input), "
             "compiled for inference in this process, fresh cache dirs per compile "
             "(inductor's caches off); first-call seconds, best of the repeats.", "",
             reporting.markdown_table(rows, columns)]
    f = result["fits"]
    if f:
        lines += ["",
                  f"- linear fit of brrr's time: {f['slope'] * 1e3:.1f} ms per block + "
                  f"{f['intercept']:.2f} s, R^2 = {f['r2']:.3f}",
                  f"- quadratic fit: {f['quad'] * 1e3:+.3f} ms x N^2 + {f['q_lin'] * 1e3:.1f} "
                  f"ms x N + {f['q_c']:.2f} s (R^2 = {f['q_r2']:.3f}); the N^2 term is "
                  f"{f['quad_share']:+.0%} of the time at N = {max(result['ns'])}",
                  f"- brrr's own cost (brrr - aot_eager): {f['own_slope'] * 1e3:.1f} ms per "
                  f"block + {f['own_intercept']:.2f} s, R^2 = {f['own_r2']:.3f}",
                  "- verdict: linear if R^2 >= 0.95 and a positive N^2 term is under 20% of "
                  "the time at the largest N (a negative one means growth slows down, as "
                  "the translation units of a large graph build side by side)"]
    i = result.get("inductor_fit")
    if i:
        lines.append(f"- linear fit of inductor's time: {i['slope'] * 1e3:.1f} ms per block + "
                     f"{i['intercept']:.2f} s, R^2 = {i['r2']:.3f}")
    return "\n".join(lines + (["", plot_note] if plot_note else []))


def plot_scaling(result: dict, directory: Path) -> str:
    """compile_scaling.png: every timed backend's points, brrr's and inductor's fits."""
    name = "compile_scaling.png"
    if not plots.available():
        return plots.missing_note([name])
    if not result["fits"]:
        return ""
    fits = {"brrr": result["fits"]["line"]}
    if result.get("inductor_fit"):
        fits["inductor"] = result["inductor_fit"]["line"]
    plots.scaling(directory / name, result["ns"], result["times"], fits,
                  title="first-call compile time vs graph size", xlabel="N blocks",
                  ylabel="seconds")
    return f"Plot: `{name}`"
