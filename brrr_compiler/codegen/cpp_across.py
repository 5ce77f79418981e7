"""The rows printer's folds across rows and scratch rows (cpp_reduce.ReductionPrinter
inherits them): a fold across rows keeps a partial per thread, combined in thread order
after all rows (so results do not depend on timing), then the `once` phase runs; each
thread allocates its own scratch rows."""
from __future__ import annotations

from brrr_compiler.kernel_ir import Stmt


class AcrossRows:
    def _across(self) -> list[Stmt]:
        return [s for p in self.k.phases if not p.loop and not p.once
                for s in p.body if s.op == "reduce"]

    def _thread_locals(self, across, indent: str) -> list[str]:
        return [ln for r in across for ln in self.acc.decls(r, indent, "c_", "cn_", "ci_")]

    def _publish(self, across, indent: str, tid: str) -> list[str]:
        lines = []
        for r in across:
            lines.append(f"{indent}sp_{r.out}[{tid}] = c_{r.out};")
            if r.value in ("max", "min"):
                lines.append(f"{indent}spn_{r.out}[{tid}] = cn_{r.out};")
        return lines

    def _once(self, across, indent: str) -> list[str]:
        """Combine the partials, then run the once phase."""
        lines = [ln for r in across for ln in self.acc.decls(r, indent, "acc_", "nan_", "ai_")]
        lines.append(f"{indent}for (int t = 0; t < {self.threads}; ++t) {{")
        lines += [ln for r in across for ln in self.acc.combine(r, indent + "  ", "sp_", "spn_", "spi_", "[t]")]
        lines += [f"{indent}}}"] + [indent + self.acc.finish(r) for r in across]
        once = [s for p in self.k.phases if p.once and not p.loop for s in p.body]
        return lines + self.body_lines(once, indent, False)

    def _scratch(self, indent: str, what: str) -> list[str]:
        """Allocate (malloc) or release (free) the kernel's scratch rows."""
        out = []
        for b in self.k.scratch:
            ct = self.ctype[b.dtype]
            if what == "malloc":
                out.append(f"{indent}{ct}* {b.name} = ({ct}*)malloc((n_red > 0 ? n_red : 1) * sizeof({ct}));")
            else:
                out.append(f"{indent}free({b.name});")
        return out
