"""Tests that kill the mutants of verbs/plan/ that survived the suite (issue 23, mutation testing; the run and its
module → test-file table are in benchmarks/mutation_score.sh).

Every figure is worked out by hand in the test's docstring from a published source (a paper, a datasheet, a Hugging
Face config), never recomputed with plan's own formulas.
"""

from __future__ import annotations

import pytest

from gpuready.shapes import PRESETS
from gpuready.estimate.memory import Strategy, TrainSetup, memory_per_gpu

GPT2_SMALL = 124_439_808
"""Hugging Face gpt2: 124,439,808 parameters (tied embeddings)."""


def _states(precision: str, strategy: Strategy, model: str = "gpt2-small", optimizer: str = "adamw"):
    setup = TrainSetup(shape=PRESETS[model], seq=1024, micro_batch=1, precision=precision, optimizer=optimizer)
    breakdown = memory_per_gpu(setup, strategy)
    return breakdown.parameters, breakdown.gradients, breakdown.optimizer


# ---------------------------------------------------------------------------------------- ZeRO-1 by hand

def test_zero1_shards_only_the_optimizer_states_plus_deepspeeds_fp32_gradient_partition():
    """ZeRO-1 (P_os) on N = 8 GPUs, GPT-2 small (Ψ = 124,439,808), mixed-precision AdamW.

    Rajbhandari et al. 2020 (arXiv:1910.02054) §5.1, Fig. 1: 16-bit weights 2Ψ and 16-bit gradients 2Ψ stay whole on
    every GPU; the K = 12 bytes of optimizer state (fp32 master 4 + momentum 4 + variance 4) are sharded: 12Ψ/N.
    (Baseline 2Ψ + 2Ψ + 12Ψ; ZeRO-2 2Ψ + (2Ψ + 12Ψ)/N; ZeRO-3 16Ψ/N.)
    DeepSpeed's stage 1 runs the optimizer of stage 2 (deepspeed/runtime/zero/stage_1_and_2.py): before the step it
    copies the GPU's gradient partition to fp32 (`single_partition_of_fp32_groups[i].grad`), 4Ψ/N more, held with the
    gradients (the figure plan's module docstring documents for stages 1 and 2).
      weights    2Ψ        = 248,879,616
      gradients  2Ψ + 4Ψ/8 = 248,879,616 + 62,219,904 = 311,099,520
      optimizer  12Ψ/8     = 186,659,712
    The paper's ZeRO-1 total 2Ψ + 2Ψ + 12Ψ/8 = 684,418,944, plus the fp32 partition: 746,638,848."""
    weights, gradients, optimizer = _states("amp-bf16", Strategy(name="zero1", dp=8, zero=1))
    assert (weights, gradients, optimizer) == (248_879_616, 311_099_520, 186_659_712)
    assert weights + gradients + optimizer == 684_418_944 + 62_219_904


def test_zero1_in_pure_bf16_has_no_master_weights_and_no_fp32_gradient_partition():
    """Pure bf16 training (`model.to(torch.bfloat16)`): no fp32 master weights, and torch.optim keeps AdamW's two
    moments in the parameter's dtype, 2 + 2 bytes; no master, so no fp32 copy of the gradient partition either.
    N = 8, Ψ = 124,439,808: weights 2Ψ = 248,879,616, gradients 2Ψ = 248,879,616, optimizer 4Ψ/8 = 62,219,904."""
    assert _states("bf16", Strategy(name="zero1", dp=8, zero=1)) == (248_879_616, 248_879_616, 62_219_904)


def test_zero1_on_two_gpus_halves_the_optimizer_and_the_fp32_partition():
    """The same model on N = 2: optimizer 12Ψ/2 = 746,638,848; gradients 2Ψ + 4Ψ/2 = 248,879,616 + 248,879,616 =
    497,759,232 (a wrong divisor, N² or N/2, moves both)."""
    assert _states("amp-bf16", Strategy(name="zero1", dp=2, zero=1)) == (248_879_616, 497_759_232, 746_638_848)


# ------------------------------------------------------------------------------------ activations by family and dtype

LLAMA_SBH = 4096 * 4096
"""Llama-2 7B (HF meta-llama/Llama-2-7b-hf: L = 32, h = 4096, ffn 11008) at s = 4096, b = 1: sbh = 16,777,216."""
GPT2_SBH = 1024 * 768
"""GPT-2 small (HF gpt2: L = 12, h = 768, ffn 3072) at s = 1024, b = 1: sbh = 786,432."""


def _layers(model: str, precision: str, zero: int = 0) -> int:
    seq = 4096 if model == "llama2-7b" else 1024
    setup = TrainSetup(shape=PRESETS[model], seq=seq, micro_batch=1, precision=precision)
    return memory_per_gpu(setup, Strategy(name="x", dp=8, zero=zero)).terms["layer_activations_bytes"]


def test_llama_layer_activations_in_each_precision():
    """Korthikanti's count for a SwiGLU block without dropout (flash attention, no scores): 16-bit elements of the two
    norm inputs 2·sbh, the q/k/v input sbh, q and k 2·sbh, v sbh, the output projection's input sbh, the MLP input
    sbh and 4·sbf of the gated MLP: (16 + 8·f/h)·sbh bytes = (16 + 8·2.6875)·sbh = 37.5·sbh.
    Hugging Face's LlamaRMSNorm works in fp32 (`hidden_states.to(torch.float32)`, `weight * hidden.to(input_dtype)`):
      bf16: each norm keeps an fp32 copy of its input (+4 bytes) beside the 2 counted: +8·sbh for two norms: 45.5;
      PyTorch AMP (autocast, DDP): the residual stream is fp32 (embeddings are not autocast), each norm keeps its
        fp32 input (+2 over 2) and the fp32 copy (+4): +12·sbh: 49.5 — under ZeRO-1 the weights are bf16, as bf16;
      fp32: every element 4 bytes, 75·sbh, and the norm's normalised output beside its input (+4 each): 83·sbh.
    × 32 layers × 16,777,216: 45.5 → 24,427,626,496; 49.5 → 26,575,110,144; 83 → 44,560,285,696."""
    assert _layers("llama2-7b", "bf16") == 24_427_626_496 == 45.5 * LLAMA_SBH * 32
    assert _layers("llama2-7b", "amp-bf16") == 26_575_110_144 == 49.5 * LLAMA_SBH * 32
    assert _layers("llama2-7b", "amp-bf16", zero=1) == 24_427_626_496
    assert _layers("llama2-7b", "fp32") == 44_560_285_696 == 83 * LLAMA_SBH * 32


