"""Per-call cost: brrr's time above Dynamo's floor, per graph, per kernel and per view.

    python benchmarks/bench_call_overhead.py [--rounds R] [--iters N]

Tiny tensors (16 floats), so every backend's time is call overhead. Backends, timed
round-robin in one process, median over rounds of the median call:
- floor: Dynamo's own per-call cost (a backend returning precomputed outputs);
- aot_floor: the same through AOTAutograd (its compiled graph returns precomputed
  outputs): the floor under any AOTAutograd backend, brrr's and inductor's;
- eager, aot_eager, inductor, brrr.
Workloads: `x + 1`; chains of 1-16 kernels (fusion="none", one kernel per op); graphs whose
runner builds 1-16 views (static views of a kernel's output that ATen reads). Least-squares
fits of brrr's time above the floor against the number of kernels and of views give the
cost per graph, per kernel and per view. Writes benchmarks/results/call_overhead.md.
"""
from __future__ import annotations

import json
import os
import statistics
import sys

import torch

import harness
import machine_env
import reporting

CHAIN = (1, 2, 4, 8, 16)
VIEWS = (1, 2, 4, 8, 16)
UNSEGMENTED = "brrr:segments=False"     # each kernel its own ctypes call (the runner before)
BACKENDS = ("floor", "aot_floor", "eager", "aot_eager", "inductor", UNSEGMENTED, "brrr")
NONE = {"brrr": {"fusion": "none"}, UNSEGMENTED: {"fusion": "none"}}


def add_one(x):
    return x + 1


def chain_of(n: int):
    def chain(x):
        for _ in range(n):
            x = x * 1.5
        return x
    chain.__name__ = f"chain{n}"
    return chain


def views_of(n: int):
    """One kernel, then `n` views of its output, each read by an ATen call (`mv`, which
    brrr never fuses), so the runner builds each view; the mv results go to one kernel."""
    def views(x, *ws):
        y = x + 1
        return sum(torch.mv(y[i].view(4, 4), w) for i, w in enumerate(ws))
    views.__name__ = f"views{n}"
    return views


def mvs_of(n: int):
    """`views_of` without the views: each mv reads the kernel's output itself. The slope of
    views n minus this one's is the cost of a view."""
    def mvs(x, *ws):
        y = x + 1
        return sum(torch.mv(y, w) for w in ws)
    mvs.__name__ = f"mvs{n}"
    return mvs


