"""Redraw the suites' PNGs from the numbers they saved, without measuring anything:

    python benchmarks/replot.py [--results-dir benchmarks/results]

kernels.json -> kernels_speedup.png and kernels_bandwidth.png (the bandwidth plot takes
the cases larger than the measuring machine's LLC: llc_bytes, else this machine's),
models.json -> models_speedup.png and models_outside.png,
cost_model.json -> cost_model.png, compile.json (or compile_scaling.json, a run of the
scaling alone) -> compile_scaling.png. A suite whose
JSON is missing is skipped with a line saying so. For a change to the plotting code, not
to the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def kernels(raw: dict, directory: Path) -> list[str]:
    from kernels_report import plot

    return plot(raw["cases"], raw["backends"], statistics.median(raw["bandwidths"]), directory,
                raw.get("llc_bytes"))


def models(raw: dict, directory: Path) -> list[str]:
    from models_report import plot

    results = {(r["model"], r["mode"]): r for r in raw["results"]}
    return plot(results, raw["backends"], directory)


def cost_model(raw: dict, directory: Path) -> list[str]:
    from bench_cost_model import plot

    png = plot(raw["kernels"], directory / "cost_model.png")
    return [f"Plot: `{png.name}`"] if png else ["no plot (no kernels, or no matplotlib)"]


def compile_scaling(raw: dict, directory: Path) -> list[str]:
    from compile_scaling import plot_scaling

    return [plot_scaling(raw["scaling"], directory)] if raw.get("scaling") else ["no scaling run"]


SUITES = {"kernels.json": kernels, "models.json": models, "cost_model.json": cost_model,
          "compile.json": compile_scaling, "compile_scaling.json": compile_scaling}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results-dir", default=str(HERE / "results"))
    directory = Path(p.parse_args(argv).results_dir)
    sys.path.insert(0, str(HERE))
    for name, redraw in SUITES.items():
        path = directory / name
        if not path.exists():
            print(f"{name}: not found, its plots are left as they are")
            continue
        print(f"{name}: " + "; ".join(redraw(json.loads(path.read_text()), directory)))


if __name__ == "__main__":
    main()
