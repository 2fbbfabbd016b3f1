"""validate's pageable host→device figure beside a plain `tensor.to("cuda")` loop in the same process (issue 23: the
figure must be >= 0.95 of the plain loop's).

The plain loop is what a user's data path does without pin_memory: a CPU tensor made and written once, then
`.to("cuda")` and a synchronize, timed on the host clock. gpuready's measurement is called as validate calls it
(workloads/gpu_bench.py `_host_copies`: the pinned copies first, then the pageable ones). The two alternate --repeats
times, so that a drifting machine shows in both.

Run on a GPU: python benchmarks/pageable_h2d.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))  # run from a checkout

import torch  # noqa: E402

from gpuready.workloads import gpu_bench  # noqa: E402


def plain_loop_gb_per_s(size_bytes: int, iterations: int) -> float:
    host = torch.empty(size_bytes, dtype=torch.uint8)
    host.fill_(1)
    host.to("cuda")  # warm-up
    torch.cuda.synchronize()
    seconds = 0.0
    for _ in range(iterations):
        begin = time.perf_counter()
        moved = host.to("cuda")
        torch.cuda.synchronize()
        seconds += time.perf_counter() - begin
        del moved
    return size_bytes * iterations / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    context = types.SimpleNamespace(device=torch.device("cuda:0"), gpu_bus_id=None,
                                    options=types.SimpleNamespace(quick=False))
    plain, ours = [], []
    for repeat in range(args.repeats):  # alternate which goes first
        for which in (("plain", "ours") if repeat % 2 == 0 else ("ours", "plain")):
            if which == "plain":
                plain.append(plain_loop_gb_per_s(gpu_bench.HOST_COPY_BYTES, gpu_bench.HOST_COPY_ITERATIONS))
            else:
                ours.append(gpu_bench._host_copies(torch, context)["h2d_pageable"]["gb_per_s"])
    print(f"plain tensor.to('cuda') loop     {' '.join(f'{value:6.2f}' for value in plain)} GB/s")
    print(f"gpuready h2d_pageable            {' '.join(f'{value:6.2f}' for value in ours)} GB/s")
    print(f"ratio of medians {statistics.median(ours) / statistics.median(plain):.3f} (target >= 0.95); each side's"
          f" spread over the repeats: plain {min(plain) / max(plain):.3f}, gpuready {min(ours) / max(ours):.3f}"
          " (min/max)")


if __name__ == "__main__":
    main()
