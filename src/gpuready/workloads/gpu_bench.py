"""GPU-only workloads: matmul TFLOP/s and device-memory bandwidth, host↔device transfers, GPU↔GPU copies.

Methods follow DESIGN.md §3: 8192³ matmuls, 3 warm-up then 20 timed between CUDA events (a short
window, before the power cap bites); a 4 GiB device copy ×10 counting read+write; 1 GiB
host↔device ×10 from memory pinned near the GPU, and pageable ones as a data loader without
pin_memory makes them (touched buffer, `.to(device)`, host clock); 512 MiB GPU↔GPU copies
(nvbandwidth's size), 16 per sample, median of 3 samples. GB = 1e9 bytes.
"""

from __future__ import annotations

import os
import statistics
from typing import Any, Callable

from gpuready.facts.units import parse_cpu_list
from gpuready.i18n import said
from gpuready.workloads.context import RankContext

MATMUL_N = 8192
MATMUL_WARMUP, MATMUL_ITERATIONS = 3, 20
QUICK_MATMUL_WINDOW_S, QUICK_MATMUL_MIN_ITERATIONS = 0.1, 4
"""--quick times as many products as fill 0.1 s by the warm-up's pace (at least 4, at most MATMUL_ITERATIONS): fp32
on an H200 (22 ms a product) took 0.5 of --quick's 1.0 s of compute with 20, the others 1-3 ms a product keep 20."""
DEVICE_COPY_BYTES, DEVICE_COPY_ITERATIONS = 4 * 2**30, 10
HOST_COPY_BYTES, HOST_COPY_ITERATIONS = 2**30, 10
QUICK_HOST_COPY_BYTES = 256 * 2**20
"""--quick's host copies: a quarter of the size, well past where PCIe bandwidth flattens (tens of MiB), a quarter
of the time (the pageable copies at ~8 GB/s were 2.5 s of a 12 s quick run on an H200)."""
P2P_BYTES, P2P_COPIES, P2P_SAMPLES = 512 * 2**20, 16, 3
LATENCY_SIZES = (4, 64, 512, 8192)
LATENCY_COPIES = 100


def _events_seconds(torch: Any, work: Callable[[], None], stream: Any = None) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    work()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) / 1000.0


def quick_iterations(warmup_s: float) -> int:
    """Products --quick times, after the warm-up's products but the first took `warmup_s`."""
    per_product_s = warmup_s / (MATMUL_WARMUP - 1)
    wanted = int(QUICK_MATMUL_WINDOW_S / per_product_s) + 1 if per_product_s > 0 else MATMUL_ITERATIONS
    return max(QUICK_MATMUL_MIN_ITERATIONS, min(MATMUL_ITERATIONS, wanted))


def matmul_tflops(torch: Any, device: Any, dtype_name: str, quick: bool = False) -> dict[str, Any]:
    n = MATMUL_N
    method = {"shape": [n, n, n], "warmup": MATMUL_WARMUP, "iterations": MATMUL_ITERATIONS,
              "timing": "CUDA events around the timed products", "flops_per_product": 2 * n**3}
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        if dtype_name == "fp8":
            if not hasattr(torch, "float8_e4m3fn") or torch.cuda.get_device_capability(device) < (8, 9):
                return {"skipped": "no fp8 on this GPU or torch"}
            a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
            scale = torch.tensor(1.0, device=device)
            product = lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
            method["api"] = "torch._scaled_mm e4m3 → bf16"
        else:
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
                     "fp32": torch.float32}[dtype_name]
            torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
            a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
            out = torch.empty(n, n, device=device, dtype=dtype)
            product = lambda: torch.mm(a, b, out=out)
            method["api"] = "torch.mm"
        product()  # the first product loads its kernel (lazy module loading): the rest of the warm-up paces --quick
        torch.cuda.synchronize(device)

        def warm_up() -> None:
            for _ in range(MATMUL_WARMUP - 1):
                product()
        warmup_s = _events_seconds(torch, warm_up)
        iterations = method["iterations"] = quick_iterations(warmup_s) if quick else MATMUL_ITERATIONS

        def timed() -> None:
            for _ in range(iterations):
                product()
        seconds = _events_seconds(torch, timed)
    except Exception as error:
        return {"skipped": f"{type(error).__name__}: {error}"}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return {"tflops": 2 * n**3 * iterations / seconds / 1e12, "seconds": seconds, "method": method}


