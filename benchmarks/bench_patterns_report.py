"""The markdown of the generated-pattern sweep (bench_patterns.py): ratios per size class,
the cases where brrr is slower than eager, and bandwidth of the large cases."""
from __future__ import annotations

import harness
import reporting

SLOWER = 1.10       # brrr more than 10% slower than eager is a case to fix or hand to ATen
LARGE = ("4llc", "16llc")


def ratio(row: dict, num: str, den: str) -> float | None:
    """times[den] / times[num]: how many times faster `num` is than `den`."""
    t = row["times"]
    return t[den] / t[num] if num in t and den in t and t[num] > 0 else None


def slower_than_eager(row: dict) -> bool:
    """brrr's time above Dynamo's per-call floor > 1.1x eager's whole time, with eager above
    the floor (no backend beats eager below it). The floor is what any compiled call pays
    in the cache state the case leaves (harness.Primed), so the difference is brrr's own
    work: its runtime and its kernels."""
    t = row["times"]
    if "brrr" not in t or "eager" not in t:
        return False
    floor = t.get(harness.FLOOR, 0.0)
    return t["eager"] > floor and t["brrr"] - floor > SLOWER * t["eager"]


def slower_wall_time(row: dict) -> bool:
    """brrr's whole time > 1.1x eager's, with eager above the floor: what a user timing both
    sees, Dynamo's own cost included."""
    t = row["times"]
    if "brrr" not in t or "eager" not in t:
        return False
    return t["eager"] > t.get(harness.FLOOR, 0.0) and t["brrr"] > SLOWER * t["eager"]


def _geo(rows, num, den) -> str:
    values = [r for r in (ratio(row, num, den) for row in rows) if r]
    return f"{harness.geomean(values):.2f}x ({len(values)})" if values else "n/a"


def summary_table(rows: list[dict], backends: list[str]) -> str:
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    table = []
    for size in sizes + ["all"]:
        mine = [r for r in rows if size in ("all", r["size"])]
        line = {"size": size, "cases": len(mine),
                "brrr vs eager": _geo(mine, "brrr", "eager"),
                "slower than eager": sum(map(slower_than_eager, mine)),
                "wall time > 1.1x eager": sum(map(slower_wall_time, mine))}
        if "inductor" in backends:
            line["brrr vs inductor"] = _geo(mine, "brrr", "inductor")
            line["inductor vs eager"] = _geo(mine, "inductor", "eager")
        table.append(line)
    columns = ["size", "cases", "brrr vs eager", "brrr vs inductor", "inductor vs eager",
               "slower than eager", "wall time > 1.1x eager"]
    return reporting.markdown_table(table, [c for c in columns if c in table[0]])


def times_line(row: dict) -> str:
    """'brrr 0.80x eager; eager 1.0 us, ...': a slow case's speedup and every time."""
    t = row["times"]
    shown = ", ".join(f"{b} {v * 1e6:.1f} us" for b, v in t.items())
    return f"brrr {t['eager'] / t['brrr']:.2f}x eager; {shown}"


def _case_line(row: dict) -> str:
    return (f"- seed {row['seed']} {row['size']} ({row['dtype']}, {row['ops']} ops, "
            f"{row['nbytes'] / 1e6:.3g} MB): {times_line(row)} "
            f"(`python benchmarks/bench_patterns.py --only {row['seed']}:{row['size']}`)")


def bandwidth_line(rows: list[dict], stream: float) -> str:
    large = [r for r in rows if r["size"] in LARGE and "brrr" in r["times"]]
    if not large:
        return "No case at 4x or 16x the last-level cache."

    def share(cases):
        return harness.geomean([r["nbytes"] / r["times"]["brrr"] / stream for r in cases])
    memory = [r for r in large if memory_bound(r)]
    known = [r for r in large if r.get("predicted")]
    line = (f"Cases at 4x and 16x the last-level cache: brrr moves the bytes the program must "
            f"move at {share(large):.0%} of the streaming bandwidth ({stream / 1e9:.1f} GB/s) "
            f"in geomean over {len(large)} cases")
    if not known:
        return line + "."
    return line + (f"; over the {len(memory)} of {len(known)} the cost model calls "
                   f"memory-bound (its kernels' memory terms summed above their compute "
                   f"terms), at {share(memory):.0%}." if memory else
                   f"; none of {len(known)} is memory-bound by the cost model.")


def memory_bound(row: dict) -> bool:
    """Whether brrr's cost model says a case's kernels spend longer moving bytes than
    computing (bench_patterns.predicted_terms)."""
    terms = row.get("predicted")
    return bool(terms) and terms["memory_s"] >= terms["compute_s"]


def render(rows: list[dict], backends: list[str], stream: float, facts: dict) -> str:
    failed = [f"- seed {r['seed']} {r['size']} {b}: {s}" for r in rows
              for b, s in r["status"].items() if not s.startswith("ok")]
    slow = sorted((r for r in rows if slower_than_eager(r)),
                  key=lambda r: r["times"]["eager"] / r["times"]["brrr"])
    notes = ["## By size class (geomean of speedups, cases in brackets)",
             summary_table(rows, backends), bandwidth_line(rows, stream),
             f"## Slower than eager ({len(slow)}; brrr's time above Dynamo's floor > "
             f"{SLOWER:.2f}x eager's)",
             "\n".join(map(_case_line, slow)) or "None.",
             "## Backends that did not run or disagreed with eager", "\n".join(failed) or "None."]
    return reporting.report("Generated patterns: brrr against eager and Inductor", facts,
                          "", notes)
