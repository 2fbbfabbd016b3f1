"""A training benchmark inside one rank: the GPT of workloads/gpt.py on synthetic tokens, under one strategy.

Strategies: "single" (no communication; each rank trains alone), "ddp" (DistributedDataParallel),
"fsdp2" (`fully_shard` with reshard_after_forward=True, ZeRO-3-like), "fsdp2-noreshard" (reshard_after_forward=False,
ZeRO-2-like: parameters stay gathered between forward and backward). Every block is sharded, then the root.

Precision: "amp-bf16" (fp32 parameters, optimizer state and gradients; forward under `torch.autocast(bfloat16)`,
on CPU too), "bf16" (the model cast to bfloat16: parameters, gradients and AdamW state in bf16), "fp32".

Each optimizer step (accumulation micro-steps, then AdamW) is timed with `time.perf_counter`, between
`torch.cuda.synchronize` calls on CUDA; the measured window is the steps after warm-up. Peak memory: on CUDA the
allocator's peak since just before the first step (so the optimizer state's creation counts); on CPU the process's
peak resident set size (`ru_maxrss`, the whole process's life, torch included).

An impossible configuration (FSDP2 missing from this torch, FSDP2 over gloo with CUDA tensors) returns
`{"skipped": why}` on every rank before any collective, so the ranks go on to the next run; the verb reports a skip.

Under torchrun one process group runs every strategy in turn (`train.<strategy>` workloads, `group_run`): the 1-GPU
run is rank 0's alone, while the other ranks wait for it on the store (not in a collective, whose timeout is one
operation's).
"""

from __future__ import annotations

import platform
import resource
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from gpuready.i18n import said, said_json, sentence
from gpuready.shapes import ModelShape, with_sequence
from gpuready.workloads.context import RankContext, runtime_versions
from gpuready.workloads.gpu_bench import matmul_tflops

STRATEGIES = ("single", "ddp", "fsdp2", "fsdp2-noreshard")
PRECISIONS = ("amp-bf16", "bf16", "fp32")
LEARNING_RATE = 1e-4
PUBLISH_EVERY = 5


class TrainUnsupported(RuntimeError):
    """This configuration cannot run here (the verb turns it into a skip, not a failure)."""


@dataclass(kw_only=True)
class TrainSettings:
    shape: dict = field(default_factory=dict)
    """ModelShape fields (family, layers, hidden, heads, vocab, kv_heads, ffn_hidden, max_positions, name)."""
    strategy: str = "single"
    precision: str = "amp-bf16"
    recompute: str = "none"
    attention: str = "flash"
    logits: str = "fp32"
    """The loss's logits: fp32 (upcast) or bf16 (kept in the model's 16-bit dtype); workloads/gpt.py LOGITS."""
    seq: int = 128
    micro_batch: int = 2
    accumulation: int = 1
    warmup_steps: int = 5
    steps: int = 20
    compile: bool = False
    seed: int = 1234

    @classmethod
    def from_options(cls, options: dict) -> "TrainSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown training settings: {', '.join(unknown)}")
        settings = cls(**options)
        settings.check()
        return settings

    def check(self) -> None:
        from gpuready.workloads.gpt import ATTENTIONS, LOGITS, RECOMPUTES  # gpt imports torch when loaded
        for label, value, allowed in (("strategy", self.strategy, STRATEGIES),
                                      ("precision", self.precision, PRECISIONS),
                                      ("recompute", self.recompute, RECOMPUTES),
                                      ("attention", self.attention, ATTENTIONS),
                                      ("logits", self.logits, LOGITS)):
            if value not in allowed:
                raise ValueError(f"training {label} {value!r}: one of {', '.join(allowed)}")
        for label, value in (("seq", self.seq), ("micro_batch", self.micro_batch),
                             ("accumulation", self.accumulation), ("steps", self.steps)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"training {label} must be a positive whole number, not {value!r}")
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"training warmup_steps must be 0 or more, not {self.warmup_steps!r}")
        if not self.shape:
            raise ValueError("training needs a model shape")


