"""Never slower than eager: every op_db op brrr makes a kernel for, in float32 and
bfloat16, on samples enlarged to at least 4 MB, and the generated patterns at the same
size, timed against eager with brrr's default options.

    python benchmarks/bench_sweep.py [--ops add,sum,...] [--dtypes float32,bfloat16]
        [--min-bytes 4e6] [--samples 1] [--pattern-seeds 0:40] [--rounds 5] [--quick]

An op's OpInfo samples are tiny (5x5), so each sample is enlarged: every tensor argument
of the highest rank whose first dim has the sample's largest first size is repeated along
that dim until the largest argument holds --min-bytes (broadcasts and dims keep their
meaning). A sample eager rejects after that is skipped, and the next one tried. brrr's
result is checked against eager (or, outside eager's tolerance, against a float64 run:
no further from it than eager) before it is timed; an op for which brrr makes no kernel
(a view, a library call, an op it does not lower) is counted, not timed. Timing is
interleaved rounds of eager, Dynamo's floor (a backend that does no work, timed after
the case's own work so that it pays the same cache misses) and brrr, median over rounds.
A case is *slower than eager* when brrr's median less the floor is more than 10% above
eager's, while eager's is above the floor (bench_patterns_report.slower_than_eager); the
report also counts the cases whose whole time is (slower_wall_time).
Each such case is a bug to fix or a case for the cost model to hand to ATen.
Writes results/sweep.md and sweep.json.
"""
from __future__ import annotations

import functools
import gc
import json
import math
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import torch  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_unflatten  # noqa: E402

import harness  # noqa: E402
import reporting  # noqa: E402
import machine_env  # noqa: E402
from benchmarks import bench_patterns  # noqa: E402
from benchmarks.bench_sweep_report import render  # noqa: E402
from workloads import bytes_moved  # noqa: E402

BACKENDS = ("eager", harness.FLOOR, "brrr")
# outputs that are random or uninitialized: there is nothing to check brrr against
UNCHECKABLE = ("rand", "normal", "bernoulli", "multinomial", "dropout", "empty", "uniform",
               "exponential", "geometric", "cauchy", "log_normal", "poisson", "randint")


def enlarge(sample, min_bytes: int, input_only: bool = False):
    """A copy of `sample` whose largest tensor holds at least `min_bytes` (module
    docstring), or None when it has no tensor of rank >= 1 to grow. `input_only`: only
    sample.input grows (INPUT_ONLY)."""
    from torch.testing._internal.opinfo.core import SampleInput
    flat, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    if input_only:
        flat = [sample.input] if isinstance(sample.input, torch.Tensor) else []
    tensors = [x for x in flat if isinstance(x, torch.Tensor)]
    rank = max((t.ndim for t in tensors), default=0)
    if rank == 0 or any(t.layout != torch.strided for t in tensors):
        return None              # a sparse operand (sparse.sampled_addmm's CSR) does not repeat
    lead = max(t.shape[0] for t in tensors if t.ndim == rank)
    largest = max(t.numel() * t.element_size() for t in tensors)
    if lead == 0 or largest == 0:
        return None
    k = math.ceil(min_bytes / largest)

    def grow(x):
        if isinstance(x, torch.Tensor) and x.ndim == rank and x.shape[0] == lead:
            return x.detach().repeat(k, *[1] * (rank - 1))
        return x.detach() if isinstance(x, torch.Tensor) else x

    if input_only:
        return SampleInput(grow(sample.input), args=sample.args, kwargs=sample.kwargs)
    inp, args, kwargs = tree_unflatten([grow(x) for x in flat], spec)
    return SampleInput(inp, args=tuple(args), kwargs=kwargs)


def _checked(fn, tensors, reference=True) -> tuple[int, bool]:
    """(kernels brrr made for fn(*tensors), drift), after checking its outputs against
    eager's (tests/helpers.py: values and strides; a value outside eager's tolerance passes
    when it is no further from a float64 run than eager's: an enlarged sample sums a
    million equal terms, where eager's own float error is large). A mismatch that passes
    when brrr rounds as eager does (op_sweep_report.rounding_options: every float16 or
    bfloat16 op rounded, correctly rounded libm) is drift, timed with the defaults: a
    float16 sum of 262,144 values near 1 is inf in eager and finite in brrr's float
    accumulator. `reference`: check_against_eager's (a generated pattern passes its own
    float64 program, whose casts to float16 are float64 too). Raises on any other
    mismatch."""
    from op_sweep_report import rounding_options
    from tests.helpers import check_against_eager
    check = functools.partial(check_against_eager, fn, *tensors, grad=False,
                              allow_fallback=True, kernels=False, reference=reference)
    try:
        return sum(len(g.kernels) for g in check()), False
    except AssertionError:
        low = any(t.dtype in (torch.float16, torch.bfloat16) for t in tensors
                  if isinstance(t, torch.Tensor))
        graphs = check(options=rounding_options(low))    # raises: a mismatch of brrr's own
        return sum(len(g.kernels) for g in graphs), True


