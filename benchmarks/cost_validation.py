"""Cost-model validation on every kernel brrr makes for held-out workloads: predicted against
measured time, kernel by kernel.

    python benchmarks/cost_validation.py [--seeds 0:120] [--sizes l1,l2,llc]
        [--suite] [--models gpt2,mlp,...] [--modes inference,training] [--rounds 5]
        [--calibration-dir DIR] [--no-calibrate] [--generic]

Workloads, none of them used by calibration (brrr_compiler/calibration.py names its
micro-kernels: x + 1 on 0.75 and 3 MB, x * 1.0001 + 0.5 chains on 1 MB, sums of 1 and 4
exp/sin/tanh/erf/sigmoid/log terms and exp chains on 1 MB, x.sum(-1)/x.amax(-1) on 192
and 768 rows, a row argmax of sin, one-element graphs of 1 and 9 kernels):
- generated patterns (benchmarks/patterns.py, the fuzzer's generator): chains of 2-20
  statements with masks, casts, integer inputs, views, transposes and strided inputs, one
  per seed and size class (sizes read from this machine's caches, bench_patterns.py);
- the kernel suite (workloads.KERNEL_CASES), without the 1 GB case unless --heavy;
- the model suite (models.MODELS, needs the [bench] extra), inference at its throughput
  batch and training steps.

Each workload is compiled with brrr's defaults (the cost policy) against the calibration
in --calibration-dir, which this script measures first unless told --no-calibrate (with
--generic, against the generic CPU a user has before calibrating). Each
kernel is then timed on its own (kernel_replay.py): one profiled run keeps every kernel
call's arguments, and each call is replayed on copies of them, many times in one native
call of the segment trampoline where the runner's segments call it so, else through its
Python call. A kernel's measured
time is the median over --rounds rounds; its predicted time is the explain report's
(overhead + the roofline of the lowered kernel with its schedule). Writes
results/cost_validation.md and cost_validation.json.
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import torch  # noqa: E402

import harness  # noqa: E402
import reporting  # noqa: E402
import kernel_replay  # noqa: E402
import machine_env  # noqa: E402
from cost_validation_report import render  # noqa: E402

from brrr_compiler.backend import brrr_backend  # noqa: E402
from brrr_compiler.calibration import measure  # noqa: E402
from brrr_compiler.cost import current_device_spec, generic_cpu, save_device_spec  # noqa: E402
from brrr_compiler.runtime import replay  # noqa: E402



def _backend(calibration_dir: str, sink: list, generic: bool = False):
    """brrr with this machine's calibration, or (`generic`) the generic CPU a user gets
    before calibrating."""
    options = {"device": "cpu"} if generic else {"calibration_dir": calibration_dir}
    return functools.partial(brrr_backend, options=options, _sink=sink)


def pattern_cases(seeds: range, sizes: list[str], max_bytes: int):
    """(source, name, make) per generated pattern; make(backend) -> (run, reports)."""
    from bench_patterns import size_classes
    for size, nbytes in size_classes(sizes, max_bytes).items():
        for seed in seeds:
            yield "pattern", f"pattern {seed} {size}", functools.partial(_pattern, seed, nbytes)


def _pattern(seed: int, nbytes: int, backend):
    from bench_patterns import pattern_at
    found = pattern_at(seed, nbytes)
    if found is None:
        return None
    _, f, inputs = found
    return _function(f, inputs, backend)


def _function(f, inputs, backend):
    compiled = torch.compile(f, backend=backend, dynamic=False)

    def run():
        with torch.no_grad():
            return compiled(*inputs)
    run()
    return run


def suite_cases(heavy: bool, quick: bool):
    from workloads import KERNEL_CASES
    for case in KERNEL_CASES.values():
        if (heavy or not case.heavy) and (case.quick or not quick):
            yield "kernel suite", case.name, \
                lambda backend, c=case: _function(c.fn, c.inputs(), backend)


def model_cases(names: list[str], modes: list[str]):
    from model_case import WithLoss
    from models import MODELS
    for name in names:
        for mode in modes:
            yield "model", f"{name} {mode}", functools.partial(_model, MODELS[name], mode, WithLoss)


def _model(case, mode: str, with_loss, backend):
    model = case.module()
    inputs, target = case.inputs()
    if mode == "inference":
        return _function(model.eval(), inputs, backend)
    compiled = torch.compile(with_loss(model.train(), case.loss), backend=backend, dynamic=False)
    params = [p for p in model.parameters() if p.requires_grad]

    def run():
        for p in params:
            p.grad = None
        compiled(inputs, target).backward()
    run()
    return run


def measure_case(source: str, name: str, make, calibration_dir: str, rounds: int,
                 failed: list[str], runner_overhead: float, generic: bool = False
                 ) -> list[dict]:
    """One row per kernel of the workload: its report's prediction and its measured time;
    kernels with no estimate go to `failed`. A kernel replayed natively pays no runner
    dispatch: its measured time in a graph is the replay's plus the device's per-kernel
    `runner_overhead` (calibration measures that apart, on segmented graphs). A kernel
    the runner calls from Python (alone between library calls, writing into an input, an
    error flag) is replayed through that call, which its time includes."""
    harness.fresh_dynamo()
    sink: list = []
    run = make(_backend(calibration_dir, sink, generic))
    if run is None:
        return []
    alone = frozenset((graph.name, k.name) for graph in sink for k in graph.kernels
                      if k.called == "python")
    timed = kernel_replay.median_by_kernel(kernel_replay.time_calls(
        replay.capture(run), kernel_replay.trampoline_lib(), rounds, alone))
    rows = []
    for graph in sink:
        for k in graph.kernels:
            got, how = timed.get((graph.name, k.name), (None, None))
            if k.predicted_s is None:          # the target: every kernel has an estimate
                failed.append(f"{name}: {k.name} has no estimate ({k.estimate_error})")
            if not got or k.predicted_s is None:
                continue
            rows.append({"source": source, "workload": name, "graph": graph.name,
                         "kernel": k.name, "ops": k.ops_summary(), "bound": k.bound,
                         "bytes": k.bytes, "flops": k.flops, "compute_s": k.compute_s,
                         "memory_s": k.memory_s, "schedule": k.schedule,
                         "domain": [str(d) for d in k.domain],
                         "pred": k.predicted_s, "replay": statistics.median(got),
                         "meas": statistics.median(got) + (runner_overhead if how == "native"
                                                           else 0),
                         "spread": spread(got), "timed": how})
    return rows


def spread(values: list[float]) -> float:
    """Interquartile range over the median of a kernel's round medians."""
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / q[1]


