"""The `brrr` command line (the console script declared in pyproject.toml).

    brrr --version
    brrr demo [--size small|full] [--rounds N] [--trace FILE]   (also: python -m brrr_compiler.cli ...)
    brrr calibrate [--cache-dir DIR] [--calibration-dir DIR] [--dry-run]
    brrr bench [kernels|models|compile|sweep|all] [--quick]
    brrr bench models [--models gpt2,bert,...] [--modes inference1,inference,training]
                      [--rounds N] [--backends eager,aot_eager,inductor,brrr] [--tiny]
    brrr cache info|clear [--cache-dir DIR]

Each subcommand is one `_add_<name>(subparsers)` function, listed in SUBCOMMANDS, that
declares its arguments and sets `handler(args, reexec) -> exit code`.

Note on the malloc environment. A command that times things first makes sure the glibc
malloc settings in MALLOC_ENV hold for the whole process, re-executing itself with
them if they do not. Without them glibc serves every allocation of 32 MB or more with a
fresh mmap that is page-faulted on every call, so eager (which allocates every
intermediate) would be charged for page faults, not for its kernels. The re-exec
repeats the process's own command line (`sys.orig_argv`), so `brrr ...` and
`python -m brrr_compiler.cli ...` come back as themselves. `main(argv)` called with an
explicit argv from inside another program never replaces that program's process.
"""
from __future__ import annotations

import argparse
import os
import sys

MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "17179869184"}
_REEXEC_MARK = "BRRR_CLI_REEXEC"       # set in the re-executed process: never loop


def malloc_env_is_set() -> bool:
    return all(os.environ.get(k) == v for k, v in MALLOC_ENV.items())


def ensure_malloc_env(reexec: bool) -> str:
    """Re-exec with MALLOC_ENV unless it is set (and `reexec` allows); say what holds."""
    settings = " ".join(f"{k}={v}" for k, v in MALLOC_ENV.items())
    if malloc_env_is_set():
        how = "re-executed to set it" if os.environ.get(_REEXEC_MARK) else "already set"
        return f"glibc malloc env {settings}: set for the whole process ({how})"
    if reexec and not os.environ.get(_REEXEC_MARK):
        sys.stdout.flush()
        sys.stderr.flush()
        env = dict(os.environ, **MALLOC_ENV, **{_REEXEC_MARK: "1"})
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    return (f"glibc malloc env {settings}: NOT set (called in-process; "
            "eager timings include page faults on large tensors)")


# ---- brrr demo ------------------------------------------------------------------------

def _run_demo(args: argparse.Namespace, reexec: bool) -> int:
    folder = os.path.dirname(os.path.abspath(args.trace)) if args.trace else None
    if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        print(f"brrr demo: --trace {args.trace}: folder {folder} does not exist or is not "
              "writable", file=sys.stderr)
        return 2
    print(ensure_malloc_env(reexec), flush=True)
    from brrr_compiler import demo
    return demo.run(args.size, args.rounds, args.trace)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _add_demo(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="compile a small built-in model, print its kernels and speedup",
        description="Compile a transformer block and three memory-bound chains with brrr; "
                    "check each against eager, print the kernels brrr made and time brrr "
                    "against eager (interleaved rounds, median).")
    p.add_argument("--size", choices=("small", "full"), default="full",
                   help="full: 4096x4096 chains (about a minute); small: a quick run")
    p.add_argument("--rounds", type=_positive_int, default=15,
                   help="interleaved timing rounds per case (default 15)")
    p.add_argument("--trace", metavar="FILE", default=None,
                   help="also profile one call of each case and write a Chrome trace "
                        "(each brrr kernel an event by name) to FILE")
    p.set_defaults(handler=_run_demo)


# ---- brrr calibrate -------------------------------------------------------------------

def _run_calibrate(args: argparse.Namespace, reexec: bool) -> int:
    print(ensure_malloc_env(reexec), flush=True)
    from brrr_compiler import calibration
    print("measuring this machine for the cost model:", flush=True)
    result, saved = calibration.run(args.cache_dir, save=not args.dry_run,
                                    calibration_dir=args.calibration_dir, force=args.force)
    print(result.spec.to_json())
    return 1 if result.noisy and not args.dry_run and saved is None else 0


def _add_calibrate(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="measure this machine for the cost model (about a minute)",
        description="Measure streaming and cache bandwidth, flop and transcendental rates "
                    "of brrr kernels and per-kernel overhead; save them as device.json in "
                    "the calibration directory (apart from the kernel cache, so `brrr cache "
                    "clear` keeps it), where later compiles find them.")
    p.add_argument("--cache-dir", default=None,
                   help="where the measured kernels are built (default: BRRR_CACHE_DIR or "
                        "~/.cache/brrr)")
    p.add_argument("--calibration-dir", default=None,
                   help="where device.json goes (default: BRRR_CALIBRATION_DIR or "
                        "~/.config/brrr)")
    p.add_argument("--dry-run", action="store_true", help="measure and print, save nothing")
    p.add_argument("--force", action="store_true",
                   help="save even figures that did not settle (by default a noisy "
                        "calibration is refused, and the exit status is 1)")
    p.set_defaults(handler=_run_calibrate)


# ---- brrr bench -----------------------------------------------------------------------

