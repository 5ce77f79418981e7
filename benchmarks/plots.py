"""PNG plots for the suites, with matplotlib (the `[bench]` extra).

Every function returns the path it wrote, or None when matplotlib is not installed: the
suites write their markdown either way and say which plots are missing. Each plot is
drawn by a `draw_*` function on an Axes the caller gives (the tests read ticks and
labels from it) and saved by its wrapper.

Note on label placement. Point labels of a scatter are placed one by one, in order of
the point's position: each tries offsets around its point at growing distance and takes
the first whose box overlaps no label placed before it and no marker; failing that, the
one with the least overlap. A label moved away from its point gets a thin leader line.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter
except ImportError:  # the [bench] extra is optional
    plt = None

COLORS = {"eager": "#888888", "inductor": "#1f77b4", "brrr": "#d62728",
          "aot_eager": "#2ca02c"}
BOUND_COLORS = {"memory": "#1f77b4", "compute": "#d62728", "overhead": "#7f7f7f"}

# tick values for speedup axes, finest first: the first ladder that gives at most
# MAX_TICKS ticks inside the data's range is used
_LADDERS = [
    (0.1, 0.2, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100),
    (0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 20, 50, 100),
    (0.1, 0.5, 1, 2, 5, 10, 50, 100),
    (0.1, 1, 10, 100),
]
MAX_TICKS = 8


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


def times_label(value: float) -> str:
    """A speedup as people write it: 0.5x, 1x, 1.5x, 12x."""
    return f"{value:.3g}x"


def speedup_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log speedup axis spanning [lo, hi] (1 always among them)."""
    lo, hi = min(lo, 1.0), max(hi, 1.0)
    for ladder in _LADDERS:
        ticks = [t for t in ladder if lo <= t <= hi]
        if len(ticks) <= MAX_TICKS:
            return ticks
    return [t for t in _LADDERS[-1] if lo <= t <= hi]


def _finite(values) -> list[float]:
    return [v for v in values if v is not None and not math.isnan(v)]


def grouped_barh(path, labels: list[str], series: dict[str, list[float]], *, title: str,
                 xlabel: str, lines: dict[str, float] | None = None, speedup: bool = False,
                 percent: bool = False):
    """Horizontal bars: one group per label, one bar per series, its value written at its
    end; NaN bars are left out. `lines` draws labelled vertical reference lines (e.g. 1x,
    75% of stream). `speedup`: a log axis ticked in x (0.5x, 1x, 1.5x, 2x) whose bars
    start at 1x, so a slowdown points left. `percent`: fractions shown as percentages."""
    if plt is None:
        return None
    n = max(1, len(series))
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(labels) * max(1, n / 2) + 1.8))
    draw_grouped_barh(ax, labels, series, title=title, xlabel=xlabel, lines=lines,
                      speedup=speedup, percent=percent)
    return _save(fig, path)


def _value_label(v: float, speedup: bool, percent: bool) -> str:
    return times_label(v) if speedup else f"{v:.0%}" if percent else f"{v:.3g}"


def draw_grouped_barh(ax, labels, series, *, title, xlabel, lines=None, speedup=False,
                      percent=False) -> None:
    n = max(1, len(series))
    height = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        kept = [(k, v) for k, v in enumerate(values) if v is not None and not math.isnan(v)]
        if not kept:
            continue
        ys = [k + (i - (n - 1) / 2) * height for k, _ in kept]
        vals = [v for _, v in kept]
        base = 1.0 if speedup else 0.0
        bars = ax.barh(ys, [v - base for v in vals], left=base, height=height, label=name,
                       color=_color(name, i))
        ax.bar_label(bars, labels=[_value_label(v, speedup, percent) for v in vals],
                     fontsize=7, padding=2)
    for text, x in (lines or {}).items():      # labelled in a row of their own, on top
        ax.axvline(x, color="black", linestyle="--", linewidth=0.8)
        ax.text(x, -0.85, f" {text}", fontsize=8, va="center")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -1.2 if lines else -0.6)      # inverted: first on top
    values = _finite(v for vs in series.values() for v in vs)
    if speedup and values:
        _speedup_axis(ax, min(values), max(values))
    elif values:
        ax.set_xlim(min(0.0, min(values)), max(values) * 1.15)   # room for the labels
    if percent:
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel(xlabel)
    ax.set_title(textwrap.fill(title, 80), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # clear of bars
    ax.grid(axis="x", alpha=0.3)


def _speedup_axis(ax, lo: float, hi: float) -> None:
    ax.set_xscale("log")
    ticks = speedup_ticks(lo, hi)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: times_label(v)))
    ax.xaxis.set_minor_locator(NullLocator())
    # room for the value labels at both ends: a slowdown's is left of its bar
    ax.set_xlim(min(lo, 1.0) / 1.4, max(hi, 1.0) * 1.4)


