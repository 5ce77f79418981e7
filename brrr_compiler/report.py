"""Reports: what brrr did with each compiled graph, for `explain` and the logs."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KernelReport:
    name: str
    aten_ops: list[str]            # the ATen overloads it fuses, in graph order
    nodes: list[str]               # the FX node names it fuses
    domain: list                   # its iteration shape

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

    def __str__(self) -> str:
        lines = [f"{self.name} ({self.kind}): {len(self.kernels)} kernel(s), "
                 f"{len(self.aten_nodes)} ATen call(s)"]
        width = max([len(k.name) for k in self.kernels] + [6])
        for k in self.kernels:
            lines.append(f"  {k.name:<{width}}  {k.ops_summary()}")
        if self.aten_nodes:
            ops = ", ".join(f"{op} ({name})" for name, op in self.aten_nodes)
            lines.append(f"  {'ATen':<{width}}  {ops}")
        return "\n".join(lines)


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
