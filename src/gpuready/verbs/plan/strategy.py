"""Which parallel strategy to use on a machine: every layout's per-GPU memory, whether it fits, a step-time
estimate (compute and communication, assumed not to overlap), and the reasons for its rank.

Rules (each with its public source): a strategy that fits beats one
that does not; offload only when nothing else fits (Hugging Face transformers deepspeed.md: "If you have enough GPU
memory make sure you disable CPU/NVMe offload"); TP stays inside a node and its NVLink domain (transformers
perf_train_gpu_many.md: "TP is almost always used within a single node"); then the shorter estimated step, where
steps within 10 % of the fastest count as equal (NEAR_BEST) and the simpler layout wins among them (simplicity()): no
pipeline before a pipeline, then fewer GPUs per model copy (TP × PP; Narayanan et al. 2021, arXiv:2104.04473,
takeaways #1 and #2: tensor parallelism inside a server first, pipeline parallelism to scale beyond it, and a
model-parallel size just large enough to fit, data parallelism for the rest), then DDP, ZeRO-2 before ZeRO-1 ("same
communication, less memory": the Ultra-Scale Playbook, "ZeRO-2 is usually the better option"), FSDP, then less
memory per GPU. The chosen layout's reasons say so where the rule, not the step, decided.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from gpuready.i18n import said_json, sentence
from gpuready.shapes import ModelShape
from gpuready.estimate.machine import Machine
from gpuready.estimate.memory import (GIB, MemoryBreakdown, Strategy, TrainSetup, inference_memory, memory_per_gpu,
                                      stage_parameters, strategies_for)

SUSTAINED_MATMUL_EFFICIENCY = 0.80
"""Achievable share of the dense bf16 datasheet peak when no measured figure is given: 783–791 of 989 TFLOP/s
measured on one H200 (8192³ bf16 matmul; DESIGN.md §3). An assumption for other GPUs, and an upper bound for whole
training steps (attention, norms and launches run below matmul speed), so step times are optimistic."""
SELECTIVE_RECOMPUTE_OVERHEAD = 1.027
"""Korthikanti et al. 2022 (arXiv:2205.05198): selective recompute costs 2.7% more compute on GPT-3 175B."""
FULL_RECOMPUTE_OVERHEAD = 4.0 / 3.0
"""Full recompute repeats the forward: (1 + 1 + 2)/(1 + 2) of the forward+backward FLOPs (Korthikanti et al. §5)."""
GRADIENT_COMM_BYTES = 2
"""Gradients are reduced in 16 bits (DeepSpeed fp16/bf16, FSDP MixedPrecision(reduce_dtype=bf16)); an fp32 DDP
all-reduce would double the gradient volume."""
ASSUMED_INTER_NODE_BUSBW_GB_PER_S = 40.0
"""When the inter-node bandwidth is unknown: one 400 Gb/s NIC per GPU (the DGX H100 design) at ~80% — an
assumption, said so in the plan's reasons; give a measured figure to replace it."""
PREFERENCE = {"ddp": 0, "single": 0, "zero2": 1, "zero1": 2, "fsdp": 3}
NEAR_BEST = 1.10
"""Estimated steps within 10% of the best are treated as equal (the model is not finer than that): among them the
simpler layout wins (simplicity())."""


@dataclass(frozen=True, kw_only=True)
class PlanRow:
    strategy: Strategy
    memory: MemoryBreakdown
    fits: bool
    headroom_bytes: int
    step_time_s: float | None
    compute_s: float | None
    communication_s: float | None
    bottleneck: str
    """compute | communication | host transfer | memory (does not fit) | invalid (the model cannot be split so)."""
    reasons: tuple[str, ...]


def _achievable_tflops(machine: Machine) -> tuple[float | None, str]:
    measured = machine.measured.get("matmul_tflops_bf16") if machine.measured else None
    if isinstance(measured, (int, float)) and measured > 0:
        return float(measured), sentence("plan.reason.compute.measured", tflops=float(measured))
    peak = machine.peak_tflops.get("bf16")
    if peak:
        return peak * SUSTAINED_MATMUL_EFFICIENCY, sentence("plan.reason.compute.assumed",
                                                            efficiency=SUSTAINED_MATMUL_EFFICIENCY, peak=peak)
    return None, sentence("plan.reason.compute.unknown")


