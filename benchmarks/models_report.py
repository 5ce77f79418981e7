"""The model suite's report: step times, time outside library calls, compile times, peak
memory and errors, geometric means, the whole-model targets, where the time goes on the
rows brrr loses to Inductor, and the plots. bench_models.py measures; this module only
turns its results (a dict keyed by (model, mode)) into markdown and PNGs.
"""
from __future__ import annotations

from pathlib import Path

import harness
import plots
from library_time import CATEGORIES
from model_steps import MODE_LABELS

INDUCTOR_MARGIN = 0.97       # "at least as fast as Inductor, within 3%"
OUTSIDE_TARGET = 0.6         # brrr's time outside library calls / Inductor's
GEOMEAN_TARGET, CONV_TARGET, COMPILE_TARGET = 1.05, 1.1, 0.2


def _ratio(d: dict, num: str, den: str) -> float | None:
    a, b = d.get(num), d.get(den)
    return a / b if a is not None and b is not None and a > 0 and b > 0 else None


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "n/a"


def _ms(value: float | None) -> str:
    return f"{value * 1e3:.2f}" if value is not None else "n/a"


def _label(model: str, mode: str) -> dict:
    return {"model": model, "mode": MODE_LABELS.get(mode, mode)}


def _compiled(backends: list[str]) -> list[str]:
    return [b for b in backends if b != "eager"]


# ---- tables -------------------------------------------------------------------------------

def _rows(results: dict, cells) -> list[dict]:
    """One row per (model, mode): its label, then `cells(result)`."""
    return [{**_label(model, mode), **cells(r)} for (model, mode), r in results.items()]


def time_rows(results: dict, backends: list[str]) -> list[dict]:
    def cells(r):
        t = r["times"]
        row = {"batch": r["batch"]}
        row.update({f"{b} ms": _ms(t[b]) if b in t else r["status"].get(b, "not run")
                    for b in backends})
        row.update({f"{b} vs eager": _x(_ratio(t, "eager", b)) for b in _compiled(backends)})
        return {**row, "brrr vs inductor": _x(_ratio(t, "inductor", "brrr"))}
    return _rows(results, cells)


def _outside_cell(out: float | None, step: float | None) -> str:
    if out is None or not step:
        return "n/a"
    if out < 0:
        return f"{out * 1e3:.2f} (noise)"
    return f"{out * 1e3:.2f} ({out / step:.0%})"


def outside_rows(results: dict, backends: list[str]) -> list[dict]:
    def cells(r):
        lib = r["library"].get("eager", r["library"].get("brrr"))
        row = {"library ms (eager)": _ms(lib)}
        row.update({f"{b} outside ms": _outside_cell(r["outside"].get(b),
                                                     r["breakdown"].get(b, {}).get("step"))
                    for b in backends})
        return {**row, "brrr / inductor": _x(_ratio(r["outside"], "brrr", "inductor"))}
    return _rows(results, cells)


def compile_rows(results: dict, backends: list[str]) -> list[dict]:
    def cells(r):
        c = r["compile_s"]
        row = {f"{b} s": f"{c[b]:.1f}" if b in c else "n/a" for b in _compiled(backends)}
        return {**row, "brrr / inductor": _x(_ratio(c, "brrr", "inductor"))}
    return _rows(results, cells)


def memory_rows(results: dict, backends: list[str]) -> list[dict]:
    def cells(r):
        row = {f"{b} peak MB": f"{r['peaks'][b] / 1e6:.1f}" if b in r["peaks"] else "n/a"
               for b in backends}
        row.update({f"{b} max err": f"{r['errors'][b]:.1e}" if b in r["errors"] else "n/a"
                    for b in _compiled(backends)})
        return row
    return _rows(results, cells)


def _geo(results, num, den, keep=lambda model, mode: True) -> float | None:
    values = [v for (model, mode), r in results.items() if keep(model, mode)
              for v in [_ratio(r["times"], num, den)] if v]
    return harness.geomean(values) if values else None


def summary_rows(results: dict, backends: list[str], conv_nets: set[str]) -> list[dict]:
    groups = {"all rows": lambda m, mode: True,
              **{MODE_LABELS[k]: (lambda m, mode, k=k: mode == k) for k in MODE_LABELS},
              "conv nets": lambda m, mode: m in conv_nets}
    rows = []
    for name, keep in groups.items():
        row = {"rows": name}
        for b in _compiled(backends):
            row[f"{b} vs eager"] = _x(_geo(results, "eager", b, keep))
        row["brrr vs inductor"] = _x(_geo(results, "inductor", "brrr", keep))
        rows.append(row)
    return rows


