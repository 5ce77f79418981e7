"""Command lines and result files for the benchmark suites.

harness.py times backends and checks their outputs; this module parses the suites'
command lines (--out, --results-dir, --quick, pattern options) and writes what they
measured: markdown tables and result files under RESULTS_DIR.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from machine_env import machine_markdown

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join(" --- " for _ in columns) + "|",
    ]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def command_line() -> str:
    return " ".join(["python"] + sys.argv)


def base_parser(doc: str, out: str) -> argparse.ArgumentParser:
    """The options every suite has: --out, --results-dir."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument("--out", default=out, help=f"file name under the results dir ({out})")
    p.add_argument("--results-dir", default=str(RESULTS_DIR),
                   help="where results go (default benchmarks/results; a --quick run uses "
                        f"{QUICK_RESULTS_DIR} instead, so a smoke test never overwrites them)")
    return p


def pattern_options(p: argparse.ArgumentParser, seeds: str, sizes: str, rounds: int,
                    max_tensor_bytes: float) -> None:
    """The options of a suite over generated patterns (benchmarks/patterns.py)."""
    p.add_argument("--seeds", default=seeds, help="pattern seeds A:B, half-open ('' for none)")
    p.add_argument("--sizes", default=sizes, help="comma-separated pattern size classes")
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--max-tensor-bytes", type=float, default=max_tensor_bytes,
                   help="cap on the largest input of a case")


def parse_quick(p: argparse.ArgumentParser, argv, quick: dict, quick_help: str):
    """Parse with a --quick smoke-test flag that sets the options in `quick` and sends the
    results to QUICK_RESULTS_DIR (see results_dir)."""
    p.add_argument("--quick", action="store_true", help=quick_help)
    args = p.parse_args(argv)
    if args.quick:
        for name, value in quick.items():
            setattr(args, name, value)
    args.results_dir = results_dir(args.results_dir, args.quick)
    return args


QUICK_RESULTS_DIR = Path(tempfile.gettempdir()) / "brrr-bench-quick"


def results_dir(chosen: str | None, quick: bool = False) -> Path:
    """Where a suite writes: --results-dir, except that a --quick run left at the default
    writes to QUICK_RESULTS_DIR (quick numbers must not replace the committed ones)."""
    if not chosen or (quick and Path(chosen) == RESULTS_DIR):
        return QUICK_RESULTS_DIR if quick else RESULTS_DIR
    return Path(chosen)


def suite_parser(doc: str, backends: str, workloads: str, out: str) -> argparse.ArgumentParser:
    """base_parser plus --size, --backends, --workloads (the NxN workload suites)."""
    p = base_parser(doc, out)
    p.add_argument("--size", type=int, default=4096, help="inputs are NxN (default 4096)")
    p.add_argument("--backends", default=backends, help=f"comma-separated ({backends})")
    p.add_argument("--workloads", default=workloads, help="comma-separated")
    return p


def report(title: str, facts: dict, table: str, notes: list[str]) -> str:
    """A result file: title, command line, machine facts, the table, then notes."""
    parts = [f"# {title}", f"Command: `{command_line()}`", machine_markdown(facts), table]
    return "\n\n".join(parts + notes) + "\n"


def publish(name: str, text: str, directory: str | Path | None = None) -> Path:
    """Print a result and write it to <directory>/<name> (default results/)."""
    print(text)
    directory = Path(directory or RESULTS_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    print(f"wrote {path}", file=sys.stderr)
    return path
