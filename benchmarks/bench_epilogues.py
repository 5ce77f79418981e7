"""Linear-layer epilogues: a linear layer and its activation as one oneDNN call
(passes/linear_epilogues.py) against the same graph with the activation in brrr's kernels.

    python benchmarks/bench_epilogues.py [--quick] [--rounds R] [--models gpt2,bert,...]

Backends, timed round-robin in one process (median over rounds of each round's median
call): eager, inductor, brrr (its default passes, which leave linear_epilogues out), and
`brrr:epilogues` (the default passes and linear_epilogues). Cases: a linear layer with GELU, SiLU and ReLU at a
transformer MLP's shape, the layer alone beside them (what the fused call is measured
against: the epilogue's cost on top of the GEMM), and model-suite models in inference at
their throughput batch (models need the [bench] extra). Writes results/epilogues.md.
"""
from __future__ import annotations

import copy
import functools
import statistics
import sys

import torch
import torch.nn.functional as F

import harness
import reporting
import machine_env
import model_check

from brrr_compiler.backend import brrr_backend
from brrr_compiler.passes.linear_epilogues import WITH_EPILOGUES

BACKENDS = ("eager", "inductor", "brrr", "brrr:epilogues")
ACTIVATIONS = {"gelu": F.gelu, "silu": F.silu, "relu": F.relu, "none": lambda y: y}


def compile_for(fn, backend: str):
    if backend == "eager":
        return fn
    if backend == "inductor":
        return torch.compile(fn, backend="inductor", dynamic=False)
    options = {"passes": WITH_EPILOGUES} if backend == "brrr:epilogues" else None
    return torch.compile(fn, backend=functools.partial(brrr_backend, options=options),
                         dynamic=False)


# (rows, in, out): a transformer MLP's up and down projections from a throughput batch's
# rows down to one row
LINEAR_SHAPES = ((1024, 768, 3072), (1024, 3072, 768), (512, 768, 3072), (256, 768, 3072),
                 (128, 768, 3072), (1, 768, 3072))


def linear_cases(shapes, activations) -> dict:
    cases = {}
    for rows, d_in, d_out in shapes:
        gen = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(s, generator=gen)
                   for s in ((rows, d_in), (d_out, d_in), (d_out,)))
        for name in activations:
            def fn(x, w, b, act=ACTIVATIONS[name]):
                return act(F.linear(x, w, b))
            cases[f"linear {rows}x{d_in}x{d_out} + {name}"] = (fn, (x, w, b))
    return cases


def model_cases(names: list[str]) -> dict:
    from models import MODELS
    cases = {}
    for name in names:
        case = MODELS[name]
        model, (inputs, _) = case.module().eval(), case.inputs()
        cases[f"{name} inference b={case.batch}"] = (model, inputs)
    return cases


def run_case(fn, args, rounds: int, backends) -> tuple[dict, dict]:
    fns, status = {}, {}
    with torch.no_grad():
        ref = fn(*args)
        for backend in backends:
            f = compile_for(copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else fn,
                            backend)
            try:
                _, verdict = model_check.verdict(f(*args), ref)
            except Exception as exc:  # a broken backend must not stop the suite
                verdict = harness.describe_error(exc)
            if verdict != "ok":
                status[backend] = verdict
                continue
            fns[backend] = f
        iters = harness.iters_for(fn, args, 0.05)
        times = harness.interleaved(fns, args, rounds=rounds, iters=iters,
                                    per_round=statistics.median)
    return {b: statistics.median(t) for b, t in times.items()}, status


def table(rows: list[dict], backends) -> str:
    out = []
    for r in rows:
        t = r["times"]
        line = {"case": r["case"], **{f"{b} ms": f"{t[b] * 1e3:.2f}" if b in t else "-"
                                      for b in backends}}
        for b in [b for b in backends if b != "brrr:epilogues"]:
            line[f"{b} / epilogues"] = f"{t[b] / t['brrr:epilogues']:.2f}x" \
                if b in t and "brrr:epilogues" in t else "-"
        out.append(line)
    return reporting.markdown_table(out, list(out[0]))


def main(argv=None) -> None:
    machine_env.ensure_malloc_env()
    p = reporting.base_parser(__doc__, "epilogues.md")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--models", default="bert,llama,vit,mlp")   # gpt2's Conv1D: no t(w)
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--quick", action="store_true", help="smoke test: small linear, no models")
    args = p.parse_args(argv)
    cases = linear_cases([(64, 32, 48)], ACTIVATIONS) if args.quick else \
        linear_cases(LINEAR_SHAPES[:1], ACTIVATIONS) | linear_cases(LINEAR_SHAPES[1:], ("gelu", "none"))
    if not args.quick and args.models:
        cases.update(model_cases(args.models.split(",")))
    rows, failed = [], []
    for name, (fn, fargs) in cases.items():
        harness.fresh_dynamo()
        backends = args.backends.split(",")
        times, status = run_case(fn, fargs, 2 if args.quick else args.rounds, backends)
        rows.append({"case": name, "times": times})
        failed += [f"- {name}, {b}: {why}" for b, why in status.items()]
        print(name, {b: f"{t * 1e3:.2f} ms" for b, t in times.items()}, file=sys.stderr, flush=True)
    notes = ["Ratios above 1: brrr with linear_epilogues is faster. `none` is the linear "
             "layer alone: GEMM + bias, nothing to fold."]
    if failed:
        notes += ["## Backends that failed or disagreed with eager", "\n".join(failed)]
    reporting.publish(args.out, reporting.report("Linear-layer epilogues", {"torch threads": str(
        torch.get_num_threads())}, table(rows, args.backends.split(",")), notes),
        reporting.results_dir(args.results_dir, args.quick))


if __name__ == "__main__":
    main()
