"""Print every kernel the suites' workloads make, as C++ (at several thread counts) and
Triton source, into one directory: a refactor of codegen or scheduling compares two
such directories (`diff -r`) to show the generated code did not change.

    python benchmarks/dump_kernel_sources.py OUT_DIR [--skip-heavy] [--cases WORD,...]

Each workload is traced and lowered by brrr's own pipeline; nothing is built or timed
(the graphs then run through ATen). Covers the pointwise trio (workloads.WORKLOADS at 256,
1024 and 4096), the kernel suite's cases (KERNEL_CASES, the masked ones included) under
each fusion policy, and their backward graphs where an input can take a gradient.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from brrr_compiler import backend
from brrr_compiler.codegen import cpp
from brrr_compiler.codegen import triton as triton_printer

THREADS = (1, 2, 4, 16)
POLICIES = ("greedy", "cost", "none")


class _Stop(Exception):
    """Raised after printing: the graph then runs through ATen, nothing is built."""


def _recorder(out: Path, label: list[str]):
    real = backend.lower_plan

    def lower_plan(plan, target="cpp", num_threads=1, *args, **kwargs):
        kernels = real(plan, target, num_threads, *args, **kwargs)[0]
        for i, k in enumerate(kernels.values()):
            stem = out / f"{label[0]}.{i:02d}.{k.name}"
            for n in THREADS:
                Path(f"{stem}.t{n}.cpp").write_text(cpp.kernel_source(k, n))
            try:
                Path(f"{stem}.py").write_text(triton_printer.kernel_source(k))
            except NotImplementedError as err:
                Path(f"{stem}.py").write_text(f"# {err}\n")
        raise _Stop(f"{len(kernels)} kernels printed")
    return lower_plan


def _cases(skip_heavy: bool, words: list[str]):
    sys.path.insert(0, str(Path(__file__).parent))
    import workloads
    for name, case in workloads.KERNEL_CASES.items():
        if not (skip_heavy and case.heavy) and (not words or any(w in name for w in words)):
            yield name, case.fn, case.inputs
    for name, w in workloads.WORKLOADS.items():
        for n in (256, 1024, 4096) if not words or any(w in name for w in words) else ():
            yield f"trio {name} {n}", w.fn, lambda w=w, n=n: w.make_inputs(n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--skip-heavy", action="store_true")
    ap.add_argument("--cases", default="", help="only the cases whose names hold one of these")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    label = [""]
    backend.lower_plan = _recorder(out, label)
    for name, fn, make in _cases(args.skip_heavy, [w for w in args.cases.split(",") if w]):
        for policy in POLICIES:
            label[0] = f"{name}.{policy}".replace(" ", "_")
            inputs = make()
            grads = [x.detach().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor)
                     else x for x in inputs]
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend="brrr", options={"fusion": policy})
            result = compiled(*grads)
            if isinstance(result, torch.Tensor) and result.requires_grad:
                label[0] += ".bwd"
                result.float().sum().backward()
    print(len(list(out.glob("*.t1.cpp"))), "kernels printed")


if __name__ == "__main__":
    main()
