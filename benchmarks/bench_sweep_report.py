"""The markdown of the never-slower-than-eager sweep (bench_sweep.py)."""
from __future__ import annotations

import harness
import reporting
from benchmarks.bench_patterns_report import SLOWER, slower_than_eager, slower_wall_time, times_line


def _geo(rows: list[dict]) -> str:
    values = [r["times"]["eager"] / r["times"]["brrr"] for r in rows]
    return f"{harness.geomean(values):.2f}x" if values else "n/a"


def summary(rows: list[dict]) -> str:
    """Per dtype and kind (op / pattern): cases timed, brrr's geomean speedup over eager,
    cases slower than eager, and the cases that were not timed and why."""
    table = []
    keys = sorted({(r["dtype"], _kind(r)) for r in rows})
    for dtype, kind in keys:
        mine = [r for r in rows if (r["dtype"], _kind(r)) == (dtype, kind)]
        timed = [r for r in mine if r["status"] == "ok"]
        table.append({"dtype": dtype, "kind": kind, "timed": len(timed),
                      "brrr vs eager (geomean)": _geo(timed),
                      f"above the floor > {SLOWER:.2f}x eager": sum(map(slower_than_eager, timed)),
                      f"wall time > {SLOWER:.2f}x eager": sum(map(slower_wall_time, timed)),
                      "no kernel": sum(r["status"] == "no kernel" for r in mine),
                      "not measured (process died)": sum(map(_died, mine)),
                      "brrr failed or disagreed": sum(r["status"] not in ("ok", "no kernel")
                                                  and not _died(r) for r in mine)})
    columns = list(table[0]) if table else ["dtype"]
    return reporting.markdown_table(table, columns)


def _died(row: dict) -> bool:
    return row["status"].startswith("no result")   # bench_sweep.RowLog


def _kind(row: dict) -> str:
    return "pattern" if row["case"].startswith("pattern ") else "op"


def _repro(row: dict) -> str:
    if _kind(row) == "pattern":
        return f"`python benchmarks/bench_patterns.py --only {row['case'].split()[1]}:l2`"
    return f"`python benchmarks/bench_sweep.py --ops {row['case']} --dtypes {row['dtype']}`"


def _slow_line(row: dict) -> str:
    return (f"- {row['case']} {row['dtype']} (sample {row['sample']}: {row['desc']}; "
            f"{row['kernels']} kernels, {row['nbytes'] / 1e6:.3g} MB): {times_line(row)} "
            f"({_repro(row)})")


def render(rows: list[dict], facts: dict) -> str:
    timed = [r for r in rows if r["status"] == "ok"]
    slow = sorted((r for r in timed if slower_than_eager(r)),
                  key=lambda r: r["times"]["eager"] / r["times"]["brrr"])
    failed = [f"- {r['case']} {r['dtype']} (sample {r['sample']}): {r['status']}"
              for r in rows if r["status"] not in ("ok", "no kernel") and not _died(r)]
    died = [f"- {r['case']} {r['dtype']}" for r in rows if _died(r)]
    drift = [f"- {r['case']} {r['dtype']} (sample {r['sample']})" for r in timed if r.get("drift")]
    notes = [f"## Slower than eager ({len(slow)}; brrr's time above Dynamo's floor > "
             f"{SLOWER:.2f}x eager's)", "\n".join(map(_slow_line, slow)) or "None.",
             "## brrr failed or disagreed with eager", "\n".join(failed) or "None.",
             "## Drift: differs from eager, matches it rounding as eager does (timed)",
             "\n".join(drift) or "None."]
    if died:
        notes += ["## Not measured: the process died in these cases (out of memory?)",
                  "\n".join(died)]
    return reporting.report("Never slower than eager: op_db ops and generated patterns",
                          facts, summary(rows), notes)
