"""The kernel suite's report: time and bandwidth tables, geometric means, the suite's
targets (with Dynamo's floor), the notes on how to read it, and the plots. Measuring is
bench_kernels.py's; this module only turns its results into markdown and PNGs.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import harness
import reporting
import machine_env
import plots
from workloads import DESCRIPTIONS, KERNEL_CASES

TWIN = "brrr no mask"   # brrr on a masked case's unmasked twin (workloads.KernelCase.twin)


def _stream(result: dict, run_median: float) -> float:
    """The stream bandwidth a case is measured against: the median of the samples taken
    just before and just after it and the run's median (the machine's bandwidth drifts
    over a run; one odd sample does not count), else the run's median."""
    return result.get("stream") or run_median


def _compilers(backends: list[str]) -> list[str]:
    """The backends that compute (all but the floor)."""
    return [b for b in backends if b != harness.FLOOR]


def _ratio(times: dict, num: str, den: str) -> float | None:
    return times[num] / times[den] if num in times and den in times else None


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "n/a"


# ---- the report -----------------------------------------------------------------------


def time_rows(results: dict, backends: list[str], llc: int) -> list[dict]:
    rows = []
    for name, r in results.items():
        times = r["times"]
        row = {"case": name, "MB moved": f"{r['nbytes'] / 1e6:.2f}",
               "> LLC": "yes" if r["nbytes"] > llc else "no"}
        for b in backends:
            row[f"{b} ms"] = (f"{times[b] * 1e3:.3f}" if b in times
                              else r["status"].get(b, "not run"))
        row["brrr vs eager"] = _x(_ratio(times, "eager", "brrr"))
        row["brrr vs inductor"] = _x(_ratio(times, "inductor", "brrr"))
        row["brrr spread"] = f"±{r['spread']['brrr'] * 50:.0f}%" if "brrr" in times else "n/a"
        rows.append(row)
    return rows


def bandwidth_rows(results: dict, backends: list[str], bandwidth: float) -> list[dict]:
    rows = []
    for name, r in results.items():
        row = {"case": name, "MB moved": f"{r['nbytes'] / 1e6:.2f}"}
        for b in _compilers(backends):
            if b in r["times"]:
                gbs = r["nbytes"] / r["times"][b]
                row[f"{b} GB/s (% stream)"] = f"{gbs / 1e9:.1f} ({gbs / _stream(r, bandwidth):.0%})"
            else:
                row[f"{b} GB/s (% stream)"] = "n/a"
        rows.append(row)
    return rows


def summary_rows(results: dict, backends: list[str]) -> list[dict]:
    """Per compiled backend: geometric-mean speedup over eager and over inductor."""
    rows = []
    for b in backends:
        if b in ("eager", harness.FLOOR):
            continue
        vs_eager = [_ratio(r["times"], "eager", b) for r in results.values()]
        vs_ind = [_ratio(r["times"], "inductor", b) for r in results.values()]
        vs_eager, vs_ind = [v for v in vs_eager if v], [v for v in vs_ind if v]
        rows.append({"backend": b, "cases timed": sum(b in r["times"] for r in results.values()),
                     "geomean vs eager": _x(harness.geomean(vs_eager)) if vs_eager else "n/a",
                     "geomean vs inductor": _x(harness.geomean(vs_ind)) if vs_ind else "n/a"})
    return rows


def mask_rows(results: dict) -> list[dict]:
    """The cases timed beside an unmasked twin: what the mask costs brrr."""
    rows = []
    for name, r in results.items():
        t = r["times"]
        if TWIN not in r.get("status", {}):
            continue
        rows.append({"case": name, **{f"{b} ms": f"{t[b] * 1e3:.3f}" if b in t else "n/a"
                                      for b in ("eager", "inductor", "brrr", TWIN)},
                     "brrr vs eager": _x(_ratio(t, "eager", "brrr")),
                     "brrr vs inductor": _x(_ratio(t, "inductor", "brrr")),
                     "masked / no mask": _x(_ratio(t, "brrr", TWIN))})
    return rows