def test_gpt2_layer_activations_in_each_precision():
    """GPT-2's block without dropout: Korthikanti's 34·sbh less the two dropout masks (2·sbh): 32·sbh in 16 bits.
    LayerNorm under autocast saves its fp32 input (the residual stream stays fp32): +2 per norm, +4·sbh: 36; bf16
    has no extra (LayerNorm keeps its input's dtype), fp32 doubles to 64.
    × 12 layers × 786,432: 32 → 301,989,888; 36 → 339,738,624; 64 → 603,979,776."""
    assert _layers("gpt2-small", "bf16") == 301_989_888 == 32 * GPT2_SBH * 12
    assert _layers("gpt2-small", "amp-bf16") == 339_738_624 == 36 * GPT2_SBH * 12
    assert _layers("gpt2-small", "fp32") == 603_979_776 == 64 * GPT2_SBH * 12


def test_the_cuda_context_is_700_mib():
    """~700 MiB for the CUDA context and PyTorch's kernels (723 MiB measured for `torch.randn(1).cuda()`,
    discuss.pytorch.org/t/73021): 700 × 2^20 = 734,003,200 bytes in every breakdown."""
    setup = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1)
    assert memory_per_gpu(setup, Strategy(name="ddp", dp=8)).terms["cuda_context_bytes"] == 734_003_200


# --------------------------------------------------------------------------------------------- sources and input

CITED = {
    "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054)": "mixed-precision Adam = 2+2+12 bytes/param",
    "microsoft/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py": "(docs/code-docs/source/memory.rst)",
    "Korthikanti et al. 2022 (arXiv:2205.05198)": "full recompute keeps 2sbh",
    "NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py": "embeddings and output layer + cross-entropy",
    "The peak is the larger of two moments": "gradients grow as activations are freed.",
    "Dao et al. 2022, FlashAttention (arXiv:2205.14135)": "only O(s) statistics",
    "Hugging Face LlamaRMSNorm": "(NORM_EXTRA_COEFFICIENT)",
    "torch.autocast caches a bf16 copy": "(torch.utils.checkpoint) keeps no copy",
    "CUDA context: ~700 MiB measured (discuss.pytorch.org/t/73021, /t/81330)": "an order of magnitude",
    "allocator fragmentation margin": "not a published figure",
    "PyTorch DDP (torch.nn.parallel.DistributedDataParallel": "'the saved memory size will be equal to the total "
                                                             "gradients size'",
    "PyTorch FSDP prefetches the next unit's all-gather": "one more layer unsharded in 16 bits",
    "Shazeer & Stern 2018, Adafactor (arXiv:1804.04235)": "rows + columns per matrix",
    "torch.optim.SGD": "in the parameter's dtype",
    "DeepSpeed ZeRO-Offload / ZeRO-Infinity (arXiv:2101.06840, arXiv:2104.07857)": "live in CPU memory",
}


def _cited(sources) -> set[str]:
    """Which works the sources name; each source must begin with the work and end with its claim."""
    named = set()
    for source in sources:
        work = next(work for work in CITED if source.startswith(work))
        assert source.endswith(CITED[work]), source
        named.add(work)
    return named


def test_every_term_names_its_source():
    """Llama-2 7B under PyTorch AMP and DDP on 8 GPUs: ZeRO's 16 bytes, Korthikanti's and Megatron's activations, the
    two moments, flash attention, the fp32 norms, autocast's copies, the CUDA context, DDP's buckets, the margin; GPT-2
    small in bf16 with SGD under ZeRO-2 offload: ZeRO, DeepSpeed, SGD's momentum, the offload; with Adafactor under
    FSDP: Adafactor and FSDP's prefetch."""
    llama = TrainSetup(shape=PRESETS["llama2-7b"], seq=4096, micro_batch=1, precision="amp-bf16")
    assert _cited(memory_per_gpu(llama, Strategy(name="ddp", dp=8)).sources) == {
        "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054)", "Korthikanti et al. 2022 (arXiv:2205.05198)",
        "NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py", "The peak is the larger of two moments",
        "Dao et al. 2022, FlashAttention (arXiv:2205.14135)", "Hugging Face LlamaRMSNorm",
        "torch.autocast caches a bf16 copy", "CUDA context: ~700 MiB measured (discuss.pytorch.org/t/73021, /t/81330)",
        "PyTorch DDP (torch.nn.parallel.DistributedDataParallel", "allocator fragmentation margin"}
    sgd = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1, precision="bf16", optimizer="sgd")
    named = _cited(memory_per_gpu(sgd, Strategy(name="zero2+offload", dp=8, zero=2, offload="optimizer")).sources)
    assert {"microsoft/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py", "torch.optim.SGD",
            "DeepSpeed ZeRO-Offload / ZeRO-Infinity (arXiv:2101.06840, arXiv:2104.07857)"} <= named
    adafactor = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1, optimizer="adafactor")
    named = _cited(memory_per_gpu(adafactor, Strategy(name="fsdp", dp=8, zero=3)).sources)
    assert {"Shazeer & Stern 2018, Adafactor (arXiv:1804.04235)",
            "PyTorch FSDP prefetches the next unit's all-gather"} <= named


def test_a_setup_outside_the_choices_is_refused_naming_the_option_and_the_choices():
    shape = PRESETS["gpt2-small"]
    for option, value, choices in (("precision", "fp8", "amp-bf16, bf16, fp32"),
                                   ("optimizer", "lion", "adamw, sgd, adafactor"),
                                   ("recompute", "some", "none, selective, full"),
                                   ("attention", "sdpa", "flash, eager")):
        with pytest.raises(ValueError) as refused:
            TrainSetup(shape=shape, seq=1024, micro_batch=1, **{option: value})
        assert str(refused.value) == f"--{option} {value!r}: one of {choices}"
    assert TrainSetup(shape=shape, seq=1024, micro_batch=1).dropout is False


# ------------------------------------------------------------------------------------ the pieces of the memory model

