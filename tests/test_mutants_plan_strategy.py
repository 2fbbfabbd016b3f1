"""Tests that kill the mutants of verbs/plan/strategy.py that survived the suite (issue 23, mutation testing; the run
and its module → test-file table are in benchmarks/mutation_score.sh).

Every step time is worked out by hand in the test's docstring (Kaplan et al. 2020's 6 FLOP per weight per token,
nccl-tests' t = S × 2(n−1)/n / busbw, the ranking rules of strategy.py's module docstring), never recomputed with
plan's own formulas. GPT-2 small (Hugging Face gpt2): Ψ = 124,439,808 parameters, 12 blocks of 7,087,872, a token
table of 50,257 × 768 = 38,597,376, 1,024 positions × 768 = 786,432.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuready.shapes import PRESETS
from gpuready.estimate.machine import Machine
from gpuready.estimate.memory import Strategy, TrainSetup, inference_memory, memory_per_gpu
from gpuready.verbs.plan.strategy import PlanRow, plan_inference, plan_training

GPT2_BF16 = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1, precision="bf16")
"""Tokens per step = global batch × 1,024. FLOP per token (Kaplan): 6 × (12 × 7,087,872 + 38,597,376) + 12 × 12 ×
1,024 × 768 = 741,911,040 + 113,246,208 = 855,157,248; a global batch of 8: 7,005,448,175,616 FLOP."""

COMPUTE_8 = 0.00109460127744
"""A global batch of 8 over 8 GPUs at 0.80 × 1,000 TFLOP/s: 7,005,448,175,616 / 6.4e15 s = 1.09460127744 ms."""

DDP_ALL_REDUCE = 0.00435539328
"""DDP's 16-bit gradients 2Ψ = 248,879,616 B over 8 ranks: × 2·7/8 = 435,539,328 B / 100e9 B/s = 4.35539328 ms."""


def _machine(**changes) -> Machine:
    """A described machine with round figures: 8 GPUs of 80 GB on one NVSwitch, 1,000 TFLOP/s dense bf16, an
    all_reduce busbw of 100 GB/s inside the node."""
    values = dict(gpu_name="round", gpus_per_node=8, memory_bytes_per_gpu=80 * 10**9, nvlink_domain=8,
                  peak_tflops={"bf16": 1000.0}, intra_node_busbw_gb_per_s=100.0)
    return Machine(**{**values, **changes})


def _one(machine: Machine, strategy: Strategy, setup: TrainSetup = GPT2_BF16, global_batch: int = 8) -> PlanRow:
    return plan_training(setup, machine, global_batch, [strategy])[0]


def _ranked(machine: Machine, strategies: list[Strategy], global_batch: int = 8,
            setup: TrainSetup = GPT2_BF16) -> list[str]:
    return [row.strategy.name for row in plan_training(setup, machine, global_batch, strategies)]


def _ids(texts) -> list[str]:
    return [text.said.msg_id for text in texts]


DDP = Strategy(name="ddp", dp=8)
ZERO1 = Strategy(name="zero1", dp=8, zero=1)
ZERO2 = Strategy(name="zero2", dp=8, zero=2)
FSDP = Strategy(name="fsdp", dp=8, zero=3)
ZERO2_OFFLOAD = Strategy(name="zero2+offload", dp=8, zero=2, offload="optimizer")
FSDP_OFFLOAD_OPTIMIZER = Strategy(name="fsdp+offload-optimizer", dp=8, zero=3, offload="optimizer")
FSDP_OFFLOAD = Strategy(name="fsdp+offload", dp=8, zero=3, offload="optimizer+params")
TP2_DP4 = Strategy(name="tp=2×dp=4", dp=4, tp=2, zero=1)
TP4_DP2 = Strategy(name="tp=4×dp=2", dp=2, tp=4, zero=1)
PP8 = Strategy(name="pp=8", dp=1, pp=8)
PP2_DP4 = Strategy(name="pp=2×dp=4", dp=4, pp=2, zero=1)
PP4_DP2 = Strategy(name="pp=4×dp=2", dp=2, pp=4, zero=1)


