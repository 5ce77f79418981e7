"""Model suite: eager, aot_eager, Inductor and brrr side by side on models users know
(models.py, hf_models.py), for inference at batch 1 and at a throughput batch, and for a
full training step.

    python benchmarks/bench_models.py [--quick] [--tiny] [--rounds R] [--models gpt2,bert,...]
                                      [--modes inference1,inference,training] [--backends ...]
    brrr bench models [same options]

Per model and mode, in one process: every backend gets its own copy of the model with
identical weights and is compiled cold (fresh, empty Inductor and brrr cache dirs for the
whole run, unless --keep-caches; the process is warmed up once per backend on a tiny
function first); its first call is timed (compile time = first call less one step) and
checked against eager (outputs; training: the loss and every parameter's gradient).
Backends are then timed round-robin, one call or step per round, median over rounds;
a few profiled steps per backend attribute time to GEMM, convolution and attention
library calls, the optimizer and the rest (library_time.py), giving the time outside
library calls; peak memory comes from
torch.profiler's allocator events (harness.peak_memory). Writes
benchmarks/results/models.md, models.json, models_speedup.png and models_outside.png.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness
import reporting
import machine_env
import library_time
import model_check
import models_report as report
from hf_models import INSTALL_HINT
from model_steps import MODES, batch_for, build_step, warm_up
from models import MODELS

QUICK_MODELS = "mlp"
BACKENDS = "eager,aot_eager,inductor,brrr"
CONV_NETS = {"resnet", "mobilenet", "convnext"}


def parse_args(argv=None):
    p = reporting.base_parser(__doc__, "models.md")
    p.add_argument("--quick", action="store_true",
                   help=f"models {QUICK_MODELS}, eager and brrr only, 2 rounds (a smoke test)")
    p.add_argument("--tiny", action="store_true",
                   help="every model at tiny sizes (a smoke test; numbers mean nothing)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 10)")
    p.add_argument("--profile-rounds", type=int, default=None,
                   help="profiled steps per backend for the library-time attribution (default 3)")
    p.add_argument("--models", default=None, help=f"comma-separated ({','.join(MODELS)}), or all")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated ({','.join(MODES)})")
    p.add_argument("--backends", default=None,
                   help=f"comma-separated (default {BACKENDS}; --quick: eager,brrr)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (and so brrr's and Inductor's kernel threads); default "
                        "torch's own. On a loaded machine 1 keeps a descheduled OpenMP thread "
                        "from stalling every parallel region")
    p.add_argument("--time-mismatches", action="store_true",
                   help="time a backend whose first call misses the check too (its status "
                        "says so); by default it is left out")
    p.add_argument("--render-only", action="store_true",
                   help="measure nothing: rewrite the markdown and plots from the JSON an "
                        "earlier run (or an interrupted one) left in the results dir")
    p.add_argument("--keep-caches", action="store_true",
                   help="use the usual Inductor and brrr cache dirs (compile times are then "
                        "warm where an earlier run left entries)")
    args = p.parse_args(argv)
    small = args.quick or args.tiny
    args.rounds = args.rounds or (2 if small else 10)
    args.profile_rounds = args.profile_rounds or (1 if small else 3)
    args.results_dir = reporting.results_dir(args.results_dir, small)
    chosen = args.models or (QUICK_MODELS if args.quick else "all")
    args.models = list(MODELS) if chosen == "all" else chosen.split(",")
    args.modes = args.modes.split(",")
    args.backends = (args.backends or ("eager,brrr" if args.quick else BACKENDS)).split(",")
    for kind, picked, known in (("models", args.models, MODELS), ("modes", args.modes, MODES)):
        if unknown := [x for x in picked if x not in known]:
            p.error(f"unknown {kind} {unknown}; {kind}: {', '.join(known)}")
    if "eager" not in args.backends:
        p.error("--backends must include eager (the reference every backend is checked against)")
    return args


def _missing_libraries(names: list[str]) -> str | None:
    if any(MODELS[n].library == "transformers" for n in names):
        try:
            import transformers
        except ImportError:
            return INSTALL_HINT
        transformers.logging.set_verbosity_error()     # config warnings about unused ids
    return None


def _build(case, mode, backends, tiny, time_mismatches=False) -> tuple[dict, dict, dict, int]:
    harness.fresh_dynamo()
    base_model = case.module(tiny)
    batch = batch_for(case, mode)
    inputs, target = case.inputs(batch, tiny)
    steps, status, errors, float64 = {}, {}, {}, []

    def reference():                  # computed once, and only if a backend needs it
        if not float64:
            float64.append(model_check.float64_first(case, mode, base_model, inputs, target))
        return float64[0]

    fair_first: list = []

    def fair():                       # likewise: eager channels-last (model_check)
        if not fair_first:
            fair_first.append(model_check.channels_last_first(case, mode, base_model, inputs,
                                                              target))
        return fair_first[0]

    for b in backends:
        try:
            steps[b] = build_step(case, mode, base_model, inputs, target, b)
        except Exception as exc:  # a broken backend must not stop the suite
            status[b] = f"failed: {harness.describe_error(exc)}"
            continue
        if b == "eager":
            status[b] = "reference"
            continue
        if "eager" not in steps:
            errors[b], verdict = float("nan"), "no eager reference"
        else:
            errors[b], verdict = model_check.verdict(
                steps[b].first, steps["eager"].first, reference, fair,
                lambda: model_check.float64_step_first(case, mode, base_model, inputs,
                                                       target, b))
        status[b] = f"{verdict} (max err {errors[b]:.1e}; first call {steps[b].first_s:.1f} s)"
        if verdict == "mismatch":
            if time_mismatches:
                status[b] += "; timed anyway (--time-mismatches)"
            else:
                del steps[b]
    return steps, status, errors, batch


def measure(case, mode: str, backends: list[str], rounds: int, profile_rounds: int,
            tiny: bool = False, time_mismatches: bool = False) -> dict:
    steps, status, errors, batch = _build(case, mode, backends, tiny, time_mismatches)
    runs = {b: s.run for b, s in steps.items()}
    per_round = harness.interleaved(runs, (), rounds=rounds, iters=1)
    times = {b: statistics.median(ts) for b, ts in per_round.items()}
    samples = {b: [] for b in steps}
    for _ in range(profile_rounds):
        for b, s in steps.items():
            samples[b].append(library_time.profile_step(s.run))
    breakdown = {b: library_time.median_breakdown(v) for b, v in samples.items()}
    library = {b: library_time.library_seconds(v) for b, v in breakdown.items()}
    outside = {b: library_time.outside(v) for b, v in breakdown.items()}
    peaks = {b: harness.peak_memory(s.run, before=s.before) for b, s in steps.items()}
    compile_s = {b: max(0.0, s.first_s - times[b]) for b, s in steps.items() if b != "eager"}
    del steps, runs
    gc.collect()
    return {"batch": batch, "times": times, "library": library,
            "outside": outside, "breakdown": breakdown, "errors": errors, "peaks": peaks,
            "compile_s": compile_s, "status": status, "rounds": rounds}


def _fresh_caches() -> str:
    """Point Inductor and brrr at new, empty cache dirs for this process: compile times are
    cold, and nothing of this run is left in the user's caches."""
    root = tempfile.mkdtemp(prefix="brrr-bench-models-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["BRRR_CACHE_DIR"] = os.path.join(root, "brrr")
    return root


def render(args, results: dict, notes: list[str], facts: dict) -> str:
    backends = args.backends
    tables = [
        "\n".join(report.targets(results, CONV_NETS)),
        "## Step time (ms, median)\n\n" + _table(report.time_rows(results, backends)),
        "## Geometric means\n\n" + _table(report.summary_rows(results, backends, CONV_NETS)),
        "## Time outside library calls (ms; share of the step)\n\n"
        "A profiled step's time less its time inside GEMM, convolution and attention "
        "library calls and, in training, the eager AdamW step: medians over the profiled "
        "steps (library_time.py). This is the part a fusion backend owns. The library "
        "column is eager's, for scale.\n\n" + _table(report.outside_rows(results, backends)),
        "## Compile time (s: first call less one step; cold caches, warm process)\n\n"
        + _table(report.compile_rows(results, backends)),
        "## Peak memory and error against eager\n\n"
        + _table(report.memory_rows(results, backends)),
    ]
    losing = report.losing(results)
    if losing:
        tables.append("## Where the time goes where brrr is slower than Inductor\n\n"
                      "Medians of the profiled steps (library_time.py): library calls, brrr's "
                      "kernels, other ATen calls, and the rest (Python, the runner, guards; "
                      "Inductor's own C++ kernels record no events, so they are in its "
                      "rest).\n\n" + _table(report.where_rows(results, losing)))
    status = [f"## Backend status (first call checked against eager: each output, or in "
              f"training the loss and every parameter gradient, within {model_check.ATOL:g} + "
              f"{model_check.RTOL:g} x its largest magnitude, else no further from a float64 "
              f"run than eager, else (ill-conditioned) its float64 step as eager's; "
              f"model_check.py)", ""]
    status += [f"- {model} {mode}: " + "; ".join(f"{b} {s}" for b, s in r["status"].items())
               for (model, mode), r in results.items()]
    zoo = ["## Models", ""] + [f"- {n}: {MODELS[n].description}" for n in args.models]
    return reporting.report("Model suite", facts, "\n\n".join(tables),
                          ["\n".join(status), "\n".join(zoo), "\n".join(notes)])


def _table(rows: list[dict]) -> str:
    return reporting.markdown_table(rows, list(rows[0]) if rows else [])


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _facts(args, caches: str) -> dict:
    """What the result file states besides machine_env.machine_info(); taken at the start of
    the run and kept in the JSON, so that --render-only states the run's, not its own."""
    return {
        **machine_env.machine_info(),
        "measured with": f"`{reporting.command_line()}`",
        "noise": f"a machine whose load average exceeds its core count ({os.cpu_count()}) "
                 "gives noisy numbers: compare the load averages at the start and the end",
        "timing": f"{args.rounds} interleaved rounds, one call (inference) or one step "
                  "(training) per backend per round, median over rounds; "
                  f"{args.profile_rounds} profiled steps per backend for library time",
        "training step": "zero_grad + forward + loss + backward (model and loss compiled "
                         "together) + AdamW step (eager for every backend)",
        "compile caches": caches,
        "peak memory": "peak bytes torch allocates during one call/step above what was live "
                       "before it (torch.profiler memory events; training: the previous "
                       "step's gradients are freed first)",
    }


def _json_path(args) -> Path:
    return Path(args.results_dir) / Path(args.out).with_suffix(".json").name


def _write_json(args, results: dict, facts: dict) -> None:
    raw = {"backends": args.backends, "tiny": args.tiny, "facts": facts,
           "results": [{"model": m, "mode": mode, **r} for (m, mode), r in results.items()]}
    _json_path(args).parent.mkdir(parents=True, exist_ok=True)
    _json_path(args).write_text(json.dumps(raw, indent=1))


def _read_json(args) -> tuple[dict, dict]:
    raw = json.loads(_json_path(args).read_text())
    args.backends = raw["backends"]
    results = {(r.pop("model"), r.pop("mode")): r for r in raw["results"]}
    for r in results.values():              # as this version attributes it
        r["outside"] = {b: library_time.outside(v) for b, v in r["breakdown"].items()}
    args.models = list(dict.fromkeys(m for m, _ in results))
    return results, raw.get("facts", {})


def _publish(args, results: dict, facts: dict) -> None:
    directory = Path(args.results_dir)
    notes = report.plot(results, args.backends, directory)
    reporting.publish(args.out, render(args, results, notes, facts), directory)


def run(args) -> tuple[dict, dict]:
    """Measure every model and mode; (results, facts)."""
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    root = None if args.keep_caches else _fresh_caches()
    facts = _facts(args, "fresh, empty Inductor and brrr cache dirs for the run" if root else
                   "the usual Inductor and brrr cache dirs (--keep-caches)")
    start = time.perf_counter()
    warm_up(args.backends)
    results = {}
    try:
        for name in args.models:
            for mode in args.modes:
                r = measure(MODELS[name], mode, args.backends, args.rounds, args.profile_rounds,
                            args.tiny, args.time_mismatches)
                results[(name, mode)] = r
                _write_json(args, results, facts)   # partial results survive an interruption
                shown = {b: f"{t * 1e3:.1f} ms" for b, t in r["times"].items()}
                print(f"[{time.perf_counter() - start:5.0f} s] {name} {mode}: {shown} "
                      f"{r['status']}", file=sys.stderr, flush=True)
    finally:
        if root:
            shutil.rmtree(root, ignore_errors=True)
    facts["load average at the end (1, 5, 15 min)"] = _load()
    facts["run time"] = f"{time.perf_counter() - start:.0f} s"
    _write_json(args, results, facts)
    return results, facts


def main(argv=None) -> int:
    machine_env.ensure_malloc_env()
    args = parse_args(argv)
    if args.render_only:
        _publish(args, *_read_json(args))
        return 0
    missing = _missing_libraries(args.models)
    if missing:
        print(f"bench_models: {missing}", file=sys.stderr)
        return 2
    _publish(args, *run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