def time_case(fn, tensors, rounds: int, reference=True) -> dict:
    """{"status", "kernels", "nbytes", "times"} for one enlarged sample or pattern."""
    try:
        kernels, drift = _checked(fn, tensors, reference)
    except Exception as err:  # noqa: BLE001  (a wrong or failed compile is reported)
        return {"status": f"brrr: {harness.describe_error(err)}"}
    if kernels == 0:
        return {"status": "no kernel", "kernels": 0}
    harness.fresh_dynamo()
    ref = fn(*tensors)
    brrr = torch.compile(fn, backend=harness.resolve_backend("brrr"), dynamic=False)
    brrr(*tensors)
    floor = torch.compile(fn, backend=harness.dynamo_floor, dynamic=False)
    floor(*tensors)
    nbytes = bytes_moved(tensors, ref)
    fns = {"eager": fn, harness.FLOOR: floor, "brrr": brrr}
    harness.prime_floor(fns, fn)
    iters = harness.iters_for(fn, tensors, bench_patterns.TARGET_ROUND_S)
    per_round = harness.interleaved(fns, tensors, rounds=rounds, iters=iters,
                                    per_round=statistics.median)
    return {"status": "ok", "kernels": kernels, "nbytes": nbytes, "drift": drift,
            "times": {name: statistics.median(ts) for name, ts in per_round.items()}}


# An enlarged sample of split or unbind with more outputs is skipped: its thousands of
# views cost Dynamo and AOTAutograd minutes per call (split's stopped the sweep twice).
MAX_OUTPUTS = 256
# Ops whose work grows with the square of the enlarged dim: multilabel_margin_loss over
# 500000 classes ran more than 15 minutes in brrr and 20 in eager (torch's decomposition
# and eager's kernel both pair every class with every target), which stalled a whole
# sweep. They are left out, named on stderr.
QUADRATIC = frozenset({"nn.functional.multilabel_margin_loss"})
# Convolutions grow their input's batch only: a sample whose input batch and weight's
# output channels were equal grew both, and its output with their product (conv1d's
# (50000, 4, 5) input by a (50000, 4, 3) weight: a 20 GB output, which killed the
# sweep's process for memory in three runs in a row).
INPUT_ONLY = frozenset(f"nn.functional.conv{kind}{n}d" for kind in ("", "_transpose")
                       for n in (1, 2, 3))


def op_cases(op, dtype: torch.dtype, args) -> list[dict]:
    """Up to --samples timed rows for one op and dtype (fewer if samples do not enlarge or
    eager rejects them enlarged)."""
    from tests.coverage import opinfo_harness as h
    if h.op_key(op) in QUADRATIC:
        print(f"{h.op_key(op)}: left out (QUADRATIC: enlarged, it runs for minutes)",
              file=sys.stderr)
        return []
    rows = []
    for i, sample in enumerate(h.samples(op, dtype, grad=False)):
        big = enlarge(sample, int(args.min_bytes), input_only=h.op_key(op) in INPUT_ONLY)
        made = h.sample_fn(op, big, "op") if big is not None else None
        if made is None:
            continue
        fn, tensors = made
        try:
            outputs = tree_flatten(fn(*tensors))[0]
        except Exception:  # noqa: BLE001  (eager rejects the enlarged sample: try the next)
            continue
        if len(outputs) > MAX_OUTPUTS:
            continue
        row = {"case": h.op_key(op), "dtype": str(dtype)[6:], "sample": i,
               "desc": h.describe(big)[:120],
               **time_case(fn, tensors, args.rounds)}
        rows.append(row)
        del fn, tensors, big
        gc.collect()
        if len(rows) >= args.samples or row["status"] == "no kernel":
            break
    return rows


def pattern_cases(args) -> list[dict]:
    lo, _, hi = args.pattern_seeds.partition(":")
    rows = []
    for seed in range(int(lo), int(hi)):
        found = bench_patterns.pattern_at(seed, int(args.min_bytes))
        if found is None:
            continue
        p, f, inputs = found
        rows.append({"case": f"pattern {seed}", "dtype": p.dtype, "sample": p.attempt,
                     "desc": f"{len(p.lines)} ops",
                     **time_case(f, inputs, args.rounds, p.build_reference())})
    return rows


