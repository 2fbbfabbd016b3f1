"""Collective bandwidth over a size sweep, measured as nccl-tests measures it.

Per size: warm-up, a barrier, a batch of back-to-back operations timed on the host clock up to
a device synchronisation, time = elapsed / count, averaged over ranks; out-of-place and in-place
where torch offers both; then a data check on exactly predictable integers, outside the timing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

from gpuready.busbw import algbw_gb_per_s, busbw_factor, element_count, size_sweep
from gpuready.i18n import said
from gpuready.progress import Figure
from gpuready.runner.nccl_debug import read_own_lines
from gpuready.workloads.context import RankContext

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
ELEMENT_BYTES = 4  # float32, nccl-tests' default type


@dataclass
class Row:
    collective: str
    size_bytes: int
    count: int
    placement: str
    """`out_of_place` or `in_place`."""
    time_us: float
    algbw_gb_per_s: float
    busbw_gb_per_s: float
    wrong: int
    iterations: int
    warmup: int


@dataclass
class Variant:
    run: Callable[[], None]
    fill: Callable[[], None]
    output: Callable[[], "object"]
    expected: Callable[[], "object"]


def message_sizes(*, is_cuda: bool, quick: bool, max_bytes: int | None = None, min_bytes: int = 8) -> list[int]:
    """The message sizes of the sweep: up to 1 GiB on GPUs, 64 MiB on CPUs (256 MiB / 4 MiB with --quick),
    doubling (×8 with --quick). The planner's time estimate uses the same list."""
    if max_bytes is None:
        if is_cuda:
            max_bytes = 256 * 2**20 if quick else 2**30
        else:
            max_bytes = 4 * 2**20 if quick else 64 * 2**20
    return size_sweep(min_bytes, max_bytes, 8 if quick else 2)


def default_sizes(ctx: RankContext) -> list[int]:
    return message_sizes(is_cuda=ctx.is_cuda, quick=ctx.options.quick, max_bytes=ctx.options.max_bytes,
                         min_bytes=ctx.options.min_bytes)


