"""Fuzzer: random graphs (benchmarks/patterns.py) compiled with brrr and checked against
eager for values, dtypes, strides, mutated inputs and gradients.

    python benchmarks/fuzz.py --seed 1234              # print that graph as a runnable
                                                       # script, then check it
    python benchmarks/fuzz.py --seed 1234 --minimize   # the smallest part still failing
    python benchmarks/fuzz.py --seeds 0:10000 --jobs 2 [--resume]

Each seed's pattern is checked by tests/helpers.py:check_against_eager(strict=True,
reference=...): a value outside eager's tolerance still passes when it is no further
from the graph's exact math (float64 throughout, its casts to lower precision too) than
eager is (brrr sums in its own order, keeps low-precision chains in float32). A
failing seed runs under aot_eager too: failing there as well makes it torch's (shared),
not brrr's; a value mismatch runs again with brrr rounding as eager does or better
(low_precision="eager" for float16/bfloat16 graphs, and libm="accurate": correctly
rounded transcendental functions where the default calls libmvec's 2-4 ulp ones):
passing there, it is drift (brrr's fast defaults by design, not a wrong kernel). A
seed whose pattern eager rejects (an in-place update of a value autograd saved) draws
the next attempt of the same seed. Results go to a JSONL per shard, appended seed by
seed (--resume continues), and the summary to benchmarks/results/fuzz.md.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

ATTEMPTS = 8

from benchmarks.op_sweep_report import STAGES, classify_failure, rounding_options  # noqa: E402


def pattern_for(seed: int, max_numel: int = 1 << 19):
    """The first attempt of `seed` whose graph eager runs (forward and backward)."""
    import torch
    from benchmarks.patterns import generate
    from tests.helpers import _gradients, clone_input

    for attempt in range(ATTEMPTS):
        p = generate(seed, max_numel, attempt=attempt)
        f, inputs = p.build()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                args = [clone_input(x) for x in inputs]
                out = f(*args)
                if p.requires_grad:     # w.r.t. the leaves this run used, so backward runs
                    _gradients(out, [x for x in args if x.requires_grad], [])
        except (RuntimeError, IndexError, ValueError):
            continue
        torch._dynamo.reset()
        return p
    return None


def check(seed: int, max_numel: int = 1 << 19) -> dict:
    """{"seed", "status" (pass, skip, brrr-only, shared, drift), "stage", "detail", ...}."""
    p = pattern_for(seed, max_numel)
    if p is None:
        return {"seed": seed, "status": "skip", "detail": f"eager rejects {ATTEMPTS} attempts"}
    row = {"seed": seed, "attempt": p.attempt, "dtype": p.dtype, "ops": len(p.lines),
           "grad": p.requires_grad, "status": "pass", "stage": "", "detail": ""}
    brrr = _run(p, None, None)
    if brrr["status"] == "pass":
        return row
    low = "float16" in p.script() or "bfloat16" in p.script()
    eager_mode = _run(p, None, rounding_options(low)) if brrr["status"] == "mismatch" else None
    status = classify_failure(brrr, _run(p, "aot_eager", None), eager_mode)
    row.update(status=status, stage=brrr["stage"], detail=brrr["detail"])
    return row


def _run(p, backend, options) -> dict:
    """{"status", "stage", "detail"} of one pattern under one backend."""
    import torch
    from tests.helpers import check_against_eager

    f, inputs = p.build()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_against_eager(f, *inputs, grad=p.requires_grad, backend=backend,
                                options=options, allow_fallback=True, strict=True,
                                reference=p.build_reference())
        return {"status": "pass", "stage": "", "detail": ""}
    except AssertionError as err:
        return {"status": "mismatch", "stage": _stage(str(err)), "detail": _line(str(err))}
    except Exception as err:  # noqa: BLE001  (the backend crashed)
        return {"status": "crash", "stage": "crash",
                "detail": f"{type(err).__name__}: {_line(str(err))}"}
    finally:
        torch._dynamo.reset()


def _stage(text: str) -> str:
    return next((s for s in STAGES if text.startswith(s)), "output")


def _line(text: str) -> str:
    return " | ".join(x.strip() for x in text.strip().splitlines()[:4])[:300]


# ---- running ranges: shards, a worker that is restarted past crashes ---------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, help="print one seed's graph as a script and check it")
    p.add_argument("--minimize", action="store_true",
                   help="with --seed: drop what the failure does not need")
    p.add_argument("--seeds", default="0:100", help="A:B, the half-open range to run")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--max-numel", type=int, default=1 << 19, help="elements per tensor, at most")
    p.add_argument("--jsonl", default=os.path.join(tempfile.gettempdir(), "brrr-fuzz.jsonl"))
    p.add_argument("--resume", action="store_true")
    p.add_argument("--report-only", action="store_true",
                   help="write the summary of what --jsonl holds, running nothing")
    p.add_argument("--recheck", action="store_true",
                   help="run again the seeds of the range brrr failed (after a fix)")
    p.add_argument("--seed-timeout", type=float, default=300.0)
    p.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results" / "fuzz.md"))
    p.add_argument("--worker", nargs=2, type=int, metavar=("FIRST", "STEP"),
                   help=argparse.SUPPRESS)
    p.add_argument("--last", type=int, help=argparse.SUPPRESS)
    p.add_argument("--since", type=float, default=time.time(), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def load(base: str) -> dict:
    rows = {}
    for path in [base, *sorted(Path(base).parent.glob(Path(base).name + ".*of*"))]:
        if not os.path.exists(path) or str(path).endswith(".log"):
            continue
        for line in Path(path).read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:          # cut short by a kill
                continue
            if r.get("t", 0) >= rows.get(r["seed"], {}).get("t", 0):
                rows[r["seed"]] = r      # a --recheck row outranks the shards' older one
    return rows


def worker(args) -> None:
    first, step = args.worker
    done = {s for s, r in load(args.jsonl).items()     # --recheck: what failed before it
            if not args.recheck or r["status"] in ("pass", "skip", "shared")
            or r.get("t", 0) >= args.since}
    with open(args.jsonl, "a") as out:
        for seed in range(first, args.last, step):
            if seed in done:
                continue
            print(f"START {seed}", flush=True)
            out.write(json.dumps(dict(check(seed, args.max_numel), t=time.time())) + "\n")
            out.flush()


def shard(args, k: int, n: int, lo: int, hi: int) -> None:
    """Seeds lo+k, lo+k+n, ... below hi in a worker restarted when it dies or stalls."""
    import queue
    import threading
    jsonl = f"{args.jsonl}.{k}of{n}" if n > 1 else args.jsonl
    while True:
        cmd = [sys.executable, __file__, "--worker", str(lo + k), str(n), "--last", str(hi),
               "--jsonl", jsonl, "--max-numel", str(args.max_numel)]
        cmd += ["--recheck", "--since", str(args.since)] if args.recheck else []
        with open(jsonl + ".worker.log", "a") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                                    cwd=str(REPO_ROOT))
        q: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [q.put(x) for x in proc.stdout] + [q.put(None)],
                         daemon=True).start()
        seed, why = None, None
        while why is None:
            try:
                line = q.get(timeout=args.seed_timeout)
            except queue.Empty:
                proc.kill()
                why = f"timeout: no result in {args.seed_timeout:.0f}s"
                break
            if line is None:
                why = f"worker died (exit {proc.wait()})"
            else:
                seed = int(line.split()[1])
        if proc.wait() == 0 or seed is None:
            return
        with open(jsonl, "a") as out:
            out.write(json.dumps({"seed": seed, "status": "brrr-only", "stage": "crash",
                                  "detail": why, "t": time.time()}) + "\n")


def summary(rows: dict, lo: int, hi: int, seconds: float | None) -> str:
    import torch
    mine = [r for s, r in sorted(rows.items()) if lo <= s < hi]
    c = collections.Counter(r["status"] for r in mine)
    lines = ["# Fuzzer: random graphs under brrr against eager", "",
             f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs; "
             f"`python benchmarks/fuzz.py --seeds {lo}:{hi}`"
             + (f"; this invocation {seconds / 60:.0f} min" if seconds else ""), "",
             "Graphs from benchmarks/patterns.py (pointwise, broadcasts, reductions, views, "
             "slices, masks, casts, in-place updates of intermediates and inputs; all four "
             "float dtypes; transposed, step-sliced and expanded inputs; zero-size and size-1 "
             "dims; inputs requiring grad), checked for values, dtypes, strides, mutated "
             "inputs and gradients. A value outside eager's tolerance passes when its worst "
             "error against the graph's exact math (float64 throughout, casts included) is at "
             "most twice eager's plus one tolerance unit. "
             "*shared*: aot_eager fails too (torch's). *drift*: a graph that matches eager "
             "once brrr rounds as eager does or better: `libm=\"accurate\"` (correctly "
             "rounded transcendental functions; the default's are within 2-4 ulp) and, in "
             "float16/bfloat16, `low_precision=\"eager\"` (float32 intermediates, by "
             "design). "
             "`python benchmarks/fuzz.py --seed N` prints seed N as a runnable script.", "",
             f"Seeds {lo}:{hi}: {len(mine)} checked of {hi - lo}; pass {c['pass']}, "
             f"brrr-only {c['brrr-only']}, shared with aot_eager {c['shared']}, "
             f"drift {c['drift']}, skipped (eager rejects every attempt) "
             f"{c['skip']}.", "",
             "| dtype | graphs | pass | brrr-only | shared | drift |",
             "| --- | --- | --- | --- | --- | --- |"]
    by = collections.defaultdict(collections.Counter)
    for r in mine:
        by[r.get("dtype", "?")][r["status"]] += 1
    for dt, k in sorted(by.items()):
        lines.append(f"| {dt} | {sum(k.values())} | {k['pass']} | {k['brrr-only']} "
                     f"| {k['shared']} | {k['drift']} |")
    for kind in ("brrr-only", "shared", "drift"):
        lines += ["", f"## {kind} mismatches", ""]
        lines += [f"- seed {r['seed']} ({r.get('dtype', '?')}, {r.get('ops', '?')} ops"
                  f"{', grad' if r.get('grad') else ''}): {r['stage']}: {r['detail'][:200]} "
                  f"(`python benchmarks/fuzz.py --seed {r['seed']} --minimize`)"
                  for r in mine if r["status"] == kind] or ["None."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.seed is not None:
        p = pattern_for(args.seed, args.max_numel)
        if p is not None and args.minimize:
            from benchmarks.fuzz_minimize import minimize
            p = minimize(p, _run)
        print(p.script() if p else f"# seed {args.seed}: eager rejects every attempt")
        print(f"# result: {check(args.seed, args.max_numel)}")
        return 0
    lo, hi = map(int, args.seeds.split(":"))
    if not (args.resume or args.recheck or args.report_only):
        for path in [args.jsonl, *Path(args.jsonl).parent.glob(Path(args.jsonl).name + ".*of*")]:
            if os.path.exists(path):
                os.unlink(path)
    os.environ.setdefault("BRRR_CACHE_DIR", tempfile.mkdtemp(prefix="brrr-fuzz-"))
    os.environ["PYTHONPATH"] = str(REPO_ROOT)
    t0 = time.time()
    import threading
    threads = [threading.Thread(target=shard, args=(args, k, args.jobs, lo, hi))
               for k in range(args.jobs)]
    for t in threads if not args.report_only else []:
        t.start()
    for t in threads if not args.report_only else []:
        t.join()
    Path(args.out).write_text(summary(load(args.jsonl), lo, hi,
                                      None if args.report_only else time.time() - t0))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