def test_the_largest_layer_deepspeed_gathers_is_the_widest_module():
    """DeepSpeed's ZeRO-3 gathers the largest module (`4 × largest_layer_params`): for the published models the token
    embedding; for shapes with a small vocabulary the widest linear layer, with its bias where it has one. GPT-2
    shapes (HF Conv1D layers with biases):
      h 64, vocab 256 ('tiny'): MLP c_fc 64×256 + 256 = 16,640 > embedding 256×64 = 16,384 = positions 256×64;
      h 512, vocab 1000, ffn 1024, 8,192 positions: position table 8,192×512 = 4,194,304 > c_attn 512×1536 + 1536 =
        787,968;
      h 512, vocab 1000, ffn 1024, 1,024 positions: c_attn 512×(512 + 1024) + 1536 = 787,968 > c_fc 512×1024 + 1024
        = 525,312 > c_proj 512×512 + 512 = 262,656.
    A LLaMA shape (no biases) h 1024, vocab 1000, ffn 4096: gate/up 1024×4096 = 4,194,304; with ffn 512 the
    attention's q/o projections, 1024×1024 = 1,048,576, beat the embedding's 1,024,000."""
    from gpuready.shapes import ModelShape
    from gpuready.estimate.memory import largest_layer_parameters
    assert largest_layer_parameters(PRESETS["tiny"]) == 16_640
    assert largest_layer_parameters(PRESETS["llama2-7b"]) == 32000 * 4096
    gpt2 = dict(layers=2, hidden=512, heads=8, vocab=1000, ffn_hidden=1024)
    assert largest_layer_parameters(ModelShape(**gpt2, max_positions=8192)) == 4_194_304
    assert largest_layer_parameters(ModelShape(**gpt2, max_positions=1024)) == 787_968
    llama = dict(family="llama", layers=2, hidden=1024, heads=16, vocab=1000)
    assert largest_layer_parameters(ModelShape(**llama, ffn_hidden=4096)) == 4_194_304
    assert largest_layer_parameters(ModelShape(**llama, ffn_hidden=512)) == 1_048_576


def test_parameters_on_the_most_loaded_pipeline_stage():
    """Megatron-LM's theoretical_memory_usage: (blocks/PP + embeddings)/TP on the first stage. GPT-2 small (HF: each
    block 7,087,872 parameters) on PP = 2: 6 blocks = 42,527,232, the token table 50,257 × 768 = 38,597,376 and the
    position table 1,024 × 768 = 786,432: 81,911,040; with no split, all 124,439,808. Llama-2 7B (each block
    4·4096² + 3·4096·11,008 + 2·4096 = 202,383,360) on PP = 2: 16 blocks = 3,238,133,760 + the token table 32,000 ×
    4096 = 131,072,000 (no position table: RoPE): 3,369,205,760."""
    from gpuready.estimate.memory import stage_parameters
    assert stage_parameters(PRESETS["gpt2-small"]) == GPT2_SMALL
    assert stage_parameters(PRESETS["gpt2-small"], pp=2) == 81_911_040
    assert stage_parameters(PRESETS["llama2-7b"], pp=2) == 3_369_205_760


def test_deepspeeds_estimator_on_one_gpu_and_on_two_nodes():
    """memory.rst: ZeRO-2 on one GPU holds 2P + 18P/1 = 20 bytes per parameter: 20 GB for 1e9 parameters; ZeRO-3 of
    the T5-3B example (2,851e6 parameters, largest layer 32e6) on 8 GPUs is 6.09 GiB per GPU whether the 8 are one
    node or 4 × 2 nodes (N = GPUs per node × nodes)."""
    from gpuready.estimate.memory import deepspeed_model_states
    assert deepspeed_model_states(1e9, 0, stage=2) == 20_000_000_000
    two_nodes = deepspeed_model_states(2851e6, 32e6, stage=3, gpus_per_node=4, nodes=2)
    assert two_nodes == deepspeed_model_states(2851e6, 32e6, stage=3, gpus_per_node=8)
    assert round(two_nodes / 2**30, 2) == 6.09
    with pytest.raises(ValueError) as refused:
        deepspeed_model_states(1e9, 0, stage=1)
    assert str(refused.value) == "DeepSpeed's estimators cover ZeRO-2 and ZeRO-3"


def test_the_peak_is_the_larger_of_the_two_moments():
    """A breakdown by hand: weights 100, optimizer 300, other 50 live throughout. Start of backward: activations 80;
    end: gradients 40 + working 60 = 100 > 80: the end is the peak, 100 + 300 + 50 + 100 = 550. With working 40:
    40 + 40 = 80, not above the 80 of activations: the start, 530. Without a working figure (0): gradients 90 alone
    beat activations 80: 540. `allocated` leaves out the CUDA context and the fragmentation margin where the terms
    hold them."""
    from gpuready.estimate.memory import MemoryBreakdown
    end = MemoryBreakdown(parameters=100, gradients=40, optimizer=300, activations=80, other=50, backward_working=60)
    assert (end.peak_phase, end.total, end.allocated) == ("backward_end", 550, 550)
    start = MemoryBreakdown(parameters=100, gradients=40, optimizer=300, activations=80, other=50, backward_working=40)
    assert (start.peak_phase, start.total) == ("backward_start", 530)
    plain = MemoryBreakdown(parameters=100, gradients=90, optimizer=300, activations=80, other=50)
    assert (plain.peak_phase, plain.total, plain.terms, plain.sources) == ("backward_end", 540, {}, ())
    held = MemoryBreakdown(parameters=100, gradients=40, optimizer=300, activations=80, other=50, backward_working=60,
                           terms={"cuda_context_bytes": 30, "fragmentation_margin_bytes": 7})
    assert held.allocated == 550 - 30 - 7


def test_setups_and_strategies_are_keyword_only_values_checked_on_creation():
    """seq and micro-batch at least 1; dp, tp, pp at least 1, ZeRO 0-3, a known offload; both frozen, keyword-only."""
    import dataclasses
    shape = PRESETS["gpt2-small"]
    assert TrainSetup(shape=shape, seq=1, micro_batch=1).seq == 1
    for seq, micro in ((0, 1), (1, 0)):
        with pytest.raises(ValueError) as refused:
            TrainSetup(shape=shape, seq=seq, micro_batch=micro)
        assert str(refused.value) == "--seq and --micro-batch must be at least 1"
    for bad in (dict(dp=0), dict(dp=2, tp=0), dict(dp=2, pp=0), dict(dp=2, zero=4), dict(dp=2, offload="disk")):
        with pytest.raises(ValueError) as refused:
            Strategy(name="odd", **bad)
        assert str(refused.value) == ("strategy 'odd': dp, tp, pp >= 1, zero in 0..3, offload in ('none', "
                                      "'optimizer', 'optimizer+params')")
    from gpuready.estimate.memory import MemoryBreakdown
    for positional in (lambda: Strategy("ddp", 8), lambda: TrainSetup(shape, 1, 1),
                       lambda: MemoryBreakdown(1, 2, 3, 4, 5)):
        with pytest.raises(TypeError):
            positional()
    with pytest.raises(dataclasses.FrozenInstanceError):
        MemoryBreakdown(parameters=1, gradients=2, optimizer=3, activations=4, other=5).other = 6  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Strategy(name="ddp", dp=8).dp = 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainSetup(shape=shape, seq=1, micro_batch=1).seq = 2  # type: ignore[misc]


