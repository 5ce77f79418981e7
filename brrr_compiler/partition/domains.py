"""Iteration domains: what a group iterates over, and which stored shapes that allows.

A group's reductions share one *row domain* (full shape, reduced dims): per outer point
(a row) the kernel folds the reduced dims. One more kind of reduction may join such a
group: a fold *across rows* — a reduction of a per-row value (its shape is the domain's
kept or dropped shape) over all its dims to a single value, as cross-entropy's mean
over the batch. The kernel folds it once per row after the row's own phases, combines
the per-thread partials after all rows, and computes what depends on it — single
values only, never anything a row needs — once at the end.
"""
from __future__ import annotations

from brrr_compiler import ops
from brrr_compiler.ops import Kind
from brrr_compiler.reduction_spec import reduction_spec
from brrr_compiler.symbolic import shape

# max/min stay out: over zero rows eager raises, and a kernel cannot
ACROSS_KINDS = frozenset({"sum", "mean", "prod", "any", "all"})


def _shape(node) -> tuple:
    return shape(node.meta.get("val"))


def row_shapes(full: tuple, dims: tuple) -> tuple[tuple, tuple]:
    """(kept, dropped): a per-row value's shape with keepdim, and without."""
    kept = tuple(1 if d in dims else s for d, s in enumerate(full))
    dropped = tuple(s for d, s in enumerate(full) if d not in dims)
    return kept, dropped


def _is_across(spec, domain) -> bool:
    full, dims = domain
    values = spec.full_shape()
    return (bool(dims) and spec.kind in ACROSS_KINDS and len(values) > 0
            and spec.dims == tuple(range(len(values))) and values in row_shapes(full, dims))


def split_domain(members, allow_across: bool = True):
    """(row domain, folds across rows): the domain is (full shape, reduced dims), None
    for a group without reductions, or a reason string when the reductions disagree."""
    specs = {n: reduction_spec(n) for n in members if ops.kind_of(n) is Kind.REDUCTION}
    specs = {n: s for n, s in specs.items() if s is not None}
    domains = {(s.full_shape(), s.dims) for s in specs.values()}
    if len(domains) <= 1:
        return next(iter(domains), None), []
    for d in domains if allow_across else ():
        across = [n for n, s in specs.items() if (s.full_shape(), s.dims) != d]
        if all(_is_across(specs[n], d) for n in across):
            return d, across
    return "illegal: reductions over different domains " + str(sorted(map(str, domains))), []


def after_rows(members, across) -> set:
    """The members that need a fold across rows (the folds included)."""
    out, todo = set(), list(across)
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo += [u for u in n.users if u in members]
    return out


def _across_problem(members, across) -> str | None:
    final = after_rows(members, across)
    for n in final:
        if n not in across and reduction_spec(n) is not None:
            return f"illegal: {n.name} reduces a fold across rows"
        if n in across and any(a in final for a in n.all_input_nodes):
            return f"illegal: {n.name} folds across rows what another such fold gives"
        if n not in across and any(s != 1 for s in _shape(n)):
            return f"illegal: {n.name} {_shape(n)} needs a fold across all rows inside a row"
        for a in n.all_input_nodes:
            if a in members and a not in final and a.all_input_nodes and n not in across:
                return f"illegal: {n.name} mixes a fold across rows with per-row {a.name}"
    return None


def shape_problem(members, stored, allow_across: bool = True) -> str | None:
    """None if the values `stored` (leaving the group) fit its domain, else why not."""
    domain, across = split_domain(members, allow_across)
    if isinstance(domain, str):
        return domain
    if across:
        problem = _across_problem(members, across)
        if problem:
            return problem
        final = after_rows(members, across)
        stored = [n for n in stored if n not in final]
    shapes = {_shape(n) for n in stored}
    if domain is None:
        if len(shapes) > 1:
            return f"illegal: stored values have different shapes {sorted(map(str, shapes))}"
        return None
    full, dims = domain
    bad = shapes - {full, *row_shapes(full, dims)}
    if bad:
        return f"illegal: stored shapes {sorted(map(str, bad))} are neither {full} nor reduced"
    return None