# ----------------------------------------------------------------------------------- the ranking rules

def test_without_a_step_time_the_simpler_layout_wins_in_the_documented_order():
    """No bf16 peak: no step time, every layout ties on it, and the module's rule orders the ones that fit without
    offload: no pipeline before a pipeline, then fewer GPUs per model copy (TP × PP: Narayanan et al. 2021's
    model-parallel size just large enough, data parallelism for the rest), then DDP, ZeRO-2, ZeRO-1, FSDP (issue 32:
    the PP grid of 2 GPUs per copy now comes before pure PP over 8). Offload comes last, ZeRO-2's before FSDP's; of FSDP's two offloads (the same
    layout) the one that leaves more memory free first: offloading the parameters too keeps only the gathered layer
    on the GPU, so fsdp+offload before fsdp+offload-optimizer. The input order is scrambled on purpose."""
    machine = _machine(peak_tflops={})
    layouts = [FSDP_OFFLOAD_OPTIMIZER, PP2_DP4, TP4_DP2, FSDP, PP8, ZERO1, FSDP_OFFLOAD, TP2_DP4, ZERO2_OFFLOAD,
               ZERO2, DDP]
    rows = plan_training(GPT2_BF16, machine, 8, layouts)
    assert [row.strategy.name for row in rows] == [
        "ddp", "zero2", "zero1", "fsdp", "tp=2×dp=4", "tp=4×dp=2", "pp=2×dp=4", "pp=8",
        "zero2+offload", "fsdp+offload", "fsdp+offload-optimizer"]
    assert all(row.fits and row.step_time_s is None and row.bottleneck == "unknown" for row in rows)


def test_one_gpu_without_sharding_comes_before_zero2():
    """One GPU: "single" is plain training, the simplest layout; ZeRO-2 over one rank shards nothing and takes the
    same step (no communication, the same compute), so the simpler one wins, whatever the input order."""
    one = _machine(gpus_per_node=1, nvlink_domain=1)
    single = Strategy(name="single", dp=1)
    zero2 = Strategy(name="zero2", dp=1, zero=2)
    rows = plan_training(GPT2_BF16, one, 8, [zero2, single])
    assert [row.strategy.name for row in rows] == ["single", "zero2"]
    assert rows[0].step_time_s == rows[1].step_time_s
    assert rows[0].communication_s == 0.0


def test_ddp_before_zero2_at_the_same_step():
    """DDP and ZeRO-2 all-reduce the same gradients (4.35539328 ms) and compute the same 1.09460127744 ms: the same
    step of 5.44999455744 ms; DDP is the simpler layout and ranks first though ZeRO-2 leaves more memory free."""
    rows = plan_training(GPT2_BF16, _machine(), 8, [ZERO2, DDP])
    assert [row.strategy.name for row in rows] == ["ddp", "zero2"]
    for row in rows:
        assert row.step_time_s == pytest.approx(COMPUTE_8 + DDP_ALL_REDUCE, rel=1e-12)
    assert rows[1].headroom_bytes > rows[0].headroom_bytes


def test_fsdp_before_a_faster_tp_grid_within_ten_percent():
    """Global batch 24 on the round machine: 3 × 1.09460127744 = 3.28380383232 ms of compute for every layout.
      FSDP: 1.5 × DDP's volume, 6.53308992 ms: step 9.81689375232 ms.
      TP 2 × DP 4: gradients of half the model, 124,439,808 B × 2·3/4 / 100e9 = 1.86659712 ms; 6 micro-batches a
        replica × 4 all-reduces × 12 layers = 288 of 2·s·b·h = 1,572,864 B × 2·1/2 / 100e9 = 15.72864 µs:
        4.52984832 ms; communication 6.39644544 ms, step 9.68024927232 ms, the best.
    9.8169 / 9.6802 = 1.014: within 10 %, so the simpler FSDP ranks first though 0.14 ms slower."""
    rows = plan_training(GPT2_BF16, _machine(), 24, [TP2_DP4, FSDP])
    assert [row.strategy.name for row in rows] == ["fsdp", "tp=2×dp=4"]
    assert rows[0].step_time_s == pytest.approx(0.00981689375232, rel=1e-12)
    assert rows[1].step_time_s == pytest.approx(0.00968024927232, rel=1e-12)
    assert rows[1].communication_s == pytest.approx(0.00639644544, rel=1e-12)


