"""The model zoo the model and compile suites run: small versions of common architectures,
written here with seeded random weights (nothing is downloaded).

    gpt      GPT-style decoder: token + position embeddings, 2 pre-norm blocks (causal
             F.scaled_dot_product_attention, GELU MLP), final LayerNorm, tied LM head;
             loss: next-token cross-entropy
    bert     BERT-style encoder: embeddings + LayerNorm, 2 post-norm blocks with attention
             written out (QK^T / sqrt(d) + padding mask, softmax, @V), GELU MLP; [CLS]
             pooler (tanh) and a 2-class head; loss: cross-entropy
    llama    one LLaMA-style block: RMSNorm, rotary embedding on q and k, causal SDPA,
             SwiGLU MLP, residuals; loss: mean squared error against a random target
    mlp      4 Linear + bias + GELU layers with a LayerNorm, 10-class head; loss:
             cross-entropy
    convnet  3 Conv-BatchNorm-ReLU stages with max-pooling, global average pool, linear
             head; loss: cross-entropy (BatchNorm in training mode updates its buffers)
    ln_gelu  LayerNorm + GELU on 8192 x 1024 rows, no matmul: the memory-bound block
             whose training step issue 3 asks about; loss: mean squared error

Each ModelCase builds its module (seeded) and its batch; `loss(module_output, target)` is
what a training step minimises. Sizes keep one eager training step near 0.1 s on 2 cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _small_embeddings(*embeddings: nn.Embedding) -> None:
    """GPT-2/BERT initialise embeddings with std 0.02 (nn.Embedding's N(0, 1) would make a
    tied LM head's logits, and so the loss, huge)."""
    for e in embeddings:
        nn.init.normal_(e.weight, std=0.02)


# ---- GPT ----------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(a.transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=2048, dim=256, heads=8, layers=2, max_seq=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_seq, dim)
        self.blocks = nn.ModuleList(GPTBlock(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        _small_embeddings(self.tok, self.pos)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.tok.weight.t()   # tied LM head: (batch, seq, vocab)


# ---- BERT ---------------------------------------------------------------------------------


class BertLayer(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def attention(self, x, mask):
        b, t, d = x.shape
        h = self.heads

        def split(z):
            return z.view(b, t, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // h) + mask
        return self.o((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x, mask):
        x = self.ln1(x + self.attention(x, mask))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class Bert(nn.Module):
    def __init__(self, vocab=2048, dim=256, heads=4, layers=2, max_seq=256, classes=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_seq, dim)
        self.ln = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(BertLayer(dim, heads) for _ in range(layers))
        self.pool, self.head = nn.Linear(dim, dim), nn.Linear(dim, classes)
        _small_embeddings(self.tok, self.pos)

    def forward(self, idx, lengths):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.ln(self.tok(idx) + self.pos(pos))
        # additive padding mask: 0 for real tokens, -10000 for padding (as BERT does)
        pad = pos[None, :] >= lengths[:, None]
        mask = (pad.to(x.dtype) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(torch.tanh(self.pool(x[:, 0])))


# ---- LLaMA block --------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.type_as(x) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, dim=512, heads=8, hidden=1408, max_seq=256):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1 = nn.Linear(dim, hidden, bias=False)   # gate
        self.w3 = nn.Linear(dim, hidden, bias=False)   # up
        self.w2 = nn.Linear(hidden, dim, bias=False)   # down
        head_dim = dim // heads
        inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.arange(max_seq).float()[:, None] * inv_freq
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def attention(self, x):
        b, t, d = x.shape
        h = self.heads

        def heads(z):
            return z.view(b, t, h, d // h).transpose(1, 2)       # (b, h, t, head_dim)

        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        cos, sin = self.cos[:t], self.sin[:t]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(a.transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


# ---- MLP and conv net ---------------------------------------------------------------------


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


class ConvNet(nn.Module):
    def __init__(self, channels=(32, 64, 128), classes=10):
        super().__init__()
        stages, c_in = [], 3
        for c in channels:
            stages += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                       nn.ReLU(), nn.MaxPool2d(2)]
            c_in = c
        self.features = nn.Sequential(*stages)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


class LayerNormGelu(nn.Module):
    """The memory-bound block of issue 3: LayerNorm (weight, bias) then exact GELU."""

    def __init__(self, dim=1024):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return F.gelu(self.norm(x))


# ---- the cases ----------------------------------------------------------------------------


def _lm_loss(logits, target):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def _mse(out, target):
    return F.mse_loss(out, target)


@dataclass(frozen=True)
class ModelCase:
    name: str
    build: Callable[[], nn.Module]
    make_batch: Callable[[], tuple]   # -> (inputs tuple, target)
    loss: Callable
    description: str

    def module(self) -> nn.Module:
        torch.manual_seed(0)
        return self.build()


def _gpt_batch(batch=2, seq=128, vocab=2048):
    idx = torch.randint(0, vocab, (batch, seq + 1), generator=_gen(1))
    return (idx[:, :-1].contiguous(),), idx[:, 1:].contiguous()


def _bert_batch(batch=2, seq=128, vocab=2048):
    idx = torch.randint(0, vocab, (batch, seq), generator=_gen(1))
    lengths = torch.tensor([seq, seq - 17, seq // 2, seq - 3][:batch])
    return (idx, lengths), torch.randint(0, 2, (batch,), generator=_gen(2))


def _llama_batch(batch=1, seq=256, dim=512):
    x = torch.randn(batch, seq, dim, generator=_gen(1))
    return (x,), torch.randn(batch, seq, dim, generator=_gen(2))


def _mlp_batch(batch=256, dim=512):
    x = torch.randn(batch, dim, generator=_gen(1))
    return (x,), torch.randint(0, 10, (batch,), generator=_gen(2))


def _ln_gelu_batch(rows=8192, dim=1024):
    return (torch.randn(rows, dim, generator=_gen(1)),), torch.randn(rows, dim, generator=_gen(2))


def _conv_batch(batch=32):
    x = torch.randn(batch, 3, 32, 32, generator=_gen(1))
    return (x,), torch.randint(0, 10, (batch,), generator=_gen(2))


MODELS = {
    m.name: m
    for m in (
        ModelCase("gpt", GPT, _gpt_batch, _lm_loss,
                  "GPT decoder: vocab 2048, dim 256, 8 heads, 2 layers; batch 2 x 128 tokens"),
        ModelCase("bert", Bert, _bert_batch, F.cross_entropy,
                  "BERT encoder: vocab 2048, dim 256, 4 heads, 2 layers, padding mask; "
                  "batch 2 x 128 tokens, 2 classes"),
        ModelCase("llama", LlamaBlock, _llama_batch, _mse,
                  "LLaMA block: dim 512, 8 heads, SwiGLU hidden 1408, RMSNorm, rotary; "
                  "batch 1 x 256"),
        ModelCase("mlp", MLP, _mlp_batch, F.cross_entropy,
                  "MLP: 512 -> 4 x (Linear 1024 + GELU) -> LayerNorm -> 10; batch 256"),
        ModelCase("convnet", ConvNet, _conv_batch, F.cross_entropy,
                  "ConvNet: 3 x (Conv3x3 + BatchNorm + ReLU + MaxPool) 32-64-128 channels, "
                  "global average pool, Linear 10; batch 32 x 3 x 32 x 32"),
        ModelCase("ln_gelu", LayerNormGelu, _ln_gelu_batch, _mse,
                  "LayerNorm(1024) + GELU block (no matmul: memory-bound); 8192 x 1024 rows; "
                  "loss: mean squared error against a random target"),
    )
}


class WithLoss(nn.Module):
    """A model and its loss as one module: what the training step compiles."""

    def __init__(self, model: nn.Module, loss: Callable):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, inputs: tuple, target):
        return self.loss(self.model(*inputs), target)
