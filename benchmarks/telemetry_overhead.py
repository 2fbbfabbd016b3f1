"""Telemetry's cost on throughput: alternate GEMM windows with and without the NVML sampler.

Target: median throughput ratio (with / without) >= 0.99. Run on a GPU machine:
python benchmarks/telemetry_overhead.py [--windows 3] [--window-s 5]
"""

import argparse
import statistics
import time

import torch

from gpuready.facts.nvml import NvmlSession
from gpuready.telemetry import Sampler


def gemm_window(a, b, out, seconds: float) -> float:
    torch.cuda.synchronize()
    started, count = time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        for _ in range(20):
            torch.mm(a, b, out=out)
        torch.cuda.synchronize()
        count += 20
    return 2 * a.shape[0] ** 3 * count / (time.perf_counter() - started) / 1e12


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=5.0)
    args = parser.parse_args()
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(a)
    gemm_window(a, b, out, 3.0)  # warm up to the power cap first
    session = NvmlSession()
    with_sampler, without = [], []
    for _ in range(args.windows):
        without.append(gemm_window(a, b, out, args.window_s))
        with Sampler(session, list(range(len(session.handles))), interval_s=1.0):
            with_sampler.append(gemm_window(a, b, out, args.window_s))
    ratios = [w / o for w, o in zip(with_sampler, without)]
    print(f"bf16 TFLOP/s without sampler: {[round(x, 1) for x in without]}")
    print(f"bf16 TFLOP/s with sampler:    {[round(x, 1) for x in with_sampler]}")
    print(f"ratio median {statistics.median(ratios):.4f} (min {min(ratios):.4f}, max {max(ratios):.4f}); target >= 0.99")


if __name__ == "__main__":
    main()