def _iterations(size_bytes: int, is_cuda: bool, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) ops: enough for a stable mean, few where one op moves hundreds of MB."""
    if quick:
        return (2, 5) if size_bytes >= 64 * 2**20 else (3, 10)
    if size_bytes >= 256 * 2**20:
        return (2, 10)
    return (5, 20) if is_cuda else (3, 10)


def run_collectives(ctx: RankContext, names: tuple[str, ...] = COLLECTIVES) -> tuple[list[Row], list[str]]:
    import torch.distributed as dist

    rows: list[Row] = []
    unsupported: set[str] = set()
    for name in names:
        if name == "send_recv" and ctx.world_size < 2:
            continue
        if name == "send_recv" and ctx.backend == "gloo" and ctx.is_cuda:
            # gloo's point-to-point ops take host tensors: with CUDA tensors the process aborts (seen: writev EFAULT).
            unsupported.add("send_recv (gloo with CUDA tensors)")
            continue
        for size_bytes in default_sizes(ctx):
            count = element_count(name, size_bytes, ctx.world_size, ELEMENT_BYTES)
            for placement in ("out_of_place", "in_place"):
                variant = _variant(ctx, name, count, placement)
                if variant is None or f"{name} {placement}" in unsupported:
                    continue
                ctx.step("collectives", said("op.collective", collective=name, placement=placement),
                         figures=[Figure(value=size_bytes, unit="bytes")])
                if not _supported(variant, ctx):
                    unsupported.add(f"{name} {placement}")
                    continue
                warmup, iterations = _iterations(size_bytes, ctx.is_cuda, ctx.options.quick)
                seconds = _timed(ctx, variant.run, warmup, iterations)
                variant.fill()
                variant.run()
                _synchronize(ctx)
                wrong = int((variant.output() != variant.expected()).sum().item())
                total_wrong = _sum_over_ranks(ctx, float(wrong))
                effective_bytes = count * ELEMENT_BYTES
                algbw = algbw_gb_per_s(effective_bytes, seconds)
                rows.append(Row(collective=name, size_bytes=effective_bytes, count=count, placement=placement,
                                time_us=seconds * 1e6, algbw_gb_per_s=algbw,
                                busbw_gb_per_s=algbw * busbw_factor(name, ctx.world_size),
                                wrong=int(total_wrong), iterations=iterations, warmup=warmup))
    dist.barrier()
    return rows, sorted(unsupported)


def _supported(variant: Variant, ctx: RankContext) -> bool:
    """The backend refuses some operations (gloo with CUDA tensors); every rank is refused alike."""
    try:
        variant.run()
        _synchronize(ctx)
        return True
    except RuntimeError as error:
        if re.search(r"not supported|unsupported|not implemented", str(error), re.IGNORECASE):
            return False
        raise


def run_collectives_as_dict(ctx: RankContext) -> dict:
    import os
    from dataclasses import asdict
    rows, unsupported = run_collectives(ctx)
    return {"rows": [asdict(row) for row in rows], "unsupported": unsupported, "element_bytes": ELEMENT_BYTES, "dtype": "float32",
            "world_size": ctx.world_size, "backend": ctx.backend,
            "nvls": os.environ.get("NCCL_NVLS_ENABLE", "default (NCCL decides)"),
            "algorithm": os.environ.get("NCCL_ALGO", "default (NCCL decides)"),
            # across nodes: NCCL's own INFO lines for these communicators (the transport it used), read back bounded
            **({"nccl_lines": read_own_lines(os.environ)} if ctx.backend == "nccl"
               and ctx.world_size > ctx.local_world_size else {})}


def _synchronize(ctx: RankContext) -> None:
    if ctx.is_cuda:
        import torch
        torch.cuda.synchronize(ctx.device)


def _sum_over_ranks(ctx: RankContext, value: float) -> float:
    import torch
    import torch.distributed as dist
    tensor = torch.tensor([value], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(tensor)
    return float(tensor.item())


def _timed(ctx: RankContext, run: Callable[[], None], warmup: int, iterations: int) -> float:
    import torch.distributed as dist
    for _ in range(warmup):
        run()
    _synchronize(ctx)
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iterations):
        run()
    _synchronize(ctx)
    elapsed = (time.perf_counter() - started) / iterations
    return _sum_over_ranks(ctx, elapsed) / ctx.world_size


def _variant(ctx: RankContext, name: str, count: int, placement: str) -> Variant | None:
    """Buffers, the operation, and the exact result it must produce (small integers in float32)."""
    import torch
    import torch.distributed as dist

    n, r, device = ctx.world_size, ctx.rank, ctx.device
    chunk = count // n

    def full(size: int, value: float):
        return torch.full((size,), float(value), dtype=torch.float32, device=device)

    if name == "all_reduce":
        if placement == "out_of_place":
            return None  # torch's all_reduce is in-place only
        buffer = full(count, r + 1)
        return Variant(run=lambda: dist.all_reduce(buffer), fill=lambda: buffer.fill_(r + 1),
                       output=lambda: buffer, expected=lambda: full(count, n * (n + 1) / 2))
    if name == "broadcast":
        if placement == "out_of_place":
            return None
        buffer = full(count, r + 1)
        return Variant(run=lambda: dist.broadcast(buffer, src=0), fill=lambda: buffer.fill_(r + 1),
                       output=lambda: buffer, expected=lambda: full(count, 1))
    if name == "all_gather":
        output = full(chunk * n, 0)
        source = output.narrow(0, r * chunk, chunk) if placement == "in_place" else full(chunk, r + 1)
        gathered = torch.arange(1, n + 1, dtype=torch.float32, device=device).repeat_interleave(chunk)
        return Variant(run=lambda: dist.all_gather_into_tensor(output, source), fill=lambda: source.fill_(r + 1),
                       output=lambda: output, expected=lambda: gathered)
    if name == "reduce_scatter":
        source = full(chunk * n, r + 1)
        output = source.narrow(0, r * chunk, chunk) if placement == "in_place" else full(chunk, 0)
        return Variant(run=lambda: dist.reduce_scatter_tensor(output, source), fill=lambda: source.fill_(r + 1),
                       output=lambda: output, expected=lambda: full(chunk, n * (n + 1) / 2))
    if name == "all_to_all":
        if placement == "in_place":
            return None
        pattern = (r * n + torch.arange(n, dtype=torch.float32, device=device)).repeat_interleave(chunk)
        source, output = pattern.clone(), full(chunk * n, 0)
        received = (torch.arange(n, dtype=torch.float32, device=device) * n + r).repeat_interleave(chunk)
        return Variant(run=lambda: dist.all_to_all_single(output, source), fill=lambda: source.copy_(pattern),
                       output=lambda: output, expected=lambda: received)
    if name == "send_recv":
        if placement == "in_place":
            return None
        source, output = full(count, r + 1), full(count, 0)
        peer_to, peer_from = (r + 1) % n, (r - 1) % n

        def exchange() -> None:
            operations = [dist.P2POp(dist.isend, source, peer_to), dist.P2POp(dist.irecv, output, peer_from)]
            for request in dist.batch_isend_irecv(operations):
                request.wait()
        return Variant(run=exchange, fill=lambda: source.fill_(r + 1), output=lambda: output,
                       expected=lambda: full(count, peer_from + 1))
    raise ValueError(f"unknown collective {name!r}")
