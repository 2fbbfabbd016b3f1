"""plan's memory model against published figures (literals with their source; none recomputed with our formulas)."""

import pytest

from gpuready.shapes import PRESETS
from gpuready.verbs.plan.memory import (Strategy, TrainSetup, deepspeed_model_states, inference_memory,
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


def test_flash_and_recompute_shrink_activations():
    shape = PRESETS["llama2-7b"]
    ddp = Strategy(name="ddp", dp=8)
    eager = memory_per_gpu(TrainSetup(shape=shape, seq=4096, micro_batch=1, attention="eager"), ddp)
    flash = memory_per_gpu(TrainSetup(shape=shape, seq=4096, micro_batch=1), ddp)
    full = memory_per_gpu(TrainSetup(shape=shape, seq=4096, micro_batch=1, recompute="full"), ddp)
    assert eager.activations > flash.activations > full.activations
    assert "attention_scores_bytes" in eager.terms and "attention_scores_bytes" not in flash.terms
    # the fp32 copy of the logits and log_softmax's saved output: 4 + 4 bytes per logit
    assert flash.terms["cross_entropy_fp32_bytes"] == 4096 * 32000 * 8
    assert all(flash.sources)


def test_strategies_for_lists_the_layouts():
    names = [s.name for s in strategies_for(8, 8)]
    for name in ("ddp", "zero1", "zero2", "fsdp", "fsdp+offload", "tp=8", "pp=8", "tp=2×pp=2×dp=2"):
        assert name in names
    assert all(s.gpus == 8 for s in strategies_for(8, 8))
    assert any(s.tp == 16 for s in strategies_for(16, 8, nodes=2))


def test_inference_llama3_70b_weights_and_kv_cache():
    shape = PRESETS["llama3-70b"]  # 70,553,706,496 parameters (Hugging Face meta-llama/Llama-3.1-70B)
    row = inference_memory(shape, batch=1, context=8192, tp=1)
    assert row["weights_bytes"] == 2 * 70_553_706_496  # 141.1 GB in bf16
    # KV: 2 × 80 layers × 8 kv heads × 128 × 8192 × 2 bytes = 2.5 GiB
    assert row["kv_cache_bytes"] == 2 * 80 * 8 * 128 * 8192 * 2
    assert inference_memory(shape, batch=1, context=8192, tp=2)["weights_bytes"] == 70_553_706_496