def mask_targets(results: dict) -> list[str]:
    """The mask targets: within 15% of the twin; the causal softmax >= 1.5x eager."""
    twins = {n: _ratio(r["times"], "brrr", TWIN) for n, r in results.items()
             if TWIN in r.get("status", {})}
    if not twins:
        return []
    slow = [f"{n} ({v:.2f}x)" if v else f"{n} (not timed)" for n, v in twins.items()
            if not v or v > 1.15]
    softmax = {n: _ratio(results[n]["times"], "eager", "brrr") for n in twins
               if KERNEL_CASES[n].workload == "masked_softmax"}
    slow_sm = [f"{n} ({v:.2f}x)" if v else f"{n} (not timed)" for n, v in softmax.items()
               if not v or v < 1.5]
    return ["", "- masked kernels within 15% of their unmasked twin: "
            + _verdict(slow, len(twins)),
            f"- masked softmax >= 1.5x eager: {_verdict(slow_sm, len(softmax))}"]


def _verdict(misses: list[str], total: int) -> str:
    if total == 0:
        return "NOT MEASURED"
    return "MET" if not misses else f"MISSED on {len(misses)} of {total}: " + ", ".join(misses)


def targets(results: dict, bandwidth: float, llc: int) -> list[str]:
    """The kernel-suite targets, each MET or MISSED with the cases that miss it."""
    timed = {n: r for n, r in results.items() if "brrr" in r["times"]}
    failed = [n for n, r in results.items() if "brrr" not in r["times"]]
    vs_eager = {n: _ratio(r["times"], "eager", "brrr") for n, r in timed.items()
                if "eager" in r["times"]}   # an A/B of brrr options runs without eager
    vs_ind = {n: _ratio(r["times"], "inductor", "brrr") for n, r in timed.items()
              if "inductor" in r["times"]}
    slow_eager = [_eager_miss(n, timed[n]["times"], v) for n, v in vs_eager.items() if v < 1.0]
    slow_eager += failed
    floored = {n: r["times"] for n, r in timed.items() if harness.FLOOR in r["times"]}
    below_floor = [n for n, t in floored.items() if t["eager"] < t[harness.FLOOR]]
    own_ok = [n for n, t in floored.items() if vs_eager[n] < 1.0 and n not in below_floor
              and t["brrr"] - t[harness.FLOOR] <= 1.05 * t["eager"]]
    slow_ind = [f"{n} ({v:.2f}x)" for n, v in vs_ind.items() if v < 1.0]
    slow_ind += failed if vs_ind else []
    big = {n: r["nbytes"] / r["times"]["brrr"] / _stream(r, bandwidth) for n, r in timed.items()
           if r["nbytes"] > llc}
    failed_big = [n for n in failed if results[n]["nbytes"] > llc]
    low_bw = [f"{n} ({f:.0%})" for n, f in big.items() if f < 0.75] + failed_big
    gm = harness.geomean(vs_ind.values()) if vs_ind else float("nan")
    gm_verdict = "NOT MEASURED" if not vs_ind else ("MET" if gm >= 1.3 else "MISSED")
    return [
        "## Targets",
        "",
        f"- brrr faster than eager on every case: {_verdict(slow_eager, len(results))}",
        *([f"  - eager's whole call is faster than Dynamo's own per-call cost (the `floor` "
           f"column) on {len(below_floor)} case(s): {', '.join(below_floor)}. No "
           "torch.compile backend can beat eager there."] if below_floor else []),
        *([f"  - on {len(own_ok)} other miss(es) brrr less the floor is at most 5% over "
           f"eager's time or below it: {', '.join(own_ok)}; there the floor decides."]
          if own_ok else []),
        "- brrr at least as fast as inductor on every case: "
        + _verdict(slow_ind, len(results) if vs_ind else 0),
        f"- geometric-mean speedup over inductor >= 1.3x: {gm_verdict}"
        + (f" ({gm:.2f}x over {len(vs_ind)} cases)" if vs_ind else ""),
        f"- cases larger than the LLC ({llc / 2**20:.0f} MiB) at >= 75% of stream bandwidth: "
        f"{_verdict(low_bw, len(big) + len(failed_big))}",
        *mask_targets(results),
        "",
        "A ratio within the `brrr spread` of 1.00x is noise. When the stream-bandwidth "
        "samples above vary widely the machine was loaded, and cases under ~1 ms are "
        "dominated by preemption (an OpenMP region waits for a descheduled thread). chain10 "
        "is compute-bound (transcendentals) on 2 cores: no backend reaches the bandwidth "
        "target on it. The bfloat16 cases move half the bytes of their float32 twins for the "
        "same arithmetic (exp, erf, and the conversions to and from bfloat16), so on 2 cores "
        "they are compute-bound too. rms_norm's `h.type_as(x)` is a cast the program wrote: "
        "brrr rounds there, as eager does; inductor drops that rounding.",
    ]