def test_two_pp_grids_within_ten_percent_go_by_gpus_per_model_copy():
    """Global batch 40: compute 5 × 1.09460127744 = 5.4730063872 ms.
      PP 2 × DP 4: 10 micro-batches a replica, bubble 1/10: 6.02030702592 ms; the first stage's 6 blocks +
        38,597,376 + 786,432 = 81,911,040 parameters, 163,822,080 B × 2·3/4 / 100e9 = 2.4573312 ms, and 2 × 10 ×
        1,572,864 B / 100e9 = 0.3145728 ms: step 8.79221102592 ms.
      PP 4 × DP 2: 20 micro-batches, bubble 3/20: 6.29395734528 ms; the first stage's 3 blocks (21,263,616) +
        39,383,808 = 60,647,424 parameters, 121,294,848 B × 2·1/2 / 100e9 = 1.21294848 ms, and 2 × 20 × 1,572,864
        / 100e9 = 0.6291456 ms: step 8.13605142528 ms, the best.
    8.7922 / 8.1361 = 1.081: both near the best and both PP grids: the one with fewer GPUs per model copy (2, not 4)
    wins though 8.1 % slower (issue 32's tie rule), and its first reason says so."""
    rows = plan_training(GPT2_BF16, _machine(), 40, [PP4_DP2, PP2_DP4])
    assert [row.strategy.name for row in rows] == ["pp=2×dp=4", "pp=4×dp=2"]
    assert rows[1].step_time_s == pytest.approx(0.00813605142528, rel=1e-12)
    assert rows[0].step_time_s == pytest.approx(0.00879221102592, rel=1e-12)
    assert rows[0].reasons[0] == ("pp=4×dp=2 is 8.1 % faster (0.00814 s), but within 10 % the simpler wins: no PP, "
                                  "fewer GPUs per model copy (TP×PP), less memory")


def test_beyond_ten_percent_the_faster_layout_wins_over_the_simpler():
    """The round machine, global batch 8 (steps of test_mutants_plan: PP 2 × DP 4 4.16214767616 ms the best, TP 2 ×
    DP 4 4.47114783744 ms within 10 %, DDP 5.44999455744 ms, FSDP 7.62769119744 ms). TP 4 × DP 2: gradients
    62,219,904 B × 2·1/2 / 100e9 = 0.62219904 ms, 4 micro-batches × 4 × 12 = 192 all-reduces of 1,572,864 B ×
    2·3/4 / 100e9 = 23.59296 µs = 4.52984832 ms: step 1.09460127744 + 5.15204736 = 6.24664863744 ms. Beyond
    4.58 ms the steps decide: DDP, TP 4 × DP 2, then FSDP (simpler, but 1.4 ms slower)."""
    rows = plan_training(GPT2_BF16, _machine(), 8, [FSDP, ZERO2_OFFLOAD, TP4_DP2, DDP, PP2_DP4, TP2_DP4])
    assert [row.strategy.name for row in rows] == ["tp=2×dp=4", "pp=2×dp=4", "ddp", "tp=4×dp=2", "fsdp",
                                                   "zero2+offload"]
    assert rows[3].step_time_s == pytest.approx(0.00624664863744, rel=1e-12)