# -------------------------------------------------------------------------------------- model states by optimizer

def test_pytorch_amp_and_fp32_keep_fp32_weights_and_gradients():
    """PyTorch AMP (torch.autocast over an fp32 model) and plain fp32 under DDP: fp32 weights 4Ψ, fp32 gradients 4Ψ,
    AdamW's two fp32 moments 8Ψ: 16 bytes per parameter as ZeRO's 2 + 2 + 12, split differently. GPT-2 small:
    497,759,232 / 497,759,232 / 995,518,464."""
    for precision in ("amp-bf16", "fp32"):
        assert _states(precision, Strategy(name="ddp", dp=8)) == (497_759_232, 497_759_232, 995_518_464)


def test_sgd_keeps_one_momentum_buffer():
    """torch.optim.SGD with momentum: one buffer per parameter in the parameter's dtype. GPT-2 small under DDP:
    fp32 weights (AMP) → 4Ψ = 497,759,232; pure bf16 → 2Ψ = 248,879,616."""
    assert _states("amp-bf16", Strategy(name="ddp", dp=8), optimizer="sgd")[2] == 497_759_232
    assert _states("bf16", Strategy(name="ddp", dp=8), optimizer="sgd")[2] == 248_879_616


def test_adafactor_factors_the_second_moment_of_each_matrix():
    """Shazeer & Stern 2018 (arXiv:1804.04235): an n×m matrix keeps n + m second-moment statistics, a vector its own
    size, no first moment. GPT-2 small (h 768, ffn 3072, 12 heads of 64):
      per block: q/k/v and output projections 4 × (768 + 768) = 6,144, MLP (768 + 3072) × 2 = 7,680: 13,824 factored;
        the block's 7,087,872 parameters less its matrices (4 × 768² + 2 × 768 × 3072 = 7,077,888) leave 9,984 in
        vectors (biases, norms): 23,808 per block, × 12 = 285,696;
      the tied token table 50,257 × 768: 50,257 + 768 = 51,025.
    336,721 fp32 statistics, 4 bytes each, under PyTorch AMP and DDP (no master copy): 1,346,884."""
    assert _states("amp-bf16", Strategy(name="ddp", dp=8), optimizer="adafactor")[2] == 1_346_884
    # TP 2 splits every statistic over the two ranks: 336,721 / 2 × 4 bytes = 673,442
    assert _states("amp-bf16", Strategy(name="tp=2×dp=4", dp=4, tp=2), optimizer="adafactor")[2] == 673_442


def test_adafactor_counts_an_untied_head_apart():
    """Llama-2 7B (h 4096, ffn 11008, untied head): per block q, k, v, o 4 × 8,192 = 32,768 and gate, up, down
    3 × (4,096 + 11,008) = 45,312: 78,080; the block's 202,383,360 parameters less its matrices (4 × 4096² +
    3 × 4096 × 11008 = 202,375,168) leave its two RMSNorm weights, 8,192: 86,272 per block, × 32 = 2,760,704; the
    token table and the head (32,000 + 4,096) × 2 = 72,192: 2,832,896 statistics, × 4 bytes (PyTorch AMP, DDP) =
    11,331,584; on a pipeline of 2 the first stage holds 16 blocks and only the token table: 1,380,352 + 36,096 =
    1,416,448, × 4 = 5,665,792."""
    assert _states("amp-bf16", Strategy(name="ddp", dp=8), "llama2-7b", "adafactor")[2] == 11_331_584
    assert _states("amp-bf16", Strategy(name="pp", dp=1, pp=2), "llama2-7b", "adafactor")[2] == 5_665_792


def test_what_offload_moves_to_the_cpu():
    """ZeRO-2 with the optimizer offloaded (DeepSpeed ZeRO-Offload): the GPU keeps the 16-bit weights 2Ψ, the CPU the
    fp32 master and Adam's moments (12Ψ), the 16-bit gradients (2Ψ) and their fp32 copy (4Ψ): 18Ψ = 2,239,916,544 for
    GPT-2 small. ZeRO-3 (FSDP) offloading the optimizer moves 12Ψ + the fp32 gradients 4Ψ = 16Ψ = 1,991,036,928;
    offloading parameters too adds the 16-bit weights and gradients: 2 + 2 + 4 + 12 = 20Ψ = 2,488,796,160. The layer
    ZeRO-3 gathers is the token table 50,257 × 768 = 38,597,376 parameters, × 4 bytes (16-bit weights and gradients,
    DeepSpeed's `4 * largest_layer_params`) = 154,389,504; split over TP = 2, 77,194,752."""
    def terms(strategy):
        setup = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1)
        return memory_per_gpu(setup, strategy).terms
    zero2 = terms(Strategy(name="zero2+offload", dp=8, zero=2, offload="optimizer"))
    assert zero2["optimizer_offloaded_to_cpu_bytes"] == 18 * GPT2_SMALL == 2_239_916_544
    fsdp = terms(Strategy(name="fsdp+offload-optimizer", dp=8, zero=3, offload="optimizer"))
    assert fsdp["optimizer_offloaded_to_cpu_bytes"] == 16 * GPT2_SMALL == 1_991_036_928
    everything = terms(Strategy(name="fsdp+offload", dp=8, zero=3, offload="optimizer+params"))
    assert everything["offloaded_to_cpu_bytes"] == 20 * GPT2_SMALL == 2_488_796_160
    assert fsdp["zero3_gathered_layer_bytes"] == 154_389_504
    assert terms(Strategy(name="fsdp-tp2", dp=4, tp=2, zero=3))["zero3_gathered_layer_bytes"] == 77_194_752


# ------------------------------------------------------------------------ activations on a TP × PP grid, by hand

def _grid(precision: str, recompute: str, attention: str, zero: int):
    """GPT-2 small, s = 1024, micro-batch 2, on TP = 2 × PP = 2 × DP = 2."""
    setup = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=2, precision=precision, recompute=recompute,
                       attention=attention)
    return memory_per_gpu(setup, Strategy(name="tp=2×pp=2×dp=2", dp=2, tp=2, pp=2, zero=zero))


