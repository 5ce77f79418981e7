"""What the model suite knows of a model: ModelCase (its module, its batch at any size,
its loss), the loss helpers, WithLoss (model and loss as the one module a training step
compiles) and settle_batch_norm. models.py and hf_models.py define the cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def lm_loss(logits, target):
    """Next-token cross-entropy over (batch, seq, vocab) logits."""
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def mse(out, target):
    return F.mse_loss(out, target)


@dataclass(frozen=True)
class ModelCase:
    name: str
    build: Callable[[bool], nn.Module]            # tiny -> module
    make_batch: Callable[[int, bool], tuple]      # (batch, tiny) -> (inputs tuple, target)
    loss: Callable
    batch: int                                    # the throughput batch
    description: str
    library: str = "torch.nn"

    def module(self, tiny: bool = False) -> nn.Module:
        torch.manual_seed(0)
        model = self.build(tiny)
        settle_batch_norm(model, self.inputs(None, tiny)[0])
        return model

    def inputs(self, batch: int | None = None, tiny: bool = False) -> tuple:
        """(inputs tuple, target) at `batch` (default the throughput batch)."""
        return self.make_batch(self.batch if batch is None else batch, tiny)


def settle_batch_norm(model: nn.Module, inputs: tuple) -> None:
    """Give every BatchNorm the statistics of one batch, as a trained model's match its
    activations. Left at their initial (mean 0, variance 1), a randomly initialised conv
    net's activations shrink layer after layer in eval mode (MobileNetV2's logits reach
    1e-30), which no real model does."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    saved = [(m, m.momentum) for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None                 # a cumulative average: one batch's statistics
    was_training = model.training
    with torch.no_grad():
        model.train()(*inputs)
    model.train(was_training)
    for m, momentum in saved:
        m.momentum = momentum



class WithLoss(nn.Module):
    """A model and its loss as one module: what the training step compiles."""

    def __init__(self, model: nn.Module, loss: Callable):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, inputs: tuple, target):
        return self.loss(self.model(*inputs), target)
