"""Code hygiene the design asks for: imports run one way down the pipeline, no import
cycles, every module has a place, source, test and benchmark files stay small.

The import graph is read from the source (every import statement, a function's lazy
ones included: they are dependencies too). Importing `pkg.mod` also runs `pkg`'s
__init__, so it counts as an import of the package as well."""
import ast
import pathlib

import networkx as nx

ROOT = pathlib.Path(__file__).resolve().parents[1]
# the pipeline, in order (DESIGN.md): a stage imports earlier stages and leaves only
STAGES = {
    "capture": ["capture", "decompositions", "decomposition_layout", "pool_decomposition",
                "batch_norm_decomposition", "slice_decomposition"],
    "passes": ["passes", "eager_strides"],   # ATen-to-ATen layout steps
    "partition": ["partition"],
    "cost": ["cost"],
    "transforms": ["transforms"],     # kernel IR -> kernel IR, applied by lower and schedule
    "lower": ["lower"],
    "schedule": ["schedule"],
    "codegen": ["codegen"],
    "runtime": ["runtime"],
}
# imported by anyone; they import only each other
LEAVES = ["config", "config_checks", "ops", "scalar_ops", "log", "torch_logs", "symbolic",
          "debug", "report", "kernel_ir", "schedule_ir", "kernel_verify", "kernel_eval",
          "reduction_spec", "accuracy", "ti_strides", "machine"]
# the driver and the tools around the pipeline: they import anything, nothing imports them
TOP = ["__init__", "backend", "explain", "graph_report", "cli", "cli_cache", "demo",
       "calibration", "calibration_kernels", "autotune_plan", "lowered_count"]
MAX_LINES = 350


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for base, prefix in ((ROOT / "brrr_compiler", "brrr_compiler"), (ROOT / "passes",
                                                                        "brrr_compiler.passes")):
        for path in base.rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            name = ".".join((prefix,) + parts).removesuffix(".__init__")
            out[name] = path
    return out


MODULES = _modules()


def _imported(module: str, path: pathlib.Path) -> set[str]:
    """The brrr modules `module` imports, with the packages whose __init__ that runs."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            while name and name != "brrr_compiler":     # the packages on the way run too
                found.add(name)
                name = name.rpartition(".")[0]
    return {m for m in found if m != module and not module.startswith(m + ".")}


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(MODULES)
    g.add_edges_from((m, t) for m, path in MODULES.items() for t in _imported(m, path))
    return g


def place(module: str) -> tuple[str, int]:
    """(kind, rank): a stage and its position in the pipeline, a leaf or the top."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else "__init__"
    for rank, (stage, heads) in enumerate(STAGES.items()):
        if head in heads:
            return stage, rank
    if head in LEAVES:
        return "leaf", -1
    if head in TOP:
        return "top", len(STAGES)
    raise KeyError(module)


def test_every_module_has_a_place():
    unplaced = []
    for m in MODULES:
        try:
            place(m)
        except KeyError:
            unplaced.append(m)
    assert not unplaced, f"give these a stage, or make them leaves or tools: {unplaced}"


def test_no_import_cycles():
    cycles = sorted(nx.simple_cycles(_graph()), key=len)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles[:10])


def against_the_pipeline(edges) -> list[str]:
    """The imports among `edges` (importer, imported) that break the direction rule."""
    out = []
    for a, b in edges:
        (kind_a, rank_a), (kind_b, rank_b) = place(a), place(b)
        if kind_b == "top" and kind_a != "top":
            out.append(f"{a} imports the driver/tool {b}")
        elif kind_a == "leaf" and kind_b != "leaf":
            out.append(f"leaf {a} imports {b} ({kind_b})")
        elif kind_a not in ("leaf", "top") and rank_b > rank_a:
            out.append(f"{a} ({kind_a}) imports the later stage {b} ({kind_b})")
    return out


def test_imports_follow_the_pipeline():
    against = against_the_pipeline(_graph().edges)
    assert not against, "imports against the pipeline's direction:\n" + "\n".join(against)


def test_the_rules_find_what_they_forbid():
    g = _graph()       # the graph is read: edges that exist are in it
    assert g.has_edge("brrr_compiler.cost.policy", "brrr_compiler.partition.legality")
    assert g.has_edge("brrr_compiler.cost.policy", "brrr_compiler.partition")
    assert g.has_edge("brrr_compiler.codegen.cpp", "brrr_compiler.scalar_ops")
    bad = [("brrr_compiler.partition.policy", "brrr_compiler.cost.policy"),
           ("brrr_compiler.scalar_ops", "brrr_compiler.lower.group"),
           ("brrr_compiler.runtime.kernels", "brrr_compiler.backend")]
    ok = [("brrr_compiler.codegen.cpp", "brrr_compiler.transforms.loops"),
          ("brrr_compiler.backend", "brrr_compiler.runtime.kernels")]
    assert len(against_the_pipeline(bad)) == 3 and not against_the_pipeline(ok)


def _too_big(paths) -> dict[str, int]:
    return {str(p.relative_to(ROOT)): n for p in paths
            if (n := len(p.read_text().splitlines())) > MAX_LINES}


def test_source_files_stay_small():
    big = _too_big(MODULES.values())
    assert not big, f"split these along the pipeline's seams (> {MAX_LINES} lines): {big}"


def test_test_and_benchmark_files_stay_small():
    """tests/ mirrors the modules, benchmarks/ the suites: split along the same seams."""
    big = _too_big([p for folder in ("tests", "benchmarks") for p in (ROOT / folder).rglob("*.py")])
    assert not big, f"split these along their seams (> {MAX_LINES} lines): {big}"
