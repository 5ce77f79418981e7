"""One backend's step on one model: built on its own copy of the model, compiled, called
once (that first call's time is what compiling costs, with one run in it) and checked
against eager by the caller.

- inference (at batch 1, `inference1`, and at the throughput batch, `inference`):
  `model.eval()` under `torch.no_grad()`, the compiled model called on the batch.
- training: `model.train()`; one step is zero_grad, loss = compiled(model + loss)(batch),
  loss.backward(), optimizer.step(). The model and its loss are compiled together
  (model_case.WithLoss); the optimizer (torch.optim.AdamW, default implementation) stays eager
  for every backend (the time outside library calls leaves it out: the same eager code
  for every backend is none of a compiler's business).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable

import torch

import harness
from model_case import WithLoss

MODES = ("inference1", "inference", "training")
MODE_LABELS = {"inference1": "inference b=1", "inference": "inference", "training": "training"}


@dataclass
class Step:
    """A backend's step: `run()` is one call or training step; `first` what its first call
    gave (outputs, or (loss, gradients)); `first_s` that call's seconds; `before`, for
    training, frees the gradients a step would free first (harness.peak_memory)."""
    run: Callable
    first: object
    first_s: float
    before: Callable | None = None


def compile_module(module, backend: str):
    if backend == "eager":
        return module
    base, options = harness.backend_spec(backend)
    return torch.compile(module, backend=harness.resolve_backend(base), options=options or None,
                         dynamic=False)


def inference_step(base_model, inputs, backend: str) -> Step:
    model = copy.deepcopy(base_model).eval()
    compiled = compile_module(model, backend)

    def run():
        with torch.no_grad():
            return compiled(*inputs)

    start = time.perf_counter()
    first = run()
    return Step(run, first, time.perf_counter() - start)


def training_step(case, base_model, inputs, target, backend: str) -> Step:
    model = copy.deepcopy(base_model).train()
    compiled = compile_module(WithLoss(model, case.loss), backend)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)

    start = time.perf_counter()
    loss = compiled(inputs, target)          # the first call compiles forward and backward
    loss.backward()
    first_s = time.perf_counter() - start
    first = (loss.detach(), [p.grad.detach().clone() for p in params])
    opt.step()
    def run():
        opt.zero_grad(set_to_none=True)
        loss = compiled(inputs, target)
        loss.backward()
        opt.step()
        return loss

    return Step(run, first, first_s, before=lambda: opt.zero_grad(set_to_none=True))


def build_step(case, mode: str, base_model, inputs, target, backend: str) -> Step:
    if mode == "training":
        return training_step(case, base_model, inputs, target, backend)
    return inference_step(base_model, inputs, backend)


def batch_for(case, mode: str) -> int:
    return 1 if mode == "inference1" else case.batch


def warm_up(backends: list[str]) -> None:
    """Compile and run a tiny function with each backend once, so that the first model's
    compile does not also pay for importing the compiler and starting its workers (the
    suite's compile times are cold on-disk caches in a warm process)."""
    for backend in backends:
        if backend == "eager":
            continue
        harness.fresh_dynamo()
        fn = compile_module(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()), backend)
        x = torch.randn(2, 4, requires_grad=True)
        fn(x).sum().backward()
    harness.fresh_dynamo()
