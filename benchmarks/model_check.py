"""Is a backend's first call right? Its outputs (inference) or its loss and every parameter
gradient (training) against eager's.

Each tensor is compared at its own scale (ATOL + RTOL x its largest reference magnitude):
a whole model sums many terms in another order, so an element's error follows the
tensor's magnitude, not its own. A tensor outside that is judged against the same step
run in float64 instead (brrr_compiler/accuracy.py's rule: no further from float64 than twice
eager's own error, plus one unit): through fifty BatchNorms in training, eager itself
can be off by a percent, and a mathematically zero gradient (a bias whose shift the next
BatchNorm removes) is rounding noise in every backend. Where even that misses, a step so
ill-conditioned that eager's own float32 errors vary severalfold with the order of its
sums passes if the backend's float64 step computes what eager's float64 step does, and
its float32 errors stay within a few times eager's (ILL_CONDITIONED).
"""

from __future__ import annotations

import copy

import torch

import harness
from brrr_compiler.accuracy import REFERENCE_TOL, within_eager_error
from model_case import WithLoss

RTOL, ATOL = 1e-3, 1e-4


def _leaves(tree) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _close(a: torch.Tensor, e: torch.Tensor) -> bool:
    scale = e.detach().abs().max().item() if e.numel() else 0.0
    try:
        torch.testing.assert_close(a.detach(), e.detach(), rtol=0, atol=ATOL + RTOL * scale)
    except AssertionError:
        return False
    return True


def _up(x):
    return x.detach().double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def float64_first(case, mode: str, base_model, inputs, target):
    """What eager's first call gives with the model, inputs and target in float64."""
    model = copy.deepcopy(base_model).double()
    inputs = tuple(_up(x) for x in inputs)
    if mode != "training":
        with torch.no_grad():
            return model.eval()(*inputs)
    model.train()
    loss = WithLoss(model, case.loss)(inputs, _up(target))
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters() if p.requires_grad]


def channels_last_first(case, mode: str, base_model, inputs, target):
    """What eager's first call gives with the model and its 4-d inputs channels-last, or
    None for a model without them. As fair a float32 evaluation as eager's own: the same
    math, the convolutions' sums in another order. A MobileNetV2 training step is so
    ill-conditioned (fifty BatchNorms at batch 16) that eager's two layouts differ from
    float64 by up to 11x each other's error on some gradients, and brrr's (which runs
    convolution nets channels-last, passes/conv_channels_last.py) by up to 6.8x eager's
    NCHW one: within what eager channels-last gives, which the rule then allows."""
    if not any(isinstance(x, torch.Tensor) and x.dim() == 4 for x in inputs):
        return None
    from model_steps import build_step
    model = copy.deepcopy(base_model).to(memory_format=torch.channels_last)
    inputs = tuple(x.contiguous(memory_format=torch.channels_last)
                   if isinstance(x, torch.Tensor) and x.dim() == 4 else x for x in inputs)
    return build_step(case, mode, model, inputs, target, "eager").first


def float64_step_first(case, mode: str, base_model, inputs, target, backend: str):
    """What `backend`'s first call gives with the model, inputs and target in float64."""
    from model_steps import build_step
    model = copy.deepcopy(base_model).double()
    return build_step(case, mode, model, tuple(_up(x) for x in inputs), _up(target),
                      backend).first


# An ill-conditioned step (the module note): a backend whose float64 step agrees with
# eager's float64 step within STEP64_RTOL x each tensor's largest magnitude (plus
# STEP64_FLOOR x the largest of all: gradients that are zero in exact arithmetic are
# rounding noise), and whose float32 errors are at most ILL_CONDITIONED x the larger of
# eager's two layouts' errors, computes the same function. Measured on the MobileNetV2
# training step (2026-12-06, Intel VM): eager NCHW and eager channels-last differ 6x from
# each other in their error on one gradient (layer 15's expand weight, 7.5e-4 against
# 4.6e-3); brrr with no graph pass at all (NCHW, no fusion change) is 1.5-3.5x eager's on
# 50 of 158 tensors, and with them up to 5.8x on 3; its float64 step matches eager's
# float64 step to 1e-9 on every gradient.
STEP64_RTOL, STEP64_FLOOR, ILL_CONDITIONED = 1e-9, 1e-12, 8


def _same_in_float64(out64, ref64) -> bool:
    outs, refs = _leaves(out64), _leaves(ref64)
    if len(outs) != len(refs) or any(a.shape != e.shape for a, e in zip(outs, refs)):
        return False
    floor = STEP64_FLOOR * max((e.abs().max().item() for e in refs if e.numel()), default=0)
    return all((a.double() - e.double()).abs().max().item()
               <= STEP64_RTOL * e.abs().max().item() + floor
               for a, e in zip(outs, refs) if e.numel())


def _within_conditioning(a, e, r, other) -> bool:
    err = (a.double() - r.double()).abs().max().item() if a.numel() else 0.0
    eager = max((x.double() - r.double()).abs().max().item() if x.numel() else 0.0
                for x in (e, *other))
    return err <= ILL_CONDITIONED * eager


def verdict(out, ref, float64=None, fair=None, float64_step=None) -> tuple[float, str]:
    """(max absolute error, "ok" | "ok against float64" | "ok in float64" | "mismatch").
    `float64()` gives the float64 first call, computed only when a tensor misses eager's
    tolerance; `fair()`, another float32 first call as fair as eager's
    (channels_last_first), or None, computed only then too; `float64_step()`, the
    backend's own float64 first call (float64_step_first), computed only where the rest
    missed."""
    err = harness.max_abs_error(out, ref)
    outs, refs = _leaves(out), _leaves(ref)
    if len(outs) != len(refs) or any(a.shape != e.shape for a, e in zip(outs, refs)):
        return err, "mismatch"
    missed = [i for i, (a, e) in enumerate(zip(outs, refs)) if not _close(a, e)]
    if not missed:
        return err, "ok"
    r64 = _leaves(float64()) if float64 is not None else []
    if len(r64) != len(refs):
        return err, "mismatch"
    tol = REFERENCE_TOL[torch.float32]
    if all(within_eager_error(outs[i], refs[i], r64[i], tol) for i in missed):
        return err, "ok against float64"
    other = _leaves(fair()) if fair is not None and fair() is not None else []
    if len(other) == len(refs) and all(
            within_eager_error(outs[i], refs[i], r64[i], tol, fair=(other[i],)) for i in missed):
        return err, "ok against float64 (eager channels-last as fair)"
    others = [(other[i],) if len(other) == len(refs) else () for i in range(len(refs))]
    if float64_step is not None and all(
            _within_conditioning(outs[i], refs[i], r64[i], others[i]) for i in missed) \
            and _same_in_float64(float64_step(), float64()):
        return err, (f"ok in float64 ({len(missed)} tensors outside eager's tolerance, each "
                     f"within {ILL_CONDITIONED}x eager's float64 error; float64 step as "
                     f"eager's)")
    return err, "mismatch"