def aot_floor(gm, example_inputs):
    """AOTAutograd whose compiled graph returns the outputs computed once at compile time."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def compiler(graph, inputs):
        outs = graph(*inputs)
        return make_boxed_func(lambda *args: outs)
    return aot_autograd(fw_compiler=compiler)(gm, example_inputs)


def workloads():
    x = torch.randn(16)
    cases = [("x + 1", add_one, (x,), {}, "-", "-")]
    cases += [(f"chain {n}", chain_of(n), (x,), NONE, n, 0) for n in CHAIN]
    xv = torch.randn(16, 16)
    cases += [(f"views {n}", views_of(n), (xv, *torch.randn(n, 4)), {}, 2, n) for n in VIEWS]
    cases += [(f"mvs {n}", mvs_of(n), (xv, *torch.randn(n, 16)), {}, 2, 0) for n in VIEWS]
    return cases


def measure(fn, args, options, rounds: int, iters: int) -> dict[str, float]:
    harness.fresh_dynamo()
    names = [b for b in BACKENDS if b not in ("floor", "aot_floor")]
    with torch.no_grad():
        fns, status = harness.compile_backends(fn, args, names, options=options)
        for name, backend in (("floor", harness.dynamo_floor), ("aot_floor", aot_floor)):
            fns[name] = torch.compile(fn, backend=backend, dynamic=False)
            fns[name](*args)
        bad = {n: s for n, s in status.items() if not s.startswith("ok")}
        if bad:
            print(f"{fn.__name__}: {bad}", file=sys.stderr)
        times = harness.interleaved({b: fns[b] for b in BACKENDS if b in fns}, args, rounds,
                                    iters, per_round=statistics.median)
    return {b: statistics.median(t) * 1e6 for b, t in times.items()}


def fit(rows, key: str, backend: str = "brrr") -> tuple[float, float, float]:
    """(intercept, slope, R^2) of `backend` - floor (us) against the column `key`."""
    pts = [(r[key], r[backend] - r["floor"]) for r in rows if isinstance(r[key], int)]
    (slope, intercept), r2 = harness.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)
    return intercept, slope, r2


def _fit_line(f, unit: str) -> str:
    return f"{f[0]:.1f} us per graph + {f[1]:.2f} us per {unit} (R^2 {f[2]:.3f})"


def render(rows, args) -> str:
    cols = ["workload", "kernels", "views"] + [f"{b} us" for b in BACKENDS] + \
        ["brrr - floor us", "before - floor us", "brrr - aot_floor us", "brrr / before",
         "brrr / eager"]
    table = []
    for r in rows:
        row = {"workload": r["workload"], "kernels": r["kernels"], "views": r["views"]}
        row.update({f"{b} us": f"{r[b]:.1f}" for b in BACKENDS if b in r})
        row["brrr - floor us"] = f"{r['brrr'] - r['floor']:.1f}"
        row["before - floor us"] = f"{r[UNSEGMENTED] - r['floor']:.1f}"
        row["brrr - aot_floor us"] = f"{r['brrr'] - r['aot_floor']:.1f}"
        row["brrr / before"] = f"{r['brrr'] / r[UNSEGMENTED]:.2f}"
        row["brrr / eager"] = f"{r['brrr'] / r['eager']:.2f}"
        table.append(row)
    chains = [r for r in rows if r["workload"].startswith("chain")]
    views = [r for r in rows if r["workload"].startswith("views")]
    mvs = [dict(r, views=int(r["workload"].split()[1])) for r in rows
           if r["workload"].startswith("mvs")]
    notes = ["## Fits of time above the floor (least squares)\n"]
    for b, label in (("brrr", "brrr"), (UNSEGMENTED, "before (`segments=False`)")):
        if len(chains) > 1:
            notes.append(f"- {label}, chains (fusion=none): {_fit_line(fit(chains, 'kernels', b), 'kernel')}")
        if len(views) > 1 and len(mvs) > 1:
            per_view = fit(views, "views", b)[1] - fit(mvs, "views", b)[1]
            notes.append(f"- {label}, views: {per_view:.2f} us per view (slope of views n "
                         "minus slope of mvs n)")
    if len(views) > 1 and len(mvs) > 1:
        notes.append(f"- eager, views: {fit_eager(views) - fit_eager(mvs):.2f} us per view "
                     "(its select and view calls)")
    notes += ["", "Each cell: median over rounds of the median of the round's calls, in us, "
              "tensors of 16 floats, torch.no_grad(), one torch thread. before = brrr with "
              "`segments=False` (each kernel its own ctypes call and tensors, the runner as it "
              "was). brrr - aot_floor is what brrr's runner adds to AOTAutograd's own wrapper."]
    facts = {"rounds x calls per round": f"{args.rounds} x {args.iters}",
             "load average at end (1, 5, 15 min)": ", ".join(f"{x:.1f}" for x in os.getloadavg())}
    return reporting.report("Per-call cost above Dynamo's floor", facts,
                          reporting.markdown_table(table, cols), ["\n".join(notes)])


def fit_eager(rows) -> float:
    pts = [(r["views"], r["eager"]) for r in rows]  # mvs rows: n carried in "views"
    (slope, _), _ = harness.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)
    return slope


def main(argv=None):
    machine_env.ensure_malloc_env()
    p = reporting.base_parser(__doc__, "call_overhead.md")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--iters", type=int, default=200, help="calls per round")
    p.add_argument("--only", default=None, help="comma-separated workload prefixes")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for name, fn, fargs, options, kernels, views in workloads():
        if args.only and not any(name.startswith(o) for o in args.only.split(",")):
            continue
        t = measure(fn, fargs, options, args.rounds, args.iters)
        rows.append({"workload": name, "kernels": kernels, "views": views, **t})
        print(name, {k: round(v, 1) for k, v in t.items()}, file=sys.stderr)
    text = render(rows, args)
    out_dir = reporting.results_dir(args.results_dir)
    reporting.publish(args.out, text, out_dir)
    (out_dir / args.out.replace(".md", ".json")).write_text(
        json.dumps({"rows": rows, "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
