"""Measurement helpers shared by the benchmark suites.

Machines here are shared and noisy, so every suite compares backends inside one run:
backends are timed round-robin (`interleaved`), medians are quoted, and achieved bandwidth is
set beside the streaming bandwidth measured in the same process (`stream_bandwidth`). The
machine's own facts (malloc environment, CPU, caches) are in machine_env.py; command lines
and result files in reporting.py.
"""

from __future__ import annotations

import ast
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

try:
    import resource
except ImportError:  # pragma: no cover - not Unix
    resource = None

REPO_ROOT = Path(__file__).resolve().parents[1]

# Tolerances for comparing a compiled backend against eager, per output dtype.
TOLERANCES = {
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
}

if str(REPO_ROOT) not in sys.path:  # lets an uninstalled checkout's brrr_compiler import
    sys.path.append(str(REPO_ROOT))


def stream_bandwidth(nbytes: int = 256 << 20, rounds: int = 11) -> float:
    """Streaming bandwidth in bytes/s: median over `rounds` of one `dst.copy_(src)`.

    Each copy counts 2*nbytes (read src + write dst).
    """
    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32)
    dst = torch.empty(n, dtype=torch.float32)
    times = time_fn(dst.copy_, (src,), warmup=2, iters=rounds)
    return 2 * n * 4 / statistics.median(times)


def _sync(args) -> None:
    if torch.cuda.is_available() and any(
        isinstance(a, torch.Tensor) and a.is_cuda for a in args
    ):
        torch.cuda.synchronize()


def time_fn(fn: Callable, args, warmup: int = 1, iters: int = 5) -> list[float]:
    """Seconds per call for each of `iters` calls, after `warmup` untimed calls. A `fn`
    with a `prime` attribute has prime(*args) run, untimed, before each timed call."""
    for _ in range(warmup):
        fn(*args)
    _sync(args)
    prime = getattr(fn, "prime", None)
    times = []
    for _ in range(iters):
        if prime is not None:
            prime(*args)
            _sync(args)
        start = time.perf_counter()
        fn(*args)
        _sync(args)
        times.append(time.perf_counter() - start)
    return times