def flops_per_token(shape: Any, seq: int, recompute: str) -> tuple[float, str]:
    """Training FLOPs per token and the formula said in words."""
    base = shape.training_flops_per_token(seq)
    formula = "6 × matmul weights + 12 × layers × seq × hidden (forward + backward)"
    if recompute == "full":
        return base * 4.0 / 3.0, formula + " × 4/3 (full recompute: one more forward)"
    if recompute == "selective":
        extra = 4.0 * shape.layers * seq * shape.hidden
        return base + extra, formula + " + 4 × layers × seq × hidden (selective recompute: attention core forward)"
    return base, formula


def _fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
        return fully_shard
    except ImportError:
        pass
    try:
        from torch.distributed._composable.fsdp import fully_shard  # torch 2.4, 2.5
        return fully_shard
    except ImportError as error:
        raise TrainUnsupported(sentence("workloads.fsdp2.missing.train", error=str(error))) from None


def _device_name(ctx: RankContext) -> str:
    import torch
    if ctx.is_cuda:
        return ctx.gpu_name or torch.cuda.get_device_name(ctx.device)
    return platform.processor() or platform.machine() or "cpu"


def _rss_bytes() -> int:
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024  # Linux: KiB


def _build(ctx: RankContext, settings: TrainSettings, shape: Any) -> tuple[Any, Any, Any]:
    """(model to call, module that owns no_sync/set_requires_gradient_sync, module whose parameters are summed)."""
    import torch
    from gpuready.workloads.gpt import build_model  # imports torch when loaded

    torch.manual_seed(settings.seed)  # identical initial weights on every rank (FSDP2 shards what each rank holds)
    with torch.device(ctx.device):
        model = build_model(shape, attention=settings.attention, recompute=settings.recompute, logits=settings.logits)
    if settings.precision == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    strategy = settings.strategy
    if strategy == "single":
        wrapped = model
    elif strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        wrapped = DistributedDataParallel(model, device_ids=[ctx.device] if ctx.is_cuda else None)
    else:
        if ctx.is_cuda and ctx.backend == "gloo":  # seen: the process segfaults (torch 2.11, H200)
            raise TrainUnsupported(sentence("workloads.fsdp2.gloo_cuda"))
        fully_shard = _fully_shard()
        reshard = strategy == "fsdp2"
        try:
            for block in model.blocks:
                fully_shard(block, reshard_after_forward=reshard)
            fully_shard(model, reshard_after_forward=reshard)
        except (NotImplementedError, RuntimeError) as error:
            raise TrainUnsupported(sentence("workloads.fsdp2.cannot_shard", backend=ctx.backend, device=ctx.device.type,
                                             error=str(error))) from error
        wrapped = model
    runnable = torch.compile(wrapped) if settings.compile else wrapped
    return runnable, wrapped, model


def _param_checksum(ctx: RankContext, model: Any, strategy: str) -> float:
    """Sum of every parameter of the full model in float64 (FSDP2: local shards summed, then all-reduced)."""
    import torch
    total = torch.zeros((), dtype=torch.float64, device=ctx.device)
    for parameter in model.parameters():
        local = parameter.to_local() if hasattr(parameter, "to_local") else parameter
        total += local.detach().to(torch.float64).sum()
    if strategy.startswith("fsdp2"):
        import torch.distributed as dist
        dist.all_reduce(total)
    return float(total)


SINGLE_DONE_KEY = "gpuready/train/single_done"


