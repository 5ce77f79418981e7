"""Reports: what brrr did with each compiled graph, for `explain` and the logs.

A leaf: plain data and its printing. backend.py fills it (graph_report.py); `explain`
adds the graph breaks Dynamo made.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field


def short_path(path: str) -> str:
    """`path` relative to the working directory when it lies inside it."""
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def fmt_time(seconds: float | None) -> str:
    """3 significant digits in ns, us, ms or s."""
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _scaled(value: float, unit: str) -> str:
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def fmt_bytes(n: float | None) -> str:
    """Decimal units: 1 KB = 1000 B, as bandwidths are quoted."""
    return "n/a" if n is None else _scaled(n, "B")


def fmt_flops(n: float | None) -> str:
    return "n/a" if n is None else _scaled(n, "FLOP")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _counted(items) -> str:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return ", ".join(x if c == 1 else f"{x} x{c}" for x, c in counts.items())


@dataclass
class KernelReport:
    name: str
    aten_ops: list[str]            # the ATen overloads it fuses, in graph order
    nodes: list[str]               # the FX node names it fuses
    domain: list                   # its iteration shape
    predicted_s: float | None = None    # the cost model's predicted time per call
    bound: str | None = None       # what bounds it: "compute", "memory" or "overhead"
    flops: float | None = None     # flop-equivalents (op-table weights)
    bytes: int | None = None       # bytes it must read and write
    compute_s: float | None = None  # the prediction's compute and memory terms
    memory_s: float | None = None
    estimate_error: str = ""       # why the cost model has no number (it should not happen)
    unfused_s: float | None = None  # predicted for its compute ops, one kernel each
    unfused_bytes: int | None = None
    sources: list[str] = field(default_factory=list)   # user lines its ops come from
    schedule: str = ""             # how it runs (its schedule, described in one line)
    called: str = ""               # how the runner calls it: "segment" (one native call
    #                                with its neighbours) or "python"; "" where not a CPU
    #                                runner's kernel

    def cost_summary(self) -> str:
        if self.predicted_s is None:
            return f"[no estimate: {self.estimate_error}]" if self.estimate_error else ""
        return (f"[{self.bound}-bound: {fmt_time(self.predicted_s)}, "
                f"{fmt_flops(self.flops)}, {fmt_bytes(self.bytes)}]")

    def ops_summary(self) -> str:
        return _counted(self.aten_ops)


@dataclass
class AtenCall:
    """A node of the graph that runs through ATen, and why."""
    name: str                      # FX node name
    op: str                        # e.g. "aten.mm.default"
    reason: str
    view: bool = False             # a view or a pick of a tuple: no compute, no data moved
    source: str = ""               # the user's line it comes from


@dataclass
class GraphBreak:
    """Where Dynamo split the function into graphs, and why (torch's own words)."""
    reason: str
    location: str = ""             # file:line of the user's code

    def __str__(self) -> str:
        first = self.reason.strip().splitlines()[0] if self.reason.strip() else "?"
        return f"{self.location}: {first}" if self.location else first


@dataclass
class GraphReport:
    name: str                      # e.g. "graph0_forward"
    kind: str                      # forward | backward | inference
    kernels: list[KernelReport]
    aten_nodes: list[tuple[str, str]]   # (node name, ATen op) that ran through ATen
    decisions: list = field(default_factory=list)
    source: str = ""               # the generated C++
    runner_code: str = ""          # the generated Python runner
    edges: list = field(default_factory=list)   # (producer, consumer) FX node names
    device: str = ""               # the DeviceSpec the predictions are for
    aten_calls: list[AtenCall] = field(default_factory=list)   # aten_nodes, with reasons
    # why each part that brrr meant to run as a kernel runs through ATen instead (a group
    # that did not lower or build, or the whole graph): this compile's own fallback record
    fallbacks: list[str] = field(default_factory=list)

    @property
    def views(self) -> list[AtenCall]:
        return [c for c in self.aten_calls if c.view]

    @property
    def compute_calls(self) -> list[AtenCall]:
        return [c for c in self.aten_calls if not c.view]

    def totals(self) -> dict:
        """Kernels and ATen calls counted; predicted time and bytes of the kernels, fused
        against their compute ops run one kernel each (None where a kernel has no number)."""
        def total(attr):
            values = [getattr(k, attr) for k in self.kernels]
            return None if any(v is None for v in values) else sum(values)
        return {"kernels": len(self.kernels), "aten_calls": len(self.compute_calls),
                "views": len(self.views), "fused_s": total("predicted_s"),
                "unfused_s": total("unfused_s"), "fused_bytes": total("bytes"),
                "unfused_bytes": total("unfused_bytes")}

    def header(self) -> str:
        t = self.totals()
        views = f", {_plural(t['views'], 'view')}" if t["views"] else ""
        return (f"{self.name} ({self.kind}): {_plural(t['kernels'], 'kernel')}, "
                f"{_plural(t['aten_calls'], 'ATen call')}{views}")

    def totals_line(self) -> str:
        t = self.totals()
        return (f"  predicted: kernels {fmt_time(t['fused_s'])} fused vs "
                f"{fmt_time(t['unfused_s'])} unfused (one kernel per ATen op); they move "
                f"{fmt_bytes(t['fused_bytes'])} vs {fmt_bytes(t['unfused_bytes'])}")

    def kernel_lines(self, sources: bool = True) -> list[str]:
        """One line per kernel (name, ops, prediction), each followed by the user lines
        its ops come from (with `sources`)."""
        width = max([len(k.name) for k in self.kernels] + [6])
        lines = []
        for k in self.kernels:
            lines.append(f"  {k.name:<{width}}  {k.ops_summary()}  {k.cost_summary()}".rstrip())
            called = {"segment": "; in a segment", "python": "; called from Python"}
            lines += [f"  {'':<{width}}  schedule: {k.schedule}{called.get(k.called, '')}"] \
                if k.schedule else []
            lines += [f"  {'':<{width}}  from {s}" for s in k.sources] if sources else []
        return lines

    def aten_lines(self) -> list[str]:
        """The ATen calls grouped by reason, then the views."""
        by_reason: dict[str, list[AtenCall]] = {}
        for c in self.compute_calls:
            by_reason.setdefault(c.reason, []).append(c)
        lines = []
        if by_reason:
            lines.append("  ATen calls:")
        for reason, calls in by_reason.items():
            where = sorted({c.source for c in calls if c.source})
            at = f" (from {'; '.join(where)})" if where and not reason.startswith("library") else ""
            lines.append(f"    {_counted(c.op for c in calls)}: {reason}{at}")
        if self.views:
            lines.append(f"  no compute (views, tuple picks, size arithmetic): "
                         f"{_counted(c.op for c in self.views)}")
        return lines

    def __str__(self) -> str:
        lines = [self.header()]
        if self.kernels:
            lines.append(self.totals_line())
        lines += self.kernel_lines() + self.aten_lines()
        if self.decisions:
            lines.append(f"  fusion decisions{' (device ' + self.device + ')' if self.device else ''}:")
            lines += [f"    {d}" for d in self.decisions]
        return "\n".join(lines)

    def dot_lines(self) -> list[str]:
        """This graph as a Graphviz cluster: kernels (colored by bound), ATen calls, inputs."""
        unit = {n: k.name for k in self.kernels for n in k.nodes}
        lines = [f'  subgraph "cluster_{self.name}" {{', f'    label="{self.name}";']
        for k in self.kernels:
            label = f"{k.name}\\n{k.ops_summary()}"
            if k.predicted_s is not None:
                label += f"\\n{k.bound}-bound, {fmt_time(k.predicted_s)}"
            lines.append(f'    "{self.name}/{k.name}" [shape=box, style=filled, '
                         f'fillcolor="{_BOUND_COLOR.get(k.bound, "white")}", label="{label}"];')
        for c in self.aten_calls or [AtenCall(name, op, "") for name, op in self.aten_nodes]:
            style = ", style=dashed" if c.view else ""
            lines.append(f'    "{self.name}/{c.name}" [shape=ellipse{style}, '
                         f'label="{c.name}\\n{c.op}", tooltip="{_quoted(c.reason)}"];')
        declared = set(unit.values()) | {name for name, _ in self.aten_nodes}
        seen = set()
        for a, b in self.edges:
            edge = (unit.get(a, a), unit.get(b, b))
            if edge[0] == edge[1] or edge in seen:
                continue
            seen.add(edge)
            for end in set(edge) - declared:         # graph inputs and the output
                declared.add(end)
                lines.append(f'    "{self.name}/{end}" [shape=plaintext, label="{end}"];')
            lines.append(f'    "{self.name}/{edge[0]}" -> "{self.name}/{edge[1]}";')
        return lines + ["  }"]


_BOUND_COLOR = {"compute": "orange", "memory": "lightblue", "overhead": "lightgrey"}


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


@dataclass
class Report:
    graphs: list[GraphReport] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)

    @property
    def kernels(self) -> list[KernelReport]:
        return [k for g in self.graphs for k in g.kernels]

    def graph(self, kind: str) -> GraphReport:
        return next(g for g in self.graphs if g.kind == kind)

    def __str__(self) -> str:
        parts = [str(g) for g in self.graphs] or ["brrr report: no graph was compiled"]
        if self.graph_breaks:
            parts.append("\n".join([f"graph breaks ({len(self.graph_breaks)}):"] +
                                   [f"  {b}" for b in self.graph_breaks]))
        return "\n\n".join(parts)

    def to_dot(self) -> str:
        """Graphviz text: per graph, its kernels (filled by bound class: orange compute,
        blue memory, grey overhead), its ATen calls (dashed: views; the tooltip says why
        each runs through ATen) and inputs, and the data flow. Render it with
        `dot -Tsvg report.dot -o report.svg`."""
        lines = ["digraph brrr {", "  rankdir=TB;", '  node [fontname="monospace"];']
        for g in self.graphs:
            lines += g.dot_lines()
        return "\n".join(lines + ["}"]) + "\n"