def test_activations_on_a_tp_pp_grid_eager_attention():
    """s = 1024, b = 2, h = 768, a = 12, vocabulary 50,257, L = 12, bf16, no dropout; sbh = 1,572,864.
    Korthikanti et al. 2022 with TP + sequence parallelism, per layer sbh(32 + 5as/h)/t: 5·12·1024/768 = 80, so
    1,572,864 × 112 / 2 = 88,080,384. Megatron's 1F1B: the first stage holds PP micro-batches of L/PP layers:
    6 × 2 = 12 layers' worth, 1,056,964,608; of which the s×s scores 5as²b/t per layer: 62,914,560 × 12 =
    754,974,720. The embeddings' output and GPT-2's embedding dropout mask 3·sbh/t, × PP = 2 micro-batches:
    4,718,592. The loss (12 bytes per logit, vocabulary-parallel) on the last stage: 1024·2·50,257·12 / 2 =
    617,558,016. First stage 1,056,964,608 + 4,718,592 = 1,061,683,200; last stage 6 × 88,080,384 + 617,558,016 =
    1,146,040,320: the last is the most loaded. The end of backward holds one layer's working set: 88,080,384."""
    grid = _grid("bf16", "none", "eager", 1)
    assert grid.terms["layer_activations_bytes"] == 1_056_964_608
    assert grid.terms["attention_scores_bytes"] == 754_974_720
    assert grid.terms["embedding_activations_bytes"] == 4_718_592
    assert grid.terms["cross_entropy_bytes"] == 617_558_016
    assert (grid.activations, grid.backward_working) == (1_146_040_320, 88_080_384)
    assert "autocast_weight_copies_bytes" not in grid.terms


def test_recompute_on_the_grid():
    """Selective recompute drops the 5as/h scores: 32 × 1,572,864 / 2 × 12 = 301,989,888. Full recompute keeps each
    layer's input, the residual stream: 2 bytes in bf16, 1,572,864 / 2 × 2 × 12 = 18,874,368; fp32 under PyTorch
    AMP (autocast, DDP replicas): 4 bytes, 37,748,736. Under AMP autocast keeps bf16 copies of the weights it casts:
    with full recompute only the head's (tied: the token table 50,257 × 768, over TP 2, 2 bytes) 38,597,376; without,
    every weight of the stage (81,911,040 on the first of PP 2 (6 blocks + tables), over TP 2, 2 bytes) 81,911,040.
    The layer recomputed last holds its full working set, with LayerNorm's fp32 input under autocast (+4·sbh):
    (32 + 4) × 1,572,864 / 2 = 28,311,552."""
    assert _grid("bf16", "selective", "eager", 1).terms["layer_activations_bytes"] == 301_989_888
    assert _grid("bf16", "full", "flash", 1).terms["layer_activations_bytes"] == 18_874_368
    amp_full = _grid("amp-bf16", "full", "flash", 0)
    assert amp_full.terms["layer_activations_bytes"] == 37_748_736
    assert amp_full.terms["autocast_weight_copies_bytes"] == 38_597_376
    assert amp_full.terms["backward_layer_working_set_bytes"] == 28_311_552
    assert _grid("amp-bf16", "none", "flash", 0).terms["autocast_weight_copies_bytes"] == 81_911_040
    assert _grid("fp32", "full", "flash", 1).terms["layer_activations_bytes"] == 37_748_736  # fp32: 4 bytes too


def test_korthikantis_full_recompute_keeps_the_layer_input_split_over_tp():
    """Korthikanti et al. 2022, Table 2: full recompute keeps 2sbh/t per layer; GPT-3 175B (h 12,288) at s = 2048,
    b = 2, t = 8: 2 × 2048 × 2 × 12,288 / 8 = 12,582,912."""
    from gpuready.estimate.memory import korthikanti_layer_bytes
    assert korthikanti_layer_bytes(2048, 2, 12288, 96, tp=8, recompute="full") == 12_582_912


def test_ddp_buckets_and_fsdp_prefetch():
    """PyTorch DDP (gradient_as_bucket_view=False) copies every gradient into its buckets: on 2 replicas of GPT-2
    small under AMP the buckets hold the 4Ψ fp32 gradients, 497,759,232, held at the end of backward beside the
    gradients; one GPU has no DDP. FSDP prefetches the next unit in 16 bits: one block of 7,087,872 parameters,
    2 bytes each: 14,175,744 (fp32: 4 bytes, 28,351,488; over TP 2: 7,087,872)."""
    def breakdown(precision, **strategy):
        setup = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1, precision=precision)
        return memory_per_gpu(setup, Strategy(name="s", **strategy))
    ddp = breakdown("amp-bf16", dp=2)
    assert ddp.terms["ddp_gradient_buckets_bytes"] == 497_759_232
    assert ddp.backward_working == ddp.terms["backward_layer_working_set_bytes"] + 497_759_232
    assert "ddp_gradient_buckets_bytes" not in breakdown("amp-bf16", dp=1).terms
    assert "ddp_gradient_buckets_bytes" not in breakdown("amp-bf16", dp=2, zero=1).terms
    assert breakdown("bf16", dp=8, zero=3).terms["fsdp_prefetch_bytes"] == 14_175_744
    assert breakdown("fp32", dp=8, zero=3).terms["fsdp_prefetch_bytes"] == 28_351_488
    assert breakdown("bf16", dp=4, tp=2, zero=3).terms["fsdp_prefetch_bytes"] == 7_087_872


# ---------------------------------------------------------------------------------------- strategies, step times

def _machine(**changes):
    """A described machine with round figures: 8 GPUs of 80 GB on one NVSwitch, 1,000 TFLOP/s dense bf16, an
    all_reduce busbw of 100 GB/s inside the node."""
    from gpuready.estimate.machine import Machine
    values = dict(gpu_name="round", gpus_per_node=8, memory_bytes_per_gpu=80 * 10**9, nvlink_domain=8,
                  peak_tflops={"bf16": 1000.0}, intra_node_busbw_gb_per_s=100.0)
    return Machine(**{**values, **changes})


GPT2_BF16 = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1, precision="bf16")
LAYOUTS = [Strategy(name="ddp", dp=8), Strategy(name="fsdp", dp=8, zero=3),
           Strategy(name="tp=2×dp=4", dp=4, tp=2, zero=1), Strategy(name="pp=2×dp=4", dp=4, pp=2, zero=1),
           Strategy(name="zero2+offload", dp=8, zero=2, offload="optimizer")]


