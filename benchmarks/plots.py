"""PNG plots for the suites, with matplotlib (the `[bench]` extra).

Every function returns the path it wrote, or None when matplotlib is not installed: the
suites write their markdown either way and say which plots are missing.
"""

from __future__ import annotations

import math
from pathlib import Path

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
except ImportError:  # the [bench] extra is optional
    plt = None

COLORS = {"eager": "#888888", "inductor": "#1f77b4", "brrr": "#d62728"}


def available() -> bool:
    return plt is not None


def missing_note(names: list[str]) -> str:
    return (f"Plots not written ({', '.join(names)}): matplotlib is not installed "
            "(`pip install -e .[bench]`).")


def _color(name: str, i: int):
    return COLORS.get(name, plt.cm.tab10(i % 10))


def _save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def grouped_barh(path, labels: list[str], series: dict[str, list[float]], *, title: str,
                 xlabel: str, lines: dict[str, float] | None = None, log: bool = False):
    """Horizontal bars: one group per label, one bar per series; NaN bars are left out.
    `lines` draws labelled vertical reference lines (e.g. 1x, 75% of stream)."""
    if plt is None:
        return None
    n = max(1, len(series))
    height = 0.8 / n
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(labels) * max(1, n / 2) + 1.6))
    for i, (name, values) in enumerate(series.items()):
        ys = [k + (i - (n - 1) / 2) * height for k in range(len(labels))]
        vals = [v if v is not None and not math.isnan(v) else 0.0 for v in values]
        ax.barh(ys, vals, height=height, label=name, color=_color(name, i))
    for text, x in (lines or {}).items():
        ax.axvline(x, color="black", linestyle="--", linewidth=0.8)
        ax.text(x, len(labels) - 0.4, f" {text}", fontsize=8, va="bottom")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def scaling(path, xs: list[float], series: dict[str, list[float]], fits: dict[str, list[float]],
            *, title: str, xlabel: str, ylabel: str):
    """Points per series and, for each series in `fits`, its fitted polynomial
    (coefficients highest power first) as a line."""
    if plt is None:
        return None
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.5))
    grid = np.linspace(min(xs), max(xs), 200)
    for i, (name, ys) in enumerate(series.items()):
        color = _color(name.split()[0], i)
        ax.plot(xs, ys, "o", color=color, label=name)
        if name in fits:
            ax.plot(grid, np.polyval(fits[name], grid), "-", color=color, alpha=0.6,
                    label=f"{name}: linear fit")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)
