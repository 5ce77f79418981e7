"""GPU suite: eager vs inductor vs brrr (Triton) on memory-bound CUDA workloads.

    python benchmarks/bench_gpu.py [--size N] [--rounds R] [--iters I]
                                   [--backends eager,inductor,brrr,brrr_cudagraphs]
                                   [--workloads ...] [--out gpu.md]
    python benchmarks/bench_gpu.py --interpret --tiny     # no GPU: Triton's interpreter

Every backend is timed round-robin in one run (medians of per-round means); achieved
bandwidth (bytes that must move / time) is set beside a device-to-device copy measured
in the same run. Default sizes finish in well under five minutes on one GPU, first
compiles included. `--interpret` runs the same script on the CPU with TRITON_INTERPRET=1
and options={"target": "triton"} (correctness of the whole path, not speed); `--tiny`
shrinks the inputs so that the interpreter gets through them in seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if "--interpret" in sys.argv:               # before anything imports triton
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import harness  # noqa: E402
import reporting  # noqa: E402
from workloads import bias_gelu, bytes_moved, chain10, silu_mul  # noqa: E402

WORKLOADS = {
    # name: (fn, input shapes as functions of N, description)
    "bias_gelu": (bias_gelu, lambda n: [(n, n), (n,)], "gelu(x + b), exact erf"),
    "chain10": (chain10, lambda n: [(n, n), (n, n)], "10 pointwise ops on x, y"),
    "silu_mul": (silu_mul, lambda n: [(n, n), (n, n)], "silu(a) * b"),
    "softmax": (lambda x: F.softmax(x, -1), lambda n: [(n, n)], "softmax over rows"),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b),
                   lambda n: [(n, n), (n,), (n,)], "layer_norm over rows, affine"),
    "row_sum": (lambda x: x.sum(-1), lambda n: [(n, n)], "sum over rows"),
    "col_amax": (lambda x: x.amax(0), lambda n: [(n, n)], "max over columns (strided)"),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=None, help="inputs are NxN (8192; 32 with --tiny)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (15; 2 with --tiny)")
    p.add_argument("--iters", type=int, default=None, help="calls per backend per round (10; 1)")
    p.add_argument("--backends", default=None,
                   help="comma-separated: eager,inductor,brrr,brrr_cudagraphs (GPU default; "
                        "eager,brrr under --interpret)")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--out", default="gpu.md", help="file under results/, or a path")
    p.add_argument("--interpret", action="store_true",
                   help="no GPU: CPU tensors through Triton's interpreter")
    p.add_argument("--tiny", action="store_true", help="tiny inputs, few rounds")
    args = p.parse_args(argv)
    args.size = args.size or (32 if args.tiny else 8192)
    args.rounds = args.rounds or (2 if args.tiny else 15)
    args.iters = args.iters or (1 if args.tiny else 10)
    if args.backends is None:
        args.backends = "eager,brrr" if args.interpret else "eager,inductor,brrr,brrr_cudagraphs"
    return args


def device_of(args) -> torch.device:
    if args.interpret:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        sys.exit("bench_gpu: no CUDA device (use --interpret --tiny to run on the CPU)")
    return torch.device("cuda")


def copy_bandwidth(device: torch.device, nbytes: int, rounds: int = 11) -> float:
    """Bytes/s of one device-to-device `dst.copy_(src)` (read + write), median."""
    n = nbytes // 4
    src = torch.ones(n, device=device)
    dst = torch.empty(n, device=device)
    times = harness.time_fn(dst.copy_, (src,), warmup=2, iters=rounds)
    return 2 * n * 4 / statistics.median(times)


def backend_for(name: str, args):
    """(torch.compile backend, options) for a backend name of this suite."""
    if name == "inductor":
        return "inductor", None
    brrr = harness.resolve_backend("brrr")
    if name == "brrr":
        return brrr, ({"target": "triton"} if args.interpret else None)
    if name == "brrr_cudagraphs":
        return brrr, {"cudagraphs": True}
    raise SystemExit(f"bench_gpu: unknown backend {name!r}")


def compile_all(fn, inputs, args) -> tuple[dict, dict]:
    """Each backend compiled, run once and checked against eager (failures are cells)."""
    ref = fn(*inputs)
    fns, status = {}, {}
    for name in args.backends.split(","):
        if name == "eager":
            fns[name], status[name] = fn, "ok (reference)"
            continue
        torch._dynamo.reset()
        start = time.perf_counter()
        try:
            backend, options = backend_for(name, args)
            compiled = torch.compile(fn, backend=backend, options=options)
            out = compiled(*inputs)
            harness._check_close(out, ref)
        except AssertionError:
            status[name] = f"mismatch: max err {harness.max_abs_error(out, ref):.2e}"
            continue
        except Exception as exc:            # a broken backend must not stop the suite
            status[name] = f"failed: {harness.describe_error(exc)}"
            continue
        fns[name] = compiled
        status[name] = f"ok (compile {time.perf_counter() - start:.1f} s)"
    return fns, status


def measure(name: str, args, device) -> dict:
    fn, shapes, _ = WORKLOADS[name]
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(s, generator=gen).to(device) for s in shapes(args.size)]
    nbytes = bytes_moved(inputs, fn(*inputs))
    fns, status = compile_all(fn, inputs, args)
    per_round = harness.interleaved(fns, inputs, rounds=args.rounds, iters=args.iters)
    return {"nbytes": nbytes, "status": status,
            "times": {b: statistics.median(ts) for b, ts in per_round.items()}}


def row(name: str, r: dict, backends: list[str], bandwidth: float) -> dict:
    out = {"workload": name, "MB moved": f"{r['nbytes'] / 1e6:.3g}"}
    times = r["times"]
    for b in backends:
        if b in times:
            gbs = r["nbytes"] / times[b]
            out[f"{b} ms"] = f"{times[b] * 1e3:.3f}"
            out[f"{b} GB/s (% copy)"] = f"{gbs / 1e9:.1f} ({gbs / bandwidth:.0%})"
        else:
            out[f"{b} ms"], out[f"{b} GB/s (% copy)"] = r["status"].get(b, "n/a"), "n/a"
    for other in ("eager", "inductor"):
        if "brrr" in times and other in times:
            out[f"brrr vs {other}"] = f"{times[other] / times['brrr']:.2f}x"
    return out


def render(args, device, results: dict, bandwidths: list[float]) -> str:
    bandwidth = statistics.median(bandwidths)
    backends = args.backends.split(",")
    cols = ["workload", "MB moved"] + [f"{b} ms" for b in backends]
    cols += [c for c in ("brrr vs eager", "brrr vs inductor")
             if any(c in row(n, r, backends, bandwidth) for n, r in results.items())]
    cols += [f"{b} GB/s (% copy)" for b in backends]
    rows = [row(n, r, backends, bandwidth) for n, r in results.items()]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
    facts = {
        "device": name,
        "copy bandwidth (device-to-device copy_, read+write)":
            f"{bandwidth / 1e9:.1f} GB/s (samples: {', '.join(f'{b / 1e9:.1f}' for b in bandwidths)})",
        "timing": f"{args.rounds} interleaved rounds x {args.iters} calls, median of per-round "
                  f"means; inputs {args.size}x{args.size} float32",
    }
    if args.interpret:
        facts["mode"] = "TRITON_INTERPRET=1, options={'target': 'triton'}: checks the path, " \
                        "not the speed"
    status = ["Backend status (first call checked against eager):"]
    status += [f"- {n}: " + "; ".join(f"{b} {s}" for b, s in r["status"].items())
               for n, r in results.items()]
    described = ["Workloads:"] + [f"- {n}: {WORKLOADS[n][2]}" for n in results]
    return reporting.report("GPU suite", facts, reporting.markdown_table(rows, cols),
                          ["\n".join(status), "\n".join(described)])


def main(argv=None) -> None:
    args = parse_args(argv)
    device = device_of(args)
    copy_bytes = (4 << 20) if args.tiny else (1 << 30)
    results, bandwidths = {}, []
    for name in args.workloads.split(","):
        bandwidths.append(copy_bandwidth(device, copy_bytes))
        results[name] = measure(name, args, device)
        print(f"{name}: {results[name]['status']}", file=sys.stderr, flush=True)
    bandwidths.append(copy_bandwidth(device, copy_bytes))
    text = render(args, device, results, bandwidths)
    out = Path(args.out)
    if out.is_absolute() or len(out.parts) > 1:
        print(text)
        out.write_text(text)
    else:
        reporting.publish(args.out, text)


if __name__ == "__main__":
    main()
