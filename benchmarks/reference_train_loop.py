"""A plain PyTorch training loop, written apart from gpuready, to hold `gpuready bench` against (issue 12's target:
bench reaches >= 95 % of this loop's tokens/s on the same GPU and settings).

The model is a nanoGPT-style GPT-2 (pre-LN blocks with biases, fused q/k/v projection, causal
`scaled_dot_product_attention`, MLP 4h with tanh GELU, learned positions, tied embeddings); none of gpuready's code is
imported, so a slow-down in gpuready's workload shows as a gap. Fused AdamW; synthetic tokens made on the GPU;
`torch.cuda.synchronize` around each timed step.

MFU uses the usual training count, 6 × non-embedding-position parameters + 12 × layers × seq × hidden FLOPs per token
(Kaplan et al. 2020 / Megatron-LM), against the peak given with --peak-tflops (H200 SXM dense bf16: 989.4).

Run: python benchmarks/reference_train_loop.py --layers 24 --hidden 1536 --heads 16 --seq 2048 --micro-batch 4
     --precision bf16 [--compile] [--steps 20 --warmup 5]
Prints one JSON line: tokens/s, step time median, MFU.
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


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
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
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(attended.transpose(1, 2).reshape(batch, seq, hidden))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, vocab: int, positions: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
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
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--precision", choices=("bf16", "amp-bf16"), default="amp-bf16")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peak-tflops", type=float, default=989.4)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script itself")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model = GPT(args.layers, args.hidden, args.heads, args.vocab, args.seq).to(device)
    if args.precision == "bf16":
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    step_fn = torch.compile(model) if args.compile else model
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if args.precision == "amp-bf16" else nullcontext

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

    parameters = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    flops_per_token = 6 * parameters + 12 * args.layers * args.seq * args.hidden
    step_s = statistics.median(times)
    tokens_per_s = args.micro_batch * args.seq / step_s
    print(json.dumps({"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "seq": args.seq,
                      "micro_batch": args.micro_batch, "precision": args.precision, "compile": args.compile,
                      "parameters": parameters, "step_s_median": step_s, "tokens_per_s": tokens_per_s,
                      "tflops": tokens_per_s * flops_per_token / 1e12,
                      "mfu": tokens_per_s * flops_per_token / (args.peak_tflops * 1e12),
                      "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
                      "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}))


if __name__ == "__main__":
    main()
