"""Model suite: eager vs inductor vs brrr on the model zoo (benchmarks/models.py), for
inference and for a full training step.

    python benchmarks/bench_models.py [--quick] [--rounds R] [--models gpt,bert,...]
                                      [--modes inference,training] [--backends ...]

- inference: `model.eval()` under `torch.no_grad()`, the compiled model called on a batch.
- training: `model.train()`; one step is zero_grad, loss = compiled(model + loss)(batch),
  loss.backward(), optimizer.step(). The model and its loss are compiled together
  (benchmarks/models.py: WithLoss); the optimizer (torch.optim.AdamW, default
  implementation) stays eager for every backend, so it costs all of them the same.

Each backend gets its own copy of the model with identical initial weights; the first
call is checked against eager (outputs; for training the loss and every parameter's
gradient). Backends are timed round-robin, one call per round, median over rounds. Peak
memory is measured with torch.profiler (see harness.peak_memory). Writes
benchmarks/results/models.md, models.json and models_speedup.png.
"""

from __future__ import annotations

import copy
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import harness
import plots
from models import MODELS, WithLoss

# Outputs and gradients of a few layers summed over a batch: looser than one kernel.
TOLERANCE = dict(rtol=1e-3, atol=1e-4)
QUICK_MODELS = "mlp"


def parse_args(argv=None):
    p = harness.base_parser(__doc__, "models.md")
    p.add_argument("--quick", action="store_true",
                   help=f"models {QUICK_MODELS}, eager and brrr only, 2 rounds (a smoke test)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7)")
    p.add_argument("--models", default=None, help=f"comma-separated ({','.join(MODELS)})")
    p.add_argument("--modes", default="inference,training", help="inference,training")
    p.add_argument("--backends", default=None,
                   help="comma-separated (default eager,inductor,brrr; --quick: eager,brrr)")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 7)
    args.results_dir = harness.results_dir(args.results_dir, args.quick)
    args.models = args.models or (QUICK_MODELS if args.quick else ",".join(MODELS))
    args.backends = args.backends or ("eager,brrr" if args.quick else "eager,inductor,brrr")
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        p.error(f"unknown models {unknown}; models: {', '.join(MODELS)}")
    return args


def _compile(module, backend: str):
    if backend == "eager":
        return module
    base, options = harness.backend_spec(backend)
    return torch.compile(module, backend=harness.resolve_backend(base), options=options or None,
                         dynamic=False)


def _inference_runner(case, base_model, inputs, backend: str):
    """(step callable, first outputs) for one backend, compiled on its own model copy."""
    model = copy.deepcopy(base_model).eval()
    compiled = _compile(model, backend)

    def step():
        with torch.no_grad():
            return compiled(*inputs)

    return step, step()


def _training_runner(case, base_model, inputs, target, backend: str):
    """(step callable, (loss, grads) of the first forward + backward) for one backend."""
    model = copy.deepcopy(base_model).train()
    compiled = _compile(WithLoss(model, case.loss), backend)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)

    loss = compiled(inputs, target)          # first call: compile, checked against eager
    loss.backward()
    first = (loss.detach(), [p.grad.detach().clone() for p in params])
    opt.step()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = compiled(inputs, target)
        loss.backward()
        opt.step()
        return loss

    step.before = lambda: opt.zero_grad(set_to_none=True)   # for harness.peak_memory
    return step, first


def _error(out, ref) -> tuple[float, str]:
    err = harness.max_abs_error(out, ref)
    try:
        torch.testing.assert_close(out, ref, **TOLERANCE)
    except AssertionError:
        return err, "mismatch"
    return err, "ok"


def measure(case, mode: str, backends: list[str], rounds: int) -> dict:
    harness.fresh_dynamo()
    base_model = case.module()
    inputs, target = case.make_batch()
    steps, firsts, status, errors = {}, {}, {}, {}
    for b in backends:
        start = time.perf_counter()
        try:
            if mode == "inference":
                steps[b], firsts[b] = _inference_runner(case, base_model, inputs, b)
            else:
                steps[b], firsts[b] = _training_runner(case, base_model, inputs, target, b)
        except Exception as exc:  # a broken backend must not stop the suite
            status[b] = f"failed: {harness.describe_error(exc)}"
            continue
        took = time.perf_counter() - start
        if b == "eager":
            status[b] = "reference"
            continue
        errors[b], verdict = _error(firsts[b], firsts["eager"]) if "eager" in firsts else (
            float("nan"), "no eager reference")
        status[b] = f"{verdict} (max err {errors[b]:.1e}; first call {took:.1f} s)"
        if verdict != "ok":
            del steps[b]
    per_round = harness.interleaved(steps, (), rounds=rounds, iters=1)
    times = {b: statistics.median(ts) for b, ts in per_round.items()}
    peaks = {b: harness.peak_memory(fn, before=getattr(fn, "before", None))
             for b, fn in steps.items()}
    del steps, firsts
    gc.collect()
    return {"times": times, "errors": errors, "peaks": peaks, "status": status, "rounds": rounds}


def _x(num, den) -> str:
    return f"{num / den:.2f}x" if num is not None and den is not None else "n/a"