def parse_args(argv=None):
    p = reporting.base_parser(__doc__, "cost_validation.md")
    reporting.pattern_options(p, seeds="0:120", sizes="l1,l2,llc", rounds=5,
                            max_tensor_bytes=64e6)
    p.add_argument("--suite", action=argparse.BooleanOptionalAction, default=True,
                   help="the kernel suite's cases")
    p.add_argument("--heavy", action="store_true", help="the kernel suite's 1 GB case too")
    p.add_argument("--models", default="all", help="model names, 'all' or '' for none")
    p.add_argument("--modes", default="inference,training")
    p.add_argument("--generic", action="store_true",
                   help="predict with the generic CPU (no calibration), as a new user's "
                        "compiles do; the measured side still adds this machine's "
                        "calibrated in-segment dispatch")
    p.add_argument("--calibration-dir",
                   default=str(Path(tempfile.gettempdir()) / "brrr-cost-validation"))
    p.add_argument("--no-calibrate", action="store_true",
                   help="use the calibration already in --calibration-dir")
    quick = dict(seeds="0:2", sizes="l1", models="", rounds=1, no_calibrate=True)
    return reporting.parse_quick(p, argv, quick, "smoke test: two l1 patterns, the suite's "
                               "quick cases, no models, one round, no calibration")


def cases(args):
    if args.seeds:
        a, b = (int(x) for x in args.seeds.split(":"))
        yield from pattern_cases(range(a, b), args.sizes.split(","), int(args.max_tensor_bytes))
    if args.suite:
        yield from suite_cases(args.heavy, args.quick)
    if args.models:
        names = args.models.split(",")
        if names == ["all"]:
            from models import MODELS
            names = list(MODELS)
        yield from model_cases(names, args.modes.split(","))


def main(argv=None) -> None:
    machine_env.ensure_malloc_env()
    args = parse_args(argv)
    load_start = os.getloadavg()[0]
    if not args.no_calibrate:
        spec = measure(args.calibration_dir, lambda m: print(m, file=sys.stderr, flush=True)).spec
        save_device_spec(spec, args.calibration_dir)
    measured = current_device_spec(args.calibration_dir)
    spec = generic_cpu() if args.generic else measured
    rows, failed = [], []   # failed: workloads that did not run, kernels with no estimate
    for source, name, make in cases(args):
        try:
            got = measure_case(source, name, make, args.calibration_dir, args.rounds, failed,
                               measured.kernel_overhead_s, args.generic)
        except Exception as exc:  # one broken workload must not stop the validation
            failed.append(f"{name}: {harness.describe_error(exc)}")
            continue
        finally:
            gc.collect()
        rows += got
        print(f"{name}: {len(got)} kernel(s), {len(rows)} in all", file=sys.stderr, flush=True)
    facts = {"calibration": spec.source, "threads": str(torch.get_num_threads()),
             "load average (1 min) at start and end": f"{load_start:.2f}, "
                                                      f"{os.getloadavg()[0]:.2f}"}
    reporting.publish(args.out, render(spec, facts, rows, failed), args.results_dir)
    (Path(args.results_dir) / Path(args.out).with_suffix(".json").name).write_text(
        json.dumps({"kernels": rows, "failed": failed}, indent=1))


if __name__ == "__main__":
    main()
