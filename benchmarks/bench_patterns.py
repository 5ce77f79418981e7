"""Generated-pattern timing sweep: brrr against eager and Inductor on random fusable graphs
(benchmarks/patterns.py, the fuzzer's generator), sized from the L1 cache to 16x the
last-level cache.

    python benchmarks/bench_patterns.py [--seeds 0:60] [--sizes l1,l2,llc,4llc,16llc]
        [--backends eager,floor,inductor,brrr] [--rounds 7] [--max-tensor-bytes 512e6]
    python benchmarks/bench_patterns.py --only SEED:SIZE     # one case, printed

For each seed and size class the generator draws patterns (2-20 statements: pointwise
ops, broadcasts, reductions, views, transposes, slices, masks, casts; any float dtype;
transposed, step-sliced and expanded inputs) until one's largest input is between an
sixteenth of the class's size and twice it; cache sizes are read from this machine
at run time (the last-level cache as the share this process measures: measured_llc;
--llc-bytes sets it). Patterns that mutate their inputs are left out (repeated calls would time
other values each round), and so are empty ones. Inputs are detached: this times the
forward program. Every backend is checked against eager first; timing is interleaved
rounds, median over rounds. A case is *slower than eager* when brrr's median exceeds
eager's by more than 10% while eager's is above Dynamo's own per-call floor (below it,
no torch.compile backend can match eager). Writes results/patterns.md and patterns.json.
"""
from __future__ import annotations

import functools
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import torch  # noqa: E402

import harness  # noqa: E402
import reporting  # noqa: E402
import machine_env  # noqa: E402
from benchmarks.bench_patterns_report import LARGE, render  # noqa: E402
from benchmarks.patterns import generate  # noqa: E402
from workloads import bytes_moved  # noqa: E402

SIZES = ("l1", "l2", "llc", "4llc", "16llc")
TARGET_ROUND_S = 0.02
ATTEMPTS = 40
LOW_PRECISION_TOL = dict(rtol=0.1, atol=0.1)   # fused chains keep float32: not eager's bits