def test_step_times_by_hand_on_a_round_machine():
    """GPT-2 small (Ψ = 124,439,808; 12 blocks of 7,087,872; token table 50,257 × 768), s = 1024, micro-batch 1,
    global batch 8: 8,192 tokens a step.
    Compute: 6 × (12 × 7,087,872 + 50,257 × 768) + 12 × 12 × 1024 × 768 = 855,157,248 FLOP per token (Kaplan);
      × 8,192 = 7.005448e12 FLOP over 8 GPUs at 0.80 × 1,000 TFLOP/s: 1.09460127744 ms.
    nccl-tests' all_reduce: t = S × 2(n−1)/n / busbw.
      DDP: 16-bit gradients 2Ψ = 248,879,616 B × 14/8 / 100e9 = 4.35539328 ms; step 5.44999455744 ms.
      FSDP: 1.5 × that volume: 6.53308992 ms.
      TP 2 × DP 4: gradients of half the model 124,439,808 B × 6/4 / 100e9 = 1.86659712 ms; per replica 2 micro-
        batches, Megatron's 4 all-reduces a layer of 2·s·b·h = 1,572,864 B, × 2·1/2 / 100e9 = 15.72864 µs, × 4 × 12 ×
        2 = 1.50994944 ms: 3.37654656 ms.
      PP 2 × DP 4: the first stage's 81,911,040 parameters, 163,822,080 B × 6/4 / 100e9 = 2.4573312 ms, and 2 × 2
        micro-batches × 1,572,864 B / 100e9 = 62.91456 µs: 2.52024576 ms; bubble (2−1)/2 = 0.5: step 1.5 × compute +
        comm = 4.16214767616 ms.
      ZeRO-2 offload: DDP's all-reduce, and over PCIe at 25 GB/s 2 × 2Ψ/8 = 62,219,904 B: 2.48879616 ms:
        7.93879071744 ms."""
    from gpuready.verbs.plan.strategy import plan_training
    rows = {row.strategy.name: row for row in plan_training(GPT2_BF16, _machine(), 8, LAYOUTS)}
    expected = {"ddp": (0.00435539328, 0.00544999455744), "fsdp": (0.00653308992, 0.00762769119744),
                "tp=2×dp=4": (0.00337654656, 0.00447114783744), "pp=2×dp=4": (0.00252024576, 0.00416214767616),
                "zero2+offload": (0.00435539328, 0.00793879071744)}
    for name, (communication, step) in expected.items():
        row = rows[name]
        assert row.compute_s == pytest.approx(0.00109460127744, rel=1e-12), name
        assert row.communication_s == pytest.approx(communication, rel=1e-12), name
        assert row.step_time_s == pytest.approx(step, rel=1e-12), name
        assert (row.fits, row.bottleneck) == (True, "communication")


def test_layouts_ranked_simplest_among_the_near_best_then_by_step_offload_last():
    """Best step 4.16 ms (PP 2 × DP 4); within 10 % (4.58 ms): TP 2 × DP 4 (4.47 ms), a TP layout, preferred to a
    PP grid; then DDP 5.45 ms and FSDP 7.63 ms by their steps; offload after everything that fits without it."""
    from gpuready.verbs.plan.strategy import plan_training
    ranked = [row.strategy.name for row in plan_training(GPT2_BF16, _machine(), 8, LAYOUTS)]
    assert ranked == ["tp=2×dp=4", "pp=2×dp=4", "ddp", "fsdp", "zero2+offload"]


def test_the_reasons_a_plan_gives():
    from gpuready.verbs.plan.strategy import plan_training
    rows = {row.strategy.name: row for row in plan_training(GPT2_BF16, _machine(), 8, LAYOUTS)}
    assert rows["pp=2×dp=4"].reasons == (
        "fits: 1.8 of 74.5 GiB per GPU", "PP=2 inside one node",  # 80 GB = 80e9 / 2**30 = 74.5 GiB
        "pipeline bubble (PP−1)/m = 0.50 with 2 micro-batches per step",
        "compute at 80% of the 1000 TFLOP/s bf16 peak (assumed; no measured figure)",
        "compute and communication assumed not to overlap")
    assert rows["fsdp"].reasons[1] == ("FSDP/ZeRO-3: ~1.5× the data-parallel volume (all-gather forward and backward, "
                                       "reduce-scatter)")
    # PP 2 × DP 4 4.16214767616 ms, TP 2 × DP 4 4.47114783744 ms: 7.4 % slower, within 10 %, chosen as the simpler
    assert rows["tp=2×dp=4"].reasons[0] == ("pp=2×dp=4 is 7.4 % faster (0.00416 s), but within 10 % the simpler wins: "
                                            "no PP, fewer GPUs per model copy (TP×PP), less memory")
    assert rows["tp=2×dp=4"].reasons[2] == "TP=2 inside the NVLink domain of 8"
    assert rows["zero2+offload"].reasons[1] == ("offload: only when nothing else fits (CPU Adam and PCIe transfers "
                                                "every step)")


# ------------------------------------------------------------------------------------------------- batch and LR

def test_a_batch_that_does_not_scale_to_a_whole_number():
    """Goyal et al. 2017's linear rule for SGD with momentum ('SGD-Momentum' is that family): 100 on 3 GPUs → 4 GPUs
    is 133.3, rounded down to 133 (said); factor 1.33, learning rate 0.001 × 1.33 = 0.00133 warmed up linearly over
    Goyal's 5 epochs. 133 is prime: no whole per-GPU batch on 4 GPUs (said)."""
    from gpuready.verbs.plan.batch import scale_batch
    result = scale_batch(known_batch=100, known_lr=1e-3, known_gpus=3, new_gpus=4, optimizer="SGD-Momentum")
    assert (result["rule"], result["new_global_batch"], result["batch_factor"]) == ("linear", 133, 1.33)
    assert result["new_lr"] == pytest.approx(0.00133)
    assert (result["micro_batch"], result["accumulation_steps"], result["divides"]) == (None, None, False)
    assert result["notes"] == [
        "100 x 4 / 3 is not a whole batch: rounded down.",
        "The global batch 133 does not divide into 4 GPU(s) x a whole per-GPU batch x whole accumulation steps; change "
        "the micro-batch or the GPU count, or accept a different global batch (and rescale the learning rate)."]
    assert result["warmup"] == ("Warm up linearly from 0.001 to 0.00133 over about 5 epochs (Goyal et al.), then follow "
                                "the original schedule.")