def losing(results: dict) -> list[tuple[str, str]]:
    """The rows where brrr's step is slower than Inductor's."""
    return [key for key, r in results.items()
            if (v := _ratio(r["times"], "inductor", "brrr")) is not None and v < 1.0]


def where_rows(results: dict, keys, backends=("inductor", "brrr")) -> list[dict]:
    rows = []
    for model, mode in keys:
        r = results[(model, mode)]
        for b in backends:
            bd = r["breakdown"].get(b)
            if bd is None:
                continue
            row = {**_label(model, mode), "backend": b, "profiled step ms": _ms(bd["step"])}
            row.update({f"{c} ms": _ms(bd.get(c)) for c in CATEGORIES})
            rows.append(row)
    return rows


# ---- targets ------------------------------------------------------------------------------

def _verdict(misses: list[str], total: int) -> str:
    if total == 0:
        return "NOT MEASURED (inductor or brrr not run)"
    return f"MISSED on {len(misses)} of {total}: " + ", ".join(misses) if misses else "MET"


def _per_row(results: dict, field: str, ok, shown) -> str:
    misses, total = [], 0
    for (model, mode), r in results.items():
        v = _ratio(r[field], *shown)
        if v is None:
            continue
        total += 1
        if not ok(v):
            misses.append(f"{model} {MODE_LABELS.get(mode, mode)} ({v:.2f}x)")
    return _verdict(misses, total)


def targets(results: dict, conv_nets: set[str]) -> list[str]:
    geo = _geo(results, "inductor", "brrr")
    conv = _geo(results, "inductor", "brrr", lambda m, mode: m in conv_nets)

    def at_least(value, goal):
        return "NOT MEASURED" if value is None else \
            f"{'MET' if value >= goal else 'MISSED'} ({value:.2f}x)"

    return [
        "## Targets", "",
        "- every model at least as fast as Inductor (within 3%), inference at both batches "
        "and training: " + _per_row(results, "times", lambda v: v >= INDUCTOR_MARGIN,
                                    ("inductor", "brrr")),
        f"- time outside library calls, brrr <= {OUTSIDE_TARGET}x Inductor's on each row: "
        + _per_row(results, "outside", lambda v: v <= OUTSIDE_TARGET, ("brrr", "inductor")),
        f"- geomean >= {GEOMEAN_TARGET}x Inductor over the suite: {at_least(geo, GEOMEAN_TARGET)}",
        f"- conv nets ({', '.join(sorted(conv_nets))}) >= {CONV_TARGET}x Inductor (geomean): "
        f"{at_least(conv, CONV_TARGET)}",
        f"- cold compile <= {COMPILE_TARGET:g} of Inductor's per model: "
        + _per_row(results, "compile_s", lambda v: v <= COMPILE_TARGET, ("brrr", "inductor")),
    ]


# ---- plots --------------------------------------------------------------------------------

PLOTS = ("models_speedup.png", "models_outside.png")


def plot(results: dict, backends: list[str], directory: Path) -> list[str]:
    """Speedup over eager per row and backend; Inductor's time outside library calls over
    brrr's per row."""
    if not plots.available():
        return [plots.missing_note(list(PLOTS))]
    labels = [f"{m} {MODE_LABELS.get(mode, mode)}" for m, mode in results]
    nan = float("nan")
    series = {b: [_ratio(r["times"], "eager", b) or nan for r in results.values()]
              for b in _compiled(backends)}
    plots.grouped_barh(directory / PLOTS[0], labels, series, speedup=True,
                       title="speedup over eager per model and mode (higher is better)",
                       xlabel="speedup: eager's step time / the backend's (log scale)",
                       lines={"1x": 1.0})
    outside = {"brrr": [_ratio(r.get("outside", {}), "inductor", "brrr") or nan
                        for r in results.values()]}
    plots.grouped_barh(directory / PLOTS[1], labels, outside, speedup=True,
                       title="time outside GEMM, convolution and attention calls: Inductor's "
                             "over brrr's (higher is better)",
                       xlabel="Inductor's time outside library calls / brrr's (log scale)",
                       lines={"1x": 1.0, "target": 1 / OUTSIDE_TARGET})
    return [f"Plots: `{PLOTS[0]}` (speedup over eager), `{PLOTS[1]}` (time outside library "
            f"calls, target line at 1/{OUTSIDE_TARGET} = {1 / OUTSIDE_TARGET:.2f}x)"]
