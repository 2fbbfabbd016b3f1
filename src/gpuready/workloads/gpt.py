"""A GPT-2 or LLaMA-family decoder in plain torch, built from a ModelShape: what the memory calibration trains and
what `plan`'s estimator describes.

GPT-2 family: pre-LN blocks, LayerNorm with bias, q/k/v/output projections with bias, MLP Linear(h, 4h) + GELU
(tanh) + Linear(4h, h), learned positions, the output head tied to the token embedding, a final LayerNorm
(Radford et al. 2019; Hugging Face `GPT2Model`). LLaMA family: RMSNorm (weight only), no biases, SwiGLU MLP
(gate/up/down of `ffn_hidden`), rotary positions (no parameters), grouped key/value heads, an untied output head
(Touvron et al. 2023; Hugging Face `LlamaModel`). No dropout.

`sum(p.numel() for p in model.parameters())` equals `shape.parameters()` (tied weights count once).

Attention: "flash" calls `torch.nn.functional.scaled_dot_product_attention(is_causal=True)` (grouped heads through
`enable_gqa`); "eager" materialises the s × s scores, `softmax(Q Kᵀ / √d)` under a causal mask (key/value heads
repeated with `repeat_interleave`). Recompute: "none"; "full" checkpoints every block
(`torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`), keeping only each block's input; "selective"
checkpoints only the attention core (scores, softmax, weighted sum), as Korthikanti et al. 2022.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from gpuready.estimate.memory import LOGITS
from gpuready.shapes import ModelShape

ATTENTIONS = ("flash", "eager")
RECOMPUTES = ("none", "full", "selective")
ROPE_THETA = 10000.0
NORM_EPS = 1e-5


def attention_core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attention: str) -> torch.Tensor:
    """Causal attention of q (batch, heads, seq, d) over k, v (batch, kv_heads, seq, d); returns (batch, heads, seq, d)."""
    groups = q.shape[1] // k.shape[1]
    if attention == "flash":
        if groups > 1:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if groups > 1:
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
    seq = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x (batch, heads, seq, d), half-split layout (Hugging Face LLaMA), θ = 10000;
    the angles are computed in fp32, then the result is cast back to x's dtype."""
    seq, dim = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim))
    angles = torch.outer(torch.arange(seq, device=x.device, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., : dim // 2], x[..., dim // 2:]
    return x * cos + torch.cat((-second, first), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, shape: ModelShape, attention: str, selective: bool) -> None:
        super().__init__()
        h, d = shape.hidden, shape.head_dim
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.key_value_heads, d
        self.rope = shape.family == "llama"
        self.attention, self.selective = attention, selective
        # One fused q/k/v projection (GPT-2's c_attn, Megatron-LM's linear_qkv): under autocast the norm's fp32
        # output is cast to bf16 once and saved once, not three times (measured on an H200: three projections took
        # 5 % more memory and 5 % more time than a plain loop with one, issue 23)
        self.split = (shape.heads * d, self.kv_heads * d, self.kv_heads * d)
        self.qkv = nn.Linear(h, sum(self.split), bias=shape.biases)
        self.out = nn.Linear(shape.heads * d, h, bias=shape.biases)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(self.split, dim=-1)
        q = q.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.rope:
            q, k = rotary(q), rotary(k)
        if self.selective and self.training and torch.is_grad_enabled():
            y = checkpoint(attention_core, q, k, v, self.attention, use_reentrant=False)
        else:
            y = attention_core(q, k, v, self.attention)
        return self.out(y.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class MLP(nn.Module):
    """GPT-2: Linear(h, 4h) + GELU(tanh) + Linear(4h, h), with biases."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.up = nn.Linear(shape.hidden, shape.mlp_hidden)
        self.down = nn.Linear(shape.mlp_hidden, shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class SwiGLU(nn.Module):
    """LLaMA: down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.gate = nn.Linear(shape.hidden, shape.mlp_hidden, bias=False)
        self.up = nn.Linear(shape.hidden, shape.mlp_hidden, bias=False)
        self.down = nn.Linear(shape.mlp_hidden, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


def _norm(shape: ModelShape) -> nn.Module:
    if shape.family == "gpt2":
        return nn.LayerNorm(shape.hidden, eps=NORM_EPS)
    return nn.RMSNorm(shape.hidden, eps=NORM_EPS)


class Block(nn.Module):
    """Pre-norm block: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, shape: ModelShape, attention: str, selective: bool) -> None:
        super().__init__()
        self.norm1 = _norm(shape)
        self.attn = Attention(shape, attention, selective)
        self.norm2 = _norm(shape)
        self.mlp = MLP(shape) if shape.family == "gpt2" else SwiGLU(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """The decoder. `forward(input_ids, labels=None)`: without labels, the logits (batch, seq, vocab) in the model's
    dtype (the autocast dtype under autocast); with labels (same shape as input_ids, already the next tokens,
    -100 ignored), the mean cross-entropy loss: the logits are computed in the model dtype, then the loss as
    `logits` says (plan's --logits, estimate/memory.py LOGITS): "fp32" through `F.cross_entropy(logits.float(), ...)`
    (an fp32 copy of the logits exists, as Hugging Face's causal-LM heads make it); "bf16" on the logits as they are,
    autocast off for the loss (autocast would run cross_entropy in fp32), as a plain nanoGPT-style loop keeps them."""

    def __init__(self, shape: ModelShape, attention: str = "flash", recompute: str = "none",
                 logits: str = "fp32") -> None:
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"attention {attention!r}: one of {', '.join(ATTENTIONS)}")
        if recompute not in RECOMPUTES:
            raise ValueError(f"recompute {recompute!r}: one of {', '.join(RECOMPUTES)}")
        if logits not in LOGITS:
            raise ValueError(f"logits {logits!r}: one of {', '.join(LOGITS)}")
        self.shape, self.attention, self.recompute, self.logits = shape, attention, recompute, logits
        self.tokens = nn.Embedding(shape.vocab, shape.hidden)
        self.positions = nn.Embedding(shape.max_positions, shape.hidden) if shape.family == "gpt2" else None
        self.blocks = nn.ModuleList(Block(shape, attention, recompute == "selective") for _ in range(shape.layers))
        self.norm = _norm(shape)
        self.lm_head = nn.Linear(shape.hidden, shape.vocab, bias=False)
        self.apply(self._init)
        if shape.tied:
            self.lm_head.weight = self.tokens.weight

    @staticmethod
    def _init(module: nn.Module) -> None:
        """GPT-2's initialisation: normal(0, 0.02) weights, zero biases (norms keep ones/zeros)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        x = self.tokens(input_ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(input_ids.shape[1], device=input_ids.device))
        full = self.recompute == "full" and self.training and torch.is_grad_enabled()
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if full else block(x)
        logits = self.lm_head(self.norm(x))
        if labels is None:
            return logits
        if self.logits == "fp32":
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        with torch.autocast(device_type=logits.device.type, enabled=False):
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def build_model(shape: ModelShape, *, attention: str = "flash", recompute: str = "none",
                logits: str = "fp32") -> nn.Module:
    """The model `shape` describes, on the current default device (use `with torch.device("meta"):` to count
    without allocating), in the default dtype (fp32 unless changed); see GPT for forward's contract."""
    return GPT(shape, attention=attention, recompute=recompute, logits=logits)
