"""`gpuready plan`'s peak-memory estimate against a plain PyTorch training loop (issue 23: within ±10 %).

For each configuration (model preset × precision × recompute × micro-batch), a fresh child process runs
benchmarks/reference_train_loop.py (a GPT-2 or LLaMA written apart from gpuready, fused AdamW) on the GPU and reports
torch.cuda.max_memory_allocated() over its steps; beside it, plan's estimate of the same thing for one GPU
(`MemoryBreakdown.allocated`: weights, gradients, optimizer states, activations and the loss's tensors, without the
CUDA context and the fragmentation margin, which the allocator does not count). Plan is never told the measurement.

Run on one GPU:  python benchmarks/plan_memory_vs_plain.py --out plan_vs_plain.json
CPU smoke test:  python benchmarks/plan_memory_vs_plain.py --device cpu --configs smoke
Prints one table row per configuration: estimate, measured, error (estimate / measured − 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))  # run from a checkout

from gpuready.shapes import PRESETS  # noqa: E402
from gpuready.estimate.memory import Strategy, TrainSetup, memory_per_gpu  # noqa: E402

GIB = 2**30
# preset, precision, recompute, micro-batch, seq (None: the preset's max positions, at most 2048)
CONFIGS = {
    "smoke": [("tiny", "fp32", "none", 2, 64), ("tiny", "bf16", "full", 2, 64)],
    "h200": [
        ("gpt2-small", "fp32", "none", 8, None),
        ("gpt2-small", "amp-bf16", "none", 8, None),
        ("gpt2-small", "bf16", "none", 8, None),
        ("gpt2-medium", "amp-bf16", "none", 8, None),
        ("gpt2-medium", "amp-bf16", "selective", 8, None),
        ("gpt2-medium", "amp-bf16", "full", 8, None),
        ("gpt2-large", "bf16", "none", 8, None),
        ("gpt2-large", "bf16", "full", 8, None),
        ("gpt2-xl", "fp32", "none", 4, None),
        ("gpt2-xl", "amp-bf16", "none", 4, None),
        ("gpt2-xl", "bf16", "none", 4, None),
        ("gpt2-xl", "bf16", "full", 16, None),
        ("gpt3-2.7b", "amp-bf16", "selective", 4, None),
        ("llama2-7b", "bf16", "none", 2, 2048),
        ("llama2-7b", "bf16", "full", 4, 2048),
        ("llama2-7b", "amp-bf16", "full", 1, 2048),
        ("llama3-8b", "bf16", "full", 2, 2048),
        ("llama3-8b", "bf16", "selective", 1, 2048),
    ],
    # measured after the model was worked out on the rows above (tests/fixtures/plan/h200-plain-loop-heldout.json)
    "heldout": [
        ("gpt2-medium", "fp32", "full", 8, None),
        ("gpt3-760m", "fp32", "selective", 4, None),
        ("gpt3-1.3b", "bf16", "selective", 8, None),
        ("gpt2-large", "amp-bf16", "full", 16, None),
        ("gpt3-2.7b", "bf16", "none", 4, None),
        ("llama2-7b", "amp-bf16", "full", 1, 2048),
        ("llama2-7b", "bf16", "selective", 2, 2048),
        ("llama3-8b", "bf16", "full", 2, 2048),
        ("llama3-8b", "bf16", "none", 1, 2048),
    ],
    # the held-out llama3-8b rows alone (the run of the set above ran out of time before them)
    "heldout-8b": [
        ("llama3-8b", "bf16", "full", 2, 2048),
        ("llama3-8b", "bf16", "none", 1, 2048),
    ],
}


def plain_loop_argv(preset: str, precision: str, recompute: str, micro_batch: int, seq: int, device: str,
                    steps: int) -> list[str]:
    shape = PRESETS[preset]
    argv = [sys.executable, os.path.join(HERE, "reference_train_loop.py"), "--family", shape.family,
            "--layers", str(shape.layers), "--hidden", str(shape.hidden), "--heads", str(shape.heads),
            "--vocab", str(shape.vocab), "--seq", str(seq), "--micro-batch", str(micro_batch),
            "--precision", precision, "--recompute", recompute, "--steps", str(steps), "--warmup", "1",
            "--device", device]
    if shape.family == "llama":
        argv += ["--kv-heads", str(shape.key_value_heads), "--ffn-hidden", str(shape.mlp_hidden)]
    return argv


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", choices=sorted(CONFIGS), default="h200")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=240)
    parser.add_argument("--budget-s", type=float, default=540, help="configs not started after this are skipped")
    parser.add_argument("--out")
    args = parser.parse_args()
    started = time.monotonic()
    rows = []
    print(f"{'config':44} {'estimate GiB':>12} {'measured GiB':>12} {'error':>8}")
    for preset, precision, recompute, micro_batch, seq in CONFIGS[args.configs]:
        shape = PRESETS[preset]
        seq = seq or min(shape.max_positions, 2048)
        label = f"{preset} {precision} recompute={recompute} mb={micro_batch} seq={seq}"
        estimate = memory_per_gpu(TrainSetup(shape=shape, seq=seq, micro_batch=micro_batch, precision=precision,
                                             recompute=recompute), Strategy(name="single", dp=1))
        row = {"preset": preset, "precision": precision, "recompute": recompute, "micro_batch": micro_batch,
               "seq": seq, "estimate_allocated_bytes": estimate.allocated, "estimate_terms": estimate.terms,
               "estimate_parts": {"parameters": estimate.parameters, "gradients": estimate.gradients,
                                  "optimizer": estimate.optimizer, "activations": estimate.activations,
                                  "other": estimate.other}}
        if time.monotonic() - started > args.budget_s:
            row["status"] = "skipped"
        else:
            try:
                done = subprocess.run(plain_loop_argv(preset, precision, recompute, micro_batch, seq, args.device,
                                                      args.steps),
                                      capture_output=True, text=True, timeout=args.timeout_s)
                if done.returncode == 0:
                    row.update(status="ok", plain=json.loads(done.stdout.strip().splitlines()[-1]))
                else:
                    row.update(status="oom" if "OutOfMemoryError" in done.stderr else "error",
                               stderr=done.stderr[-600:])
            except subprocess.TimeoutExpired:
                row["status"] = "timeout"
        measured = (row.get("plain") or {}).get("peak_allocated_bytes")
        row["measured_allocated_bytes"] = measured
        row["error"] = estimate.allocated / measured - 1 if measured else None
        rows.append(row)
        if args.out:  # after every row: a run stopped by its time limit keeps what it measured
            with open(args.out, "w") as out:
                json.dump({"schema": "gpuready.plan_memory_vs_plain/1", "configs": args.configs, "rows": rows}, out,
                          indent=1)
        shown = f"{measured / GIB:12.2f} {row['error']:+8.1%}" if measured else f"{row['status']:>12}"
        print(f"{label:44} {estimate.allocated / GIB:12.2f} {shown}", flush=True)
    judged = [row["error"] for row in rows if row["error"] is not None]
    if judged:
        within = sum(abs(error) <= 0.10 for error in judged)
        print(f"within ±10 %: {within} of {len(judged)}; worst {max(judged, key=abs):+.1%}")


if __name__ == "__main__":
    main()
