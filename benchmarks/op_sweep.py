"""Op coverage sweep: every OpInfo sample in torch's op_db under brrr and under aot_eager.

    python benchmarks/op_sweep.py [--dtypes float32,bfloat16] [--ops add,sum,...]
                                  [--limit N] [--no-grad] [--op-timeout 300]
                                  [--jsonl PATH] [--resume] [--out PATH]

Each sample (its tensors become the compiled function's arguments) is compared with
eager through tests/helpers.py:check_against_eager: outputs and, for differentiable ops
in floating dtypes, the gradients of the inputs. A sample is pass / mismatch / crash
under each backend, or skip when eager itself raises on it. aot_eager runs the same
samples so that what fails there too (random ops, undefined outputs, AOTAutograd and
Dynamo limits) is told apart from brrr's own failures.

The ops run in a worker process that the driver restarts when it dies (a crashing
kernel) or stalls past --op-timeout; the op it was on is recorded as such. Results go
line by line to a JSONL file (--resume continues one) and the summary table to
benchmarks/results/op_sweep.md. Needs the `expecttest` package (op_db imports it).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import platform
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

BACKENDS = ("brrr", "aot_eager")
STATUSES = ("pass", "mismatch", "crash")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--ops", default="", help="comma-separated op keys (default: all)")
    p.add_argument("--limit", type=int, default=None, help="samples per op and dtype")
    p.add_argument("--no-grad", action="store_true", help="forward only")
    p.add_argument("--op-timeout", type=float, default=300.0, help="seconds per op and dtype")
    p.add_argument("--jsonl", default=os.path.join(tempfile.gettempdir(), "brrr-op-sweep.jsonl"),
                   help="per-op results, one JSON line each")
    p.add_argument("--resume", action="store_true", help="skip jobs already in --jsonl")
    p.add_argument("--out", default=str(RESULTS_DIR / "op_sweep.md"))
    p.add_argument("--worker", metavar="JOBS_JSON", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---- the worker: runs jobs, one JSON line per finished job ---------------------------

def worker(jobs_path: str, out_path: str, limit, grad: bool) -> None:
    import torch
    import torch._dynamo
    from tests.coverage import opinfo_harness as h

    torch._dynamo.config.suppress_errors = False
    ops = h.ops_by_key(h.load_op_db())
    jobs = json.loads(Path(jobs_path).read_text())
    for i, (key, dtype_name) in enumerate(jobs):
        print(f"START {i}", flush=True)
        op, dtype = ops[key], getattr(torch, dtype_name)
        g = grad and h.wants_grad(op, dtype)
        record = {"op": key, "dtype": dtype_name, "grad": g, "samples": [], "limit": limit}
        try:
            samples = h.samples(op, dtype, g, limit)
        except Exception as err:  # noqa: BLE001
            record["error"] = f"sample_inputs raised {type(err).__name__}: {err}"[:300]
            samples = []
        for j, s in enumerate(samples):
            row = {"i": j, "desc": h.describe(s)}
            for backend in BACKENDS:
                row[backend] = h.run_sample(op, s, None if backend == "brrr" else backend, g)
            record["samples"].append(row)
        with open(out_path, "a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"DONE {i}", flush=True)


# ---- the driver: restarts the worker past deaths and stalls --------------------------

def _reader(stream, q):
    for line in stream:
        q.put(line.strip())
    q.put(None)


def _died(key, dtype_name, why) -> dict:
    return {"op": key, "dtype": dtype_name, "grad": None, "samples": [], "error": why}


def drive(jobs: list, args, env) -> None:
    start = 0
    while start < len(jobs):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(jobs[start:], f)
        cmd = [sys.executable, __file__, "--worker", f.name, "--jsonl", args.jsonl]
        cmd += ["--no-grad"] if args.no_grad else []
        cmd += ["--limit", str(args.limit)] if args.limit else []
        log = open(args.jsonl + ".worker.log", "a")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                                cwd=str(REPO_ROOT))
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        current, finished = None, False
        while True:
            try:
                line = q.get(timeout=args.op_timeout + (120 if current is None else 0))
            except queue.Empty:
                proc.kill()
                why = f"timeout: no result in {args.op_timeout:.0f}s"
                break
            if line is None:
                proc.wait()
                if current is None and proc.returncode != 0:
                    raise SystemExit(f"the worker failed outside any op (exit {proc.returncode}); "
                                     f"see {log.name}")
                finished = current is None
                why = f"worker died (exit {proc.returncode})"
                break
            if line.startswith("START "):
                current = start + int(line.split()[1])
                print(f"[{current + 1}/{len(jobs)}] {jobs[current][0]} {jobs[current][1]}",
                      flush=True)
            elif line.startswith("DONE "):
                current = None
        os.unlink(f.name)
        log.close()
        if finished or current is None:
            break
        with open(args.jsonl, "a") as out:
            out.write(json.dumps(_died(*jobs[current], why)) + "\n")
        start = current + 1


def all_jobs(dtypes: list, only: list) -> list:
    import torch
    from tests.coverage import opinfo_harness as h

    ops = h.ops_by_key(h.load_op_db())
    keys = only or sorted(ops)
    missing = [k for k in keys if k not in ops]
    if missing:
        raise SystemExit(f"unknown op keys: {missing}")
    return [(k, d) for d in dtypes for k in keys
            if getattr(torch, d) in ops[k].supported_dtypes("cpu")]


# ---- the summary ---------------------------------------------------------------------

def load_records(path: str) -> list:
    latest = {}
    if os.path.exists(path):
        for line in Path(path).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                latest[(r["op"], r["dtype"])] = r
    return list(latest.values())


def _counts(record, backend) -> collections.Counter:
    c = collections.Counter(s[backend]["status"] for s in record["samples"])
    if record.get("error") and not record["samples"]:
        c["died"] += 1
    return c


def _brrr_only(record) -> list:
    return [s for s in record["samples"]
            if s["aot_eager"]["status"] == "pass" and s["brrr"]["status"] != "pass"]


def _cell(c) -> str:
    return " / ".join(str(c.get(k, 0)) for k in STATUSES)


def summary(records: list, args, seconds: float | None) -> str:
    import torch
    by_dtype = collections.defaultdict(list)
    for r in records:
        by_dtype[r["dtype"]].append(r)
    lines = ["# Op coverage sweep: brrr vs aot_eager on torch's op_db", "",
             f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs; "
             f"`python benchmarks/op_sweep.py --dtypes {args.dtypes}"
             + (f" --limit {args.limit}" if args.limit else "")
             + (" --no-grad" if args.no_grad else "") + "`"
             + (f"; {seconds / 60:.0f} min" if seconds else ""), "",
             "Every OpInfo CPU sample input, compiled with `torch.compile(fn, backend=...)` "
             "and compared with eager by `tests/helpers.py:check_against_eager` (outputs; "
             "gradients of the inputs too where the op and dtype are differentiable). "
             "Cells read pass / mismatch / crash. *brrr-only* counts samples that pass under "
             "aot_eager but not under brrr: the target is 0. *fused* counts samples where "
             "brrr generated at least one kernel. Samples eager itself rejects are skipped.",
             "", "## Totals", "",
             "| dtype | ops | samples | skipped | brrr pass/mism/crash | aot_eager pass/mism/crash "
             "| brrr-only failures | aot_eager-only failures | fused |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for dt, recs in sorted(by_dtype.items()):
        b, a = collections.Counter(), collections.Counter()
        only_b = only_a = fused = n = skipped = 0
        for r in recs:
            for s in r["samples"]:
                if s["brrr"]["status"] == "skip":
                    skipped += 1
                    continue
                n += 1
                b[s["brrr"]["status"]] += 1
                a[s["aot_eager"]["status"]] += 1
                only_b += s["aot_eager"]["status"] == "pass" and s["brrr"]["status"] != "pass"
                only_a += s["brrr"]["status"] == "pass" and s["aot_eager"]["status"] != "pass"
                fused += bool(s["brrr"].get("kernels"))
        died = sum(1 for r in recs if r.get("error") and not r["samples"])
        lines.append(f"| {dt} | {len(recs)}" + (f" ({died} died/timed out)" if died else "")
                     + f" | {n} | {skipped} | {_cell(b)} | {_cell(a)} | {only_b} | {only_a} "
                     f"| {fused} |")
    builds = [(r, s) for r in records for s in r["samples"] if s["brrr"].get("build_failed")]
    lines += ["", "## Kernels that failed to build (their groups ran through ATen)", ""]
    lines += [f"- `{r['op']}` {r['dtype']} sample {s['i']} ({s['desc']}): "
              f"{s['brrr']['build_failed']}" for r, s in builds] or ["None."]
    lines += ["", "## brrr-only failures (pass under aot_eager, fail under brrr)", ""]
    fails = [(r, s) for r in records for s in _brrr_only(r)]
    died = [r for r in records if r.get("error") and not r["samples"]]
    if not fails and not died:
        lines.append("None.")
    for r in died:
        lines.append(f"- `{r['op']}` {r['dtype']}: {r['error']}")
    for r, s in sorted(fails, key=lambda x: (x[0]["op"], x[0]["dtype"], x[1]["i"])):
        lines.append(f"- `{r['op']}` {r['dtype']} sample {s['i']} ({s['desc']}): "
                     f"**{s['brrr']['status']}** {s['brrr']['detail']}")
    lines += ["", "## Per op", "",
              "| op | dtype | grad | samples | brrr | aot_eager | brrr-only | fused |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(records, key=lambda r: (r["op"], r["dtype"])):
        live = [s for s in r["samples"] if s["brrr"]["status"] != "skip"]
        sub = dict(r, samples=live)
        note = f" ({r['error'][:60]})" if r.get("error") else ""
        note += f" (at most {r['limit']} samples, spread)" if r.get("limit") else ""
        lines.append(f"| `{r['op']}` | {r['dtype']} | {'y' if r['grad'] else ''} | {len(live)}"
                     f"{note} | {_cell(_counts(sub, 'brrr'))} | {_cell(_counts(sub, 'aot_eager'))} "
                     f"| {len(_brrr_only(sub))} | {sum(bool(s['brrr'].get('kernels')) for s in live)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args.worker, args.jsonl, args.limit, not args.no_grad)
        return 0
    dtypes = [d for d in args.dtypes.split(",") if d]
    jobs = all_jobs(dtypes, [o for o in args.ops.split(",") if o])
    Path(args.jsonl).parent.mkdir(parents=True, exist_ok=True)
    if args.resume:
        done = {(r["op"], r["dtype"]) for r in load_records(args.jsonl)}
        jobs = [j for j in jobs if tuple(j) not in done]
    elif os.path.exists(args.jsonl):
        os.unlink(args.jsonl)
    cache = tempfile.mkdtemp(prefix="brrr-op-sweep-")
    env = dict(os.environ, BRRR_CACHE_DIR=cache, PYTHONPATH=str(REPO_ROOT))
    t0 = time.time()
    drive(jobs, args, env)
    wanted = {(k, d) for k, d in all_jobs(dtypes, [o for o in args.ops.split(",") if o])}
    records = [r for r in load_records(args.jsonl) if (r["op"], r["dtype"]) in wanted]
    Path(args.out).write_text(summary(records, args, time.time() - t0))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