def group_run(strategy: str) -> Callable[[RankContext], dict[str, Any]]:
    """The workload `train.<strategy>` of a torchrun group: that strategy's settings from `train_runs`; "single" is
    rank 0's alone (the others wait on the store, announcing how long they may wait)."""
    def run(ctx: RankContext) -> dict[str, Any]:
        options = dict(ctx.options.train_runs[strategy])
        if strategy != "single" or ctx.world_size == 1:
            return run_train(ctx, options)
        if ctx.rank == 0:
            result = run_train(ctx, options)
            ctx.store.set(SINGLE_DONE_KEY, "1")
            return result
        steps = int(options.get("warmup_steps", 0)) + int(options.get("steps", 1))
        wait_s = ctx.options.timeout_s * (steps + 2)  # rank 0's build, its steps, its checksum
        ctx.step("train", said("op.train.waiting"), timeout_s=wait_s)
        _wait_for_key(ctx.store, SINGLE_DONE_KEY, wait_s)
        return {"waited_for": 0, "strategy": "single", "world_size": 1}
    return run


WAIT_POLL_S = 0.5


def _wait_for_key(store: Any, key: str, timeout_s: float) -> None:
    """`store.wait` in short checks: a TCPStore client serves one call at a time, so a blocking wait would starve
    this rank's heartbeat (the same client) and the watchdog would call the rank silent after 20 s."""
    deadline = time.monotonic() + timeout_s
    while not store.check([key]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f} s for {key} on the store")
        time.sleep(WAIT_POLL_S)


