"""The GPT-2 decoder in PyTorch, shaped by
:class:`~archbench.workloads.training.models.GPTShape` (:data:`~archbench.workloads.training.models.GPT`):
causal self-attention through PyTorch's fused ``scaled_dot_product_attention``, GPT-2's
tanh GELU, the output projection tied to the token embedding, GPT-2's initialisation
(normal 0.02, the residual projections scaled by 1 / sqrt(2 L)). A PyTorch without the
fused kernel (before 2.0: Debian's 1.13) runs the plain formulation, the same numbers
(:data:`FUSED_ATTENTION` says which).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from archbench.workloads.training.models import GPT, GPTShape

FUSED_ATTENTION = hasattr(F, "scaled_dot_product_attention")


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(Q) + causal mask) v over (batch, heads, T, Q) tensors."""
    if FUSED_ATTENTION:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v


class SelfAttention(nn.Module):
    def __init__(self, shape: GPTShape):
        super().__init__()
        self.heads = shape.heads
        self.qkv = nn.Linear(shape.width, 3 * shape.width)
        self.proj = nn.Linear(shape.width, shape.width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for y in self.qkv(x).split(d, dim=2))
        return self.proj(causal_attention(q, k, v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, shape: GPTShape):
        super().__init__()
        self.norm_1 = nn.LayerNorm(shape.width)
        self.attention = SelfAttention(shape)
        self.norm_2 = nn.LayerNorm(shape.width)
        self.mlp = nn.Sequential(nn.Linear(shape.width, 4 * shape.width), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * shape.width, shape.width))

    def forward(self, x):
        x = x + self.attention(self.norm_1(x))
        return x + self.mlp(self.norm_2(x))


class GPTModel(nn.Module):
    """Token ids (batch, T), T at most the context, to logits (batch, T, vocabulary)."""

    def __init__(self, shape: GPTShape):
        super().__init__()
        self.shape = shape
        self.tokens = nn.Embedding(shape.vocabulary, shape.width)
        self.positions = nn.Embedding(shape.context, shape.width)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = nn.LayerNorm(shape.width)
        self.output = nn.Linear(shape.width, shape.vocabulary, bias=False)
        self.output.weight = self.tokens.weight  # tied
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: residual projections scaled by depth
            for layer in (block.attention.proj, block.mlp[2]):
                nn.init.normal_(layer.weight, std=0.02 / math.sqrt(2 * shape.layers))

    @staticmethod
    def _init(module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids):
        t = ids.shape[1]
        if t > self.shape.context:
            raise ValueError(f"a sequence of {t} tokens is longer than the model's context "
                             f"of {self.shape.context}")
        x = self.tokens(ids) + self.positions(torch.arange(t, device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.output(self.norm(x))


def build(name: str) -> GPTModel:
    """The GPT model ``name`` of :data:`GPT` (random weights from the current torch seed)."""
    if name not in GPT:
        raise ValueError(f"unknown GPT model '{name}' (known: {', '.join(GPT)})")
    return GPTModel(GPT[name])


def language_model_loss(logits, targets):
    """Mean cross-entropy of every position's logits (batch, T, vocabulary) against its
    next token (``targets``: the input sequence shifted by one, batch x T)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
