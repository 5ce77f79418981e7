"""Op coverage sweep: every OpInfo sample in torch's op_db under brrr, in every dtype and
variant, with gradients; failures told apart from torch's own by aot_eager.

    python benchmarks/op_sweep.py --dtypes float32,float64,bfloat16,float16 --grad \\
        --variants op,inplace,out --jobs 2 [--resume] [--limit N] [--ops add,sum,...]
    python benchmarks/op_sweep.py --repro add:bfloat16:inplace:fwd:3   # one sample, loud
    python benchmarks/op_sweep.py ... --recheck     # again the samples that failed, after a fix

A job is (op, dtype, variant, fwd|grad). "op" calls the function, "inplace" its in-place
method on the sample's input (forward: the compiled function mutates its argument;
with gradients: a clone of it), "out" the out= overload into zeroed tensors passed as
arguments. Gradient jobs run for --grad-dtypes (float32 and float64) where the op is
differentiable; their forward outputs are checked too. Each sample is compared with eager
by tests/helpers.py:check_against_eager(strict=True): values, dtypes, strides, the
arguments after the call (what it mutated), gradients; float16/bfloat16 values outside
eager's tolerance pass if no further from a float64 run than eager is. A sample brrr
fails runs under aot_eager too: a failure there as well is torch's (shared); a value
mismatch runs again with brrr rounding as eager does or better (libm="accurate", and
low_precision="eager" in float16/bfloat16): passing there, it is drift (the defaults'
fast libm and float32 intermediates, by design), reported apart.

--jobs N runs N shards, each a driver process that restarts its worker when it dies or
stalls past --sample-timeout (that sample is recorded as a crash). Samples are appended
as they finish to one JSONL per shard (--jsonl, default in the temp dir); --resume skips
what is there. The report (op_sweep_report.py) goes to benchmarks/results/op_sweep.md.
Needs the `expecttest` package (op_db imports it).
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import op_sweep_report as report  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--grad", action="store_true", help="gradient jobs for --grad-dtypes")
    p.add_argument("--grad-dtypes", default="float32,float64")
    p.add_argument("--variants", default="op", help="comma-separated: op,inplace,out")
    p.add_argument("--ops", default="", help="comma-separated op keys (default: all)")
    p.add_argument("--limit", type=int, default=None, help="samples per job (default: all)")
    p.add_argument("--jobs", type=int, default=1, help="shards run side by side")
    p.add_argument("--shard", default=None, help="K/N: run only every N-th job from K")
    p.add_argument("--sample-timeout", type=float, default=300.0, help="seconds per sample")
    p.add_argument("--jsonl", default=os.path.join(tempfile.gettempdir(), "brrr-op-sweep.jsonl"),
                   help="results, one JSON line per sample (a suffix per shard)")
    p.add_argument("--resume", action="store_true", help="skip samples already in --jsonl")
    p.add_argument("--recheck", action="store_true",
                   help="run again the samples in --jsonl that brrr failed (after a fix)")
    p.add_argument("--out", default=str(RESULTS_DIR / "op_sweep.md"))
    p.add_argument("--report-only", action="store_true",
                   help="write the summary of what --jsonl holds, running nothing")
    p.add_argument("--repro", metavar="OP:DTYPE:VARIANT:fwd|grad:I",
                   help="run one sample under brrr and aot_eager, raising what it raises")
    p.add_argument("--worker", metavar="JOBS_JSON", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _split(text: str) -> list:
    return [x for x in text.split(",") if x]


def all_jobs(args) -> list:
    """[op, dtype, variant, grad] for every op, dtype and variant that apply, op by op
    (so a partial run covers its ops in every dtype)."""
    import torch
    from tests.coverage import opinfo_harness as h

    ops = h.ops_by_key(h.load_op_db())
    keys = _split(args.ops) or sorted(ops)
    missing = [k for k in keys if k not in ops]
    if missing:
        raise SystemExit(f"unknown op keys: {missing}")
    jobs = []
    for key in keys:
        op = ops[key]
        for d in _split(args.dtypes):
            if getattr(torch, d) not in op.supported_dtypes("cpu"):
                continue
            grad = args.grad and d in _split(args.grad_dtypes) and h.wants_grad(op, getattr(torch, d))
            for v in _split(args.variants):
                if not h.has_variant(op, v):
                    continue
                modes = [False, True] if v == "inplace" and grad else [grad and v == "op"]
                jobs += [[key, d, v, g] for g in modes]
    return jobs


# ---- the worker: runs samples, one JSON line each ------------------------------------

def worker(jobs_path: str, out_path: str, limit) -> None:
    import torch
    import torch._dynamo
    from tests.coverage import opinfo_harness as h

    torch._dynamo.config.suppress_errors = False
    ops = h.ops_by_key(h.load_op_db())
    todo = json.loads(Path(jobs_path).read_text())
    out = open(out_path, "a")
    for n, (job, start, only) in enumerate(todo):
        key, dtype_name, variant, grad = job
        op, dtype = ops[key], getattr(torch, dtype_name)
        print(f"JOB {n}", flush=True)
        base = {"op": key, "dtype": dtype_name, "variant": variant, "grad": grad}
        try:
            samples = h.samples(op, dtype, grad, limit)
        except Exception as err:  # noqa: BLE001
            samples, base["error"] = [], f"sample_inputs raised {type(err).__name__}: {err}"[:300]
        for i in [k for k in range(start, len(samples)) if only is None or k in only]:
            print(f"START {n} {i}", flush=True)
            row = dict(base, i=i, desc=h.describe(samples[i]))
            row["brrr"] = h.run_sample(op, samples[i], None, grad, variant, strict=True)
            if row["brrr"]["status"] in (h.MISMATCH, h.CRASH):
                row["aot_eager"] = h.run_sample(op, samples[i], "aot_eager", grad, variant,
                                                strict=True)
            if row["brrr"]["status"] == h.MISMATCH:
                row["eager_mode"] = h.run_sample(op, samples[i], None, grad, variant, strict=True,
                                                 options=report.rounding_options(
                                                     dtype in (torch.float16, torch.bfloat16)))
            out.write(json.dumps(dict(row, t=time.time())) + "\n")
            out.flush()
        out.write(json.dumps(dict(base, done=len(samples))) + "\n")
        out.flush()
        print(f"END {n}", flush=True)


# ---- the driver: restarts the worker past deaths and stalls --------------------------

def _reader(stream, q):
    for line in stream:
        q.put(line.strip())
    q.put(None)


def _run_worker(todo: list, args, jsonl: str, env) -> tuple:
    """Run the worker on `todo` until it finishes (None) or dies/stalls: then
    (position in todo, sample index or None, why)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(todo, f)
    cmd = [sys.executable, __file__, "--worker", f.name, "--jsonl", jsonl]
    cmd += ["--limit", str(args.limit)] if args.limit else []
    with open(jsonl + ".worker.log", "a") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                                cwd=str(REPO_ROOT))
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        job, sample, ended = None, None, False
        while True:
            try:
                line = q.get(timeout=args.sample_timeout + 120)
            except queue.Empty:
                proc.kill()
                proc.wait()
                os.unlink(f.name)
                return job, sample, f"timeout: no result in {args.sample_timeout:.0f}s"
            if line is None:
                proc.wait()
                os.unlink(f.name)
                if ended and job == len(todo) - 1:
                    return None
                if job is None:
                    raise SystemExit(f"the worker failed before any job (exit "
                                     f"{proc.returncode}); see {log.name}")
                return job, sample, f"worker died (exit {proc.returncode})"
            word, *nums = line.split()
            if word == "JOB":
                job, sample, ended = int(nums[0]), None, False
                print(" ".join(map(str, todo[job][0])), flush=True)
            elif word == "START":
                sample = int(nums[1])
            elif word == "END":
                ended = True