def _device_copy(torch: Any, device: Any) -> dict[str, Any]:
    free, _total = torch.cuda.mem_get_info(device)
    size = min(DEVICE_COPY_BYTES, free // 4) // 2**20 * 2**20
    source = torch.empty(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    torch.cuda.synchronize(device)

    def timed() -> None:
        for _ in range(DEVICE_COPY_ITERATIONS):
            target.copy_(source)
    seconds = _events_seconds(torch, timed)
    moved = 2 * size * DEVICE_COPY_ITERATIONS  # each copy reads and writes the buffer
    return {"gb_per_s": moved / seconds / 1e9, "method": {"bytes": size, "iterations": DEVICE_COPY_ITERATIONS,
                                                          "counting": "read + write", "warmup": 1}}


def run_compute(ctx: RankContext) -> dict[str, Any]:
    import torch
    dtypes = ctx.options.dtypes or ("bf16", "fp16", "tf32", "fp32", "fp8")
    results: dict[str, Any] = {"matmul": {}}
    for index, dtype_name in enumerate(dtypes):
        ctx.step("compute", f"matmul {dtype_name}", step=index, total=len(dtypes))
        results["matmul"][dtype_name] = matmul_tflops(torch, ctx.device, dtype_name, quick=ctx.options.quick)
    ctx.step("compute", said("op.device_copy"))
    results["memory"] = _device_copy(torch, ctx.device)
    return results


def _local_cpus(bus_id: str | None) -> set[int] | None:
    """The CPUs of the GPU's NUMA node, from sysfs (None where unknown)."""
    if not bus_id:
        return None
    try:
        with open(f"/sys/bus/pci/devices/{bus_id}/local_cpulist") as handle:
            cpus = parse_cpu_list(handle.read()) & os.sched_getaffinity(0)
            return cpus or None
    except (OSError, ValueError):  # no such file, or a CPU list that does not parse
        return None


def _host_copy_bytes(ctx: RankContext) -> int:
    return QUICK_HOST_COPY_BYTES if ctx.options.quick else HOST_COPY_BYTES


def _pinned_copies(torch: Any, ctx: RankContext, local: set[int] | None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    size = _host_copy_bytes(ctx)
    device_buffer = torch.empty(size, dtype=torch.uint8, device=ctx.device)
    host_buffer = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    host_buffer.fill_(1)
    for direction in ("h2d", "d2h"):
        source, target = (host_buffer, device_buffer) if direction == "h2d" else (device_buffer, host_buffer)
        target.copy_(source, non_blocking=True)
        torch.cuda.synchronize(ctx.device)

        def timed() -> None:
            for _ in range(HOST_COPY_ITERATIONS):
                target.copy_(source, non_blocking=True)
        seconds = _events_seconds(torch, timed)
        results[f"{direction}_pinned"] = {
            "gb_per_s": size * HOST_COPY_ITERATIONS / seconds / 1e9,
            "method": {"bytes": size, "iterations": HOST_COPY_ITERATIONS, "pinned": True,
                       "numa_local_cpus": sorted(local) if local else None, "warmup": 1,
                       "timing": "CUDA events around back-to-back non_blocking copy_ into a preallocated tensor"}}
    del host_buffer, device_buffer
    return results


def _pageable_copies(torch: Any, ctx: RankContext) -> dict[str, Any]:
    """What a data loader without pin_memory sees: an ordinary (pageable) CPU tensor, allocated and written
    before timing, moved with `.to(device)` (the driver stages it through its own pinned buffers), host
    clock around each copy and its synchronize. The process's own CPU affinity, not pinned to the GPU's node."""
    import time
    results: dict[str, Any] = {}
    size = _host_copy_bytes(ctx)
    host_buffer = torch.empty(size, dtype=torch.uint8)
    host_buffer.fill_(1)  # every page written, so no first-touch faults inside the timed copies
    device_buffer = host_buffer.to(ctx.device)  # warm-up, also the D2H source
    torch.cuda.synchronize(ctx.device)
    times = []
    for _ in range(HOST_COPY_ITERATIONS):
        begin = time.perf_counter()
        moved = host_buffer.to(ctx.device)
        torch.cuda.synchronize(ctx.device)
        times.append(time.perf_counter() - begin)
        del moved
    samples = [size / seconds / 1e9 for seconds in times]
    results["h2d_pageable"] = {
        "gb_per_s": size * len(times) / sum(times) / 1e9,
        "method": {"bytes": size, "iterations": HOST_COPY_ITERATIONS, "pinned": False, "warmup": 1,
                   "samples_gb_per_s": [round(sample, 2) for sample in samples],
                   "timing": "host clock around tensor.to(device) + synchronize, one copy at a time",
                   "buffer": "torch.empty (pageable), written with fill_ before timing",
                   "cpu_affinity": "the process's own (not pinned to the GPU's NUMA node)"}}
    host_buffer.copy_(device_buffer)
    times = []
    for _ in range(HOST_COPY_ITERATIONS):
        begin = time.perf_counter()
        host_buffer.copy_(device_buffer)  # synchronous into pageable memory
        times.append(time.perf_counter() - begin)
    results["d2h_pageable"] = {
        "gb_per_s": size * len(times) / sum(times) / 1e9,
        "method": {"bytes": size, "iterations": HOST_COPY_ITERATIONS, "pinned": False, "warmup": 1,
                   "samples_gb_per_s": [round(size / seconds / 1e9, 2) for seconds in times],
                   "timing": "host clock around copy_ into a touched pageable tensor (synchronous)",
                   "cpu_affinity": "the process's own (not pinned to the GPU's NUMA node)"}}
    del host_buffer, device_buffer
    return results


def _host_copies(torch: Any, ctx: RankContext) -> dict[str, Any]:
    original = os.sched_getaffinity(0)
    local = _local_cpus(ctx.gpu_bus_id)
    if local:  # pinned pages land on the node of the CPU that first touches them
        os.sched_setaffinity(0, local)
    try:
        results = _pinned_copies(torch, ctx, local)
    finally:
        os.sched_setaffinity(0, original)
    results.update(_pageable_copies(torch, ctx))
    return results


def run_transfer(ctx: RankContext) -> dict[str, Any]:
    """One GPU at a time, as nvbandwidth does, so GPUs do not share the host's memory bandwidth."""
    import torch
    import torch.distributed as dist
    result: dict[str, Any] = {}
    for turn in range(ctx.world_size):
        ctx.step("transfer", said("op.host_copies", rank=turn), timeout_s=ctx.options.timeout_s * 2)
        if turn == ctx.rank:
            result = _host_copies(torch, ctx)
        dist.barrier()
    return result


def _pair_bandwidth(torch: Any, source: int, target: int, bidirectional: bool) -> dict[str, Any]:
    a = torch.empty(P2P_BYTES, dtype=torch.uint8, device=f"cuda:{source}")
    b = torch.empty(P2P_BYTES, dtype=torch.uint8, device=f"cuda:{target}")
    forward_stream = torch.cuda.Stream(device=source)
    backward_stream = torch.cuda.Stream(device=target)
    back_a = torch.empty_like(a) if bidirectional else None
    back_b = torch.empty_like(b) if bidirectional else None
    samples = []
    for sample in range(P2P_SAMPLES + 1):  # the first is warm-up
        torch.cuda.synchronize(source)
        torch.cuda.synchronize(target)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(source):
            start.record(forward_stream)
            with torch.cuda.stream(forward_stream):
                for _ in range(P2P_COPIES):
                    b.copy_(a, non_blocking=True)
            if bidirectional:
                with torch.cuda.stream(backward_stream):
                    for _ in range(P2P_COPIES):
                        back_a.copy_(back_b, non_blocking=True)
            end.record(forward_stream)
        end.synchronize()
        torch.cuda.synchronize(target)
        if sample:
            samples.append(P2P_BYTES * P2P_COPIES / (start.elapsed_time(end) / 1000.0) / 1e9)
    return {"gb_per_s": statistics.median(samples), "samples": samples,
            "method": {"bytes": P2P_BYTES, "copies_per_sample": P2P_COPIES, "samples": P2P_SAMPLES,
                       "statistic": "median", "engine": "copy engine (cudaMemcpyPeerAsync via Tensor.copy_)",
                       "bidirectional": "per direction, the other direction copying concurrently"
                       if bidirectional else None}}


def _pair_latency(torch: Any, source: int, target: int) -> dict[str, float]:
    latencies = {}
    for size in LATENCY_SIZES:
        a = torch.empty(size, dtype=torch.uint8, device=f"cuda:{source}")
        b = torch.empty(size, dtype=torch.uint8, device=f"cuda:{target}")
        b.copy_(a)
        torch.cuda.synchronize(source)

        def timed() -> None:
            for _ in range(LATENCY_COPIES):
                b.copy_(a, non_blocking=True)
        with torch.cuda.device(source):
            seconds = _events_seconds(torch, timed)
        latencies[str(size)] = seconds / LATENCY_COPIES * 1e6
    return latencies


def run_p2p(ctx: RankContext) -> dict[str, Any]:
    """Rank 0 measures every ordered pair while the other ranks wait (no competing traffic)."""
    import torch
    import torch.distributed as dist
    count = torch.cuda.device_count()
    pairs = [(i, j) for i in range(count) for j in range(count) if i != j]
    result: dict[str, Any] = {"gpus": count, "pairs": {}}
    ctx.step("p2p", said("op.p2p_pairs", pairs=len(pairs)),
             timeout_s=ctx.options.timeout_s + 10 * len(pairs))
    if ctx.rank == 0 and count > 1:
        for i, j in pairs:
            entry: dict[str, Any] = {"peer_access": bool(torch.cuda.can_device_access_peer(i, j))}
            try:
                entry["unidirectional"] = _pair_bandwidth(torch, i, j, bidirectional=False)
                entry["bidirectional"] = _pair_bandwidth(torch, i, j, bidirectional=True)
                entry["latency_us"] = _pair_latency(torch, i, j)
            except Exception as error:
                entry["error"] = f"{type(error).__name__}: {error}"
            result["pairs"][f"{i},{j}"] = entry
        result["latency_note"] = ("copy latency includes the launch of each copy (CUDA events around a batch of "
                                  f"{LATENCY_COPIES}); NCCL send/recv latency is the smallest sizes of collectives")
    elif count < 2:
        result["skipped"] = "fewer than two GPUs visible"
    dist.barrier()
    return result