def _busbw(machine: Machine, spans_nodes: bool, notes: list[str]) -> float | None:
    if spans_nodes:
        if machine.inter_node_busbw_gb_per_s:
            return machine.inter_node_busbw_gb_per_s
        note = sentence("plan.reason.inter_node_assumed", busbw=ASSUMED_INTER_NODE_BUSBW_GB_PER_S)
        if note not in notes:
            notes.append(note)
        return ASSUMED_INTER_NODE_BUSBW_GB_PER_S
    measured = machine.measured.get("all_reduce_busbw_gb_per_s") if machine.measured else None
    if isinstance(measured, (int, float)) and measured > 0 and machine.nodes == 1:
        return float(measured)
    return machine.intra_node_busbw_gb_per_s


def _all_reduce_s(size_bytes: float, n: int, busbw_gb_per_s: float | None) -> float | None:
    """nccl-tests: busbw = algbw × 2(n−1)/n, algbw = S/t, so t = S × 2(n−1)/n / busbw."""
    if n <= 1:
        return 0.0
    if not busbw_gb_per_s:
        return None
    return size_bytes * 2 * (n - 1) / n / (busbw_gb_per_s * 1e9)


def _invalid(setup: TrainSetup, strategy: Strategy) -> str | None:
    shape = setup.shape
    if shape.heads % strategy.tp:
        return sentence("plan.reason.heads_split", heads=shape.heads, tp=strategy.tp)
    if strategy.pp > shape.layers:
        return sentence("plan.reason.pp_layers", pp=strategy.pp, layers=shape.layers)
    return None


def _memory_reason(memory_total: float, capacity: float | None) -> str:
    if capacity is None:
        return sentence("plan.reason.memory_unknown")
    if memory_total <= capacity:
        return sentence("plan.reason.fits", need_gib=memory_total / GIB, have_gib=capacity / GIB)
    return sentence("plan.reason.does_not_fit", need_gib=memory_total / GIB, have_gib=capacity / GIB)


def _layout_reasons(machine: Machine, strategy: Strategy, tp_spans_nodes: bool, pp_spans_nodes: bool,
                    reasons: list[str]) -> bool:
    """What the layout means on this machine (TP inside the NVLink domain or not, PP, ZeRO, offload), added to
    `reasons`; True where the layout is discouraged (TP across nodes)."""
    discouraged = False
    if strategy.tp > 1:
        if tp_spans_nodes:
            discouraged = True
            reasons.append(sentence("plan.reason.tp_spans_nodes", tp=strategy.tp, per_node=machine.gpus_per_node))
        elif strategy.tp <= machine.nvlink_domain:
            reasons.append(sentence("plan.reason.tp_nvlink", tp=strategy.tp, domain=machine.nvlink_domain))
        else:
            reasons.append(sentence("plan.reason.tp_pcie", tp=strategy.tp, domain=machine.nvlink_domain))
    if strategy.pp > 1:
        reasons.append(sentence("plan.reason.pp_nodes") if pp_spans_nodes
                       else sentence("plan.reason.pp_node", pp=strategy.pp))
    if strategy.zero == 2 and strategy.offload == "none":
        reasons.append(sentence("plan.reason.zero2"))
    if strategy.offload != "none":
        reasons.append(sentence("plan.reason.offload"))
    if strategy.zero == 3:
        reasons.append(sentence("plan.reason.zero3"))
    return discouraged


def _communication_s(setup: TrainSetup, machine: Machine, strategy: Strategy, micro_batches: int,
                     spans: tuple[bool, bool, bool], notes: list[str]) -> float | None:
    """Seconds of communication per step (no overlap with compute assumed): DP gradients, TP activations (Megatron:
    2 forward + 2 backward all-reduces per layer), PP sends; None where a bandwidth is unknown. `spans`: whether
    DP, TP and PP cross nodes."""
    shape = setup.shape
    dp_spans_nodes, tp_spans_nodes, pp_spans_nodes = spans
    comm: float | None = 0.0
    if strategy.dp > 1:
        grad_bytes = GRADIENT_COMM_BYTES * stage_parameters(shape, strategy.tp, strategy.pp)
        volume = grad_bytes * (1.5 if strategy.zero == 3 else 1.0)
        part = _all_reduce_s(volume, strategy.dp, _busbw(machine, dp_spans_nodes, notes))
        comm = None if part is None else comm + part
    if strategy.tp > 1 and comm is not None:
        act = 2 * setup.seq * setup.micro_batch * shape.hidden
        per_layer = 6 if setup.recompute == "full" else 4
        count = per_layer * math.ceil(shape.layers / strategy.pp) * micro_batches
        part = _all_reduce_s(act, strategy.tp, _busbw(machine, tp_spans_nodes, notes))
        comm = None if part is None else comm + count * part
    if strategy.pp > 1 and comm is not None:
        act = 2 * setup.seq * setup.micro_batch * shape.hidden / strategy.tp
        bw = _busbw(machine, pp_spans_nodes, notes)
        comm = None if not bw else comm + 2 * micro_batches * act / (bw * 1e9)
    return comm


