"""The code every runnable dump carries (runtime/script.py writes the rest of the file).

A dump is one Python file per compiled graph that needs only torch and a C++ compiler:
it builds the graph's kernels with the recorded command, runs brrr's runner and the ATen
graph brrr was given on the same random inputs, says whether they agree and times both.
Everything below the marker line is copied into each dump verbatim, so it imports
nothing from brrr; tests import this module to check it directly.
"""
# ---- runnable dump helpers (copied verbatim from brrr_compiler/runtime/script_main.py) ----
import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from math import inf, nan  # noqa: F401 - FX code may name them

import torch
import torch.fx._pytree as fx_pytree  # noqa: F401 - FX code may name it
import torch.utils._pytree as pytree  # noqa: F401
from torch import device  # noqa: F401

NoneType = type(None)
# brrr computes in float32 inside a kernel and may sum in another order than ATen
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-4,
             torch.float64: 1e-7, torch.complex64: 1e-4, torch.complex128: 1e-7}
ROUND_S = 0.02          # calls per timing round are chosen so a round takes about this
COPIES_BYTES = 256 << 20    # at most this much in input copies made ahead of a round


class BuildFailed(Exception):
    """The kernels cannot be built here; the message is one line saying why."""


def compiler_command(command: list[str]) -> list[str]:
    """`command` with a compiler that exists here: $BRRR_CXX if set, else the recorded
    path, else a compiler of the same name on PATH."""
    cxx = os.environ.get("BRRR_CXX") or command[0]
    if os.path.isfile(cxx) and os.access(cxx, os.X_OK):
        return [cxx, *command[1:]]
    found = shutil.which(os.path.basename(cxx))
    if found is None:
        raise BuildFailed(f"no C++ compiler here: {cxx} does not exist and no "
                          f"{os.path.basename(cxx)} is on PATH (set BRRR_CXX to a C++17 "
                          "compiler with OpenMP)")
    return [found, *command[1:]]


