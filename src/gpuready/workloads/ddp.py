"""A minimal DDP training run, and an FSDP2 (`fully_shard`) step, checked for correctness (with --quick: the same
data-parallel run with its gradients averaged by hand, no DDP or FSDP2).

Every rank builds the same model (same seed) and trains on its own batch. After the first
backward pass the averaged gradients must equal a single-process reference computed from all
ranks' batches (within a tolerance for float32 reduction order); after a few steps every rank's
parameters must be bitwise identical; FSDP2's parameters after one step must match DDP's.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from gpuready.i18n import Sentence, said, said_json, sentence
from gpuready.workloads.context import RankContext

STEPS = 3
TIMED_STEPS = 6
"""Passes timed after the check, the first a warm-up: each rank's own step time, for the straggler rule (5 per rank
at least, as knowledge/thresholds.toml [straggler] asks of logs)."""
BATCH, WIDTH = 16, 256
LEARNING_RATE = 0.05
# Float32 sums in a different order differ by a few ulps of the largest term; gradients here are O(1e-2).
GRADIENT_RTOL, GRADIENT_ATOL = 1e-4, 1e-6


def _model(device: Any):
    import torch
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, WIDTH),
                               torch.nn.GELU(), torch.nn.Linear(WIDTH, 1)).to(device)


def _batch(rank: int, step: int, device: Any):
    import torch
    generator = torch.Generator().manual_seed(10_000 * step + rank)
    inputs = torch.randn(BATCH, WIDTH, generator=generator)
    targets = torch.randn(BATCH, 1, generator=generator)
    return inputs.to(device), targets.to(device)


def _loss(model: Any, inputs: Any, targets: Any):
    import torch
    return torch.nn.functional.mse_loss(model(inputs), targets)


def run_ddp(ctx: RankContext) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    if ctx.options.quick:
        # DDP's and torch.optim's constructors import torch._dynamo: 1-4 s, more than the rest of this test. --quick
        # averages the gradients with one all-reduce and steps SGD by hand instead: the arithmetic DDP and SGD do
        # here, the same NCCL and autograd path, checked the same way. The default run keeps DDP and FSDP2.
        ctx.step("ddp", said("op.ddp.build_by_hand"))
        module = model = _model(ctx.device)

        def finish_backward() -> None:
            _average_gradients(module, ctx.world_size)

        def optimizer_step() -> None:
            _sgd_step(module)
    else:
        from torch.nn.parallel import DistributedDataParallel
        ctx.step("ddp", said("op.ddp.build"))
        model = DistributedDataParallel(_model(ctx.device), device_ids=[ctx.device] if ctx.is_cuda else None)
        module = model.module
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)

        def finish_backward() -> None:
            """DDP averaged the gradients during backward."""

        def optimizer_step() -> None:
            optimizer.step()
            optimizer.zero_grad()

    ctx.step("ddp", said("op.ddp.first_step"), step=0, total=STEPS)
    inputs, targets = _batch(ctx.rank, 0, ctx.device)
    _loss(model, inputs, targets).backward()
    finish_backward()
    reference = _reference_gradients(ctx)
    worst = 0.0
    mismatched = []
    for (name, parameter), expected in zip(module.named_parameters(), reference):
        difference = (parameter.grad - expected).abs()
        allowed = GRADIENT_ATOL + GRADIENT_RTOL * expected.abs()
        worst = max(worst, float((difference / allowed).max()))
        if not bool((difference <= allowed).all()):
            mismatched.append(name)
    optimizer_step()
    after_first_step = [parameter.detach().clone() for parameter in module.parameters()]

    losses = []
    for step in range(1, STEPS):
        ctx.step("ddp", said("op.ddp.step"), step=step, total=STEPS)
        inputs, targets = _batch(ctx.rank, step, ctx.device)
        loss = _loss(model, inputs, targets)
        loss.backward()
        finish_backward()
        optimizer_step()
        losses.append(float(loss.detach()))

    ctx.step("ddp", said("op.ddp.compare"))
    flat = torch.cat([parameter.detach().reshape(-1) for parameter in module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, flat)
    differing_ranks = [rank for rank, other in enumerate(gathered) if not torch.equal(other, gathered[0])]
    step_times = _timed_steps(ctx, model)

    result: dict[str, Any] = {
        "method": "by_hand" if ctx.options.quick else "ddp",
        "steps": STEPS, "world_size": ctx.world_size, "losses": losses,
        "step_times_s": step_times, "warmup_steps": 1,
        "step_timing": "time.perf_counter from a barrier around this rank's forward and backward pass after the "
                       "check, without the gradient all-reduce (DDP no_sync), CUDA synchronised",
        "gradient_worst_ratio": worst, "gradient_mismatched": mismatched,
        "gradient_tolerance": {"rtol": GRADIENT_RTOL, "atol": GRADIENT_ATOL},
        "parameters_identical": not differing_ranks, "ranks_differing_from_rank0": differing_ranks,
    }
    result["fsdp"] = _skip(sentence("workloads.fsdp2.quick")) if ctx.options.quick else \
        _fsdp_step(ctx, after_first_step)
    return result


def _timed_steps(ctx: RankContext, model: Any) -> list[float]:
    """TIMED_STEPS forward and backward passes on this rank alone, each timed from a barrier: without the gradient
    all-reduce (DDP's `no_sync`), where every rank would wait for the slowest and all times would look alike. The
    first is a warm-up the judge leaves out."""
    import torch
    import torch.distributed as dist
    no_sync = getattr(model, "no_sync", contextlib.nullcontext)
    times = []
    for step in range(STEPS, STEPS + TIMED_STEPS):
        ctx.step("ddp", said("op.ddp.step"), step=step, total=STEPS + TIMED_STEPS)
        inputs, targets = _batch(ctx.rank, step, ctx.device)
        dist.barrier()
        started = time.perf_counter()
        with no_sync():
            _loss(model, inputs, targets).backward()
        if ctx.is_cuda:
            torch.cuda.synchronize(ctx.device)
        times.append(time.perf_counter() - started)
    return times


def _average_gradients(model: Any, world_size: int) -> None:
    """What DDP's reducer does, in one all-reduce: every rank's gradients summed, then divided by the ranks."""
    import torch
    import torch.distributed as dist
    gradients = [parameter.grad for parameter in model.parameters()]
    flat = torch.cat([gradient.reshape(-1) for gradient in gradients])
    dist.all_reduce(flat)
    flat.div_(world_size)
    offset = 0
    for gradient in gradients:
        gradient.copy_(flat[offset:offset + gradient.numel()].view_as(gradient))
        offset += gradient.numel()


def _sgd_step(model: Any) -> None:
    """torch.optim.SGD's step without momentum or weight decay (param -= lr × grad), and zero_grad's None."""
    import torch
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(parameter.grad, alpha=-LEARNING_RATE)
            parameter.grad = None


def _skip(reason: Sentence) -> dict[str, Any]:
    """FSDP2 not run here: its reason in English, and by catalogue id for the report in the reader's language."""
    return {"status": "skip", "reason": str(reason), "reason_text": said_json(reason)}


def _reference_gradients(ctx: RankContext) -> list[Any]:
    """One process's view: the same model on every rank's batch, loss averaged as DDP averages gradients."""
    model = _model(ctx.device)
    total = None
    for rank in range(ctx.world_size):
        inputs, targets = _batch(rank, 0, ctx.device)
        loss = _loss(model, inputs, targets) / ctx.world_size
        total = loss if total is None else total + loss
    total.backward()
    return [parameter.grad.detach() for parameter in model.parameters()]


def _fsdp_step(ctx: RankContext, ddp_after_first_step: list[Any]) -> dict[str, Any]:
    """One FSDP2 step from the same start and data must land where DDP's first step did."""
    import torch
    if ctx.backend == "gloo" and ctx.is_cuda:  # seen: the process segfaults (torch 2.11, H200)
        return _skip(sentence("workloads.fsdp2.gloo_cuda"))
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import fully_shard  # torch 2.4, 2.5
        except ImportError as error:
            return _skip(sentence("workloads.fsdp2.missing", error=str(error)))
    ctx.step("ddp", said("op.fsdp2_step"))
    model = _model(ctx.device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    inputs, targets = _batch(ctx.rank, 0, ctx.device)
    _loss(model, inputs, targets).backward()
    optimizer.step()
    worst = 0.0
    for parameter, expected in zip(model.parameters(), ddp_after_first_step):
        full = parameter.full_tensor() if hasattr(parameter, "full_tensor") else parameter
        worst = max(worst, float((full.detach() - expected).abs().max()))
    # FSDP reduce-scatters where DDP all-reduces: a different summation order, float32 rounding only.
    tolerance = 1e-5
    return {"status": "pass" if worst <= tolerance else "fail", "max_abs_difference": worst, "tolerance": tolerance}
