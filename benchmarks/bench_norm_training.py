"""Norm training suite: a norm's forward and backward with its affine gradients, eager vs
inductor vs brrr, and brrr without folds across rows (`fold_across_rows=False`: the
loss's sum and the weight and bias gradients' column sums in kernels of their own).

    python benchmarks/bench_norm_training.py [--quick] [--rounds R] [--cases NAME,...] [--threads T]

Each case is `torch.autograd.grad((norm(x, w[, b]) * g).sum(), (x, w[, b]))`: Dynamo
compiles the forward graph (the loss) and AOTAutograd the backward graph (the
gradients). What must move: the forward reads x and g, the backward reads them again
and writes x's gradient (five tensors of x's size; the per-row statistics, w and b are
small). Timed round-robin in one process (median over rounds of the median call);
writes benchmarks/results/norm_training.md.
"""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

import harness
import reporting
import machine_env

BACKENDS = ["eager", "inductor", "brrr", "brrr:fold_across_rows=False"]
TOLERANCE = dict(atol=2e-3, rtol=2e-3)      # sums over 4096 rows: eager's own error is ~1e-4
# bf16 gradients: eager's differ from inductor's and brrr's (which agree) by up to ~20 in
# bias gradients of magnitude ~100 (sums over 4096 rows of bf16 terms)
BF16_TOLERANCE = dict(atol=32.0, rtol=0.25)


def layer_norm_train(x, w, b, g):
    loss = (F.layer_norm(x, (x.shape[-1],), w, b) * g).sum()
    return torch.autograd.grad(loss, (x, w, b))


def rms_norm_train(x, w, g):
    loss = (F.rms_norm(x, (x.shape[-1],), w, 1e-6) * g).sum()
    return torch.autograd.grad(loss, (x, w))


def _inputs(shape, dtype, bias: bool, seed: int = 0) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    d = shape[-1]

    def rand(*s):
        return torch.randn(*s, generator=gen).to(dtype)
    x = rand(*shape).requires_grad_()
    params = [rand(d).requires_grad_() for _ in range(2 if bias else 1)]
    return (x, *params, rand(*shape))


CASES = {
    "layer_norm 4096x1024": (layer_norm_train, (4096, 1024), torch.float32, True),
    "rms_norm 4096x1024": (rms_norm_train, (4096, 1024), torch.float32, False),
    "layer_norm 4096x1024 bf16": (layer_norm_train, (4096, 1024), torch.bfloat16, True),
    "layer_norm 8x512x1024": (layer_norm_train, (8, 512, 1024), torch.float32, True),
    "layer_norm 256x1024": (layer_norm_train, (256, 1024), torch.float32, True),
}
QUICK = {"layer_norm 37x129": (layer_norm_train, (37, 129), torch.float32, True)}


def measure(name, case, rounds: int, backends: list[str]) -> dict:
    fn, shape, dtype, bias = case
    args = _inputs(shape, dtype, bias)
    tol = BF16_TOLERANCE if dtype is torch.bfloat16 else TOLERANCE
    harness.fresh_dynamo()
    fns, status = harness.compile_backends(fn, args, backends, tolerance=tol)
    iters = harness.iters_for(fns["eager"], args)
    times = harness.interleaved(fns, args, rounds=rounds, iters=iters, per_round=statistics.median)
    med = {k: statistics.median(v) for k, v in times.items()}
    must = 5 * args[0].numel() * args[0].element_size()
    row = {"case": name}
    for b in backends:
        row[b] = f"{med[b] * 1e3:.2f} ms" if b in med else status[b]
    if "brrr" in med:
        for b in backends:
            if b in med and b != "brrr":
                row[f"{b} / brrr"] = f"{med[b] / med['brrr']:.2f}x"
        row["brrr GB/s"] = f"{must / med['brrr'] / 1e9:.1f}"
    return row


def main(argv=None) -> None:
    machine_env.ensure_malloc_env()
    p = reporting.base_parser(__doc__, "norm_training.md")
    p.add_argument("--quick", action="store_true", help="one small case, 2 rounds, no inductor")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--cases", default=None, help="comma-separated case names")
    p.add_argument("--threads", type=int, default=0,
                   help="torch (and so brrr and inductor) threads; 0: torch's default. On a "
                        "machine loaded past its cores, 1 keeps OpenMP barriers out of the times")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cases = QUICK if args.quick else CASES
    if args.cases:
        cases = {k: CASES[k] for k in args.cases.split(",")}
    rounds = 2 if args.quick else args.rounds
    stream = harness.stream_bandwidth()
    backends = [b for b in BACKENDS if b != "inductor" or not args.quick]
    rows = [measure(name, case, rounds, backends) for name, case in cases.items()]
    columns = ["case"] + backends + [f"{b} / brrr" for b in backends if b != "brrr"]
    columns.append("brrr GB/s")
    facts = {"stream bandwidth": f"{stream / 1e9:.1f} GB/s (copy: read + write)",
             "rounds": rounds}
    notes = ["Ratios above 1 mean brrr is faster. `brrr GB/s`: the five tensors of x's size "
             "that must move (forward reads x, g; backward reads x, g and writes x's "
             "gradient) over brrr's time, beside the stream bandwidth above."]
    text = reporting.report("Norm forward + backward with affine gradients", facts,
                          reporting.markdown_table(rows, columns), notes)
    reporting.publish(args.out, text, reporting.results_dir(args.results_dir, args.quick))


if __name__ == "__main__":
    main()
