"""Ops whose value is an index computation, not arithmetic on their inputs' values.

gather loads its input at an index read from another tensor (an indirect load, checked
against the extent: eager raises for an out-of-range index), and embedding loads whole
rows of its table that way; cat selects one input by the
index along the cat dim, reading every input at a clamped, always in-bounds index; arange
is a ramp of the index itself; copy(self, src) is src in self's place, self never read
(so an empty self has no value to compute). Each rule takes the group lowering (`low`: its `value`
evaluates any node at any index) and returns the node's value at `idx`.
"""
from __future__ import annotations

import functools

import sympy
import torch

from brrr_compiler import ops
from brrr_compiler.slice_decomposition import slice_bounds
from brrr_compiler.lower import indexing
from brrr_compiler.lower.scalar_rules import Body, V
from brrr_compiler.ops import normalized
from brrr_compiler.symbolic import clamp


def gather(low, node, idx: tuple, body: Body) -> V:
    """out[idx] = x[idx with dim replaced by index[idx]]: an indirect load."""
    x, dim, index = node.args[0], node.args[1], node.args[2]
    dim = dim + len(indexing.shape(x.meta["val"])) if dim < 0 else dim
    return _indirect(low, node, x, dim, low.value(index, idx), idx, idx)


def embedding(low, node, idx: tuple, body: Body) -> V:
    """out[..., j] = weight[indices[...], j]: a gather of whole rows of the table. The
    index is read, and checked, where indices[...] lives: once per row of a reduction,
    not per element of its loop."""
    weight, indices = node.args[0], node.args[1]
    k = len(indexing.shape(indices.meta["val"]))
    return _indirect(low, node, weight, 0, low.value(indices, idx[:k]), (None, idx[k]),
                     idx[:k])


def index(low, node, idx: tuple, body: Body) -> V:
    """x[indices] (aten.index, _unsafe_index: fancy indexing, and what upsampling
    decomposes to): each dim with an integer index tensor is an indirect load at that
    tensor's value, broadcast with the others', wrapped when negative and checked against
    the extent as eager does. The broadcast dims stand where the indexed dims stood when
    those are adjacent, else first (numpy's rule)."""
    x, indices = node.args[0], list(node.args[1])
    shape = indexing.shape(x.meta["val"])
    pos = [d for d, t in enumerate(indices) if t is not None]
    nb = len(node.meta["val"].shape) - (len(shape) - len(pos))
    first = pos[0] if pos == list(range(pos[0], pos[-1] + 1)) else 0
    b_idx = idx[first:first + nb]
    rest = iter(idx[:first] + idx[first + nb:])     # the dims not indexed, in order
    at, raws = [], {}
    for d in range(len(shape)):
        t = indices[d] if d < len(indices) else None
        at.append(next(rest) if t is None else None)
        if t is not None:
            raws[d] = low.value(t, indexing.broadcast(b_idx, indexing.shape(t.meta["val"])))
    return _indirect_dims(low, node, x, raws, tuple(at), b_idx, wrap=True)


def _indirect(low, node, x, dim: int, raw: V, at: tuple, where: tuple) -> V:
    """x read at `at` with dim `dim` replaced by the loaded index `raw`, which exists at
    `where` of node's domain; checked against x's extent there (eager raises for an index
    out of range)."""
    return _indirect_dims(low, node, x, {dim: raw}, at, where)


def _indirect_dims(low, node, x, raws: dict, at: tuple, where: tuple, wrap: bool = False) -> V:
    """x read at `at` with each dim d of `raws` replaced by the loaded index raws[d]
    (plus the extent where negative, when `wrap`), checked once per scope."""
    body, scope = low.target(node, where)
    extents = indexing.shape(x.meta["val"])
    at = list(at)
    for dim, raw in raws.items():
        # one check per row and index value, however many phases or nodes read it
        key = ("bounded", raw.name, extents[dim], wrap, scope)
        if key not in low.memo:
            raw = body.cast(raw, torch.int64)
            if wrap:
                negative = body.emit("lt", torch.bool, (raw, body.const(0, torch.int64)))
                shifted = body.emit("add", torch.int64, (raw, body.const(extents[dim], torch.int64)))
                raw = body.emit("where", torch.int64, (negative, shifted, raw))
            low.memo[key] = body.emit("bounded", torch.int64, (raw,), index=extents[dim])
        safe = low.memo[key]
        low.sym_level[safe.name] = low.level_at(node, where)
        sym = sympy.Symbol(safe.name, integer=True)
        if low.is_full(where):     # an index read inside a reduction loop: so is x at it
            low.loop_syms.add(sym)
        at[dim] = sym
    return low.value(x, tuple(at))