def cache_bytes(level: int) -> int:
    """This machine's data (or unified) cache of `level` in bytes, from sysfs; 0 unknown."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if int((index / "level").read_text()) != level or \
                    (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    return machine_env.llc_bytes() if level == 3 else 0


def size_classes(names, max_tensor_bytes: int, llc: int | None = None) -> dict[str, int]:
    """Bytes of the largest input per size class, capped at `max_tensor_bytes`. The
    last-level cache classes scale `llc`, by default the share this process measures."""
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        sys.exit(f"unknown size classes {unknown}; known: {', '.join(SIZES)}")
    if llc is None and any(n.endswith("llc") for n in names):
        llc = measured_llc()
    known = {"l1": cache_bytes(1) or 32 << 10, "l2": cache_bytes(2) or 1 << 20,
             "llc": llc, "4llc": 4 * (llc or 0), "16llc": 16 * (llc or 0)}
    return {n: min(known[n], max_tensor_bytes) for n in names}


@functools.cache
def measured_llc() -> int:
    """The last-level cache this process gets (brrr_compiler.calibration.llc_share): a
    2-vCPU VM's sysfs names its chip's 480 MB, of which x + 1 finds 64-128 MB; sizing
    "llc" cases by sysfs put them far past the cache they meant to fill. sysfs's where
    the measurement finds nothing cached (or 32 MB if sysfs knows none)."""
    from brrr_compiler.calibration import llc_share
    return llc_share() or cache_bytes(3) or 32 << 20


def _largest_input(p) -> int:
    return max((max(1, _numel(i.shape)) * torch.empty((), dtype=getattr(torch, i.dtype))
                .element_size() for i in p.inputs), default=0)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def pattern_at(seed: int, size_bytes: int):
    """The first attempt of `seed` whose largest input is in (size/16, 2 size], that eager
    runs, that is not empty and leaves its inputs as they were; None if none does."""
    for attempt in range(ATTEMPTS):
        p = generate(seed, max(1, size_bytes // 4), attempt=attempt,
                     min_numel=max(1, size_bytes // 32))
        largest = _largest_input(p)
        if not size_bytes // 16 < largest <= 2 * size_bytes:
            continue
        f, inputs = p.build()
        inputs = [x.detach() if isinstance(x, torch.Tensor) else x for x in inputs]
        if any(x.numel() == 0 for x in inputs if isinstance(x, torch.Tensor)):
            continue
        if max(_output_bytes(f, inputs), _largest_value(f, inputs)) > max_output_bytes():
            continue
        if _runs_cleanly(f, inputs):
            return p, f, inputs
    return None


def max_output_bytes() -> int:
    """The most a pattern's outputs may hold: a sixteenth of this machine's memory. Every
    backend keeps its own outputs, and a broadcast can make them far larger than the
    inputs: seed 16 at 4x the LLC (a (31, 31, 31, 100) float64 input maximum'd with
    itself unsqueezed) asked for 3 GB per output, and the run was killed for memory."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 16
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def _largest_value(f, inputs) -> int:
    """The bytes of the largest storage any op of `f` makes, outputs or not, from a run on
    meta tensors (0 where that fails). Eager computes a dead value too: seed 55 at 32 MB
    broadcast a (31, 1, 32, 1) tensor against a 4M-element one into 16 GB that no output
    reads, and the pattern search itself was killed for memory."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Largest(TorchDispatchMode):
        bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    # its storage: an expand's view holds no more than its base
                    Largest.bytes = max(Largest.bytes, t.untyped_storage().nbytes())
            return out

    meta = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        with Largest():
            f(*meta)
    except Exception:        # an op without a meta kernel: no estimate
        return 0
    return Largest.bytes


def _output_bytes(f, inputs) -> int:
    """The bytes of `f`'s outputs, from a run on meta tensors (0 where that fails: the
    real run decides)."""
    meta = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        out = f(*meta)
    except Exception:        # an op without a meta kernel: no estimate
        return 0
    outs = out if isinstance(out, (tuple, list)) else [out]
    return sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))


def _runs_cleanly(f, inputs) -> bool:
    before = [x.clone() for x in inputs]
    try:
        f(*inputs)
    except (RuntimeError, IndexError, ValueError):
        return False
    return all(torch.equal(a, b) or (a.is_floating_point() and
                                     torch.equal(a.nan_to_num(), b.nan_to_num()))
               for a, b in zip(before, inputs))


def measure(p, f, inputs, backends, rounds: int) -> dict:
    """Bytes moved, median seconds per call per working backend, and statuses."""
    harness.fresh_dynamo()
    nbytes = bytes_moved(inputs, f(*inputs))
    low = p.dtype in ("bfloat16", "float16")
    fns, status = harness.compile_backends(f, inputs, backends,
                                           tolerance=LOW_PRECISION_TOL if low else None,
                                           judge=_judge(p, inputs))
    harness.prime_floor(fns, f)
    iters = harness.iters_for(f, inputs, TARGET_ROUND_S)
    per_round = harness.interleaved(fns, inputs, rounds=rounds, iters=iters,
                                    per_round=statistics.median)
    times = {name: statistics.median(ts) for name, ts in per_round.items()}
    return {"nbytes": nbytes, "times": times, "status": status, "iters": iters}


def predicted_terms(f, inputs) -> dict | None:
    """brrr's cost model on its kernels for `f` (default options): their compute and
    memory terms summed, which say whether the case is memory-bound (the bandwidth line
    of the report counts those); None where explain fails or leaves no kernel."""
    from brrr_compiler import explain
    try:
        kernels = explain(f, *inputs).kernels
    except Exception:          # reported as unknown, never a failed run
        return None
    if not kernels or any(k.predicted_s is None for k in kernels):
        return None
    return {"compute_s": sum(k.compute_s for k in kernels),
            "memory_s": sum(k.memory_s for k in kernels)}


def _judge(p, inputs):
    """The fuzzer's rule for an output outside the tolerance: no further from the pattern's
    float64 program than eager is, a zero's sign free where eager's order sets it."""
    from brrr_compiler.accuracy import matches, zero_sign_variants
    exact, made = p.build_reference(), {}

    def up():
        return [x.double() if x.is_floating_point() else x.clone() for x in inputs]

    def judge(out, expected) -> bool:
        if not made:
            made.update(r=exact(*up()), alts=zero_sign_variants(exact, up))
        tensors = lambda tree: [t for t in torch.utils._pytree.tree_leaves(tree)  # noqa: E731
                                if isinstance(t, torch.Tensor)]
        out, expected, r = tensors(out), tensors(expected), tensors(made["r"])
        alts = [tensors(v) for v in made["alts"]]
        return len(out) == len(expected) == len(r) and all(
            matches(a, e, r[i], [v[i] for v in alts if len(v) == len(r)])
            for i, (a, e) in enumerate(zip(out, expected)))
    return judge


def run_case(seed: int, size: str, size_bytes: int, backends, rounds: int) -> dict | None:
    found = pattern_at(seed, size_bytes)
    if found is None:
        return None
    p, f, inputs = found
    row = {"seed": seed, "size": size, "attempt": p.attempt, "dtype": p.dtype,
           "ops": len(p.lines), "max_numel": max(1, size_bytes // 4),
           **measure(p, f, inputs, backends, rounds)}
    if size in LARGE and "brrr" in row["times"]:
        row["predicted"] = predicted_terms(f, inputs)
    del f, inputs
    gc.collect()
    return row


def _llc(args) -> int | None:
    return int(args.llc_bytes) if args.llc_bytes else None


def _llc_fact(args, sizes: dict) -> str:
    if not any(n.endswith("llc") for n in sizes):
        return "no llc class run"
    how = "--llc-bytes" if args.llc_bytes else "measured (brrr_compiler.calibration.llc_share)"
    llc = _llc(args) or measured_llc()
    return f"{llc / 1e6:.0f} MB, {how}; sysfs says {cache_bytes(3) / 1e6:.0f} MB"


def parse_args(argv=None):
    p = reporting.base_parser(__doc__, "patterns.md")
    reporting.pattern_options(p, seeds="0:60", sizes=",".join(SIZES), rounds=7,
                            max_tensor_bytes=512e6)
    p.add_argument("--backends", default="eager,floor,inductor,brrr",
                   help="comma-separated (floor: Dynamo's own per-call cost; "
                        "brrr:<policy> or brrr:<option>=<value> for brrr variants)")
    p.add_argument("--only", default=None, help="SEED:SIZE: run and print that one case")
    p.add_argument("--llc-bytes", type=float, default=None,
                   help="the last-level cache the llc classes scale (default: measured)")
    quick = dict(seeds="0:2", sizes="l1,l2", backends="eager,brrr", rounds=2)
    return reporting.parse_quick(p, argv, quick, "a smoke test: seeds 0:2 at the L1 and L2 "
                               "sizes, eager and brrr, 2 rounds")


def main(argv=None) -> None:
    machine_env.ensure_malloc_env()
    args = parse_args(argv)
    backends = args.backends.split(",")
    if "eager" not in backends:
        sys.exit("--backends must include eager (every ratio is against it)")
    if args.only:
        seed, _, size = args.only.partition(":")
        size_bytes = size_classes([size], int(args.max_tensor_bytes), _llc(args))[size]
        found = pattern_at(int(seed), size_bytes)
        print(found[0].script() if found else "no pattern of that size for this seed")
        if found:
            print(run_case(int(seed), size, size_bytes, backends, args.rounds))
        return
    sizes = size_classes(args.sizes.split(","), int(args.max_tensor_bytes), _llc(args))
    lo, _, hi = args.seeds.partition(":")
    start, rows, streams = time.perf_counter(), [], [harness.stream_bandwidth()]
    for seed in range(int(lo), int(hi)):
        for size, size_bytes in sizes.items():
            row = run_case(seed, size, size_bytes, backends, args.rounds)
            if row is None:
                continue
            rows.append(row)
            shown = {b: f"{t * 1e6:.1f} us" for b, t in row["times"].items()}
            print(f"[{time.perf_counter() - start:5.0f} s] seed {seed} {size} {row['dtype']} "
                  f"{row['ops']} ops: {shown}", file=sys.stderr, flush=True)
    streams.append(harness.stream_bandwidth())
    directory = Path(args.results_dir)
    directory.mkdir(parents=True, exist_ok=True)
    facts = {"sizes (largest input)": ", ".join(f"{k} {v / 1e6:.3g} MB" for k, v in sizes.items()),
             "last-level cache": _llc_fact(args, sizes),
             "streaming bandwidth (GB/s, start and end)": ", ".join(f"{s / 1e9:.1f}" for s in streams)}
    (directory / "patterns.json").write_text(json.dumps(
        {"facts": facts, "backends": backends, "rows": rows}, indent=1))
    reporting.publish(args.out, render(rows, backends, statistics.median(streams), facts),
                    directory)


if __name__ == "__main__":
    main()