def scaling(path, xs: list[float], series: dict[str, list[float]], fits: dict[str, list[float]],
            *, title: str, xlabel: str, ylabel: str):
    """Points per series and, for each series in `fits`, its fitted polynomial
    (coefficients highest power first) as a line."""
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    draw_scaling(ax, xs, series, fits, title=title, xlabel=xlabel, ylabel=ylabel)
    return _save(fig, path)


def draw_scaling(ax, xs, series, fits, *, title, xlabel, ylabel) -> None:
    import numpy as np

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


def predicted_vs_measured(path, points: list[tuple[str, float, float, str]], *, title: str):
    """Log-log scatter of (name, measured s, predicted s, bound class) with the diagonal,
    x1.5 bands and a label per point that overlaps no other."""
    if plt is None or not points:
        return None
    fig, ax = plt.subplots(figsize=(7, 6.5))
    draw_predicted_vs_measured(ax, points, title=title)
    return _save(fig, path)


def draw_predicted_vs_measured(ax, points, *, title) -> list:
    """The scatter on `ax`; returns the label Text objects."""
    us = [(name, meas * 1e6, pred * 1e6, bound) for name, meas, pred, bound in points]
    for bound, color in BOUND_COLORS.items():
        pts = [(m, p) for _, m, p, b in us if b == bound]
        if pts:
            ax.scatter(*zip(*pts), c=color, label=f"{bound}-bound (predicted)", s=28, zorder=3)
    lo = min(min(m, p) for _, m, p, _ in us) / 2
    hi = max(max(m, p) for _, m, p, _ in us) * 2
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="predicted = measured")
    ax.plot([lo, hi], [lo * 1.5, hi * 1.5], "k:", lw=0.6, label="x1.5")
    ax.plot([lo, hi], [lo / 1.5, hi / 1.5], "k:", lw=0.6)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
           xlabel="measured us per call (median)", ylabel="predicted us per call", title=title)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="both", lw=0.3)
    ax.figure.tight_layout()                  # labels are placed in the final layout
    return label_points(ax, [(m, p) for _, m, p, _ in us], [name for name, *_ in us])


# offsets in points around a point, nearest first; ha/va put the text on that side
_RINGS = (6, 14, 24, 36, 50)
_DIRECTIONS = [(1, 0.3), (1, -0.9), (-1, 0.3), (-1, -0.9), (0, 1), (0, -1.6),
               (1, 1), (-1, 1), (1, -1.6), (-1, -1.6)]


def label_points(ax, xy: list[tuple[float, float]], labels: list[str], fontsize: int = 6) -> list:
    """Annotate each point with its label, no two labels (or a label and a marker)
    overlapping where the rings of offsets allow (the note at the top)."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    marker = [_marker_box(ax, p) for p in xy]
    placed, texts = [], []
    for i in sorted(range(len(xy)), key=lambda i: (xy[i][0], xy[i][1])):
        best = None
        for ring in _RINGS:
            for dx, dy in _DIRECTIONS:
                text = _annotate(ax, xy[i], labels[i], (dx * ring, dy * ring), fontsize)
                box = text_box(text, renderer).expanded(1.05, 1.1)
                cost = sum(_overlap(box, b) for b in placed + marker)
                if best is None or cost < best[0]:
                    if best is not None:
                        best[1].remove()
                    best = (cost, text, box, ring)
                else:
                    text.remove()
                if cost == 0:
                    break
            if best[0] == 0:
                break
        _, text, box, ring = best
        if ring > _RINGS[0]:                  # moved away: draw it again with a leader
            offset = text.xyann
            text.remove()
            text = _annotate(ax, xy[i], labels[i], offset, fontsize, leader=True)
        placed.append(box)
        texts.append(text)
    return texts


def text_box(text, renderer):
    """The box of an annotation's text alone (its own extent includes the leader)."""
    from matplotlib.text import Text

    return Text.get_window_extent(text, renderer)


def _annotate(ax, point, label, offset, fontsize, leader: bool = False):
    ha = "left" if offset[0] > 0 else "right" if offset[0] < 0 else "center"
    arrow = {"arrowstyle": "-", "lw": 0.4, "color": "0.5", "shrinkA": 0, "shrinkB": 3}
    return ax.annotate(label, point, xytext=offset, textcoords="offset points",
                       fontsize=fontsize, ha=ha, va="center",
                       arrowprops=arrow if leader else None)


def _marker_box(ax, point):
    from matplotlib.transforms import Bbox

    x, y = ax.transData.transform(point)
    r = 4.0 * ax.figure.dpi / 72          # a 28 pt^2 marker's radius, in pixels
    return Bbox([[x - r, y - r], [x + r, y + r]])


def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0
