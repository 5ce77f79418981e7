"""The `brrr` command line (the console script declared in pyproject.toml).

    brrr demo [--size small|full] [--rounds N]     (also: python -m brrr_compiler.cli ...)

Each subcommand is one `_add_<name>(subparsers)` function, listed in SUBCOMMANDS, that
declares its arguments and sets `handler(args, reexec) -> exit code`. `calibrate` and
`bench` join that list when they are written; nothing stands in for them until then.

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
    print(ensure_malloc_env(reexec), flush=True)
    from brrr_compiler import demo
    return demo.run(args.size, args.rounds)


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
    p.set_defaults(handler=_run_demo)


# ---- the parser -------------------------------------------------------------------------

SUBCOMMANDS = (_add_demo,)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brrr", description="brrr: a torch.compile backend that fuses memory-bound op chains")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `brrr`; `argv` None means this process's own command line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.handler(args, reexec=argv is None)


if __name__ == "__main__":
    sys.exit(main())
