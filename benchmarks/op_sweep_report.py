"""The op sweep's results: its JSONL files read back, and the markdown summary
(benchmarks/results/op_sweep.md): a section per dtype (forward: outputs, dtypes,
strides, mutated arguments) and one for gradients, each with its counts, its brrr-only
failures (one line each, with the command that reproduces it) and the failures shared
with aot_eager (torch's)."""
from __future__ import annotations

import collections
import glob
import json
import os
import platform
from pathlib import Path

COLUMNS = ("| variant | mode | ops | samples | skipped | passed | brrr-only | shared "
           "| drift | not run |")


def jsonl_files(base: str) -> list:
    return [p for p in [base, *sorted(glob.glob(base + ".*of*"))]
            if os.path.exists(p) and not p.endswith(".log")]


def _job(r) -> tuple:
    return (r["op"], r["dtype"], r["variant"], r["grad"])


def load(base: str) -> list:
    """The latest line for each sample or job end, from every shard's file (by its
    time stamp where it has one: --recheck appends to whichever shard runs it)."""
    latest = {}
    for path in jsonl_files(base):
        for line in Path(path).read_text().splitlines():
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:          # a line cut short by a kill
                continue
            key = _job(r) + (r.get("i", "done"),)
            if r.get("t", 0) >= latest.get(key, {}).get("t", 0):     # a recheck wins
                latest[key] = r
    return list(latest.values())


def progress(base: str) -> tuple:
    """(finished jobs, {job: last sample index recorded})."""
    done, seen = set(), {}
    for r in load(base):
        if "done" in r:
            done.add(_job(r))
        else:
            seen[_job(r)] = max(seen.get(_job(r), -1), r["i"])
    return done, seen


STAGES = ("output", "input after the call", "gradient")


def _error_type(result: dict) -> str:
    return result.get("detail", "").split(":")[0].split(" at ")[0]


def rounding_options(low_precision: bool) -> dict:
    """brrr's options that round as eager does or better (a mismatch that passes under
    them is drift): correctly rounded libm, and in float16/bfloat16 eager's per-op
    rounding of low-precision intermediates."""
    return {"libm": "accurate", **({"low_precision": "eager"} if low_precision else {})}


def classify_failure(brrr: dict, aot_eager: dict | None, eager_mode: dict | None) -> str:
    """brrr-only, shared or drift, for a sample (or graph) brrr failed.

    shared: aot_eager fails too, in the same way: both raise the same exception type, or
    aot_eager raises where brrr gives a wrong value, or both give wrong values with
    aot_eager's no later (output, mutated input, gradient) than brrr's; the failure is
    torch's. drift: matches eager once brrr rounds as eager does or better (`eager_mode`:
    the caller's run with low_precision="eager" for float16/bfloat16, the fuzzer's also
    with libm="accurate"): the defaults' float32 intermediates and fast libm, by design,
    not a wrong value; also when that mode fails only later, and the way
    aot_eager does (an argmax over drifted bfloat16 values, then torch's gradients)."""
    if aot_eager and aot_eager["status"] == "crash":
        if brrr["status"] != "crash" or _error_type(brrr) == _error_type(aot_eager):
            return "shared"
    elif aot_eager and aot_eager["status"] == "mismatch" and brrr["status"] == "mismatch":
        a, b = aot_eager.get("stage"), brrr.get("stage")
        if a not in STAGES or b not in STAGES or STAGES.index(a) <= STAGES.index(b):
            return "shared"
    if eager_mode and eager_mode["status"] == "pass":
        return "drift"
    if eager_mode and _later(eager_mode, brrr) \
            and classify_failure(eager_mode, aot_eager, None) == "shared":
        return "drift"
    return "brrr-only"


def _later(a: dict, b: dict) -> bool:
    """Did result `a` fail at a later stage than result `b` (both mismatches)?"""
    sa, sb = a.get("stage"), b.get("stage")
    return a["status"] == b["status"] == "mismatch" and sa in STAGES and sb in STAGES \
        and STAGES.index(sa) > STAGES.index(sb)


def classify(r) -> str:
    """skip, pass, brrr-only, shared or drift."""
    b = r["brrr"]["status"]
    if b in ("skip", "pass"):
        return b
    return classify_failure(r["brrr"], r.get("aot_eager"), r.get("eager_mode"))


def repro_command(r) -> str:
    mode = "grad" if r["grad"] else "fwd"
    return f"python benchmarks/op_sweep.py --repro {r['op']}:{r['dtype']}:{r['variant']}:{mode}:{r['i']}"


def _limit_flag(args) -> str:
    return f" --limit {args.limit}" if args.limit else ""


def _table(rows: list, jobs: list, keyf) -> list:
    """Counts per (variant, mode) over sample records `rows` and planned `jobs`."""
    lines = [COLUMNS, "| --- " * 10 + "|"]
    finished = {j for j in jobs}
    groups = collections.defaultdict(list)
    for r in rows:
        groups[keyf(r)].append(r)
    planned = collections.Counter((j[2], "grad" if j[3] else "fwd") for j in finished)
    ran = collections.defaultdict(set)
    for r in rows:
        ran[keyf(r)].add(r["op"])
    for key in sorted(set(groups) | set(planned)):
        c = collections.Counter(classify(r) for r in groups.get(key, []))
        n = sum(c.values()) - c["skip"]
        lines.append(f"| {key[0]} | {key[1]} | {len(ran[key])} | {n} | {c['skip']} | {c['pass']} "
                     f"| {c['brrr-only']} | {c['shared']} | {c['drift']} | {planned[key] - len(ran[key])} jobs |")
    return lines


