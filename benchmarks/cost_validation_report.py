"""The cost-model validation's report (cost_validation.py): rank correlation overall, per
source and per decade of measured time; the spread of max(pred/meas, meas/pred); the worst
kernels with what the model got wrong about each."""
from __future__ import annotations

import math
import statistics

import reporting
from bench_cost_model import spearman


def ratio(r: dict) -> float:
    return max(r["pred"] / r["meas"], r["meas"] / r["pred"])


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fit_line(label: str, rows: list[dict]) -> dict:
    ratios = [ratio(r) for r in rows]
    rho = spearman([r["pred"] for r in rows], [r["meas"] for r in rows]) \
        if len(rows) >= 3 else float("nan")
    return {"kernels": label, "n": len(rows), "Spearman": f"{rho:.3f}",
            "median ratio": f"{statistics.median(ratios):.2f}",
            "p90 ratio": f"{_quantile(ratios, 0.9):.2f}",
            "pred > meas": f"{sum(r['pred'] > r['meas'] for r in rows) / len(rows):.0%}"}


def decade(seconds: float) -> str:
    lo = 10 ** math.floor(math.log10(seconds * 1e6))
    return f"{lo:g}-{lo * 10:g} us"


def fits(rows: list[dict]) -> list[dict]:
    groups = {"all": rows}
    for key in ("source",):
        for value in sorted({r[key] for r in rows}):
            groups[value] = [r for r in rows if r[key] == value]
    by_decade = {}
    for r in sorted(rows, key=lambda r: r["meas"]):
        by_decade.setdefault(decade(r["meas"]), []).append(r)
    groups.update({f"measured {d}": rs for d, rs in by_decade.items()})
    return [fit_line(label, rs) for label, rs in groups.items() if rs]


def targets(fit_rows: list[dict], calibrated: bool) -> list[str]:
    """The cost-model targets, met or not: Spearman >= 0.9 overall and >= 0.7 in each
    decade of 20 or more kernels; median ratio <= 1.3 and p90 <= 2 calibrated, median
    <= 1.6 on the generic device."""
    every, decades = fit_rows[0], [f for f in fit_rows if f["kernels"].startswith("measured")]
    crowded = [f for f in decades if f["n"] >= 20]
    checks = [("Spearman >= 0.9 overall", float(every["Spearman"]) >= 0.9),
              ("Spearman >= 0.7 in each decade of 20+ kernels "
               f"({', '.join(f['kernels'][9:] for f in crowded) or 'none has'})",
               all(float(f["Spearman"]) >= 0.7 for f in crowded))]
    if calibrated:
        checks += [("median ratio <= 1.3", float(every["median ratio"]) <= 1.3),
                   ("p90 ratio <= 2", float(every["p90 ratio"]) <= 2)]
    else:
        checks.append(("median ratio <= 1.6 (generic device)", float(every["median ratio"]) <= 1.6))
    return [f"- {what}: {'met' if ok else 'NOT met'}" for what, ok in checks]


def why(r: dict) -> str:
    """What the model got wrong about one kernel, from its terms."""
    over = r["pred"] > r["meas"]
    parts = [f"{'over' if over else 'under'}-predicted {ratio(r):.1f}x, {r['bound']}-bound"]
    net = r.get("replay", r["meas"])
    if r["bound"] == "overhead":
        parts.append(f"the model charges {r['pred'] * 1e6:.2f} us of fixed cost (fork, "
                     "dispatch)")
    elif r["bound"] == "memory" and r["memory_s"]:
        parts.append(f"{r['bytes'] / 1e6:.3g} MB at {r['bytes'] / net / 1e9:.1f} GB/s measured "
                     f"against {r['bytes'] / r['memory_s'] / 1e9:.1f} GB/s assumed")
    elif r["bound"] == "compute" and r["compute_s"]:
        parts.append(f"{r['flops'] / net / 1e9:.1f} GFLOP-eq/s measured against "
                     f"{r['flops'] / r['compute_s'] / 1e9:.1f} assumed")
    return "; ".join(parts)


def worst_table(rows: list[dict], n: int = 10) -> str:
    worst = sorted(rows, key=ratio, reverse=True)[:n]
    table = [{"workload": r["workload"], "kernel": r["kernel"], "ops": r["ops"][:60],
              "schedule": r["schedule"][:60], "predicted us": f"{r['pred'] * 1e6:.1f}",
              "measured us": f"{r['meas'] * 1e6:.1f}", "timed": r.get("timed", ""),
              "why": why(r)} for r in worst]
    return reporting.markdown_table(table, list(table[0]))


def render(spec, facts: dict, rows: list[dict], failed: list[str]) -> str:
    facts = {**facts,
             "device spec": f"{spec.name}: {spec.dram_bandwidth / 1e9:.1f} GB/s streaming, "
                            f"{spec.cache_bandwidth / 1e9:.1f} GB/s in cache, "
                            f"{spec.flops['float32'] / 1e9:.1f} GFLOP/s float32, "
                            f"{spec.kernel_overhead_s * 1e6:.2f} us per kernel, "
                            f"{spec.fork_overhead_s * 1e6:.2f} us per fork"}
    if not rows:
        return reporting.report("Cost model validation", facts, "No kernel was measured.", failed)
    fit_rows = fits(rows)
    calibrated = spec.source.startswith("calibrated")
    parts = ["## Targets", "\n".join(targets(fit_rows, calibrated)),
             "## Fit", reporting.markdown_table(fit_rows, list(fit_rows[0])),
             "## The ten worst predictions", worst_table(rows), NOTES]
    if failed:
        parts += ["## Workloads that did not run, kernels with no estimate",
                  "\n".join(f"- {f}" for f in failed)]
    return reporting.report(f"Cost model validation over {len(rows)} kernels", facts,
                          "\n\n".join(parts), [])


NOTES = """## Reading it

- ratio: max(pred/meas, meas/pred) per kernel; `pred > meas`: the share over-predicted.
- measured: the kernel alone, replayed on copies of its arguments from one run
  (kernel_replay.py) as the runner calls it: repeated in one native call of the segment
  trampoline where it runs in a segment (`timed: native`), or in a Python loop over its
  ctypes call, a microsecond or more each, where the runner calls it from Python (alone
  between library calls, writing into an input, an error flag, symbolic sizes: `timed:
  python`); the model charges the device's Python call there.
  A `native` row's measured time is the replay's plus the device's per-kernel dispatch in
  a segment (which a replay does not pay; calibration measures it apart, on segmented
  graphs of one-element kernels): the kernel's cost inside a graph. The JSON keeps the
  replay's own time as `replay`.
- Decades are of measured time. Spearman within a decade tests the ranking where bytes
  alone no longer order the kernels."""
