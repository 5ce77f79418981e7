"""The model suite's models: the hand-written ones and the registry, MODELS (ModelCase
is in model_case.py).

Models that a library defines come from that library (hf_models.py: GPT-2, BERT, LLaMA,
T5, ViT, ResNet, MobileNetV2, ConvNeXt from transformers, built from config objects with
seeded random weights; nothing is downloaded). Two have no library model and are written
here from torch.nn modules:

    mlp         4 x (Linear 1024 + GELU), LayerNorm, 10-class head; loss: cross-entropy
    norm_block  LayerNorm + GELU + residual + RMSNorm over 1024-wide rows, no matmul: the
                memory-bound normalisation work around a transformer's GEMMs; loss: mean
                squared error against a random target

A ModelCase builds its module (seeded) and a batch of any size: `batch` is its throughput
batch; the suite also runs batch 1. `tiny=True` gives the smoke test's sizes.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from hf_models import HF_CASES
from model_case import ModelCase, gen, mse


class MLP(nn.Module):
    def __init__(self, dim_in=512, hidden=1024, layers=4, classes=10):
        super().__init__()
        dims = [dim_in] + [hidden] * layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return self.head(self.norm(x))


class NormBlock(nn.Module):
    """LayerNorm (weight, bias), exact GELU, a residual add, then RMSNorm: normalisation
    and pointwise work only, the part of a transformer layer a fusion compiler owns."""

    def __init__(self, dim=1024):
        super().__init__()
        self.norm, self.rms = nn.LayerNorm(dim), nn.RMSNorm(dim, eps=1e-6)

    def forward(self, x):
        return self.rms(x + F.gelu(self.norm(x)))


def _mlp(tiny: bool) -> nn.Module:
    return MLP(32, 64, 2) if tiny else MLP()


def _mlp_batch(batch: int, tiny: bool):
    x = torch.randn(batch, 32 if tiny else 512, generator=gen(1))
    return (x,), torch.randint(0, 10, (batch,), generator=gen(2))


def _norm_block(tiny: bool) -> nn.Module:
    return NormBlock(64 if tiny else 1024)


def _norm_batch(batch: int, tiny: bool):
    rows, dim = (16, 64) if tiny else (1024, 1024)
    shape = (batch, rows, dim)
    return (torch.randn(shape, generator=gen(1)),), torch.randn(shape, generator=gen(2))


HAND_WRITTEN = (
    ModelCase("mlp", _mlp, _mlp_batch, F.cross_entropy, 256,
              "MLP (torch.nn): 512 -> 4 x (Linear 1024 + GELU) -> LayerNorm -> 10; a batch "
              "is rows"),
    ModelCase("norm_block", _norm_block, _norm_batch, mse, 8,
              "norm-heavy block (torch.nn LayerNorm, GELU, residual, RMSNorm), no matmul; "
              "a batch item is 1024 rows of 1024; loss: mean squared error"),
)


MODELS = {c.name: c for c in (*HF_CASES, *HAND_WRITTEN)}
