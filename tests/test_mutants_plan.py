"""Tests that kill the mutants of verbs/plan/ that survived the suite (issue 23, mutation testing; the run and its
module → test-file table are in benchmarks/mutation_score.sh).

Every figure is worked out by hand in the test's docstring from a published source (a paper, a datasheet, a Hugging
Face config), never recomputed with plan's own formulas.
"""

from __future__ import annotations

from gpuready.shapes import PRESETS
from gpuready.verbs.plan.memory import Strategy, TrainSetup, memory_per_gpu

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
