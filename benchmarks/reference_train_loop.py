"""A plain PyTorch training loop, written apart from gpuready, to hold `gpuready bench` (speed, memory) and `gpuready
plan` (peak memory) against: issue 12's and issue 23's references.

Two families, none of gpuready's code imported:
- gpt2: nanoGPT-style GPT-2 (pre-LN blocks with biases, fused q/k/v projection, causal
  `scaled_dot_product_attention`, MLP 4h with tanh GELU, learned positions, tied embeddings);
- llama: LLaMA-style (RMSNorm, no biases, rotary positions, grouped key/value heads, SwiGLU MLP of --ffn-hidden,
  untied embeddings), as Hugging Face's LlamaForCausalLM lays it out.
The loss upcasts the logits to fp32 (`logits.float()`), as Hugging Face's causal-LM heads do. Fused AdamW; synthetic
tokens made on the GPU; `torch.cuda.synchronize` around each timed step; no dropout.

Precisions: fp32 (everything fp32, TF32 matmuls off); amp-bf16 (fp32 weights, gradients and AdamW states, forward
under torch.autocast(bfloat16)); bf16 (`model.to(torch.bfloat16)`: weights, gradients and AdamW states in bf16).
Recompute: none; selective (the attention core, `scaled_dot_product_attention`, recomputed in backward: Megatron-LM's
"selective"); full (each block recomputed: `torch.utils.checkpoint`, non-reentrant).

MFU uses the usual training count, 6 × non-embedding-position parameters + 12 × layers × seq × hidden FLOPs per token
(Kaplan et al. 2020 / Megatron-LM), against the peak given with --peak-tflops (H200 SXM dense bf16: 989.4).
Memory: torch.cuda.max_memory_allocated() and max_memory_reserved() over all steps (the optimizer's states exist from
the first step on), in bytes.

Run: python benchmarks/reference_train_loop.py --layers 24 --hidden 1536 --heads 16 --seq 2048 --micro-batch 4
     --precision bf16 [--family llama --kv-heads 8 --ffn-hidden 14336 --vocab 128256] [--recompute full]
     [--compile] [--steps 20 --warmup 5]
Prints one JSON line: tokens/s, step time median, MFU, peak memory.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, recompute: str) -> torch.Tensor:
    if k.shape[1] != q.shape[1]:  # grouped key/value heads: each serves heads / kv_heads query heads
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    if recompute == "selective":
        return checkpoint(F.scaled_dot_product_attention, q, k, v, is_causal=True, use_reentrant=False)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(nn.Module):
    """GPT-2's block."""

    def __init__(self, hidden: int, heads: int, recompute: str) -> None:
        super().__init__()
        self.heads, self.recompute = heads, recompute
        self.ln_1 = nn.LayerNorm(hidden)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(hidden, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = attention(q, k, v, self.recompute)
        x = x + self.c_proj(attended.transpose(1, 2).reshape(batch, seq, hidden))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype  # as Hugging Face's LlamaRMSNorm: the statistics in fp32, the result in the input's dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class LlamaBlock(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, ffn_hidden: int, recompute: str) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.recompute = heads, kv_heads, hidden // heads, recompute
        self.input_layernorm = RMSNorm(hidden)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.gate_proj = nn.Linear(hidden, ffn_hidden, bias=False)
        self.up_proj = nn.Linear(hidden, ffn_hidden, bias=False)
        self.down_proj = nn.Linear(ffn_hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        attended = attention(q, k, v, self.recompute)
        x = x + self.o_proj(attended.transpose(1, 2).reshape(batch, seq, hidden))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class GPT(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, vocab: int, positions: int, recompute: str) -> None:
        super().__init__()
        self.recompute = recompute
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, recompute) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, parameter in self.named_parameters():
            if parameter.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(parameter, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(parameter)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.recompute == "full" else block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


class Llama(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, kv_heads: int, ffn_hidden: int, vocab: int,
                 recompute: str, rope_theta: float = 10000.0) -> None:
        super().__init__()
        self.recompute, self.head_dim, self.rope_theta = recompute, hidden // heads, rope_theta
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaBlock(hidden, heads, kv_heads, ffn_hidden, recompute) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        for parameter in self.parameters():
            if parameter.dim() == 2:
                nn.init.normal_(parameter, std=0.02)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        inverse = 1.0 / (self.rope_theta ** (torch.arange(0, self.head_dim, 2, device=tokens.device).float()
                                             / self.head_dim))
        angles = torch.outer(torch.arange(seq, device=tokens.device).float(), inverse)
        angles = torch.cat((angles, angles), dim=-1)
        x = self.embed_tokens(tokens)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for layer in self.layers:
            x = checkpoint(layer, x, cos, sin, use_reentrant=False) if self.recompute == "full" else layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def position_parameters(model: nn.Module) -> int:
    return model.wpe.weight.numel() if isinstance(model, GPT) else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", choices=("gpt2", "llama"), default="gpt2")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--kv-heads", type=int, help="llama: grouped key/value heads (default: --heads)")
    parser.add_argument("--ffn-hidden", type=int, help="llama: the SwiGLU MLP's width (required for llama)")
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--precision", choices=("fp32", "amp-bf16", "bf16"), default="amp-bf16")
    parser.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peak-tflops", type=float, default=989.4)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script itself")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    device = torch.device(args.device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if args.family == "llama":
        if args.ffn_hidden is None:
            parser.error("--family llama needs --ffn-hidden")
        model = Llama(args.layers, args.hidden, args.heads, args.kv_heads or args.heads, args.ffn_hidden, args.vocab,
                      args.recompute).to(device)
    else:
        model = GPT(args.layers, args.hidden, args.heads, args.vocab, args.seq, args.recompute).to(device)
    if args.precision == "bf16":
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    step_fn = torch.compile(model) if args.compile else model
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if args.precision == "amp-bf16" else nullcontext
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    times = []
    for step in range(args.warmup + args.steps):
        tokens = torch.randint(0, args.vocab, (args.micro_batch, args.seq + 1), device=device)
        synchronize()
        started = time.perf_counter()
        with autocast():
            loss = step_fn(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - started)

    parameters = sum(p.numel() for p in model.parameters()) - position_parameters(model)
    flops_per_token = 6 * parameters + 12 * args.layers * args.seq * args.hidden
    step_s = statistics.median(times)
    tokens_per_s = args.micro_batch * args.seq / step_s
    cuda = device.type == "cuda"
    print(json.dumps({"family": args.family, "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
                      "kv_heads": args.kv_heads, "ffn_hidden": args.ffn_hidden, "vocab": args.vocab,
                      "seq": args.seq, "micro_batch": args.micro_batch, "precision": args.precision,
                      "recompute": args.recompute, "compile": args.compile,
                      "parameters": parameters, "all_parameters": sum(p.numel() for p in model.parameters()),
                      "step_s_median": step_s, "tokens_per_s": tokens_per_s,
                      "tflops": tokens_per_s * flops_per_token / 1e12,
                      "mfu": tokens_per_s * flops_per_token / (args.peak_tflops * 1e12),
                      "peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
                      "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
                      "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
                      "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name() if cuda else "cpu"}))


if __name__ == "__main__":
    main()
