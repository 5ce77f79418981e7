"""Iteration domains: what a group iterates over, and which stored shapes that allows.

A group's reductions share one *row domain* (full shape, reduced dims): per outer point
(a row) the kernel folds the reduced dims. One more kind of reduction may join such a
group: a fold *across rows* — a reduction of a per-row value (its shape is the domain's
kept or dropped shape) over all its dims to a single value, as cross-entropy's mean
over the batch. The kernel folds it once per row after the row's own phases, combines
the per-thread partials after all rows, and computes what depends on it — single
values only, never anything a row needs — once at the end. A sum of every element of a
full-shape value (a loss) folds across rows too: a row sum first, then across rows.

Note on column folds. A reduction of a full-shape value over the domain's *outer* dims
(a sum over the rows, one value per point of the reduced dims: LayerNorm's weight and
bias gradients beside the input gradient's row sums) may join a row domain that reduces
the last dim: each thread keeps a partial vector the length of a row, adds every row it
walks into it, and the partials are combined in thread order after all rows (so results
do not depend on timing), where what depends on them — values of the column shape only,
never anything a row needs — is computed once per column.
"""
from __future__ import annotations

from brrr_compiler import ops
from brrr_compiler.ops import Kind
from brrr_compiler.reduction_spec import reduction_spec
from brrr_compiler.symbolic import shape

# max/min stay out: over zero rows eager raises, and a kernel cannot
ACROSS_KINDS = frozenset({"sum", "mean", "prod", "any", "all"})
COLUMN_KINDS = frozenset({"sum", "mean"})   # float only: partial vectors add in double


def _shape(node) -> tuple:
    return shape(node.meta.get("val"))


def row_shapes(full: tuple, dims: tuple) -> tuple[tuple, tuple]:
    """(kept, dropped): a per-row value's shape with keepdim, and without."""
    kept = tuple(1 if d in dims else s for d, s in enumerate(full))
    dropped = tuple(s for d, s in enumerate(full) if d not in dims)
    return kept, dropped


def _reduces_last(domain) -> bool:
    """A row domain whose rows run along the last dim (the row printer's, so that the
    kernel walks memory forward when it adds rows into column partials)."""
    full, dims = domain
    return bool(full) and len(full) - 1 in dims


def _is_across(spec, domain) -> bool:
    full, dims = domain
    values = spec.full_shape()
    if not (dims and spec.kind in ACROSS_KINDS and values and
            spec.dims == tuple(range(len(values)))):
        return False
    return values in row_shapes(full, dims) or (values == full and _reduces_last(domain))


def _is_column(spec, domain) -> bool:
    full, dims = domain
    outer = tuple(d for d in range(len(full)) if d not in dims)
    return (spec.kind in COLUMN_KINDS and spec.full_shape() == full and spec.dims == outer
            and bool(outer) and _reduces_last(domain)
            and spec.input.meta["val"].dtype.is_floating_point)


def _preference(domain) -> tuple:
    """Rows along the last dim first: a sum over dim 0 and one over dim 1 of the same
    matrix could each be the other's column fold; the row printer's is the right one."""
    return (not _reduces_last(domain), str(domain))


def folds_into(domain, other) -> bool:
    """Could reductions over `other` fold into rows of `domain` (a row domain along the
    last dim): sums over its outer dims (column folds) or over all its dims?"""
    if not (isinstance(domain, tuple) and isinstance(other, tuple) and domain != other):
        return False
    (full, dims), (ofull, odims) = domain, other
    outer = tuple(d for d in range(len(full)) if d not in dims)
    return (full == ofull and _reduces_last(domain) and bool(outer)
            and odims in (outer, tuple(range(len(full)))))


def split_domain(members, allow_across: bool = True):
    """(row domain, folds across rows, column folds): the domain is (full shape,
    reduced dims), None for a group without reductions, or a reason string when the
    reductions disagree."""
    specs = {n: reduction_spec(n) for n in members if ops.kind_of(n) is Kind.REDUCTION}
    specs = {n: s for n, s in specs.items() if s is not None}
    domains = {(s.full_shape(), s.dims) for s in specs.values()}
    if len(domains) <= 1:
        return next(iter(domains), None), [], []
    for d in sorted(domains, key=_preference) if allow_across else ():
        others = [n for n, s in specs.items() if (s.full_shape(), s.dims) != d]
        across = [n for n in others if _is_across(specs[n], d)]
        columns = [n for n in others if n not in across and _is_column(specs[n], d)]
        if len(across) + len(columns) == len(others):
            return d, across, columns
    return "illegal: reductions over different domains " + str(sorted(map(str, domains))), [], []


def after_rows(members, across) -> set:
    """The members that need a fold across rows (the folds included)."""
    out, todo = set(), list(across)
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo += [u for u in n.users if u in members]
    return out


def column_shapes(full: tuple, dims: tuple) -> tuple[tuple, tuple]:
    """(kept, dropped): a column fold's shape with keepdim, and without."""
    kept = tuple(s if d in dims else 1 for d, s in enumerate(full))
    return kept, tuple(full[d] for d in dims)


def _named(nodes) -> list:
    """`nodes` in name order: a refusal names the same node in every run (a set of fx
    nodes iterates in the order of their addresses)."""
    return sorted(nodes, key=lambda n: n.name)


def _column_problem(members, columns, domain, across_final) -> str | None:
    final = after_rows(members, columns)
    allowed = column_shapes(*domain)
    for n in _named(final):
        if n in across_final:
            return f"illegal: {n.name} needs both a fold across rows and a column fold"
        if n not in columns and reduction_spec(n) is not None:
            return f"illegal: {n.name} reduces a column fold"
        if n in columns and any(a in final or a in across_final for a in n.all_input_nodes):
            return f"illegal: {n.name} folds columns of what another fold gives"
        if n not in columns and _shape(n) not in allowed:
            return f"illegal: {n.name} {_shape(n)} needs column sums inside a row"
        for a in n.all_input_nodes:
            if a in members and a not in final and a.all_input_nodes and n not in columns:
                return f"illegal: {n.name} mixes a column fold with per-row {a.name}"
    return None


def _across_problem(members, across) -> str | None:
    final = after_rows(members, across)
    for n in _named(final):
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
    domain, across, columns = split_domain(members, allow_across)
    if isinstance(domain, str):
        return domain
    final = after_rows(members, across)
    problem = (_across_problem(members, across) if across else None) or \
        (_column_problem(members, columns, domain, final) if columns else None)
    if problem:
        return problem
    final |= after_rows(members, columns)
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