def run_train(ctx: RankContext, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One run of `options` (default: the rank's `train` settings); {"skipped": why} where it cannot run here."""
    settings = TrainSettings.from_options(dict(ctx.options.train if options is None else options))
    try:
        return _train(ctx, settings)
    except TrainUnsupported as error:  # raised while building, on every rank alike, before any collective
        text = said_json(error)  # by catalogue id, where the reason has one
        return {"skipped": str(error), **({"skipped_text": text} if isinstance(text, dict) else {}),
                "strategy": settings.strategy, "device_type": ctx.device.type,
                "world_size": 1 if settings.strategy == "single" else ctx.world_size}


def _train(ctx: RankContext, settings: TrainSettings) -> dict[str, Any]:
    import torch  # the rank's own torch: loaded by the worker before any workload runs

    strategy = settings.strategy
    shape = with_sequence(ModelShape(**settings.shape), settings.seq)
    result = _run_description(ctx, settings, shape, runtime_versions(torch))
    ctx.step("train", said("op.train.build", strategy=strategy), stage="build")
    runnable, wrapped, model = _build(ctx, settings, shape)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE,
                                  **({"fused": True} if ctx.is_cuda else {"foreach": True}))
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    _train_steps(ctx, settings, shape, result, runnable, wrapped, optimizer)
    if ctx.is_cuda:
        result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(ctx.device)
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(ctx.device)
    else:
        result["peak_rss_bytes"] = _rss_bytes()
    ctx.step("train", said("op.train.checksum", strategy=strategy), stage="check")
    result["param_checksum"] = _param_checksum(ctx, model, strategy)
    if ctx.is_cuda and strategy == "single":  # the GPU's own bf16 matmul rate, for MFU against what it can do
        ctx.step("train", said("op.train.matmul_rate"), stage="check")
        result["matmul_bf16"] = matmul_tflops(torch, ctx.device, "bf16")
    return result


def _run_description(ctx: RankContext, settings: TrainSettings, shape: ModelShape,
                     versions: dict[str, str]) -> dict[str, Any]:
    """The run's result before its first step: its settings, the model and the method; the figures come later."""
    world_size = 1 if settings.strategy == "single" else ctx.world_size
    flops, formula = flops_per_token(shape, settings.seq, settings.recompute)
    return {
        "strategy": settings.strategy, "world_size": world_size, "precision": settings.precision,
        "recompute": settings.recompute, "attention": settings.attention, "logits": settings.logits, "compile": settings.compile,
        "seq": settings.seq, "micro_batch": settings.micro_batch, "accumulation": settings.accumulation,
        "tokens_per_step": settings.micro_batch * settings.seq * settings.accumulation * world_size,
        "parameters": shape.parameters(), "flops_per_token": flops, "flops_formula": formula,
        "shape": {"name": shape.name, "family": shape.family, "layers": shape.layers, "hidden": shape.hidden,
                  "heads": shape.heads, "kv_heads": shape.key_value_heads, "vocab": shape.vocab,
                  "ffn_hidden": shape.mlp_hidden, "max_positions": shape.max_positions},
        "step_times_s": [], "warmup_steps": settings.warmup_steps, "steps": settings.steps,
        "window_start": None, "window_end": None,
        "peak_allocated_bytes": None, "peak_reserved_bytes": None, "peak_rss_bytes": None,
        "peak_memory_method": ("torch.cuda.max_memory_allocated/reserved since just before the first step"
                               if ctx.is_cuda else "ru_maxrss: the process's peak resident set size (CPU run)"),
        "loss_first": None, "loss_last": None, "loss_scope": "this rank's micro-batches, mean",
        "device_name": _device_name(ctx), "device_type": ctx.device.type, "versions": versions,
        "device_index": ctx.device.index if ctx.is_cuda else None, "gpu_bus_id": ctx.gpu_bus_id,
        "timing": "time.perf_counter around each optimizer step (forward, backward, communication, AdamW)"
                  + (", between torch.cuda.synchronize calls" if ctx.is_cuda else ""),
    }


def _train_steps(ctx: RankContext, settings: TrainSettings, shape: ModelShape, result: dict[str, Any],
                 runnable: Any, wrapped: Any, optimizer: Any) -> None:
    """Warm-up, then the measured steps: each optimizer step timed into `result` (published every few steps)."""
    import torch  # the rank's own torch, as in _train

    strategy = settings.strategy
    autocast = (lambda: torch.autocast(device_type=ctx.device.type, dtype=torch.bfloat16)) \
        if settings.precision == "amp-bf16" else nullcontext
    generator = torch.Generator(device=ctx.device).manual_seed(settings.seed + 1_000_003 * (ctx.rank + 1))

    def sync_context(final: bool):
        if strategy == "ddp" and not final:
            return wrapped.no_sync()
        if strategy.startswith("fsdp2"):
            wrapped.set_requires_gradient_sync(final)
        return nullcontext()

    def synchronize() -> None:
        if ctx.is_cuda:
            torch.cuda.synchronize(ctx.device)

    total = settings.warmup_steps + settings.steps
    last_loss = None
    synchronize()
    for index in range(total):
        warm_up = index < settings.warmup_steps
        ctx.step("train", said("op.train.step.warm_up" if warm_up else "op.train.step", strategy=strategy),
                 step=index, total=total, warm_up=warm_up)
        if index == settings.warmup_steps:
            result["window_start"] = time.time()
        started = time.perf_counter()
        step_loss = None
        for micro in range(settings.accumulation):
            tokens = torch.randint(0, shape.vocab, (settings.micro_batch, settings.seq), device=ctx.device,
                                   generator=generator)
            with sync_context(micro == settings.accumulation - 1):
                with autocast():
                    loss = runnable(tokens, torch.roll(tokens, shifts=-1, dims=1))
                (loss / settings.accumulation).backward()
            step_loss = loss.detach() if step_loss is None else step_loss + loss.detach()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize()
        elapsed = time.perf_counter() - started
        last_loss = step_loss / settings.accumulation
        if index == 0:
            result["loss_first"] = float(last_loss)
        if not warm_up:
            result["step_times_s"].append(elapsed)
            result["window_end"] = time.time()
        if index + 1 < total and (index + 1 == settings.warmup_steps or (index + 1) % PUBLISH_EVERY == 0):
            result["loss_last"] = float(last_loss)
            ctx.publish({**result, "step_times_s": list(result["step_times_s"])})
    result["loss_last"] = float(last_loss)