def _host_transfer_s(setup: TrainSetup, machine: Machine, strategy: Strategy, micro_batches: int) -> float:
    """Seconds per step moving offloaded states over PCIe (16-bit grads out, weights in)."""
    if strategy.offload == "none":
        return 0.0
    host_bw = machine.measured.get("h2d_gb_per_s") if machine.measured else None
    host_bw = float(host_bw) if isinstance(host_bw, (int, float)) and host_bw > 0 else 25.0
    parameters = stage_parameters(setup.shape, strategy.tp, strategy.pp)
    moved = 2 * 2 * parameters / strategy.dp
    if strategy.offload == "optimizer+params":
        moved += 2 * 2 * parameters * micro_batches / strategy.dp
    return moved / (host_bw * 1e9)


def _row(setup: TrainSetup, machine: Machine, strategy: Strategy, global_batch: int) -> tuple[PlanRow, tuple]:
    shape = setup.shape
    memory = memory_per_gpu(setup, strategy)
    capacity = machine.memory_bytes_per_gpu
    notes: list[str] = []
    fits = capacity is not None and memory.total <= capacity
    headroom = (capacity - memory.total) if capacity is not None else 0
    reasons = [_memory_reason(memory.total, capacity)]
    invalid = _invalid(setup, strategy)
    gpn = machine.gpus_per_node
    tp_spans_nodes = strategy.tp > gpn
    dp_spans_nodes = machine.nodes > 1 and strategy.tp * strategy.dp > gpn and strategy.dp > 1
    pp_spans_nodes = machine.nodes > 1 and strategy.pp > 1 and strategy.tp * strategy.dp * strategy.pp > gpn
    discouraged = _layout_reasons(machine, strategy, tp_spans_nodes, pp_spans_nodes, reasons)
    # tokens and micro-batches per step: the same global batch for every layout
    per_replica = math.ceil(global_batch / strategy.dp)
    micro_batches = max(1, math.ceil(per_replica / setup.micro_batch))
    if per_replica % setup.micro_batch or global_batch % strategy.dp:
        notes.append(sentence("plan.reason.batch_rounded", batch=global_batch,
                              multiple=setup.micro_batch * strategy.dp))
    tokens = micro_batches * setup.micro_batch * strategy.dp * setup.seq
    tflops, compute_note = _achievable_tflops(machine)
    notes.append(compute_note)
    overhead = {"none": 1.0, "selective": SELECTIVE_RECOMPUTE_OVERHEAD, "full": FULL_RECOMPUTE_OVERHEAD}[setup.recompute]
    compute_s = None
    if tflops:
        flops = shape.training_flops_per_token(setup.seq) * tokens * overhead
        compute_s = flops / (strategy.gpus * tflops * 1e12)
    bubble = (strategy.pp - 1) / micro_batches if strategy.pp > 1 else 0.0
    if strategy.pp > 1:
        reasons.append(sentence("plan.reason.bubble", bubble=bubble, micro_batches=micro_batches))
    comm = _communication_s(setup, machine, strategy, micro_batches, (dp_spans_nodes, tp_spans_nodes, pp_spans_nodes),
                            notes)
    host_s = _host_transfer_s(setup, machine, strategy, micro_batches)
    step = compute_s * (1 + bubble) + comm + host_s if compute_s is not None and comm is not None else None
    if invalid:
        bottleneck = "invalid"
        reasons.insert(0, invalid)
    elif not fits:
        bottleneck = "memory"
    elif compute_s is None or comm is None:
        bottleneck = "unknown"
    else:
        parts = {"compute": compute_s * (1 + bubble), "communication": comm, "host transfer": host_s}
        bottleneck = max(parts, key=parts.get)
    reasons.extend(notes)
    reasons.append(sentence("plan.reason.no_overlap"))
    row = PlanRow(strategy=strategy, memory=memory, fits=fits and not invalid, headroom_bytes=headroom,
                  step_time_s=step, compute_s=compute_s, communication_s=comm, bottleneck=bottleneck,
                  reasons=tuple(dict.fromkeys(reasons)))
    key = (not row.fits, bool(invalid), discouraged, strategy.offload != "none",
           step if step is not None else math.inf, simplicity(strategy, memory.total))
    return row, key


