"""Which generated loops does gcc leave scalar? Compiles the kernels brrr makes for the
generated patterns (benchmarks/patterns.py) and lists every `omp simd` loop that gcc did
not vectorize, with its kernel and body.

    python benchmarks/vector_audit.py [--seeds 0:80] [--sizes l1,l2,llc] [--out FILE]

(Seed 55 at the LLC size needs over 20 GB in eager itself: leave it out on a small machine.)

A scalar inner loop is the usual reason a fused kernel runs several times slower than its
bytes allow (a loop of libm calls or float16 conversions at one element a time). Nothing
is timed: each case is compiled by brrr once, with its debug dump on, and each dumped
translation unit is compiled again with the toolchain's own flags and gcc's
`-fopt-info-vec` report. A loop counts as scalar when gcc reports "couldn't vectorize
loop" and no "loop vectorized" on its `for` line or the line after it (where gcc places
a loop's location); loops gcc turned into a memset or unrolled whole are not listed.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from benchmarks.bench_patterns import pattern_at, size_classes  # noqa: E402
from brrr_compiler.runtime.toolchain import find_toolchain  # noqa: E402

UNIT_MARK = "// ==== translation unit"


def dump_case(seed: int, size_bytes: int, debug_dir: Path) -> str | None:
    """Compile the pattern of `seed` at `size_bytes` with brrr, dumping into `debug_dir`;
    its dtype, or None when the seed has no pattern at that size."""
    found = pattern_at(seed, size_bytes)
    if found is None:
        return None
    p, f, inputs = found
    os.environ["BRRR_DEBUG_DIR"] = str(debug_dir)
    try:
        torch._dynamo.reset()
        torch.compile(f, backend="brrr")(*inputs)
    except Exception as e:  # noqa: BLE001 - torch.compile fails on some (aot_eager too)
        print(f"seed {seed}: torch.compile failed ({type(e).__name__}); its kernels, "
              "if any were dumped, are still audited", file=sys.stderr)
    finally:
        os.environ.pop("BRRR_DEBUG_DIR")
    return p.dtype


def units(kernels_cpp: Path) -> list[str]:
    """The translation units of a dumped kernels.cpp (several are concatenated)."""
    head, *rest = kernels_cpp.read_text().split(UNIT_MARK)
    found = [head] if head.strip() else []
    return found + [u.partition("\n")[2] for u in rest]     # less the marker's own line


def scalar_loops(source: str, flags, libs, work: Path) -> list[tuple[str, str]]:
    """(kernel name, loop text) of each `omp simd` loop of `source` gcc left scalar."""
    cpp, report = work / "unit.cpp", work / "vec.txt"
    cpp.write_text(source)
    report.unlink(missing_ok=True)
    cmd = [find_toolchain().cxx, *[f for f in flags if f != "-shared"], "-c",
           f"-fopt-info-vec-optimized-missed={report}", "-o", str(work / "unit.o"), str(cpp)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return [("(unit failed to compile)", done.stderr[-1500:])]
    text = report.read_text() if report.exists() else ""    # no loop at all: no report
    done = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", text)}
    failed = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: missed: couldn't vectorize loop",
                                                   text)}
    lines, found, kernel = source.split("\n"), [], "?"
    for i, line in enumerate(lines, start=1):
        m = re.match(r'extern "C" [^(]*?(\w+)\(', line)
        kernel = m.group(1) if m else kernel
        if not line.strip().startswith("#pragma omp simd"):
            continue
        # gcc places a loop's report on its `for` line, the line after it, or, for a
        # long body, a line inside it (a column walk's max over a relu: line 3 of it)
        body = set(range(i + 1, _loop_end(lines, i) + 1))
        if body & failed and not body & done:
            found.append((kernel, "\n".join(lines[i:i + 12])))
    return found


def _loop_end(lines: list[str], pragma: int) -> int:
    """The 1-based line that closes the loop whose `for` follows the pragma on line
    `pragma` (1-based); the `for` line itself when it has no braced body."""
    if "{" not in lines[pragma]:            # `for (...) one statement;`
        return pragma + 2 if not lines[pragma].rstrip().endswith(";") else pragma + 1
    depth, opened = 0, False
    for j in range(pragma, len(lines)):
        depth += lines[j].count("{") - lines[j].count("}")
        opened = opened or "{" in lines[j]
        if opened and depth <= 0:
            return j + 1
    return pragma + 1


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0:80")
    ap.add_argument("--sizes", default="l1,l2,llc")
    ap.add_argument("--out", default=None, help="write the report here (default stdout)")
    args = ap.parse_args(argv)
    lo, hi = map(int, args.seeds.split(":"))
    tc = find_toolchain()
    rows = []
    with tempfile.TemporaryDirectory(prefix="brrr-vec-audit-") as tmp:
        work = Path(tmp)
        # a cached kernel is not printed again, so it would not be dumped: a private cache
        os.environ["BRRR_CACHE_DIR"] = str(work / "cache")
        for size, nbytes in size_classes(args.sizes.split(","), 1 << 62).items():
            for seed in range(lo, hi):
                dbg = work / f"dbg_{seed}_{size}"
                dtype = dump_case(seed, nbytes, dbg)
                for kcpp in sorted(dbg.rglob("kernels.cpp")) if dtype else []:
                    graph = kcpp.parent.name
                    for unit in units(kcpp):
                        for kernel, body in scalar_loops(unit, tc.flags, tc.libs, work):
                            rows.append((seed, size, dtype, graph, kernel, body))
                print(f"seed {seed} {size}: {sum(r[:2] == (seed, size) for r in rows)} "
                      "scalar loop(s)", file=sys.stderr, flush=True)
                if args.out:        # after each case: a long run that dies keeps its rows
                    Path(args.out).write_text(render(rows, args))
    if not args.out:
        print(render(rows, args))


def render(rows, args) -> str:
    out = [f"# Scalar `omp simd` loops in generated patterns (seeds {args.seeds}, sizes "
           f"{args.sizes})", "", f"{len(rows)} loop(s) gcc did not vectorize.", ""]
    for seed, size, dtype, graph, kernel, body in rows:
        out += [f"## seed {seed} {size} ({dtype}), {graph}: {kernel}", "", "```cpp", body,
                "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    main()