def _eager_miss(name: str, times: dict, ratio: float) -> str:
    """A case where eager beat brrr, with brrr's time less the floor when it was timed."""
    if harness.FLOOR not in times:
        return f"{name} ({ratio:.2f}x)"
    own = times["brrr"] - times[harness.FLOOR]
    return (f"{name} ({ratio:.2f}x; eager {times['eager'] * 1e3:.3f} ms, floor "
            f"{times[harness.FLOOR] * 1e3:.3f} ms, brrr less the floor {own * 1e3:.3f} ms)")


def render(args, results: dict, backends: list[str], default_policy: str,
           bandwidths: list[float], plot_notes: list[str], round_s: float) -> str:
    bandwidth, llc = statistics.median(bandwidths), machine_env.llc_bytes()
    samples = ", ".join(f"{b / 1e9:.1f}" for b in bandwidths)
    facts = {
        "stream bandwidth (dst.copy_(src), read + write)": f"{bandwidth / 1e9:.1f} GB/s, "
        f"median of samples before each case and at the end: {samples} GB/s (each case's "
        "% of stream uses the median of the samples on either side of it and this median)",
        "timing": f"{args.rounds} interleaved rounds (heavy cases: a third as many, at "
        f"least 2), calls per round chosen so eager's round takes ~{round_s * 1e3:.0f} "
        "ms; median over rounds of each round's median call",
        "backends": f"{', '.join(backends)}; `floor` is Dynamo's own per-call cost (a "
        "backend that does no work, see below); `brrr` is brrr's default fusion policy "
        f"({default_policy}); `brrr:<policy>` sets options={{'fusion': '<policy>'}}, "
        "`brrr:<option>=<value>` sets that option",
    }
    tables = [
        "\n".join(targets(results, bandwidth, llc)),
        "## Geometric means\n\n" + reporting.markdown_table(
            summary_rows(results, backends),
            ["backend", "cases timed", "geomean vs eager", "geomean vs inductor"]),
        "## Time per call\n\n" + reporting.markdown_table(
            time_rows(results, backends, llc),
            ["case", "MB moved", "> LLC"] + [f"{b} ms" for b in backends]
            + ["brrr vs eager", "brrr vs inductor", "brrr spread"]),
        *(["## Masks beside their unmasked twins\n\n" + reporting.markdown_table(
            mask_rows(results), ["case"] + [f"{b} ms" for b in ("eager", "inductor", "brrr", TWIN)]
            + ["brrr vs eager", "brrr vs inductor", "masked / no mask"])]
          if mask_rows(results) else []),
        "## Achieved bandwidth\n\n" + reporting.markdown_table(
            bandwidth_rows(results, backends, bandwidth),
            ["case", "MB moved"] + [f"{b} GB/s (% stream)" for b in _compilers(backends)]),
    ]
    status = ["## Backend status (first call checked against eager)", ""]
    status += [f"- {name}: " + "; ".join(f"{b} {s}" for b, s in r["status"].items() if b != "eager")
               for name, r in results.items()]
    workloads = sorted({KERNEL_CASES[n].workload for n in results})
    notes = [
        "\n".join(status),
        "## Workloads\n\n" + "\n".join(f"- {w}: {DESCRIPTIONS[w]}" for w in workloads),
        NOTES,
        "\n".join(plot_notes),
    ]
    table = "\n\n".join(tables)
    return reporting.report("Kernel suite", facts, table, notes)


