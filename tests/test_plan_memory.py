"""plan's memory model against published figures (literals with their source; none recomputed with our formulas)."""

import pytest

from gpuready.shapes import PRESETS
from gpuready.estimate.memory import (Strategy, TrainSetup, deepspeed_model_states, inference_memory,
                                        korthikanti_layer_bytes, memory_per_gpu, strategies_for)

GIB = 2**30


def _states(model, strategy, **kw):
    setup = TrainSetup(shape=PRESETS[model], seq=1024, micro_batch=1, **kw)
    return memory_per_gpu(setup, strategy).model_states


@pytest.mark.parametrize("model,params", [
    ("gpt2-small", 124_439_808),   # Hugging Face gpt2: 124,439,808 parameters
    ("gpt2-xl", 1_557_611_200),    # Hugging Face gpt2-xl: 1,557,611,200 parameters
    ("llama2-7b", 6_738_415_616),  # Hugging Face meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters
])
def test_ddp_is_16_bytes_per_parameter(model, params):
    # ZeRO paper (arXiv:1910.02054) §3.1: mixed-precision Adam holds 2 + 2 + 12 = 16 bytes per parameter
    assert _states(model, Strategy(name="ddp", dp=8)) == 16 * params


def test_zero3_equals_deepspeed_published_estimator_t5_3b():
    # DeepSpeed docs/code-docs/source/memory.rst: estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6,
    # largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1): per GPU 6.09GB / 0.78GB / 0.12GB
    def gib(offload):
        return round(deepspeed_model_states(2851e6, 32e6, stage=3, gpus_per_node=8, offload=offload) / GIB, 2)
    assert gib("none") == 6.09
    assert gib("optimizer") == 0.78
    assert gib("optimizer+params") == 0.12
    # ZeRO-2 with the optimizer offloaded: 5.31GB (same page, cpu_offload=1)
    assert round(deepspeed_model_states(2851e6, 0, stage=2, gpus_per_node=8, offload="optimizer") / GIB, 2) == 5.31


def test_zero3_equals_deepspeed_published_t5_large_example():
    # memory.rst: t5-large, 737.67M params, 32.90M largest layer, 4 GPUs: case1 3291MB, case2 125MB, case3 477MB
    assert deepspeed_model_states(737.67e6, 32_899_072, stage=3, gpus_per_node=4) >> 20 == 3291
    assert deepspeed_model_states(737.67e6, 32_899_072, stage=3, gpus_per_node=4, offload="optimizer+params") >> 20 == 125
    assert deepspeed_model_states(737.67e6, 32_899_072, stage=3, gpus_per_node=4, offload="optimizer") >> 20 == 477


@pytest.mark.parametrize("model", ["gpt2-small", "gpt2-xl", "llama2-7b"])
def test_memory_per_gpu_model_states_equal_deepspeed(model):
    shape = PRESETS[model]
    largest = {"gpt2-small": 50257 * 768, "gpt2-xl": 50257 * 1600, "llama2-7b": 32000 * 4096}[model]  # the embedding
    total = shape.parameters()
    for stage, name in ((2, "zero2"), (3, "fsdp")):
        for offload in ("none", "optimizer") + (("optimizer+params",) if stage == 3 else ()):
            strategy = Strategy(name=name, dp=8, zero=stage, offload=offload)
            assert _states(model, strategy) == deepspeed_model_states(total, largest, stage=stage, gpus_per_node=8,
                                                                      offload=offload)


def test_korthikanti_gpt3_selective_recompute_saves_70_percent():
    # Korthikanti et al. 2022 §4.2 / Ultra-Scale Playbook: GPT-3 175B (a=96, s=2048, h=12288): selective
    # recomputation gives "70% activation memory reduction"
    full = korthikanti_layer_bytes(2048, 1, 12288, 96)
    selective = korthikanti_layer_bytes(2048, 1, 12288, 96, recompute="selective")
    assert round(1 - selective / full, 2) == 0.70
    # full recompute keeps only the layer input 2sbh; TP+SP divides by t (Korthikanti Table 2)
    assert korthikanti_layer_bytes(2048, 1, 12288, 96, recompute="full") == 2 * 2048 * 12288
    assert korthikanti_layer_bytes(2048, 1, 12288, 96, tp=8) == full / 8
    # the no-parallelism form sbh(34 + 5as/h): 5·96·2048/12288 = 80
    assert full == 2048 * 12288 * (34 + 80)


def test_activations_of_gpt2_small_by_hand_eager_flash_and_full_recompute():
    """GPT-2 small (HF gpt2 config: L=12, h=768, a=12, vocab 50257), s=1024, b=1, with dropout, bf16 throughout.
    Korthikanti et al. 2022 (arXiv:2205.05198) §4.1, Eq. 1: per layer sbh(34 + 5as/h) bytes; sbh = 1024·768 = 786,432;
    5as/h = 5·12·1024/768 = 80:
      eager (scores stored): 786,432 × 114 = 89,653,248 per layer, × 12 = 1,075,838,976, of which the s×s scores
        5as²b·L = 5·12·1,048,576·12 = 754,974,720;
      flash attention (Dao et al. 2022: no s×s scores) = selective recompute: 34·sbh = 26,738,688 per layer,
        × 12 = 320,864,256;
      full recompute (§5): each layer keeps its input 2sbh = 1,572,864, × 12 = 18,874,368; the layer recomputed last
        holds its 34·sbh = 26,738,688 at the end of backward, when the loss's tensors are long gone.
    The loss at the start of backward: nll_loss's fp32 gradient, log_softmax's fp32 output and its fp32 input gradient,
    12 bytes per logit: 1024·50257·12 = 617,558,016."""
    shape = PRESETS["gpt2-small"]
    ddp = Strategy(name="ddp", dp=8)

    def breakdown(**kw):
        return memory_per_gpu(TrainSetup(shape=shape, seq=1024, micro_batch=1, dropout=True, precision="bf16", **kw),
                              ddp)
    eager, flash, full = breakdown(attention="eager"), breakdown(), breakdown(recompute="full")
    assert eager.terms["layer_activations_bytes"] == 1_075_838_976
    assert eager.terms["attention_scores_bytes"] == 754_974_720
    assert flash.terms["layer_activations_bytes"] == 320_864_256 and "attention_scores_bytes" not in flash.terms
    assert full.terms["layer_activations_bytes"] == 18_874_368
    assert full.terms["backward_layer_working_set_bytes"] == 26_738_688
    assert flash.terms["cross_entropy_bytes"] == 617_558_016
    # what sets the three apart at the start of backward is exactly the layers' share
    assert eager.activations - flash.activations == 754_974_720
    assert flash.activations - full.activations == 320_864_256 - 18_874_368
    assert all(flash.sources)