def interleaved(
    fns: dict[str, Callable], args, rounds: int = 10, iters: int = 3,
    per_round=statistics.fmean,
) -> dict[str, list[float]]:
    """Time every fn round-robin; per fn, `per_round` (default the mean) of the seconds per
    call of each round. The median instead keeps a round's one preempted call (tens of ms
    on a loaded 2-core machine) from standing for a round of 20 us calls.

    Each round starts with untimed calls (`settle`): without them, a round of one or a
    few calls timed the fn right after the previous one, and the fn that followed a long
    single-threaded one (eager's 25 ms of a pattern brrr runs in 35 us) paid for waking
    the idle cores: 375 us, then 67, 43, 39 (benchmarks/results/notes.md, "The fn after
    eager"). The order is shuffled each round (seeded), so that no fn always runs after
    the same one. Before the rounds, each fn runs until its calls stop page-faulting
    (`steady_heap`)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    names, order = list(fns), random.Random(0)
    for fn in fns.values():
        steady_heap(fn, args)
    for _ in range(rounds):
        for name in order.sample(names, len(names)):
            fn = fns[name]
            settle(fn, args)
            times[name].append(per_round(time_fn(fn, args, 0, iters)))
    return times


# A call that page-faults fewer pages than this runs on memory the heap already holds
STEADY_FAULTS = 64


def steady_heap(fn: Callable, args, max_calls: int = 12, seconds: float = 2.0) -> int:
    """Call `fn` untimed until one call page-faults fewer than STEADY_FAULTS pages (at most
    `max_calls` calls or `seconds`, at least one); returns the calls made.

    Why. The malloc environment the suites ask for (MALLOC_MMAP_MAX_=0 and a high trim
    threshold) keeps freed memory in the heap, but torch allocates with posix_memalign(64),
    and glibc 2.36 served each 64 MB request of the kind from fresh heap pages, every
    page faulted in and zeroed, for the first nine calls (a C loop of posix_memalign, memset
    and free: 16384 faults a call, the heap growing 64 MB a call, then none), where malloc
    reused the freed block at once. A few warm calls left the first rounds of a large case
    paying those faults (benchmarks/results/notes.md, "Aligned allocations fault until the
    heap settles")."""
    if resource is None:               # not on Linux/Unix: nothing to measure
        fn(*args)
        return 1
    start = time.perf_counter()
    for calls in range(1, max_calls + 1):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        fn(*args)
        _sync(args)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        if faults < STEADY_FAULTS or time.perf_counter() - start >= seconds:
            return calls
    return max_calls


def settle(fn: Callable, args, calls: int = 5, seconds: float = 2e-3) -> None:
    """Call `fn` untimed until `calls` calls or `seconds` have passed (at least once)."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
        if time.perf_counter() - start >= seconds:
            break
    _sync(args)


def describe_error(exc: BaseException, limit: int = 120) -> str:
    """One line naming the innermost cause (Dynamo wraps backend errors)."""
    while (inner := getattr(exc, "inner_exception", None) or exc.__cause__) is not None:
        exc = inner
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


FLOOR = "floor"


def dynamo_floor(gm, example_inputs):
    """A torch.compile backend that does no work: it runs the captured graph once, here,
    and returns those outputs on every call. Its time per call is what Dynamo itself costs
    (guard checks, frame handling): the floor under every backend's time. Where eager's
    whole call is faster than this, no torch.compile backend can beat eager."""
    outputs = gm(*example_inputs)
    return lambda *args: outputs


class Primed:
    """`fn`, timed by `time_fn` right after an untimed call of `prime`: the floor timed in
    the cache state the case's own work leaves behind. Every compiled call reloads Dynamo's
    code and data (guards, frame handling) from wherever the case's sweep left them, and
    that costs far more than the hot floor as soon as the sweep outgrows the L2, not only
    the LLC: Dynamo with eager's own ops as its graph ran `x + 1.5` of 1M floats (8 MB
    moved, a quarter of the Intel VM's cached LLC share) in 192 us where eager took 147 and
    the hot floor 8 (benchmarks/results/notes.md, "Dynamo's floor, cold")."""

    def __init__(self, fn: Callable, prime: Callable):
        self.fn, self.prime = fn, prime

    def __call__(self, *args):
        return self.fn(*args)


def prime_floor(fns: dict, case_fn: Callable) -> None:
    """Times the floor among `fns` (if there) after each untimed call of the case's eager
    `case_fn`, at every size (Primed)."""
    if FLOOR in fns:
        fns[FLOOR] = Primed(fns[FLOOR], case_fn)


def resolve_backend(name: str):
    """A backend name for torch.compile; brrr from the checkout if it is not installed."""
    if name == FLOOR:
        return dynamo_floor
    if name == "brrr" and name not in torch._dynamo.list_backends(exclude_tags=()):
        from brrr_compiler.backend import brrr_backend

        return brrr_backend
    return name


def max_abs_error(out, ref) -> float:
    outs, refs = torch.utils._pytree.tree_leaves(out), torch.utils._pytree.tree_leaves(ref)
    errs = [
        (o.double() - r.double()).abs().max().item()
        for o, r in zip(outs, refs)
        if isinstance(o, torch.Tensor) and o.shape == r.shape and o.numel()
    ]
    return max(errs, default=float("nan"))


def _check_close(out, ref, tolerance=None) -> None:
    leaves = torch.utils._pytree.tree_leaves(ref)
    dtype = next((t.dtype for t in leaves if isinstance(t, torch.Tensor)), torch.float32)
    torch.testing.assert_close(out, ref, **(tolerance or TOLERANCES.get(dtype, {})))


def backend_spec(name: str) -> tuple[str, dict]:
    """A suite's backend name -> (torch.compile backend name, options).

    "brrr:<policy>" is brrr with options={"fusion": "<policy>"}, "brrr:<key>=<value>" brrr
    with options={"<key>": <value>} (a Python literal, True or 2, else the string); plain
    "brrr" is brrr with its default configuration.
    """
    base, _, suffix = name.partition(":")
    if suffix and base != "brrr":
        raise ValueError(f"only brrr takes a suffix, got {name!r}")
    if not suffix:
        return base, {}
    key, eq, value = suffix.partition("=")
    try:
        value = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        pass                      # a plain word: the string itself
    return base, ({key: value} if eq else {"fusion": suffix})


def fresh_dynamo() -> None:
    """Forget every earlier compile: the same function compiled again at another shape must
    not come back dynamic, nor run into Dynamo's recompile limit (which falls back to eager
    silently)."""
    torch._dynamo.reset()


def compile_backends(
    fn: Callable, args, backends=("eager", "inductor", "brrr"), options=None, tolerance=None,
    judge: Callable | None = None,
) -> tuple[dict[str, Callable], dict[str, str]]:
    """Compile `fn` with each backend, run it once on `args` and check it against eager.

    Backend names are torch.compile backends, or "brrr:<policy>" (see `backend_spec`);
    `options` maps a backend name to extra torch.compile options. Shapes are compiled static
    (dynamic=False). `tolerance` (rtol/atol) overrides TOLERANCES for this comparison;
    `judge(out, eager_out)`, if given, may still pass an output outside it (the tests'
    accuracy rule against a float64 run, brrr_compiler/accuracy.py).
    Returns the callables that compiled and matched eager, and a status line for every
    backend: "ok (max err ...)", "failed: <error>" or "mismatch: <error>". The first call
    (compilation) happens here.
    """
    ref = fn(*args)
    fns, status = {}, {}
    for name in backends:
        if name == "eager":
            fns[name], status[name] = fn, "ok (reference)"
            continue
        base, opts = backend_spec(name)
        opts = {**opts, **((options or {}).get(name) or {})} or None
        try:
            compiled = torch.compile(fn, backend=resolve_backend(base), options=opts,
                                     dynamic=False)
            out = compiled(*args)
        except Exception as exc:  # a broken backend must not stop the suite
            status[name] = f"failed: {describe_error(exc)}"
            continue
        err = max_abs_error(out, ref)
        try:
            _check_close(out, ref, tolerance)
            ok = f"ok (max err {err:.1e})"
        except (AssertionError, TypeError) as exc:
            if judge is None or not judge(out, ref):
                status[name] = f"mismatch: max err {err:.2e} ({describe_error(exc, 60)})"
                continue
            ok = f"ok (max err {err:.1e}, within eager's error of float64)"
        fns[name], status[name] = compiled, ok
    return fns, status


def iters_for(fn: Callable, args, target_s: float = 0.02, most: int = 1000) -> int:
    """Calls per round so that one round of `fn` takes about `target_s`."""
    per_call = min(time_fn(fn, args, warmup=1, iters=5))
    return max(1, min(most, round(target_s / max(per_call, 1e-9))))


def peak_memory(fn: Callable, args=(), before: Callable | None = None) -> int:
    """Peak bytes allocated above the starting point during one call of `fn(*args)`.

    torch's CPU allocator reports every allocation and free to the profiler (tracemalloc
    sees none of them); the running sum of those events, in time order, peaks here. Only
    memory that torch allocates counts (not Python objects nor compiler work). The profiler
    cannot see the free of a block allocated before it started, so `before()` (untimed,
    unprofiled) should free what the call would free first, e.g. a training step's old
    gradients.
    """
    from torch.profiler import ProfilerActivity, profile

    if before is not None:
        before()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(*args)
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    current = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        current += e.nbytes()
        peak = max(peak, current)
    return peak


def geomean(values) -> float:
    values = [v for v in values if v > 0]
    if not values:
        return float("nan")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def polyfit(xs, ys, degree: int) -> tuple[list[float], float]:
    """Least-squares polynomial fit: (coefficients, highest power first; R^2)."""
    x = torch.tensor(xs, dtype=torch.float64)
    y = torch.tensor(ys, dtype=torch.float64)
    vander = torch.stack([x**p for p in range(degree, -1, -1)], dim=1)
    coeffs = torch.linalg.lstsq(vander, y[:, None]).solution[:, 0]
    ss_res = float(((y - vander @ coeffs) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return coeffs.tolist(), (1 - ss_res / ss_tot if ss_tot else 1.0)