def build(source: str, command: list[str], folder: str) -> ctypes.CDLL:
    """Compile `source` with `command` ({source}, {output} filled in) and load it."""
    src, lib = os.path.join(folder, "kernels.cpp"), os.path.join(folder, "kernels.so")
    with open(src, "w") as f:
        f.write(source)
    cmd = [a.replace("{source}", src).replace("{output}", lib) for a in compiler_command(command)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildFailed(f"{cmd[0]} did not run: {err}") from None
    if proc.returncode != 0:
        lines = proc.stderr.splitlines()
        first = next((ln for ln in lines if "error" in ln), lines[0] if lines else "")
        raise BuildFailed(f"the kernels did not build ({os.path.basename(cmd[0])} exit "
                          f"{proc.returncode}): {first.strip()}")
    try:
        return ctypes.CDLL(lib)
    except OSError as err:
        raise BuildFailed(f"the built kernels do not load: {err}") from None


def kernel_call(lib, symbol: str, n_inputs: int, outs, offsets=(), n_sizes: int = 0,
                checks: bool = False, into=()):
    """A Python function running kernel `symbol` as brrr's runner does: `n_inputs`
    tensors (their data pointers `offsets` bytes further on) and `n_sizes` sizes in, new
    outputs out, allocated as `outs(*sizes)` says: [(shape, stride, dtype)]; the outputs
    `into` are instead the tensors passed last (a mutated input stored in place)."""
    fn = getattr(lib, symbol)
    n_outs = len(outs(*[1] * n_sizes))
    fn.argtypes = [ctypes.c_void_p] * (n_inputs + n_outs) + [ctypes.c_int64] * n_sizes
    fn.restype = None
    offsets = offsets or (0,) * n_inputs

    def call(*args):
        inputs, rest = args[:n_inputs], args[n_inputs:]
        sizes, given = [int(s) for s in rest[:n_sizes]], dict(zip(into, rest[n_sizes:]))
        out = [given[j] if j in given else torch.empty_strided(sh, st, dtype=dt)
               for j, (sh, st, dt) in enumerate(outs(*sizes))]
        fn(*[t.data_ptr() + off for t, off in zip(inputs, offsets)],
           *[o.data_ptr() for o in out], *sizes)
        if checks and lib.brrr_take_error():
            raise IndexError(f"{symbol}: index out of bounds")
        return out
    return call


def brrr_reinterpret(tensor, size, stride, offset):
    """`tensor`'s storage seen with `size` and `stride`, `offset` elements further on."""
    return tensor.as_strided(size, stride, tensor.storage_offset() + offset)


def random_input(spec):
    """A tensor of `spec` (shape, stride, storage offset, dtype, device[, high]: integers
    are drawn from [0, high), safe as the indices they are), or `spec` itself (a size)."""
    if not isinstance(spec, tuple):
        return spec
    shape, stride, offset, dtype, where, *high = spec
    extent = offset + (1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0)
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.randn(extent, dtype=dtype, device=where)
    elif dtype == torch.bool:
        base = torch.rand(extent, device=where) < 0.5
    else:
        base = torch.randint(0, high[0] if high else 2, (extent,), dtype=dtype, device=where)
    return base.as_strided(shape, stride, offset)


def copy_input(t):
    """A copy of `t` with its sizes, strides and storage offset (ints pass through)."""
    if not isinstance(t, torch.Tensor):
        return t
    storage = t.untyped_storage()
    flat = torch.empty(storage.nbytes() // t.element_size(), dtype=t.dtype, device=t.device)
    flat.untyped_storage().copy_(storage)
    return flat.as_strided(t.shape, t.stride(), t.storage_offset())


def _tensors(values) -> list:
    values = values if isinstance(values, (list, tuple)) else [values]
    return [v for v in values if isinstance(v, torch.Tensor)]


def compare(actual, expected) -> tuple[bool, str]:
    """(whether every tensor agrees within its dtype's tolerance, a one-line summary)."""
    actual, expected = _tensors(actual), _tensors(expected)
    if len(actual) != len(expected):
        return False, f"{len(actual)} tensors from brrr, {len(expected)} from the ATen graph"
    worst = 0.0
    for i, (a, e) in enumerate(zip(actual, expected)):
        tol = TOLERANCE.get(e.dtype, 0)
        try:
            torch.testing.assert_close(a, e, rtol=tol, atol=tol, equal_nan=True,
                                       check_stride=False)
        except AssertionError as err:
            return False, f"tensor {i} differs: " + " ".join(str(err).split())[:300]
        if a.numel() and (a.is_floating_point() or a.is_complex()):
            worst = max(worst, (a.double() - e.double()).abs().nan_to_num(0).max().item())
    return True, f"{len(actual)} tensors agree (max abs difference {worst:.2e})"


def _median_s(fns: dict, make_args, rounds: int, sync) -> tuple[dict, int]:
    """Median seconds per call of each of `fns`, alternating within every round; each
    call gets fresh copies of the inputs (made before the round's clock starts); `sync()`
    waits for the device before the clock stops."""
    nbytes = sum(t.untyped_storage().nbytes() for t in _tensors(make_args()))
    start = time.perf_counter()
    for fn in fns.values():
        fn(make_args())
    sync()
    calls = int(ROUND_S * len(fns) / max(time.perf_counter() - start, 1e-9))
    calls = max(1, min(1000, calls, COPIES_BYTES // max(nbytes, 1)))
    per_round = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            args = [make_args() for _ in range(calls)]
            start = time.perf_counter()
            for a in args:
                fn(a)
            sync()
            per_round[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(t) for name, t in per_round.items()}, calls


def cpp_kernels(source: str, command: list[str]):
    """The `load` of a C++ dump: `folder` -> the library `source` builds into there."""
    return lambda folder: build(source, command, folder) if source else None


def run(name: str, module, runner, bind, load, specs, argv=None, untimed: str = "") -> int:
    """Build the kernels (`load(folder)`, which `bind` turns into the runner's kernel
    calls), check brrr's runner against the ATen graph `module`, time both (unless
    `untimed` says why not). Exit code: 0 they agree, 1 they differ, 2 the kernels
    cannot be built or run here."""
    parser = argparse.ArgumentParser(prog=f"python {name}.py", description=(
        f"Rebuild {name}'s kernels, check brrr's runner against the ATen graph, time both."))
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds (0: no timing)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix=f"brrr-{name}-") as folder:
        try:
            kernels = bind(load(folder))
        except BuildFailed as err:
            print(f"{name}: {err}", file=sys.stderr)
            return 2
        runner.__globals__.update(kernels)
        torch.manual_seed(0)
        inputs = [random_input(s) for s in specs]
        fns = {"ATen": lambda a: module(*a), "brrr": lambda a: runner(module, a)}
        after = {}                          # outputs, then the inputs (a graph may mutate them)
        for who, fn in fns.items():
            copies = [copy_input(t) for t in inputs]
            torch.manual_seed(1)            # the same random numbers for random ops
            after[who] = _tensors(fn(list(copies))) + _tensors(copies)
        ok, summary = compare(after["brrr"], after["ATen"])
        print(f"{name}: {'match' if ok else 'MISMATCH'}: brrr's runner against the ATen "
              f"graph, outputs and inputs after the call: {summary}")
        cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)
        if args.rounds > 0 and untimed:
            print(f"{name}: not timed: {untimed}")
        elif args.rounds > 0:
            times, calls = _median_s(fns, lambda: [copy_input(t) for t in inputs], args.rounds,
                                     torch.cuda.synchronize if cuda else (lambda: None))
            print(f"{name}: ATen graph {times['ATen'] * 1e6:.1f} us, brrr {times['brrr'] * 1e6:.1f} "
                  f"us per call: {times['ATen'] / times['brrr']:.2f}x (median of {args.rounds} "
                  f"interleaved rounds of {calls} calls)")
    return 0 if ok else 1