def test_llama2_7b_layer_activations_by_hand():
    """Llama-2 7B (HF meta-llama/Llama-2-7b-hf config: L=32, h=4096, 32 heads, intermediate 11008), s=4096, b=1, flash
    attention, no dropout, bf16. Korthikanti's per-layer tensors, in 16-bit elements (×2 bytes), for a pre-norm block
    with a SwiGLU MLP: the two RMSNorm inputs 2·sbh; the Q/K/V projections' input sbh; Q and K (after RoPE) 2·sbh and
    V sbh (what flash attention saves); the output projection's input sbh; the MLP input sbh (shared by gate and up);
    gate output (SiLU's input), SiLU output, up output and their product (down's input) 4·sbf: sbh(16 + 8f/h) bytes.
    Hugging Face's LlamaRMSNorm computes in fp32 (`hidden_states.to(torch.float32)` … `weight *
    hidden_states.to(input_dtype)`): each norm also keeps that fp32 copy, 4·sbh bytes, two per layer: +8.
    sbh(16 + 8·11008/4096 + 8) = 16,777,216 × 45.5 = 763,363,328 per layer, × 32 = 24,427,626,496."""
    setup = TrainSetup(shape=PRESETS["llama2-7b"], seq=4096, micro_batch=1, precision="bf16")
    assert memory_per_gpu(setup, Strategy(name="ddp", dp=8)).terms["layer_activations_bytes"] == 24_427_626_496


def test_strategies_for_lists_the_layouts():
    """Every layout of 8 GPUs, counted by hand: the seven data-parallel forms (DDP, ZeRO-1, ZeRO-2, FSDP and three
    offloads), then every (tp, pp, dp) with tp·pp·dp = 8 but pure DP: 8 = 2³ spreads its three factors of 2 over three
    slots in C(5, 2) = 10 ways, less (1, 1, 8) = 9 grids, their DP replicas sharding the optimizer (ZeRO-1). 16 GPUs
    (2⁴): C(6, 2) − 1 = 14 grids + 7 = 21. One GPU: the GPU alone and its two offloads."""
    def rows(*args, **kw):
        return {(s.name, s.dp, s.tp, s.pp, s.zero, s.offload) for s in strategies_for(*args, **kw)}
    assert rows(8, 8) == {
        ("ddp", 8, 1, 1, 0, "none"), ("zero1", 8, 1, 1, 1, "none"), ("zero2", 8, 1, 1, 2, "none"),
        ("fsdp", 8, 1, 1, 3, "none"), ("zero2+offload", 8, 1, 1, 2, "optimizer"),
        ("fsdp+offload-optimizer", 8, 1, 1, 3, "optimizer"), ("fsdp+offload", 8, 1, 1, 3, "optimizer+params"),
        ("pp=2×dp=4", 4, 1, 2, 1, "none"), ("pp=4×dp=2", 2, 1, 4, 1, "none"), ("pp=8", 1, 1, 8, 0, "none"),
        ("tp=2×dp=4", 4, 2, 1, 1, "none"), ("tp=2×pp=2×dp=2", 2, 2, 2, 1, "none"), ("tp=2×pp=4", 1, 2, 4, 0, "none"),
        ("tp=4×dp=2", 2, 4, 1, 1, "none"), ("tp=4×pp=2", 1, 4, 2, 0, "none"), ("tp=8", 1, 8, 1, 0, "none")}
    assert len(strategies_for(8, 8)) == 16
    sixteen = strategies_for(16, 8, nodes=2)
    assert len(sixteen) == 21 and {s.gpus for s in sixteen} == {16}
    assert ("tp=16", 1, 16, 1, 0, "none") in rows(16, 8, nodes=2)
    assert rows(1, 1) == {("single", 1, 1, 1, 0, "none"), ("zero2+offload", 1, 1, 1, 2, "optimizer"),
                          ("fsdp+offload", 1, 1, 1, 3, "optimizer+params")}


def test_inference_llama3_70b_weights_and_kv_cache():
    shape = PRESETS["llama3-70b"]  # 70,553,706,496 parameters (Hugging Face meta-llama/Llama-3.1-70B)
    row = inference_memory(shape, batch=1, context=8192, tp=1)
    assert row["weights_bytes"] == 2 * 70_553_706_496  # 141.1 GB in bf16
    # KV: 2 × 80 layers × 8 kv heads × 128 × 8192 × 2 bytes = 2.5 GiB
    assert row["kv_cache_bytes"] == 2 * 80 * 8 * 128 * 8192 * 2
    assert inference_memory(shape, batch=1, context=8192, tp=2)["weights_bytes"] == 70_553_706_496