def cat(low, node, idx: tuple, body: Body) -> V:
    """out[.., i, ..] = input k at i - offset_k, for the k whose range holds i: every
    input is read at its index clamped into range (in bounds), then selected."""
    dim, dt = ops.cat_dim(node), node.meta["val"].dtype
    parts, offset = [], 0
    for t in node.args[0]:
        size = int(t.meta["val"].shape[dim])
        if size == 0:
            continue
        local = clamp(idx[dim] - offset, 0, size - 1)
        parts.append((offset + size, body.cast(low.value(t, idx[:dim] + (local,) + idx[dim + 1:]), dt)))
        offset += size
    at = body.emit("index", torch.int64, index=sympy.Integer(0) + idx[dim])
    result = parts[-1][1]
    for end, v in reversed(parts[:-1]):
        inside = body.emit("lt", torch.bool, (at, body.const(end, torch.int64)))
        result = body.emit("where", dt, (inside, v, result))
    return result


def arange(low, node, idx: tuple, body: Body) -> V:
    a = normalized(node)
    start = a.get("start", 0) if "end" in a and "start" in a else 0
    step = a.get("step", 1) or 1
    ramp = body.emit("index", torch.int64, index=sympy.Integer(int(start)) + int(step) * idx[0])
    return body.cast(ramp, node.meta["val"].dtype)


def copy_into(low, node, idx: tuple, body: Body) -> V:
    """copy(self, src): src broadcast to self's shape and cast to its dtype, laid out as
    self (the node's own strides, which its store follows). self's values are never read:
    it is an empty tensor of the wanted layout, or the view a functionalized copy_ wrote."""
    src = normalized(node)["src"]
    v = low.value(src, indexing.broadcast(idx, indexing.shape(src.meta["val"])))
    return body.cast(v, node.meta["val"].dtype)


def strided_slice_scatter(low, node, idx: tuple, body: Body) -> V:
    """slice_scatter with a step k > 1 (ops.py: static sizes): out[.., i, ..] is
    src[.., (i - start) / k, ..] where i - start is a multiple of k in [0, n k), else
    base's. The source index is a division, which index expressions do not take: it is
    computed as a value, clamped into range, and src read there (gather's read)."""
    a = normalized(node)
    base, src = a["self"], a["src"]
    shape = indexing.shape(base.meta["val"])
    dim = a["dim"] % len(shape)
    start, step = slice_bounds(shape[dim], a["start"], None)[0], a["step"]
    n = int(src.meta["val"].shape[dim])
    i64 = torch.int64
    rel = body.emit("index", i64, index=sympy.Integer(0) + idx[dim] - start)
    # (i - start) / k in double, truncated: exact for the extents and steps ops.py admits
    f64 = torch.float64
    q = body.cast(body.emit("truediv", f64, (body.cast(rel, f64), body.const(step, f64))), i64)
    on = body.emit("eq", torch.bool, (rel, body.emit("mul", i64, (q, body.const(step, i64)))))
    for cmp, v, bound in (("ge", rel, 0), ("lt", q, n)):
        on = body.emit("logical_and", torch.bool, (on, body.emit(cmp, torch.bool, (
            v, body.const(bound, i64)))))
    low_q = body.emit("maximum", i64, (q, body.const(0, i64)))
    safe = body.emit("minimum", i64, (low_q, body.const(max(n - 1, 0), i64)))
    dt = node.meta["val"].dtype
    written = body.cast(_indirect(low, node, src, dim, safe, idx, idx), dt)
    return body.emit("where", dt, (on, written, body.cast(low.value(base, idx), dt)))


def empty(low, node, idx: tuple, body: Body) -> V:
    """An uninitialized tensor (ops.py takes only those whose readers are copies into
    them, which never read it): zeros, should a kernel have to store it."""
    return body.const(0, node.meta["val"].dtype)


RULES = {"gather": gather, "embedding": embedding, "index": index, "cat": cat, "arange": arange,
         "copy_into": copy_into, "empty": empty, "strided_slice_scatter": strided_slice_scatter}


# cats read through slices of cats (diff with prepend and append, n times over) clamp
# each index once per input per level: a kernel holding many levels has index
# expressions that grow exponentially, and sympy's time on them too (seconds per
# candidate group). Past this many clamps, the group does not lower: the cost policy
# refuses the merge that made it, and a cat's inputs are stored instead.
MAX_CLAMPS = 128


@functools.lru_cache(maxsize=1 << 14)
def _clamps(index: sympy.Expr) -> int:
    """Min and Max nodes in `index`, counted once per expression: the cost policy lowers
    the same indices in every candidate group (a walk of each took 0.3 s of GPT-2's
    compile)."""
    return sum(isinstance(e, (sympy.Min, sympy.Max)) for e in sympy.preorder_traversal(index))


def check_clamps(kernel) -> None:
    """Refuse (NotImplementedError) a kernel whose indices clamp more than MAX_CLAMPS times."""
    n = sum(_clamps(s.index) for s in kernel.body if s.index is not None)
    if n > MAX_CLAMPS:
        raise NotImplementedError(f"brrr: its indices clamp {n} times (cats of slices of "
                                  f"cats; at most {MAX_CLAMPS})")
