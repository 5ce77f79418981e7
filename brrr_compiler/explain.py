"""explain(fn, *args, **options): compile `fn` with brrr and report what it made."""
from __future__ import annotations

import functools

import torch

from brrr_compiler.report import Report


def _grad_snapshot(fn):
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    return [(p, p.grad) for p in params]


def _floating_outputs(out) -> list[torch.Tensor]:
    flat, _ = torch.utils._pytree.tree_flatten(out)
    return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]


def explain(fn, *args, **options) -> Report:
    """Compile `fn` for `args` (forward, and backward if an output needs grad) and report.

    The report lists, for every compiled graph, its kernels with the ATen ops each fuses,
    and the nodes that run through ATen. Parameter gradients of a module are restored.
    """
    from brrr_compiler.backend import brrr_backend
    from brrr_compiler.config import build_config

    build_config(options)                     # unknown keys fail here, before tracing
    sink: list = []
    backend = functools.partial(brrr_backend, options=options or None, _sink=sink)
    compiled = torch.compile(fn, backend=backend)
    saved = _grad_snapshot(fn)
    args = [a.detach().clone().requires_grad_(a.requires_grad)
            if isinstance(a, torch.Tensor) and a.is_leaf else a for a in args]
    try:
        outs = _floating_outputs(compiled(*args))
        if outs:
            torch.autograd.backward([o.sum() for o in outs], inputs=None)
    finally:
        for p, g in saved:
            p.grad = g
    return Report(sink)