def test_tp_across_nodes_ranks_after_ddp_though_faster():
    """2 nodes of 2 GPUs, GPT-2 small at s = 128, global batch 4 (512 tokens). FLOP per token 6 × 123,651,840 +
    12 × 12 × 128 × 768 = 741,911,040 + 14,155,776 = 756,066,816; × 512 / (4 × 800e12) = 0.12097069056 ms.
      DDP over 4 crosses nodes at the assumed 40 GB/s: 248,879,616 B × 2·3/4 / 40e9 = 9.3329856 ms; step
        9.45395629056 ms.
      TP 4 spans nodes: 4 micro-batches × 4 × 12 = 192 all-reduces of 2·128·768 = 196,608 B × 2·3/4 / 40e9 =
        7.3728 µs: 1.4155776 ms; step 1.53654829056 ms, six times faster.
    The rule "TP stays inside a node" ranks it after DDP all the same."""
    two = _machine(gpus_per_node=2, nodes=2, nvlink_domain=2)
    setup = TrainSetup(shape=PRESETS["gpt2-small"], seq=128, micro_batch=1, precision="bf16")
    tp4 = Strategy(name="tp=4", dp=1, tp=4)
    rows = plan_training(setup, two, 4, [tp4, Strategy(name="ddp", dp=4)])
    assert [row.strategy.name for row in rows] == ["ddp", "tp=4"]
    assert rows[0].step_time_s == pytest.approx(0.00945395629056, rel=1e-12)
    assert rows[1].step_time_s == pytest.approx(0.00153654829056, rel=1e-12)
    assert "TP=4 spans nodes (2 GPUs per node): its all-reduces cross the network on every layer" in rows[1].reasons


def test_a_global_batch_below_one_is_refused():
    with pytest.raises(ValueError) as refused:
        plan_training(GPT2_BF16, _machine(), 0, [DDP])
    assert str(refused.value) == "--global-batch must be at least 1"


# ----------------------------------------------------------------------------------- measured figures

def test_a_measured_matmul_of_zero_falls_back_to_the_peak_and_a_small_one_counts():
    """A measured 0 TFLOP/s is no measurement: the assumed 80 % of the peak stays (1.09460127744 ms). A measured
    0.5 TFLOP/s is one (a slow GPU): 7,005,448,175,616 / (8 × 0.5e12) = 1.751362043904 s."""
    zero = _one(_machine(measured={"matmul_tflops_bf16": 0}), DDP)
    assert zero.compute_s == pytest.approx(COMPUTE_8, rel=1e-12)
    assert _ids(zero.reasons)[1] == "plan.reason.compute.assumed"
    slow = _one(_machine(measured={"matmul_tflops_bf16": 0.5}), DDP)
    assert slow.compute_s == pytest.approx(1.751362043904, rel=1e-12)
    assert slow.reasons[1] == "compute at the measured 0.5 TFLOP/s bf16 matmul"


def test_a_measured_busbw_of_zero_falls_back_to_the_expected_one_and_a_small_one_counts():
    """A measured all_reduce busbw of 0 is no measurement: the expected 100 GB/s stays (4.35539328 ms). 0.5 GB/s is
    one: 435,539,328 B / 0.5e9 = 0.871078656 s."""
    zero = _one(_machine(measured={"all_reduce_busbw_gb_per_s": 0}), DDP)
    assert zero.communication_s == pytest.approx(DDP_ALL_REDUCE, rel=1e-12)
    slow = _one(_machine(measured={"all_reduce_busbw_gb_per_s": 0.5}), DDP)
    assert slow.communication_s == pytest.approx(0.871078656, rel=1e-12)


def test_a_measured_host_to_device_bandwidth_replaces_the_assumed_25_gb_per_s():
    """ZeRO-2 with the optimizer offloaded moves 16-bit gradients out and weights in: 2 × 2Ψ/8 = 62,219,904 B a step.
      measured 50 GB/s: 1.24439808 ms, step 1.09460127744 + 4.35539328 + 1.24439808 = 6.69439263744 ms;
      measured 0.5 GB/s: 124.439808 ms, step 129.88980255744 ms, the host transfer the bottleneck;
      measured 0 (no measurement): PCIe's assumed 25 GB/s, 2.48879616 ms, step 7.93879071744 ms."""
    fast = _one(_machine(measured={"h2d_gb_per_s": 50.0}), ZERO2_OFFLOAD)
    assert fast.step_time_s == pytest.approx(0.00669439263744, rel=1e-12)
    slow = _one(_machine(measured={"h2d_gb_per_s": 0.5}), ZERO2_OFFLOAD)
    assert slow.step_time_s == pytest.approx(0.12988980255744, rel=1e-12)
    assert slow.bottleneck == "host transfer"
    none = _one(_machine(measured={"h2d_gb_per_s": 0}), ZERO2_OFFLOAD)
    assert none.step_time_s == pytest.approx(0.00793879071744, rel=1e-12)


