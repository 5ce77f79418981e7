"""Reports: what brrr did with each compiled graph, for `explain` and the logs."""
from __future__ import annotations

from dataclasses import dataclass, field


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

    def cost_summary(self) -> str:
        if self.predicted_s is None:
            return ""
        return (f"[{self.bound}-bound: {self.predicted_s * 1e6:.3g} us, "
                f"{self.flops / 1e6:.3g} MFLOP, {self.bytes / 1e6:.3g} MB]")

    def ops_summary(self) -> str:
        counts: dict[str, int] = {}
        for op in self.aten_ops:
            counts[op] = counts.get(op, 0) + 1
        return ", ".join(op if c == 1 else f"{op} x{c}" for op, c in counts.items())


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

    def __str__(self) -> str:
        lines = [f"{self.name} ({self.kind}): {len(self.kernels)} kernel(s), "
                 f"{len(self.aten_nodes)} ATen call(s)"]
        width = max([len(k.name) for k in self.kernels] + [6])
        for k in self.kernels:
            lines.append(f"  {k.name:<{width}}  {k.ops_summary()}  {k.cost_summary()}".rstrip())
        if self.aten_nodes:
            ops = ", ".join(f"{op} ({name})" for name, op in self.aten_nodes)
            lines.append(f"  {'ATen':<{width}}  {ops}")
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
                label += f"\\n{k.bound}-bound, {k.predicted_s * 1e6:.3g} us"
            lines.append(f'    "{self.name}/{k.name}" [shape=box, style=filled, '
                         f'fillcolor="{_BOUND_COLOR.get(k.bound, "white")}", label="{label}"];')
        for name, op in self.aten_nodes:
            lines.append(f'    "{self.name}/{name}" [shape=ellipse, label="{name}\\n{op}"];')
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


@dataclass
class Report:
    graphs: list[GraphReport] = field(default_factory=list)

    @property
    def kernels(self) -> list[KernelReport]:
        return [k for g in self.graphs for k in g.kernels]

    def graph(self, kind: str) -> GraphReport:
        return next(g for g in self.graphs if g.kind == kind)

    def __str__(self) -> str:
        if not self.graphs:
            return "brrr report: no graph was compiled"
        return "\n\n".join(str(g) for g in self.graphs)

    def to_dot(self) -> str:
        """Graphviz text: per graph, its kernels (filled by bound class: orange compute,
        blue memory, grey overhead), its ATen calls and inputs, and the data flow."""
        lines = ["digraph brrr {", "  rankdir=TB;", '  node [fontname="monospace"];']
        for g in self.graphs:
            lines += g.dot_lines()
        return "\n".join(lines + ["}"]) + "\n"
