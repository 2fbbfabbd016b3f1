"""Full load on one GPU with silent-error detection, as gpu-burn does, plus a memory pattern test.

Every product is compared with a reference computed once on the same GPU from the same inputs;
inputs are seeded identically on every GPU, so GPUs of one model must also agree on the reference
checksum (compared by the parent, without any collective: a lost GPU blocks nobody).
"""

from __future__ import annotations

import time
from typing import Any

from gpuready.i18n import said
from gpuready.progress import PUBLISH_EVERY_S, Figure
from gpuready.workloads.context import RankContext

# Relative to the largest |reference| element: recomputing on the same GPU is normally bitwise equal;
# the tolerance only absorbs a cuBLAS algorithm change, never a flipped bit in the high bits.
TOLERANCE = {"bf16": 1e-2, "fp16": 1e-3, "tf32": 1e-3, "fp32": 1e-5, "fp64": 1e-12}
CHECK_EVERY = 20
SELF_TEST_ITERATION = 3 * CHECK_EVERY
MEMORY_FREE_SHARE = 0.15
"""Of the memory free at start, the share the pattern buffer takes. Buffer, index, pattern and a 1-byte mask
live at once (3.25x the buffer): about half of what is free, leaving the rest for another process's growth
(on an H200 with 130 GiB held by another process, 0.25 and temporaries of `index * 3 + 1` ran out of memory)."""
MEMORY_CAP_BYTES = 8 * 2**30


def _dtype(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32,
            "fp64": torch.float64}[name]


def _memory_pattern(torch: Any, ctx: RankContext) -> dict[str, Any]:
    """Write two patterns over a large buffer and read them back (outside the GEMM window)."""
    free = total = None
    if ctx.is_cuda:
        free, total = torch.cuda.mem_get_info(ctx.device)
        count = int(min(free * MEMORY_FREE_SHARE, MEMORY_CAP_BYTES) // 4)
    else:
        count = 64 * 2**20 // 4
    started = time.time()
    buffer = torch.empty(count, dtype=torch.int32, device=ctx.device)
    index = torch.arange(count, dtype=torch.int32, device=ctx.device)
    pattern = torch.empty_like(buffer)  # patterns are written into it in place: no temporaries beyond the mask
    wrong = 0
    for name in ("3*i+1", "~i"):
        if name == "3*i+1":
            torch.mul(index, 3, out=pattern).add_(1)
        else:
            torch.bitwise_not(index, out=pattern)
        buffer.copy_(pattern)
        wrong += int(torch.ne(buffer, pattern).sum().item())
    del buffer, index, pattern
    if ctx.is_cuda:
        torch.cuda.empty_cache()
    return {"bytes": count * 4, "wrong_words": wrong, "seconds": round(time.time() - started, 3),
            "patterns": ["3*i+1", "~i"], "free_bytes_at_start": free, "total_bytes": total,
            "sizing": (f"{MEMORY_FREE_SHARE:.0%} of the memory free at start, "
                       f"at most {MEMORY_CAP_BYTES / 2**30:.0f} GiB" if ctx.is_cuda else "64 MiB on CPU")}


def _gemm_size(torch: Any, ctx: RankContext) -> int:
    if not ctx.is_cuda:
        return 512
    _, total = torch.cuda.mem_get_info(ctx.device)
    return 8192 if total >= 20 * 2**30 else 4096


def run_burn(ctx: RankContext) -> dict[str, Any]:
    import torch

    burn = ctx.options.burn
    dtype_name = burn["dtype"]
    ctx.step("burn", said("op.burn.memory"))
    result: dict[str, Any] = {"memory": _memory_pattern(torch, ctx), "dtype": dtype_name}

    n = _gemm_size(torch, ctx)
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    generator = torch.Generator().manual_seed(2024)
    dtype = _dtype(torch, dtype_name)
    a = torch.randn(n, n, generator=generator).to(ctx.device, dtype)
    b = torch.randn(n, n, generator=generator).to(ctx.device, dtype)
    reference = torch.mm(a, b)
    product = torch.empty_like(reference)
    scale = float(reference.abs().max())
    allowed = TOLERANCE[dtype_name] * scale
    result.update(n=n, flops_per_gemm=2 * n**3, tolerance_abs=allowed,
                  reference_checksum=float(reference.double().sum()))

    def synchronize() -> None:
        if ctx.is_cuda:
            torch.cuda.synchronize(ctx.device)

    synchronize()
    errors: list[dict[str, Any]] = []
    intervals: list[tuple[float, float]] = []
    iterations = 0
    window_start = time.time()
    deadline = window_start + burn["duration_s"]
    last_publish = window_start
    interval_start, interval_iterations = window_start, 0
    while time.time() < deadline:
        for _ in range(CHECK_EVERY):
            torch.mm(a, b, out=product)
        iterations += CHECK_EVERY
        interval_iterations += CHECK_EVERY
        if burn.get("self_test") and iterations == SELF_TEST_ITERATION:
            product[0, 0] += 4 * allowed + 1  # the deliberate fault the detector must catch
        difference = (product - reference).abs()
        bad = int((difference > allowed).sum().item())  # .item() synchronises: the interval ends here
        now = time.time()
        if bad:
            errors.append({"iteration": iterations, "elements": bad, "max_abs_error": float(difference.max()),
                           "t": now})
        if now - interval_start >= 1.0:
            intervals.append((now, 2 * n**3 * interval_iterations / (now - interval_start) / 1e12))
            interval_start, interval_iterations = now, 0
        if now - last_publish >= PUBLISH_EVERY_S:
            last_publish = now
            tflops = intervals[-1][1] if intervals else 0.0
            ctx.step("burn", said("op.burn.gemms"), errors=len(errors),
                     figures=[Figure(value=iterations, unit="gemms"), Figure(value=tflops, unit="tflops")])
            ctx.publish({**result, "iterations": iterations, "errors": errors, "window_start": window_start,
                         "window_end": now, "intervals": intervals,  # kept if the run is stopped (a signal, a hang)
                         "tflops": 2 * n**3 * iterations / (now - window_start) / 1e12})
    synchronize()
    window_end = time.time()
    result.update(iterations=iterations, errors=errors, window_start=window_start, window_end=window_end,
                  intervals=intervals, tflops=2 * n**3 * iterations / (window_end - window_start) / 1e12)
    return result
