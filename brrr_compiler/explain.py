"""explain(fn, *args, options=None, **kwargs): compile `fn` with brrr for these inputs and
report what it made.

Note on side effects. explain runs `fn` once (forward, and backward when an output needs
grad) and undoes what that run would change for the caller:
  - tensor arguments are copied (views of one storage stay views of one copy, strides
    kept), so in-place updates of inputs and gradients stay on the copies;
  - buffers and plain tensor attributes of every module explain can see (fn, the object
    of a bound method, modules among the arguments, in fn's closure and defaults, and in
    the globals fn's code names) and tensors found there are restored when the run
    changed them (their version counter moved): BatchNorm's running statistics; `.grad`
    of parameters is put back. Parameters are not copied (that would double a model's
    memory): one that the run changes in place draws a warning;
  - the random number generators are forked, so dropout draws nothing from the caller's
    stream;
  - Dynamo compiles in a cache region of its own (isolate_recompiles) without automatic
    dynamic shapes, so each call compiles afresh for the shapes given, whatever earlier
    calls compiled, and the caller's compiled functions keep their caches.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import warnings

import torch

from brrr_compiler.report import GraphBreak, Report, short_path


def explain(fn, *args, options: dict | None = None, **kwargs) -> Report:
    """Compile `fn(*args, **kwargs)` with brrr and report, per graph, its kernels (the ATen
    ops each fuses, predicted time, the user lines they come from), the ATen calls left
    and why, totals fused against unfused, the fusion decisions, and Dynamo's graph
    breaks. `options` are brrr's (as torch.compile's `options=`); keyword arguments go to
    `fn`. Earlier versions took options as keyword arguments: a keyword `fn` does not
    accept is still read as an option, with a FutureWarning."""
    from brrr_compiler.backend import brrr_backend
    from brrr_compiler.config import build_config

    kwargs, options = _split_options(fn, kwargs, options)
    build_config(options)                     # bad options fail here, before tracing
    sink: list = []
    backend = functools.partial(brrr_backend, options=options or None, _sink=sink,
                                _graph_ids=itertools.count())
    breaks = _BreakRecorder()
    with _restored(fn, args, kwargs), breaks, \
            torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        args, kwargs = _copied((args, kwargs))
        compiled = torch.compile(fn, backend=backend, **_ISOLATED)
        outs = _needing_grad(compiled(*args, **kwargs))
        if outs:
            torch.autograd.backward([o.sum() for o in outs])
    return Report(list(sink), breaks.found)


# a cache region of its own (torch 2.13 and later; before, explain shares fn's cache)
_ISOLATED = ({"isolate_recompiles": True}
             if "isolate_recompiles" in inspect.signature(torch.compile).parameters else {})


def _split_options(fn, kwargs: dict, options: dict | None) -> tuple[dict, dict | None]:
    """(keyword arguments for fn, brrr options): keywords fn cannot take are the old way
    of passing options."""
    legacy = {k: v for k, v in kwargs.items() if not _accepts(fn, k)}
    if not legacy:
        return kwargs, options
    if options is not None:
        raise TypeError(f"brrr.explain: {_name(fn)} takes no keyword argument(s) "
                        f"{sorted(legacy)}; brrr options go in options={{...}}")
    from brrr_compiler.config import build_config
    try:
        build_config(legacy)
    except ValueError as err:
        raise ValueError(f"brrr.explain: {sorted(legacy)}: neither keyword arguments of "
                         f"{_name(fn)} nor brrr options ({err}); brrr options go in "
                         "options={...}") from None
    warnings.warn("brrr.explain: pass brrr options as options={...}; keyword arguments "
                  "go to the function", FutureWarning, stacklevel=3)
    return {k: v for k, v in kwargs.items() if k not in legacy}, legacy


def _accepts(fn, key: str) -> bool:
    try:           # a module's __call__ takes **kwargs; its forward says what it accepts
        params = inspect.signature(getattr(fn, "forward", fn)).parameters.values()
    except (TypeError, ValueError):           # no signature: let fn decide
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == key and p.kind in
               (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) for p in params)


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _needing_grad(out) -> list[torch.Tensor]:
    """The real floating outputs that need grad: their sums seed the backward."""
    flat, _ = torch.utils._pytree.tree_flatten(out)
    return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad
            and t.is_floating_point()]


def _copied(tree):
    """`tree` with every tensor copied: same sizes, strides and storage offsets, tensors
    that share a storage share the copy's, leaves that require grad still do."""
    storages: dict = {}

    def copy(t):
        if not isinstance(t, torch.Tensor):
            return t
        grad = t.requires_grad and (t.is_floating_point() or t.is_complex())
        if t.layout != torch.strided or type(t) not in (torch.Tensor, torch.nn.Parameter):
            return t.detach().clone().requires_grad_(grad)
        key = (t.untyped_storage().data_ptr(), t.device)
        if key not in storages:
            storages[key] = t.untyped_storage().clone()
        with torch.no_grad():
            out = torch.empty(0, dtype=t.dtype, device=t.device)
            out.set_(storages[key], t.storage_offset(), t.size(), t.stride())
        return out.requires_grad_(grad)

    return torch.utils._pytree.tree_map(copy, tree)