def test_offloading_the_parameters_too_moves_the_weights_for_every_micro_batch():
    """FSDP with optimizer and parameters offloaded, global batch 16 (2 micro-batches a replica): gradients out and
    weights in once, 2 × 2Ψ/8 = 62,219,904 B, plus the 16-bit weights for each micro-batch, 2 × 2Ψ × 2/8 =
    124,439,808 B: 186,659,712 B at 25 GB/s = 7.46638848 ms. Compute 2.18920255488 ms, FSDP's all-gathers and
    reduce-scatter 1.5 × 4.35539328 = 6.53308992 ms: step 16.18868095488 ms, the host transfer the largest part."""
    row = _one(_machine(), FSDP_OFFLOAD, global_batch=16)
    assert row.step_time_s == pytest.approx(0.01618868095488, rel=1e-12)
    assert row.bottleneck == "host transfer"


# ----------------------------------------------------------------------------------- across nodes, bottlenecks

def test_dp_of_two_across_nodes_uses_the_inter_node_busbw():
    """2 nodes of 4, TP 4 × DP 2: each TP group fills a node, so the 2 data-parallel replicas talk across nodes at
    the assumed 40 GB/s (said): a quarter of the gradients, 62,219,904 B × 2·1/2 / 40e9 = 1.5554976 ms. TP inside the
    node at 100 GB/s: 192 all-reduces × 1,572,864 B × 2·3/4 / 100e9 = 4.52984832 ms. 6.08534592 ms in all."""
    row = _one(_machine(gpus_per_node=4, nodes=2, nvlink_domain=4), TP4_DP2)
    assert row.communication_s == pytest.approx(0.00608534592, rel=1e-12)
    assert "plan.reason.inter_node_assumed" in _ids(row.reasons)


def test_a_pipeline_bubble_can_make_compute_the_bottleneck():
    """PP 2 × DP 4, global batch 16: 4 micro-batches a replica, bubble 1/4; compute 2.18920255488 ms × 1.25 =
    2.7365031936 ms against communication 2.4573312 + 2 × 4 × 1,572,864 / 100e9 = 2.58316032 ms: compute, with
    the bubble, is the larger part; step 5.3196635136 ms."""
    row = _one(_machine(), PP2_DP4, global_batch=16)
    assert row.communication_s == pytest.approx(0.00258316032, rel=1e-12)
    assert row.step_time_s == pytest.approx(0.0053196635136, rel=1e-12)
    assert row.bottleneck == "compute"


def test_a_layout_that_needs_exactly_the_gpus_memory_fits_with_no_headroom():
    """The boundary: a GPU whose memory equals what DDP needs holds it (<=), with 0 bytes to spare."""
    need = memory_per_gpu(GPT2_BF16, DDP).total
    row = _one(_machine(memory_bytes_per_gpu=need), DDP)
    assert (row.fits, row.headroom_bytes, row.bottleneck) == (True, 0, "communication")
    assert _ids(row.reasons)[0] == "plan.reason.fits"


def test_plan_rows_are_frozen_and_keyword_only():
    """DESIGN §5 (torchtitan's style): keyword-only dataclasses; a plan's row is a value the console only reads."""
    row = _one(_machine(), DDP)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.fits = False
    with pytest.raises(TypeError):
        PlanRow(row.strategy, row.memory, True, 0, None, None, None, "unknown", ())


# ----------------------------------------------------------------------------------- inference

GPT2_INFERENCE_BYTES = 1_020_631_552
"""GPT-2 small in bf16 at batch 1, context 1,024, TP 1: weights 2 × 124,439,808 = 248,879,616; KV cache 2 × 12 layers
× 12 heads × 64 × 1,024 × 1 × 2 B = 37,748,736; CUDA context 700 MiB = 734,003,200: 1,020,631,552 B."""


