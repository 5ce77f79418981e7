"""`brrr demo`: a small built-in model compiled with brrr: its kernels, accuracy and speed.

The cases are a pre-norm transformer block (LayerNorm, multi-head attention through
F.scaled_dot_product_attention, residuals, a GELU MLP) and three memory-bound chains
(bias + GELU, silu(a) * b, a 10-op pointwise chain). Each is compiled with
backend="brrr", checked against eager (eager is the oracle), explained (the kernels brrr
made and the ATen calls left over) and timed against eager in this process: eager and
brrr alternate within every round and the median per-round time is quoted. Timing runs
under torch.no_grad(); one training step (forward + backward) of the transformer block
is then checked output by output and gradient by gradient.

The glibc malloc environment is the command line's business (brrr_compiler/cli.py):
without it eager pays page faults on every large intermediate, not just its kernels.
"""
from __future__ import annotations

import copy
import statistics
import textwrap
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from brrr_compiler.accuracy import matches
from brrr_compiler.explain import explain
from brrr_compiler.report import GraphReport, KernelReport, Report


@dataclass(frozen=True)
class Size:
    n: int                 # the pointwise chains run on n x n float32 tensors
    batch: int             # the transformer block's input is (batch, seq, dim)
    seq: int
    dim: int
    heads: int


SIZES = {"small": Size(1024, 2, 64, 128, 4), "full": Size(4096, 8, 256, 256, 8)}

TARGET_ROUND_S = 0.05      # calls per round are chosen so one round takes about this long
MAX_ITERS = 50
WIDTH = 100                # kernel table lines wrap here


class Block(nn.Module):
    """A pre-norm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(a.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def bias_gelu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + b)


def silu_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.silu(a) * b


def chain10(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """mul, add, sin, exp, log1p, sub, tanh, sigmoid, sqrt, maximum: finite for finite x, y."""
    return ((x * y + 1.0).sin().exp().log1p() - y).tanh().sigmoid().sqrt().maximum(x)


@dataclass
class Case:
    name: str
    what: str
    fn: Callable
    inputs: tuple


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def make_block(size: Size) -> tuple[Block, torch.Tensor]:
    torch.manual_seed(0)
    return Block(size.dim, size.heads), _randn(size.batch, size.seq, size.dim, seed=0)


def cases(size: Size) -> list[Case]:
    n, s = size.n, size
    block, x = make_block(size)
    return [
        Case("transformer_block", f"pre-norm block, x {s.batch}x{s.seq}x{s.dim}, {s.heads} heads",
             block, (x,)),
        Case("bias_gelu", f"gelu(x + b), x {n}x{n}", bias_gelu,
             (_randn(n, n, seed=1), _randn(n, seed=2))),
        Case("silu_mul", f"silu(a) * b, {n}x{n}", silu_mul,
             (_randn(n, n, seed=3), _randn(n, n, seed=4))),
        Case("chain10", f"10 pointwise ops on x, y, {n}x{n}", chain10,
             (_randn(n, n, seed=5), _randn(n, n, seed=6))),
    ]


# ---- printing what brrr made -----------------------------------------------------------

def _aten_summary(g: GraphReport) -> str:
    ops = KernelReport("ATen", [c.op for c in g.compute_calls], [], []).ops_summary()
    return (ops or "none") + (f"; {len(g.views)} views" if g.views else "")


def _wrap(line: str, indent: int) -> list[str]:
    return textwrap.wrap(line, WIDTH, subsequent_indent=" " * indent) or [line]


def kernel_table(report: Report) -> str:
    """Each graph's header, totals and kernel lines as the report prints them; ATen calls
    counted."""
    lines = []
    for g in report.graphs:
        width = 4 + max([len(k.name) for k in g.kernels] + [6])
        lines.append(g.header())
        lines += _wrap(g.totals_line(), 4) if g.kernels else []
        lines += [w for k in g.kernel_lines(sources=False) for w in _wrap(k, width)]
        lines += _wrap(f"  ATen calls: {_aten_summary(g)}", 4)
    return "\n".join(lines)


def _max_abs(tensors) -> float:
    return max((t.abs().max().item() for t in tensors), default=0.0)


def _error(values, exact) -> float:
    return _max_abs(v.double() - x.double() for v, x in zip(values, exact))


def check(label: str, out, ref, exact) -> bool:
    """brrr's outputs (`out`) against eager's (`ref`), judged by a float64 run of the same
    case (`exact`) by brrr_compiler/accuracy.py's rule, as the tests judge them: within
    eager's tolerance of eager, or no further from float64 than eager is. Fused code may
    round differently from eager (one rounding for a chain, another libm, another
    summation order), so a correct kernel cannot fail on eager's own rounding errors; a
    wrong one is off by far more than eager, so it cannot pass."""
    outs, refs, exacts = (torch.utils._pytree.tree_leaves(t) for t in (out, ref, exact))
    brrr_err, eager_err = _error(outs, exacts), _error(refs, exacts)
    stats = (f"max abs error vs float64 {brrr_err:.2e} (eager's {eager_err:.2e}, "
             f"max |value| {_max_abs(exacts):.2e})")
    ok = len(outs) == len(refs) == len(exacts) and \
        all(matches(o, r, x) for o, r, x in zip(outs, refs, exacts))
    if not ok:
        print(f"  {label}: MISMATCH, {stats}: further from float64 than eager")
        return False
    print(f"  {label}: matches, {stats}")
    return True


def _float64(args):
    return tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in args)


# ---- timing -----------------------------------------------------------------------------

def _calls_per_round(fn: Callable, args) -> int:
    start = time.perf_counter()
    fn(*args)
    elapsed = time.perf_counter() - start
    return max(1, min(MAX_ITERS, int(TARGET_ROUND_S / max(elapsed, 1e-9))))


def interleaved(fns: dict[str, Callable], args, rounds: int) -> tuple[dict[str, float], int]:
    """Median over `rounds` of seconds per call; the fns alternate within each round."""
    iters = _calls_per_round(next(iter(fns.values())), args)
    per_round: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(iters):
                fn(*args)
            per_round[name].append((time.perf_counter() - start) / iters)
    return {name: statistics.median(ts) for name, ts in per_round.items()}, iters


def speed_table(rows: list[tuple[str, dict[str, float], int]]) -> str:
    lines = [f"  {'case':<18} {'eager ms':>9} {'brrr ms':>9} {'speedup':>8} {'calls/round':>12}"]
    for name, times, iters in rows:
        e, b = times["eager"] * 1e3, times["brrr"] * 1e3
        lines.append(f"  {name:<18} {e:>9.3f} {b:>9.3f} {e / b:>7.2f}x {iters:>12}")
    return "\n".join(lines)


# ---- the demo -----------------------------------------------------------------------------

def run_case(case: Case, rounds: int):
    """Explain, check and time one case (inference); None if brrr's output is wrong."""
    print(f"\n== {case.name}: {case.what}")
    with torch.no_grad():
        print(kernel_table(explain(case.fn, *case.inputs)))
        compiled = torch.compile(case.fn, backend="brrr")
        fn64 = copy.deepcopy(case.fn).double() if isinstance(case.fn, nn.Module) else case.fn
        if not check("output", compiled(*case.inputs), case.fn(*case.inputs),
                     fn64(*_float64(case.inputs))):
            return None
        times, iters = interleaved({"eager": case.fn, "brrr": compiled}, case.inputs, rounds)
    return case.name, times, iters