def drive(todo: list, args, jsonl: str, env) -> None:
    while todo:
        stopped = _run_worker(todo, args, jsonl, env)
        if stopped is None:
            return
        job, sample, why = stopped
        key, dtype, variant, grad = todo[job][0]
        base = {"op": key, "dtype": dtype, "variant": variant, "grad": grad}
        with open(jsonl, "a") as out:
            if sample is None:
                out.write(json.dumps(dict(base, done=0, error=why)) + "\n")
            else:
                crash = {"status": "crash", "stage": "crash", "detail": why}
                out.write(json.dumps(dict(base, i=sample, desc="", brrr=crash, aot_eager=None))
                          + "\n")
        todo = todo[job:] if sample is not None else todo[job + 1:]
        if sample is not None:
            todo[0] = [todo[0][0], sample + 1, todo[0][2]]


def pending(jobs: list, jsonl: str, resume: bool, recheck: bool = False) -> list:
    """[job, first sample, only these samples or None]: the jobs not finished in the
    JSONL files, or (recheck) the samples brrr failed there (not torch's own failures)."""
    if recheck:
        failed = {}
        for r in report.load(jsonl):
            if "done" not in r and report.classify(r) in ("brrr-only", "drift"):
                failed.setdefault(tuple(r[k] for k in ("op", "dtype", "variant", "grad")),
                                  []).append(r["i"])
        return [[j, 0, sorted(failed[tuple(j)])] for j in jobs if tuple(j) in failed]
    if not resume:
        return [[j, 0, None] for j in jobs]
    done, seen = report.progress(jsonl)
    return [[j, seen.get(tuple(j), -1) + 1, None] for j in jobs if tuple(j) not in done]


def run_shards(args, argv: list) -> None:
    """--jobs N: N copies of this driver, each on every N-th job."""
    argv = [a for i, a in enumerate(argv) if not a.startswith("--jobs")
            and not (i and argv[i - 1] == "--jobs")]
    procs = [subprocess.Popen([sys.executable, __file__, *argv, "--jobs", "1",
                               "--shard", f"{k}/{args.jobs}", "--resume"], cwd=str(REPO_ROOT))
             for k in range(args.jobs)]
    for p in procs:
        p.wait()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        worker(args.worker, args.jsonl, args.limit)
        return 0
    if args.repro:
        from benchmarks.op_sweep_repro import repro
        return repro(args.repro, args.limit)
    jobs = all_jobs(args)
    Path(args.jsonl).parent.mkdir(parents=True, exist_ok=True)
    if not (args.resume or args.shard or args.recheck or args.report_only):
        for old in report.jsonl_files(args.jsonl):
            os.unlink(old)
    os.environ.setdefault("BRRR_CACHE_DIR", tempfile.mkdtemp(prefix="brrr-op-sweep-"))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    t0 = time.time()
    if args.report_only:
        pass
    elif args.jobs > 1:
        os.environ["BRRR_CACHE_DIR"] = env["BRRR_CACHE_DIR"]
        run_shards(args, argv)
    else:
        k, n = map(int, (args.shard or "0/1").split("/"))
        jsonl = f"{args.jsonl}.{k}of{n}" if args.shard else args.jsonl
        drive(pending(jobs[k::n], args.jsonl, args.resume, args.recheck), args, jsonl, env)
        if args.shard:
            return 0
    Path(args.out).write_text(report.summary(report.load(args.jsonl), jobs, args,
                                             None if args.report_only else time.time() - t0))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