def test_whole_batches_split_into_micro_batches_and_steps():
    """64 on 8 GPUs kept: 8 a GPU, one step, learning rate and warm-up unchanged. 128 on 8 GPUs at micro-batch 16:
    16 × 8 × 1 = 128, one accumulation step. 256 on 8 → 1 GPU (Adam: square root): 32 on the one GPU, a smaller
    batch keeps its warm-up; 1/8 is exactly the trusted 8× extrapolation. 8 on 1 → 16 GPUs at micro-batch 4:
    128 = 4 × 16 × 2, two steps; 16× is beyond 8×: verify with a short run."""
    from gpuready.verbs.plan.batch import scale_batch
    same = scale_batch(known_batch=64, known_lr=3e-4, known_gpus=8, new_gpus=8)
    assert (same["micro_batch"], same["accumulation_steps"], same["lr_factor"]) == (8, 1, 1.0)
    assert same["warmup"] == "The global batch is unchanged: keep the learning rate and the warm-up."
    assert scale_batch(known_batch=128, known_lr=3e-4, known_gpus=8, new_gpus=8, micro_batch=16)[
        "accumulation_steps"] == 1
    smaller = scale_batch(known_batch=256, known_lr=3e-4, known_gpus=8, new_gpus=1)
    assert (smaller["new_global_batch"], smaller["micro_batch"], smaller["verify"]) == (32, 32, False)
    assert smaller["warmup"] == ("A smaller batch: keep the original warm-up (the rule gives a lower peak learning "
                                 "rate).")
    larger = scale_batch(known_batch=8, known_lr=3e-4, known_gpus=1, new_gpus=16, micro_batch=4)
    assert (larger["new_global_batch"], larger["accumulation_steps"], larger["notes"]) == (128, 2, [])
    assert larger["verify"] is True


@pytest.mark.parametrize("bad, said", [
    (dict(known_batch=True), "known_batch must be a positive whole number, not True"),
    (dict(known_batch=2.0), "known_batch must be a positive whole number, not 2.0"),
    (dict(known_gpus=0), "known_gpus must be a positive whole number, not 0"),
    (dict(new_gpus=-1), "new_gpus must be a positive whole number, not -1"),
    (dict(micro_batch=True), "micro_batch must be a positive whole number, not True"),
    (dict(micro_batch=1.5), "micro_batch must be a positive whole number, not 1.5"),
    (dict(known_lr=0.0), "known_lr must be a positive number, not 0.0"),
    (dict(known_lr=float("inf")), "known_lr must be a positive number, not inf"),
    (dict(known_lr=True), "known_lr must be a positive number, not True"),
    (dict(known_lr="1e-3"), "known_lr must be a positive number, not '1e-3'"),
    (dict(optimizer="lion"), "optimizer 'lion': no scaling rule known (known: sgd, sgd_momentum, momentum, nesterov, "
                             "adam, adamw, rmsprop, adafactor, lamb)"),
])
def test_bad_batch_input_is_named(bad, said):
    from gpuready.verbs.plan.batch import scale_batch
    with pytest.raises(ValueError) as refused:
        scale_batch(**{**dict(known_batch=256, known_lr=1e-3, known_gpus=1, new_gpus=8), **bad})
    assert str(refused.value) == said


def test_a_micro_batch_larger_than_the_global_batch():
    """Global batch 8 on one GPU at micro-batch 16: half a step; the nearest batch that works is one step of 16."""
    from gpuready.verbs.plan.batch import scale_batch
    result = scale_batch(known_batch=8, known_lr=1e-3, known_gpus=1, new_gpus=1, micro_batch=16)
    assert result["accumulation_steps"] is None
    assert result["notes"] == [
        "The global batch 8 does not divide into 1 GPU(s) x micro-batch 16 x whole accumulation steps: the nearest "
        "above is 16 (accumulation 1); change the micro-batch or the GPU count, or accept a different global batch "
        "(and rescale the learning rate)."]


def _one(machine, strategy, setup=GPT2_BF16, global_batch=8):
    from gpuready.verbs.plan.strategy import plan_training
    return plan_training(setup, machine, global_batch, [strategy])[0]


def test_what_a_plan_says_when_memory_or_figures_are_missing():
    """On 1 GB (0.93 GiB) GPUs DDP (2.6 GB, 2.5 GiB: memory in plan's outputs is in GiB, issue 32) does not fit: memory is the bottleneck; with the GPU memory unknown nothing fits;
    without a bf16 peak there is no compute time, without a busbw no communication time: no step."""
    small = _one(_machine(memory_bytes_per_gpu=10**9), Strategy(name="ddp", dp=8))
    assert (small.fits, small.bottleneck, small.reasons[0]) == (False, "memory",
                                                               "does not fit: needs 2.5 GiB per GPU, has 0.9 GiB")
    unknown = _one(_machine(memory_bytes_per_gpu=None), Strategy(name="ddp", dp=8))
    assert (unknown.fits, unknown.headroom_bytes, unknown.reasons[0]) == (
        False, 0, "GPU memory unknown: cannot say whether it fits")
    no_peak = _one(_machine(peak_tflops={}), Strategy(name="ddp", dp=8))
    assert (no_peak.compute_s, no_peak.step_time_s, no_peak.bottleneck) == (None, None, "unknown")
    assert no_peak.reasons[1] == "no bf16 peak known for this GPU: no step time"
    no_busbw = _one(_machine(intra_node_busbw_gb_per_s=None), Strategy(name="ddp", dp=8))
    assert (no_busbw.communication_s, no_busbw.step_time_s, no_busbw.bottleneck) == (None, None, "unknown")


