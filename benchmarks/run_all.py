"""Run benchmark suites one after another, each in its own process (each re-execs itself
with the malloc environment and writes its own results).

    python benchmarks/run_all.py [kernels|models|compile|sweep|all] [--quick] [-- extra suite args]

`brrr bench ...` (brrr_compiler/cli.py) runs this file from the checkout.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = {
    "kernels": "bench_kernels.py",
    "models": "bench_models.py",
    "compile": "bench_compile.py",
    "sweep": "bench_sweep.py",
}
ALL = ("kernels", "models", "compile")     # the sweep is long: asked for by name


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("suite", nargs="?", default="all", choices=[*SUITES, "all"])
    p.add_argument("--quick", action="store_true", help="each suite's quick smoke-test mode")
    p.add_argument("extra", nargs="*", help="after --: arguments passed to every suite")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    names = list(ALL) if args.suite == "all" else [args.suite]
    failed = []
    for name in names:
        cmd = [sys.executable, str(HERE / SUITES[name])]
        cmd += (["--quick"] if args.quick else []) + args.extra
        print(f"== {name}: {' '.join(cmd)}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(cmd)
        print(f"== {name}: exit {code} after {time.perf_counter() - start:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed suites: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
