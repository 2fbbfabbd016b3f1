"""What gpuready's measurement adds to a training step (target: <= 1 % of the step time).

Times the same model and step two ways and prints the medians:
- plain: a straightforward loop in this process (build_model, AdamW, forward, backward, step, zero_grad);
- bench: `gpuready bench --ranks 1`, one rank through the runner: a progress post per step, the heartbeat
  thread, watchdog polling, and on GPUs the NVML sampler.
On the 2-core CPU box the two differ by -39 % to +6 % from run to run (thread scheduling of a process with a few ms
steps), far more than any overhead: the figure that counts is on a GPU, with a model whose step is tens of ms.
Both run in a fresh process each time; --repeats N alternates them N times and also prints the median of medians
(on the H200 the plain loop alone varied from 42.3 to 47.8 ms between processes: ±6 %, far above the 1 % target).
--calls-only times what a rank adds to each step on its own (the progress post and the partial result), which is
the part of the overhead that sits inside the step; the sampler and watchdog run in the parent process.
Run: python benchmarks/bench_overhead.py [--device cpu|cuda] [--preset tiny] [--steps 40] [--seq N] [--micro-batch B]
     [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def plain_steps(device: str, preset: str, seq: int, micro_batch: int, steps: int, warmup: int) -> list[float]:
    import torch

    from gpuready.verbs.bench.run import BENCH_PRESETS
    from gpuready.shapes import with_sequence
    from gpuready.workloads.gpt import build_model

    torch.manual_seed(1234)
    shape = with_sequence(BENCH_PRESETS[preset], seq)
    model = build_model(shape).to(device)
    kind = {"fused": True} if device == "cuda" else {"foreach": True}  # as workloads/train.py
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **kind)
    tokens = torch.randint(0, shape.vocab, (micro_batch, seq + 1), device=device)
    times = []
    for step in range(warmup + steps):
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = model(tokens[:, :-1], labels=tokens[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - started)
    return times


def bench_steps(device: str, preset: str, seq: int, micro_batch: int, steps: int, warmup: int) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bench.json"
        command = [sys.executable, "-m", "gpuready", "bench", "--device", device, "--ranks", "1", "--preset", preset,
                   "--seq", str(seq), "--micro-batch", str(micro_batch), "--steps", str(steps), "--warmup",
                   str(warmup), "--json", "--out", str(out)]
        subprocess.run(command, capture_output=True, text=True, check=False)
        report = json.loads(out.read_text())
    step = next(m for m in report["measurements"] if m["name"] == "step_time_s")
    return step["samples"]


def per_step_calls_s(repeats: int = 2000) -> tuple[float, float]:
    """What a rank adds to each training step, timed alone: the progress post (one TCPStore set of a small JSON) and,
    every PUBLISH_EVERY steps, the partial result (json of the result so far, one set). Seconds per step, median of
    `repeats` (post, publish of a 25-step result)."""
    import os
    from datetime import timedelta

    import torch.distributed as dist

    from gpuready.runner.progress import ProgressReporter
    from gpuready.workloads.train import PUBLISH_EVERY
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=30))
    reporter = ProgressReporter(store, 0, "0000:00:00.0", os.getpid())
    posts, publishes = [], []
    result = {"step_times_s": [0.045] * 25, "strategy": "single", "shape": {"layers": 12}, "versions": {"torch": "x"}}
    for _ in range(repeats):
        started = time.perf_counter()
        reporter.post("train", "single step 7", 300.0)
        posts.append(time.perf_counter() - started)
        started = time.perf_counter()
        store.set("gpuready/result/0", json.dumps({"workloads": {"train": {**result, "partial": True}}}))
        publishes.append(time.perf_counter() - started)
    return statistics.median(posts), statistics.median(publishes) / PUBLISH_EVERY


def plain_in_subprocess(args: argparse.Namespace) -> list[float]:
    """The plain loop in a fresh process, as bench's rank is: neither side reuses a warm CUDA context."""
    command = [sys.executable, __file__, "--plain-only", "--device", args.device, "--preset", args.preset, "--seq",
               str(args.seq), "--micro-batch", str(args.micro_batch), "--steps", str(args.steps), "--warmup",
               str(args.warmup)]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1, help="alternate plain and bench this many times")
    parser.add_argument("--plain-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls-only", action="store_true",
                        help="only time what a rank adds to each step (the progress post, the partial result)")
    args = parser.parse_args()
    if args.calls_only:
        from gpuready.workloads.train import PUBLISH_EVERY
        post_s, publish_s = per_step_calls_s()
        print(f"inside a rank, per step: progress post {post_s * 1e6:.0f} µs + partial result {publish_s * 1e6:.0f} µs "
              f"(one in {PUBLISH_EVERY} steps, spread): "
              f"{(post_s + publish_s) * 1e6:.0f} µs, {100 * (post_s + publish_s) / 0.045:.2f} % of a 45 ms step")
        return
    if args.plain_only:
        print(json.dumps(plain_steps(args.device, args.preset, args.seq, args.micro_batch, args.steps, args.warmup)))
        return
    pairs = []
    for _ in range(args.repeats):
        plain = statistics.median(plain_in_subprocess(args))
        bench = statistics.median(bench_steps(args.device, args.preset, args.seq, args.micro_batch, args.steps,
                                              args.warmup))
        pairs.append((plain, bench))
        print(f"{args.preset} seq {args.seq} micro-batch {args.micro_batch} on {args.device}, median of {args.steps} "
              f"steps: plain loop {plain * 1e3:.2f} ms, through gpuready bench {bench * 1e3:.2f} ms, "
              f"overhead {100 * (bench - plain) / plain:+.1f} %", flush=True)
    if args.repeats > 1:
        plain = statistics.median(p for p, _ in pairs)
        bench = statistics.median(b for _, b in pairs)
        print(f"over {args.repeats} alternations: plain {plain * 1e3:.2f} ms, bench {bench * 1e3:.2f} ms, "
              f"overhead {100 * (bench - plain) / plain:+.1f} % (median of medians)")


if __name__ == "__main__":
    main()