def rows(results: dict, backends: list[str]) -> list[dict]:
    out = []
    for (model, mode), r in results.items():
        t = r["times"]
        row = {"model": model, "mode": mode}
        for b in backends:
            row[f"{b} ms"] = f"{t[b] * 1e3:.1f}" if b in t else r["status"].get(b, "not run")
        for b in backends:
            if b != "eager":
                row[f"{b} vs eager"] = _x(t.get("eager"), t.get(b))
        row["brrr vs inductor"] = _x(t.get("inductor"), t.get("brrr"))
        for b in backends:
            if b != "eager":
                row[f"{b} max err"] = f"{r['errors'][b]:.1e}" if b in r["errors"] else "n/a"
        for b in backends:
            row[f"{b} peak MB"] = f"{r['peaks'][b] / 1e6:.1f}" if b in r["peaks"] else "n/a"
        out.append(row)
    return out


def columns(backends: list[str]) -> list[str]:
    compiled = [b for b in backends if b != "eager"]
    return (["model", "mode"] + [f"{b} ms" for b in backends]
            + [f"{b} vs eager" for b in compiled] + ["brrr vs inductor"]
            + [f"{b} max err" for b in compiled] + [f"{b} peak MB" for b in backends])


def targets(results: dict) -> list[str]:
    misses, timed = [], 0
    for (model, mode), r in results.items():
        t = r["times"]
        if "brrr" not in t or "inductor" not in t:
            if "inductor" in t:
                misses.append(f"{model} {mode} (brrr {r['status'].get('brrr', 'not run')})")
            continue
        timed += 1
        if t["inductor"] / t["brrr"] < 1.0:
            misses.append(f"{model} {mode} ({t['inductor'] / t['brrr']:.2f}x)")
    if timed == 0 and not misses:
        verdict = "NOT MEASURED (inductor or brrr not run)"
    elif misses:
        verdict = f"MISSED on {len(misses)} of {len(results)}: " + ", ".join(misses)
    else:
        verdict = "MET"
    return ["## Targets (issue 5)", "",
            f"- brrr at least as fast as inductor on each model, inference and training: {verdict}"]


def render(args, results: dict, backends: list[str], plot_notes: list[str]) -> str:
    facts = {
        "timing": f"{args.rounds} interleaved rounds, one call (inference) or one step "
        "(training) per backend per round, median over rounds",
        "training step": "zero_grad + forward + loss + backward (model and loss compiled "
        "together) + AdamW step (eager for every backend)",
        "peak memory": "peak bytes torch allocates during one call/step above what was live "
        "before it (torch.profiler memory events; compiler work and Python objects excluded; "
        "training: the previous step's gradients are freed first)",
    }
    table = "\n\n".join([
        "\n".join(targets(results)),
        "## Results\n\n" + harness.markdown_table(rows(results, backends), columns(backends)),
    ])
    status = ["## Backend status (first call checked against eager, rtol 1e-3 atol 1e-4; "
              "training: the loss and every parameter gradient)", ""]
    status += [f"- {model} {mode}: " + "; ".join(f"{b} {s}" for b, s in r["status"].items())
               for (model, mode), r in results.items()]
    zoo = ["## Models", ""] + [f"- {n}: {MODELS[n].description}" for n in args.models.split(",")]
    return harness.report("Model suite", facts, table,
                          ["\n".join(status), "\n".join(zoo), "\n".join(plot_notes)])


def plot(results: dict, backends: list[str], directory: Path) -> list[str]:
    name = "models_speedup.png"
    if not plots.available():
        return [plots.missing_note([name])]
    labels = [f"{m} {mode}" for m, mode in results]
    series = {b: [r["times"]["eager"] / r["times"][b]
                                if b in r["times"] and "eager" in r["times"] else float("nan")
                                for r in results.values()]
              for b in backends if b != "eager"}
    plots.grouped_barh(directory / name, labels, series, speedup=True,
                       title="speedup over eager per model (higher is better)",
                       xlabel="speedup: eager's time / the backend's (log scale)",
                       lines={"1x": 1.0})
    return [f"Plot: `{name}`"]


def main(argv=None) -> None:
    harness.ensure_malloc_env()
    args = parse_args(argv)
    backends = args.backends.split(",")
    start = time.perf_counter()
    results = {}
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            results[(name, mode)] = r = measure(MODELS[name], mode, backends, args.rounds)
            shown = {b: f"{t * 1e3:.1f} ms" for b, t in r["times"].items()}
            print(f"[{time.perf_counter() - start:5.0f} s] {name} {mode}: {shown} {r['status']}",
                  file=sys.stderr, flush=True)
    directory = Path(args.results_dir)
    notes = plot(results, backends, directory)
    harness.publish(args.out, render(args, results, backends, notes), directory)
    raw = {"backends": backends, "results": [{"model": m, "mode": mode, **r}
                                             for (m, mode), r in results.items()]}
    (directory / Path(args.out).with_suffix(".json").name).write_text(json.dumps(raw, indent=1))
    print(f"wrote {directory / args.out} in {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