def _failures(rows: list, kind: str, args) -> list:
    """One line per failing job: how many of its samples, the first reason, a repro."""
    by_job = collections.defaultdict(list)
    for r in rows:
        if classify(r) == kind:
            by_job[_job(r)].append(r)
    if not by_job:
        return ["None."]
    lines = []
    for job, rs in sorted(by_job.items()):
        rs.sort(key=lambda r: r["i"])
        first = rs[0]["brrr"]
        mode = "with gradients" if job[3] else "forward"
        lines.append(f"- `{job[0]}` {job[2]} {mode}, {len(rs)} sample(s) ({rs[0]['desc'][:80]}): "
                     f"**{first['status']}** ({first.get('stage', '')}) "
                     f"{first['detail'][:220]} — `{repro_command(rs[0])}{_limit_flag(args)}`")
    return lines


def _section(title: str, rows: list, jobs: list, args) -> list:
    mode = lambda r: (r["variant"], "grad" if r["grad"] else "fwd")  # noqa: E731
    return [f"## {title}", "", *_table(rows, jobs, mode), "", "### brrr-only failures", "",
            *_failures(rows, "brrr-only", args), "", "### Shared with aot_eager (torch's)", "",
            *_failures(rows, "shared", args), "",
            "### Drift (matches eager under libm=\"accurate\", and low_precision=\"eager\" in float16/bfloat16)", "",
            *_failures(rows, "drift", args), ""]


def summary(records: list, jobs: list, args, seconds: float | None) -> str:
    import torch
    wanted = {tuple(j) for j in jobs}
    rows = [r for r in records if "done" not in r and _job(r) in wanted]
    cmd = (f"python benchmarks/op_sweep.py --dtypes {args.dtypes}"
           + (f" --grad --grad-dtypes {args.grad_dtypes}" if args.grad else "")
           + f" --variants {args.variants}{_limit_flag(args)}"
           + (f" --ops {args.ops}" if args.ops else ""))
    lines = ["# Op coverage sweep: brrr against eager on torch's op_db, aot_eager to tell "
             "torch's failures apart", "",
             f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs; `{cmd}`"
             + (f"; this invocation {seconds / 60:.0f} min" if seconds else ""), "",
             "Every OpInfo CPU sample (at most --limit per job, spread over its list), "
             "compiled with brrr and compared with eager by `tests/helpers.py:"
             "check_against_eager(strict=True)`: values, dtypes, strides, the arguments "
             "after the call (mutated inputs, out= tensors) and, in *grad* mode, gradients. "
             "float16/bfloat16 values outside eager's tolerance pass when they are no further "
             "from a float64 run of the sample than eager is. A failing sample runs under "
             "aot_eager too: *shared* failures fail there as well (torch's, not brrr's); "
             "*brrr-only* ones are brrr's bugs (target: 0). A value mismatch that passes "
             "when brrr rounds as eager does or better (`libm=\"accurate\"`: correctly "
             "rounded transcendental functions; in float16/bfloat16 also "
             "`low_precision=\"eager\"`: every op rounded) is *drift*: the defaults' fast "
             "libm and float32 intermediates, listed apart. Variants: *op* the function, "
             "*inplace* its in-place method (forward: on the compiled function's argument; "
             "grad: on a clone), *out* its out= overload. *not run*: jobs of the plan this "
             "report has no samples for yet (the sweep is resumable).", ""]
    grad_rows = [r for r in rows if r["grad"]]
    for dt in [d for d in args.dtypes.split(",") if d]:
        # a sample whose gradient alone failed passed its forward checks
        fwd = [r if r["brrr"].get("stage") != "gradient" else dict(r, brrr={"status": "pass"})
               for r in rows if r["dtype"] == dt]
        lines += _section(f"{dt}", fwd, [j for j in wanted if j[1] == dt], args)
    if args.grad:
        for dt in [d for d in args.grad_dtypes.split(",") if d]:
            mine = [r for r in grad_rows if r["dtype"] == dt]
            failed_fwd = {(_job(r), r["i"]) for r in mine
                          if classify(r) in ("brrr-only", "shared")
                          and r["brrr"].get("stage") != "gradient"}
            mine = [r for r in mine if (_job(r), r["i"]) not in failed_fwd]
            lines += _section(f"Gradients, {dt} (samples whose forward passed)", mine,
                              [j for j in wanted if j[1] == dt and j[3]], args)
    died = [r for r in records if r.get("error") and _job(r) in wanted]
    lines += ["## Jobs whose samples could not be made", ""]
    lines += [f"- `{r['op']}` {r['dtype']} {r['variant']}: {r['error']}" for r in died] or ["None."]
    # "build_failed": what records written before every fallback was counted call it
    fell = [(r, r["brrr"].get("fallback") or r["brrr"].get("build_failed")) for r in rows]
    fell = [(r, why) for r, why in fell if why]
    lines += ["", "## Groups brrr meant to fuse that ran through ATen (lowering or build "
              "failures)", ""]
    lines += [f"- `{r['op']}` {r['dtype']} {r['variant']} sample {r['i']}: {why}"
              for r, why in fell] or ["None."]
    return "\n".join(lines) + "\n"
