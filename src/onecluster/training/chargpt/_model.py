"""A small character-level GPT (2 layers, 64 wide, 4 heads, 64 characters of context:
about 112k parameters), trainable on a CPU in minutes."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["CharGPT", "GPTConfig"]


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 65
    context: int = 64
    width: int = 64
    heads: int = 4
    layers: int = 2


class _Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width)
        self.attn = nn.MultiheadAttention(cfg.width, cfg.heads, batch_first=True)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        attended: torch.Tensor = self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + attended
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


class CharGPT(nn.Module):
    """Next-character prediction; ``forward(x, y)`` gives the mean cross-entropy."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.width)
        self.pos = nn.Embedding(cfg.context, cfg.width)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab)
        mask = torch.triu(torch.ones(cfg.context, cfg.context, dtype=torch.bool), diagonal=1)
        self.mask: torch.Tensor
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(t))
        mask = self.mask[:t, :t]
        for block in self.blocks:
            h = block(h, mask)
        logits = self.head(self.ln(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