BENCH_SUITES = ("kernels", "models", "compile", "sweep", "all")


def benchmarks_dir():
    """The checkout's benchmarks/ folder (the suites are not part of the installed
    package), or None when brrr is not installed from a checkout that has one."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks"
    return path if (path / "run_all.py").is_file() else None


def _run_bench(args: argparse.Namespace, reexec: bool) -> int:
    import subprocess
    where = benchmarks_dir()
    if where is None:
        print("brrr bench: the benchmark suites live in the repository's benchmarks/ folder, "
              "which this installation does not have; run it from a checkout installed "
              "with `pip install -e .` (each suite writes benchmarks/results/)", file=sys.stderr)
        return 2
    passed, wrong = _suite_options(args)
    if wrong:
        print(f"brrr bench: {wrong}", file=sys.stderr)
        return 2
    # the suite right before its passed-on options: argparse takes positionals in one run
    cmd = [sys.executable, str(where / "run_all.py"), *(["--quick"] if args.quick else []),
           args.suite, *(["--", *passed] if passed else [])]
    return subprocess.call(cmd, cwd=where.parent)     # each suite sets the malloc env itself


# option -> the suites that take it (the models suite's own choices, and the rounds and
# backends the kernel suite shares)
_SUITE_OPTIONS = {"models": ("models",), "modes": ("models",), "tiny": ("models",),
                  "threads": ("models",), "rounds": ("models", "kernels"),
                  "backends": ("models", "kernels")}


def _suite_options(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """(the suite options given, as the suite's own arguments; None, or what is wrong
    when the chosen suite does not take one of them)."""
    out = []
    for name, suites in _SUITE_OPTIONS.items():
        value = getattr(args, name)
        if value in (None, False):
            continue
        if args.suite not in suites:
            return [], f"--{name} applies to `brrr bench {' or '.join(suites)}`, not " \
                       f"`brrr bench {args.suite}`"
        out += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    return out, None


def _add_bench(subparsers) -> None:
    p = subparsers.add_parser(
        "bench", help="run the benchmark suites (eager vs inductor vs brrr) from the checkout",
        description="Run benchmarks/bench_<suite>.py from the checkout brrr is installed from; "
                    "each suite prints its table and writes benchmarks/results/<suite>.md and "
                    "PNG plots (with the [bench] extra).")
    p.add_argument("suite", nargs="?", choices=BENCH_SUITES, default="all",
                   help="kernels, models, compile or all (default; minutes each), or sweep "
                        "(never slower than eager: op_db ops and generated patterns, long; "
                        "see benchmarks/README.md)")
    p.add_argument("--quick", action="store_true", help="each suite's short smoke-test mode")
    p.add_argument("--models", default=None,
                   help="models suite: comma-separated models (gpt2, bert, llama, t5, vit, "
                        "resnet, mobilenet, convnext, mlp, norm_block; default all)")
    p.add_argument("--modes", default=None,
                   help="models suite: inference1 (batch 1), inference (throughput batch), "
                        "training; comma-separated (default all three)")
    p.add_argument("--rounds", type=_positive_int, default=None,
                   help="models and kernels suites: interleaved timing rounds")
    p.add_argument("--backends", default=None,
                   help="models and kernels suites: comma-separated backends "
                        "(models default eager,aot_eager,inductor,brrr)")
    p.add_argument("--threads", type=_positive_int, default=None,
                   help="models suite: torch threads (default torch's)")
    p.add_argument("--tiny", action="store_true",
                   help="models suite: tiny sizes, a smoke test (numbers mean nothing)")
    p.set_defaults(handler=_run_bench)


# ---- brrr cache ------------------------------------------------------------------------

def _run_cache(args: argparse.Namespace, reexec: bool) -> int:
    from brrr_compiler.cli_cache import clear_cache, show_cache
    return (show_cache if args.action == "info" else clear_cache)(args.cache_dir)


def _add_cache(subparsers) -> None:
    p = subparsers.add_parser(
        "cache", help="show or clear the kernel cache",
        description="info: the kernel cache's location, entries, size and cap, and where "
                    "the calibration lives. clear: remove every built kernel (the "
                    "calibration, kept apart, stays).")
    p.add_argument("action", choices=("info", "clear"), help="info or clear")
    p.add_argument("--cache-dir", default=None,
                   help="the cache to act on (default: BRRR_CACHE_DIR or ~/.cache/brrr)")
    p.set_defaults(handler=_run_cache)


# ---- the parser -------------------------------------------------------------------------

SUBCOMMANDS = (_add_demo, _add_calibrate, _add_bench, _add_cache)


def build_parser() -> argparse.ArgumentParser:
    from brrr_compiler import __version__
    parser = argparse.ArgumentParser(
        prog="brrr", description="brrr: a torch.compile backend that fuses memory-bound op chains")
    parser.add_argument("--version", action="version", version=f"brrr {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `brrr`; `argv` None means this process's own command line. A bad
    option or BRRR_* variable, or a file the command cannot use, is one line on stderr
    and exit status 2."""
    from brrr_compiler.config_checks import OptionError
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.handler(args, reexec=argv is None)
    except (OptionError, OSError) as err:
        print(f"brrr {args.command}: error: {str(err).removeprefix('brrr: ')}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