def simplicity(strategy: Strategy, memory_total: int) -> tuple[bool, int, int, int]:
    """The tie rule as a sort key, simplest first: a pipeline or not, GPUs per model copy (TP × PP), the data-parallel
    kind (DDP, ZeRO-2, ZeRO-1, FSDP), bytes per GPU."""
    return (strategy.pp > 1, strategy.tp * strategy.pp, PREFERENCE.get(strategy.name.split("+")[0], len(PREFERENCE)),
            memory_total)


def plan_training(setup: TrainSetup, machine: Machine, global_batch: int | None = None,
                  strategies: list[Strategy] | None = None) -> list[PlanRow]:
    """Every strategy for this machine, best first. global_batch defaults to micro_batch × all GPUs (pure DP)."""
    gpus = machine.gpus
    if strategies is None:
        strategies = strategies_for(gpus, machine.nvlink_domain, machine.nodes)
    if global_batch is None:
        global_batch = setup.micro_batch * gpus
    if global_batch < 1:
        raise ValueError("--global-batch must be at least 1")
    rows = [_row(setup, machine, s, global_batch) for s in strategies]
    # steps within NEAR_BEST of the best one count as equal: the simpler layout wins among them (simplicity())
    best = min((key[4] for _, key in rows if not any(key[:4])), default=math.inf)

    def near(key: tuple) -> bool:
        return not any(key[:4]) and key[4] <= best * NEAR_BEST

    rows.sort(key=lambda pair: pair[1][:4] + ((0, pair[1][5], pair[1][4]) if near(pair[1]) else (1, *pair[1][4:])))
    ranked = [row for row, _ in rows]
    fastest = min((row for row, key in rows if near(key) and math.isfinite(key[4])), default=None,
                  key=lambda row: row.step_time_s)
    chosen = ranked[0] if ranked and near(rows[0][1]) else None
    if chosen is not None and fastest is not None and fastest.step_time_s < chosen.step_time_s:
        rule = sentence("plan.reason.tie_rule", faster=fastest.strategy.name, step=fastest.step_time_s,
                        percent=100 * (chosen.step_time_s / fastest.step_time_s - 1), band=100 * (NEAR_BEST - 1))
        ranked[0] = dataclasses.replace(chosen, reasons=(rule,) + chosen.reasons)
    return ranked


def plan_inference(shape: ModelShape, machine: Machine, batch: int, context: int, precision: str = "bf16") -> list[dict]:
    """Per TP degree (divisors of the heads up to all GPUs): per-GPU bytes and whether it fits; the smallest TP that
    fits first ("one GPU suffices" where TP=1 fits), then the larger ones, then those that do not fit."""
    out = []
    capacity = machine.memory_bytes_per_gpu
    for tp in range(1, machine.gpus + 1):
        if machine.gpus % tp or shape.heads % tp:
            continue
        row = inference_memory(shape, batch, context, tp, precision)
        fits = capacity is not None and row["total_bytes"] <= capacity
        row["fits"] = fits
        row["headroom_bytes"] = (capacity - row["total_bytes"]) if capacity is not None else None
        notes = []
        if tp == 1 and fits:
            notes.append(sentence("plan.infer.one_gpu"))
        if tp > machine.gpus_per_node:
            notes.append(sentence("plan.infer.tp_spans_nodes", tp=tp))
        elif tp > machine.nvlink_domain:
            notes.append(sentence("plan.infer.tp_pcie", tp=tp, domain=machine.nvlink_domain))
        row["notes"] = tuple(notes)
        row["notes_text"] = [said_json(note) for note in notes]  # the console says them in the reader's language
        out.append(row)
    smallest = min((r["tp"] for r in out if r["fits"]), default=None)
    for row in out:
        if row["tp"] == smallest:
            row["notes"] = (sentence("plan.infer.fewest"),) + row["notes"]
            row["notes_text"] = [said_json(note) for note in row["notes"]]
    out.sort(key=lambda r: (not r["fits"], r["tp"] > machine.gpus_per_node, r["tp"]))
    return out