NOTES = """## How to read this

- `MB moved`: bytes that must move: every distinct input read once plus every output
  written once (a broadcast operand at its own size). The traffic of a perfectly fused
  kernel, not what any backend actually moves. `> LLC`: whether that exceeds the L3.
- `<backend> ms`: median over rounds of the median call within a round (a preempted call
  on a loaded machine does not count; a call's own variation does).
- `floor ms`: torch.compile with a backend that does no work (it returns the outputs of
  the first call): what Dynamo itself costs per call, guards and frame handling. Every
  compiled backend pays it; eager does not. In cases larger than the LLC each floor call
  is timed right after an untimed eager call of the case, in the caches that sweep leaves
  behind: it includes reloading Dynamo's code and data from memory, as every compiled
  call of such a case does.
- `brrr vs eager`, `brrr vs inductor`: their time over brrr's; above 1x brrr is faster.
- `brrr spread`: half the interquartile range of brrr's per-round times, as a fraction of
  their median: the run's noise on this case.
- `GB/s (% stream)`: `MB moved` / time, and that over the stream bandwidth around the
  case: the median of the samples taken just before and just after it and the run's
  median (the machine's bandwidth drifts during a run; the samples are listed above).
  A kernel that reads more than it writes can exceed 100% (the copy's writes pay for
  write-allocate traffic the count leaves out).
- bfloat16 cases run under brrr's default `low_precision="float32"`: values stay float32
  inside a fused kernel and round at the casts the program wrote and at stores (one
  rounding per fused chain, as inductor, which also drops written casts; eager rounds
  after every op). `brrr:low_precision=eager`, when timed, rounds after every op as eager
  does and matches eager's bits.
- Tolerances: float32 rtol = atol = 1e-5; reductions (norms, softmax, sums,
  cross-entropy) rtol 1e-4 (atol 1e-5, softmax 1e-7); bfloat16 rtol 1.6e-2, atol 1e-2."""


def plot(results: dict, backends: list[str], bandwidth: float, directory: Path,
         llc: int | None = None) -> list[str]:
    """Write the PNGs; return the lines that name them (or say why they are missing).
    `llc`: the last-level cache of the machine that measured (default this one's)."""
    llc = machine_env.llc_bytes() if llc is None else llc
    names = ["kernels_speedup.png", "kernels_bandwidth.png"]
    if not plots.available():
        return [plots.missing_note(names)]
    labels = list(results)
    speedups = {f"brrr vs {b}": [(_ratio(r["times"], b, "brrr") or float("nan"))
                                 for r in results.values()] for b in ("eager", "inductor")}
    plots.grouped_barh(directory / names[0], labels, speedups, speedup=True,
                       title="brrr speedup per case (higher is better)",
                       xlabel="speedup: the other's time / brrr's (log scale)",
                       lines={"1x": 1.0})
    big = {n: r for n, r in results.items() if r["nbytes"] > llc}
    fractions = {b: [r["nbytes"] / r["times"][b] / _stream(r, bandwidth) if b in r["times"]
                     else float("nan")
                     for r in big.values()] for b in _compilers(backends) if ":" not in b}
    plots.grouped_barh(directory / names[1], list(big), fractions,
                       title=f"cases larger than the LLC: achieved / stream bandwidth "
                             f"around each case (run median {bandwidth / 1e9:.1f} GB/s)",
                       xlabel="achieved / stream bandwidth", percent=True,
                       lines={"75%": 0.75, "stream": 1.0})
    return [f"Plots: `{n}`" for n in names]