def _grads(block: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    grads = {"input": x.grad}
    grads.update((name, p.grad) for name, p in block.named_parameters())
    return grads


def training_step(size: Size) -> bool:
    """One forward + backward of the block, brrr against eager: outputs and every gradient."""
    block, x = make_block(size)
    x.requires_grad_(True)
    print(f"\n== training step (forward + backward) of the transformer block, "
          f"x {size.batch}x{size.seq}x{size.dim}")
    print(kernel_table(explain(block, x)))
    weight = _randn(*x.shape, seed=7)          # loss = sum(out * weight): a non-uniform grad
    twin, x2 = copy.deepcopy(block), x.detach().clone().requires_grad_(True)
    exact, x64 = copy.deepcopy(block).double(), x.detach().double().requires_grad_(True)
    ref, ref64 = block(x), exact(x64)
    (ref * weight).sum().backward()
    (ref64 * weight.double()).sum().backward()
    out = torch.compile(twin, backend="brrr")(x2)
    (out * weight).sum().backward()
    ok = check("output", out, ref, ref64)
    n = len(_grads(block, x))
    grads = [list(_grads(m, t).values()) for m, t in ((twin, x2), (block, x), (exact, x64))]
    return check(f"gradients (input + {n - 1} parameters)", *grads) and ok


def trace(size: Size, path: str) -> list[str]:
    """Profile one call of each case (under torch.no_grad()) and one training step of the
    block, all compiled with brrr and warmed up first, into a Chrome trace at `path`
    (chrome://tracing or ui.perfetto.dev). Returns the names of brrr's events in it."""
    block, x = make_block(size)
    x.requires_grad_(True)
    step = torch.compile(block, backend="brrr")
    calls = [(torch.compile(c.fn, backend="brrr"), c.inputs) for c in cases(size)]

    def run_all():
        with torch.no_grad():
            for fn, args in calls:
                fn(*args)
        step(x).sum().backward()

    run_all()                                  # compiles: the trace shows steady-state calls
    with torch.profiler.profile() as prof:
        run_all()
    prof.export_chrome_trace(path)
    return sorted({e.name for e in prof.events() if e.name.startswith("brrr::")})


def run(size: str = "full", rounds: int = 15, trace_path: str | None = None) -> int:
    """The whole demo; returns the process exit code (1 if any check against eager failed).
    `trace_path`: also write a Chrome trace of one call of each case there."""
    start = time.perf_counter()
    print(f"brrr demo --size {size}: torch {torch.__version__}, {torch.get_num_threads()} threads")
    rows = [run_case(c, rounds) for c in cases(SIZES[size])]
    print(f"\n== speed under torch.no_grad(): median of {rounds} interleaved rounds "
          "(eager, brrr alternating)")
    print(speed_table([r for r in rows if r is not None]))
    print("  speedup = eager ms / brrr ms (above 1x: brrr is faster)")
    trained = training_step(SIZES[size])
    if trace_path:
        try:
            names = trace(SIZES[size], trace_path)
        except OSError as err:
            print(f"\ncould not write the Chrome trace {trace_path}: {err}")
            return 1
        kernels = sum(n.startswith("brrr::k") for n in names)
        print(f"\nChrome trace: {trace_path} ({kernels} brrr kernels and "
              f"{len(names) - kernels} graphs by name; open it in ui.perfetto.dev)")
    failed = sum(r is None for r in rows) + (not trained)
    print(f"\ndone in {time.perf_counter() - start:.1f} s; "
          + (f"{failed} check(s) against eager FAILED" if failed else "every check matched eager"))
    return 1 if failed else 0