class _BreakRecorder:
    """The graph breaks Dynamo records while the block runs: torch keeps every
    GraphCompileReason with graph_break set in one list (the one torch._dynamo.explain's
    break_reasons come from), breaks before an empty graph included."""

    def __enter__(self):
        self._start = len(self._reasons())
        self.found: list[GraphBreak] = []
        return self

    def __exit__(self, *exc):
        seen = set()
        for r in self._reasons()[self._start:]:
            frame = r.user_stack[-1] if r.user_stack else None
            where = f"{short_path(frame.filename)}:{frame.lineno}" if frame else ""
            if (r.reason, where) not in seen:
                seen.add((r.reason, where))
                self.found.append(GraphBreak(r.reason, where))
        return False

    @staticmethod
    def _reasons() -> list:
        from torch._dynamo import output_graph
        return getattr(output_graph, "graph_break_reasons", [])


class _restored:
    """Puts back the module state and RNG streams the block changes (the note above)."""

    def __init__(self, fn, args, kwargs):
        self.fn, self.roots = fn, _roots(fn, args, kwargs)

    def __enter__(self):
        self.params, self.tensors = _state(self.roots)
        self.saved = [(t, t._version, t.detach().clone()) for t in self.tensors]
        self.versions = [(p, p._version) for p in self.params]
        self.grads = [(t, t.grad) for t in self.params + self.tensors if t.is_leaf]
        devices = [torch.cuda.current_device()] if torch.cuda.is_initialized() else []
        self.rng = torch.random.fork_rng(devices=devices)
        self.rng.__enter__()
        return self

    def __exit__(self, *exc):
        self.rng.__exit__(*exc)
        with torch.no_grad():
            for t, version, value in self.saved:
                if t._version != version:
                    t.copy_(value)
        for t, grad in self.grads:
            t.grad = grad
        changed = [p for p, version in self.versions if p._version != version]
        if changed:
            warnings.warn(f"brrr.explain: {_name(self.fn)} changed {len(changed)} parameter(s) "
                          "in place; explain does not copy parameters and cannot undo that",
                          RuntimeWarning, stacklevel=3)
        return False


def _roots(fn, args, kwargs) -> list:
    """Objects whose modules and tensors the run may change: fn, the object of a bound
    method, a partial's arguments, the arguments, fn's closure, defaults and the globals
    its code names."""
    flat, _ = torch.utils._pytree.tree_flatten((args, kwargs))
    roots = [fn, getattr(fn, "__self__", None)]
    roots += [a for a in flat if isinstance(a, torch.nn.Module)]   # tensors are copied
    while isinstance(fn, functools.partial):
        roots += [*fn.args, *fn.keywords.values()]
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    roots += _cell_contents(getattr(fn, "__closure__", None) or ())
    roots += list(getattr(fn, "__defaults__", None) or ())
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    roots += [names[n] for n in (code.co_names if code else ()) if n in names]
    return roots


def _cell_contents(cells) -> list:
    out = []
    for cell in cells:
        try:
            out.append(cell.cell_contents)
        except ValueError:                    # an empty cell: a name not bound yet
            pass
    return out


def _state(roots) -> tuple[list, list]:
    """(parameters, other tensors: buffers, plain tensor attributes, loose tensors) of the
    modules and tensors among `roots`, each once."""
    params, tensors, seen = [], [], set()

    def add(t, into):
        if isinstance(t, torch.Tensor) and id(t) not in seen:
            seen.add(id(t))
            into.append(t)

    for root in roots:
        if isinstance(root, torch.nn.Module):
            for p in root.parameters():
                add(p, params)
            for m in root.modules():
                for t in itertools.chain(m.buffers(recurse=False), vars(m).values()):
                    add(t, tensors)
        elif isinstance(root, torch.nn.Parameter):
            add(root, params)
        else:
            add(root, tensors)
    return params, tensors