def test_inference_tp_degrees_divide_both_the_gpus_and_the_heads():
    """GPT-2 small's 12 heads on 8 GPUs: TP 1, 2 and 4 divide both; 3 and 6 divide the heads only, 8 the GPUs only.
    TP 1 fits (1.02 GB of 80), the fewest GPUs: 80e9 − 1,020,631,552 = 78,979,368,448 B to spare. TP 2 and 4 fit
    too and say nothing: inside the NVSwitch, inside the node."""
    rows = plan_inference(PRESETS["gpt2-small"], _machine(), batch=1, context=1024)
    assert [row["tp"] for row in rows] == [1, 2, 4]
    assert rows[0]["total_bytes"] == GPT2_INFERENCE_BYTES
    assert rows[0]["headroom_bytes"] == 78_979_368_448
    assert rows[0]["notes"] == ("the fewest GPUs that fit", "one GPU suffices")
    assert [row["notes"] for row in rows[1:]] == [(), ()]
    assert [row["notes_text"] for row in rows[1:]] == [[], []]


def test_inference_on_exactly_enough_memory_fits_on_one_gpu():
    """The boundary: a GPU of exactly 1,020,631,552 B holds GPT-2 small at TP 1 with 0 bytes to spare."""
    rows = plan_inference(PRESETS["gpt2-small"], _machine(memory_bytes_per_gpu=GPT2_INFERENCE_BYTES), 1, 1024)
    assert (rows[0]["tp"], rows[0]["fits"], rows[0]["headroom_bytes"]) == (1, True, 0)
    assert rows[0]["notes"] == ("the fewest GPUs that fit", "one GPU suffices")


def test_inference_with_the_memory_unknown_says_no_headroom():
    rows = plan_inference(PRESETS["gpt2-small"], _machine(memory_bytes_per_gpu=None), 1, 1024)
    assert [(row["tp"], row["fits"], row["headroom_bytes"], row["notes"]) for row in rows] == [
        (1, False, None, ()), (2, False, None, ()), (4, False, None, ())]


def test_inference_notes_on_the_nvlink_domain_and_across_nodes():
    """Llama-2 7B (32 heads) on 2 nodes of 4 GPUs of 80 GB, NVLink pairs (a domain of 2): TP 1 fits and is the
    fewest; TP 2 stays inside the domain (no note); TP 4 goes over PCIe; TP 8 spans the nodes. When one GPU does not
    fit (1 GB GPUs), TP 1 is not "one GPU suffices"."""
    machine = _machine(gpus_per_node=4, nodes=2, nvlink_domain=2)
    rows = {row["tp"]: row for row in plan_inference(PRESETS["llama2-7b"], machine, batch=1, context=4096)}
    assert rows[1]["notes"] == ("the fewest GPUs that fit", "one GPU suffices")
    assert rows[2]["notes"] == () and rows[2]["notes_text"] == []
    assert rows[4]["notes"] == ("TP=4 beyond the NVLink domain of 2: all-reduces over PCIe",)
    assert rows[4]["notes_text"] == [{"message_id": "plan.infer.tp_pcie", "message_values": {"tp": 4, "domain": 2}}]
    assert rows[8]["notes"] == ("TP=8 spans nodes: every layer's all-reduce crosses the network",)
    assert rows[8]["notes_text"] == [{"message_id": "plan.infer.tp_spans_nodes", "message_values": {"tp": 8}}]
    tiny = {row["tp"]: row for row in plan_inference(PRESETS["llama2-7b"], _machine(memory_bytes_per_gpu=10**9),
                                                      batch=1, context=4096)}
    assert tiny[1]["fits"] is False and tiny[1]["notes"] == ()


def test_inference_tp_over_all_gpus_of_one_nvswitch_node_has_no_note():
    """Llama-2 7B on 8 GPUs of one node, all on one NVSwitch: TP 8 neither spans nodes nor leaves NVLink."""
    rows = {row["tp"]: row for row in plan_inference(PRESETS["llama2-7b"], _machine(), batch=1, context=4096)}
    assert rows[8]["notes"] == ()
    assert rows[8]["fits"] is True