def parse_args(argv=None):
    p = reporting.base_parser(__doc__, "sweep.md")
    p.add_argument("--ops", default="",
                   help="comma-separated op_db keys (default: all; none: patterns only)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--min-bytes", type=float, default=4e6)
    p.add_argument("--samples", type=int, default=1, help="timed samples per op and dtype")
    p.add_argument("--pattern-seeds", default="0:40", help="A:B; '' for none")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0,
                   help="torch's (and so brrr's) threads; 0: torch's default. One thread "
                        "keeps a shared machine's other jobs from stalling each parallel "
                        "region for a scheduler period")
    p.add_argument("--quick", action="store_true",
                   help="a smoke test: add and sum in float32, one pattern, 1 round")
    p.add_argument("--jsonl", default="",
                   help="append each case to this file as it is measured (one JSON line), "
                        "so that a run killed midway (out of memory) keeps its rows")
    p.add_argument("--resume", action="store_true",
                   help="with --jsonl: skip the cases it holds; a case begun and never "
                        "finished (the process died in it) is reported as such, not rerun")
    args = p.parse_args(argv)
    if args.resume and not args.jsonl:
        p.error("--resume needs --jsonl")
    if args.quick:
        args.ops, args.dtypes, args.pattern_seeds, args.rounds = "add,sum", "float32", "0:1", 1
    args.results_dir = reporting.results_dir(args.results_dir, args.quick)
    return args


def main(argv=None) -> None:
    machine_env.ensure_malloc_env()
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from tests.coverage import opinfo_harness as h
    torch._dynamo.config.suppress_errors = False
    ops = h.ops_by_key(h.load_op_db())
    keys = [] if args.ops == "none" else [k for k in args.ops.split(",") if k] or sorted(ops)
    log = RowLog(args.jsonl, args.resume)
    start = time.perf_counter()
    for key in keys:
        if any(word in key for word in UNCHECKABLE) or key in h.UNDEFINED_OUTPUT:
            continue
        for name in args.dtypes.split(","):
            dtype = getattr(torch, name)
            if dtype in ops[key].supported_dtypes("cpu") and log.begin(key, name):
                log.add(_logged(op_cases(ops[key], dtype, args), start), key, name)
    if args.pattern_seeds and log.begin("patterns", args.pattern_seeds):
        log.add(_logged(pattern_cases(args), start), "patterns", args.pattern_seeds)
    rows = log.rows
    directory = Path(args.results_dir)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / Path(args.out).with_suffix(".json").name).write_text(
        json.dumps({"rows": rows}, indent=1))
    reporting.publish(args.out, render(rows, {"min bytes per case": f"{args.min_bytes:.3g}"}),
                    directory)


class RowLog:
    """The rows measured so far, appended to `path` (if given) case by case: a line
    {"begin": [case, dtype]} before a case runs, then its rows. With `resume`, the rows
    already there are kept and their cases skipped; a case begun without rows after it
    (the process died in it: an enlarged sample out of memory) gets one row saying so."""

    def __init__(self, path: str, resume: bool):
        self.path, self.rows, self.done = path, [], set()
        lines = Path(path).read_text().splitlines() if resume and Path(path).exists() else []
        begun = None
        for line in map(json.loads, lines):
            if "begin" in line:
                if begun is not None:
                    self.rows.append(_died(*begun))
                begun = tuple(line["begin"])
                self.done.add(begun)
            elif "end" in line:
                begun = None
            else:
                self.rows.append(line)
        if begun is not None:
            self.rows.append(_died(*begun))
        if path and not resume:
            Path(path).write_text("")

    def begin(self, case: str, dtype: str) -> bool:
        """Whether to run the case (not done before); marks it begun."""
        if (case, dtype) in self.done:
            return False
        self._write({"begin": [case, dtype]})
        return True

    def add(self, rows: list[dict], case: str, dtype: str) -> None:
        self.rows += rows
        for r in rows:
            self._write(r)
        self._write({"end": [case, dtype]})

    def _write(self, line: dict) -> None:
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(line) + "\n")


def _died(case: str, dtype: str) -> dict:
    return {"case": case, "dtype": dtype, "sample": -1, "desc": "",
            "status": "no result: the process died in this case (out of memory?)"}


def _logged(rows: list[dict], start: float) -> list[dict]:
    for r in rows:
        shown = {b: f"{t * 1e6:.1f} us" for b, t in r.get("times", {}).items()}
        print(f"[{time.perf_counter() - start:5.0f} s] {r['case']} {r['dtype']}: "
              f"{r['status']} {shown}", file=sys.stderr, flush=True)
    return rows


if __name__ == "__main__":
    main()