def test_across_two_nodes_by_hand():
    """2 nodes of 4: DDP's all-reduce crosses nodes at an assumed 40 GB/s (said): 435,539,328 B / 40e9 = 10.8884832
    ms; at a given 50 GB/s, 8.71078656 ms. PP 2 × DP 4: DP stays in a node (4 ≤ 4) at 100 GB/s, 2.4573312 ms; the
    pipeline crosses: 2 × 2 × 1,572,864 B / 40e9 = 0.1572864 ms. TP 8 spans nodes: discouraged (and 12 heads do not
    split over 8)."""
    two = _machine(gpus_per_node=4, nodes=2)
    ddp = _one(two, Strategy(name="ddp", dp=8))
    assert ddp.communication_s == pytest.approx(0.0108884832, rel=1e-12)
    assert ("inter-node busbw unknown: assumed 40 GB/s (one 400 Gb/s NIC per GPU); measure it to replace this"
            in ddp.reasons)
    given = _one(_machine(gpus_per_node=4, nodes=2, inter_node_busbw_gb_per_s=50.0), Strategy(name="ddp", dp=8))
    assert given.communication_s == pytest.approx(0.00871078656, rel=1e-12)
    pipeline = _one(two, Strategy(name="pp=2×dp=4", dp=4, pp=2, zero=1))
    assert pipeline.communication_s == pytest.approx(0.0024573312 + 0.0001572864, rel=1e-12)
    assert "PP across nodes: only point-to-point activations cross the network" in pipeline.reasons
    tp = _one(two, Strategy(name="tp=8", dp=1, tp=8))
    assert (tp.fits, tp.bottleneck, tp.reasons[0]) == (False, "invalid", "12 attention heads do not split over TP=8")
    assert "TP=8 spans nodes (4 GPUs per node): its all-reduces cross the network on every layer" in tp.reasons


def test_measured_figures_replace_the_assumed_ones():
    """validate's 400 TFLOP/s bf16 matmul and 50 GB/s all_reduce busbw: compute 7.005448e12 / (8 × 400e12) =
    2.18920255488 ms, communication 435,539,328 / 50e9 = 8.71078656 ms."""
    row = _one(_machine(measured={"all_reduce_busbw_gb_per_s": 50.0, "matmul_tflops_bf16": 400.0}),
               Strategy(name="ddp", dp=8))
    assert row.compute_s == pytest.approx(0.00218920255488, rel=1e-12)
    assert row.communication_s == pytest.approx(0.00871078656, rel=1e-12)
    assert row.reasons[1] == "compute at the measured 400 TFLOP/s bf16 matmul"


def test_tp_inside_and_beyond_the_nvlink_domain():
    """TP 4 × DP 2 on the NVSwitch: gradients 62,219,904 B × 2·1/2 / 100e9 = 0.62219904 ms; 4 micro-batches per
    replica × 4 all-reduces × 12 layers = 192 of 1,572,864 B × 2·3/4 / 100e9 = 23.59296 µs: 4.52984832 ms; 5.15204736
    ms in all. TP 8 on the 8-GPU NVSwitch (Llama-2 7B: 32 heads) is inside it; TP 2 on a PCIe-only box says so."""
    inside = _one(_machine(), Strategy(name="tp=4×dp=2", dp=2, tp=4, zero=1))
    assert inside.communication_s == pytest.approx(0.00515204736, rel=1e-12)
    assert inside.reasons[1] == "TP=4 inside the NVLink domain of 8"
    llama = TrainSetup(shape=PRESETS["llama2-7b"], seq=1024, micro_batch=1, precision="bf16")
    assert "TP=8 inside the NVLink domain of 8" in _one(_machine(), Strategy(name="tp=8", dp=1, tp=8), llama).reasons
    beyond = _one(_machine(nvlink_domain=1), Strategy(name="tp=2×dp=4", dp=4, tp=2, zero=1))
    assert beyond.reasons[1] == "TP=2 beyond the NVLink domain of 1: its all-reduces go over PCIe"


def test_batches_recompute_and_pipeline_depth():
    """A global batch of 10 on 8 replicas rounds up to 2 micro-batches each (said): 16,384 tokens, compute
    2.18920255488 ms. Selective recompute costs 2.7 % more compute (Korthikanti: 1.094601 × 1.027 = 1.12415551193
    ms), full recompute a third more (1.45946836992 ms). PP 12 on 12 GPUs (12 layers) is valid, PP 16 is not."""
    rounded = _one(_machine(), Strategy(name="ddp", dp=8), global_batch=10)
    assert rounded.compute_s == pytest.approx(0.00218920255488, rel=1e-12)
    assert "global batch 10 is not a multiple of micro-batch × DP = 8: rounded up" in rounded.reasons
    for recompute, compute in (("selective", 0.00112415551193088), ("full", 0.00145946836992)):
        setup = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=1, precision="bf16", recompute=recompute)
        assert _one(_machine(), Strategy(name="ddp", dp=8), setup).compute_s == pytest.approx(compute, rel=1e-12)
    deep = _one(_machine(gpus_per_node=12), Strategy(name="pp=12", dp=1, pp=12))
    assert (deep.fits, deep.bottleneck) == (True, "compute")
    assert "pipeline bubble (PP−1)/m = 1.38 with 8 micro-batches per step" in deep.reasons
    too_deep = _one(_machine(gpus_per_node=16), Strategy(name="pp=16", dp=1, pp=16))
    assert (too_deep.fits, too_deep.bottleneck, too_deep.reasons[0]) == (False, "invalid", "PP=16 exceeds the 12 layers")


def test_a_tp_pp_dp_grid_with_full_recompute_by_hand():
    """TP 2 × PP 2 × DP 2, micro-batch 2, full recompute, global batch 8: 4 samples a replica, 2 micro-batches,
    8,192 tokens; compute 1.09460127744 ms × 4/3 = 1.45946836992 ms.
    Gradients of the first stage over TP: 81,911,040 / 2 = 40,955,520 parameters, 81,911,040 B × 2·1/2 / 100e9 =
    0.8191104 ms. TP: full recompute repeats the forward's 2 all-reduces (Megatron: 6 a layer), of 2·s·b·h =
    3,145,728 B, × 6 layers a stage × 6 × 2 micro-batches = 72, each 3,145,728 × 2·1/2 / 100e9 = 31.45728 µs:
    2.26492416 ms. PP: 2 × 2 micro-batches × 3,145,728 / 2 B / 100e9 = 62.91456 µs. Communication 3.14694912 ms;
    bubble 1/2: step 1.5 × 1.45946836992 + 3.14694912 = 5.33615167488 ms."""
    setup = TrainSetup(shape=PRESETS["gpt2-small"], seq=1024, micro_batch=2, precision="bf16", recompute="full")
    row = _one(_machine(), Strategy(name="tp=2×pp=2×dp=2", dp=2, tp=2, pp=2, zero=1), setup)
    assert row.compute_s == pytest.approx(0.00145946836992, rel=1e-12)
    assert row.communication_s == pytest.approx(0.00314694912, rel=1e-12)
    assert row.step_time_s == pytest.approx(0.00533615167488, rel=1e-12)
