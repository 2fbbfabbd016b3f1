"""One convention for the loss's logits in `plan` and `bench` (issue 32): `--logits fp32` (the default: Hugging Face's
causal-LM heads upcast the logits before the loss) or `--logits bf16` (a plain nanoGPT-style loop keeps them in the
model's 16-bit dtype). plan's memory model and bench's model both follow it, and the console says which one.

The memory delta is worked out here from first principles, not from plan's formula: when backward starts, the loss
holds three tensors of batch × seq × vocab elements in its own dtype: nll_loss's gradient, log_softmax's saved
output and log_softmax's input gradient (PyTorch derivatives.yaml: `_log_softmax_backward_data(grad, result, ...)`);
4 bytes each in fp32, 2 in bf16. The issue measured 2.2 GiB less with bf16 logits on a 760M model on one H100."""

from __future__ import annotations

import pytest

from gpuready.cli import main as cli
from gpuready.estimate.memory import Strategy, TrainSetup, memory_per_gpu
from gpuready.shapes import PRESETS
from gpuready.verbs.bench.run import BenchOptions, train_settings

GPT3_760M = PRESETS["gpt3-760m"]
SINGLE = Strategy(name="single", dp=1)


def _setup(logits: str, precision: str = "amp-bf16") -> TrainSetup:
    return TrainSetup(shape=GPT3_760M, seq=2048, micro_batch=4, precision=precision, logits=logits)


def test_bf16_logits_save_three_vocabulary_sized_tensors_of_two_bytes():
    """GPT-3 760M (vocabulary 50,257), micro-batch 4 × 2,048 tokens = 8,192 positions × 50,257 logits =
    411,705,344 logits; three tensors each, 4 − 2 = 2 bytes less per element: 2,470,232,064 bytes = 2.30 GiB less
    at the start of backward, where this run peaks (the issue measured 2.2 GiB on an H100)."""
    logits = 4 * 2048 * 50_257
    assert logits == 411_705_344
    expected = logits * 3 * (4 - 2)
    assert expected == 2_470_232_064
    fp32, bf16 = memory_per_gpu(_setup("fp32"), SINGLE), memory_per_gpu(_setup("bf16"), SINGLE)
    assert fp32.peak_phase == bf16.peak_phase == "backward_start"
    assert fp32.activations - bf16.activations == expected
    assert fp32.allocated - bf16.allocated == expected  # what max_memory_allocated() would show
    assert fp32.terms["cross_entropy_bytes"] == logits * 3 * 4 and bf16.terms["cross_entropy_bytes"] == logits * 3 * 2
    assert fp32.model_states == bf16.model_states  # weights, gradients, AdamW: untouched


def test_in_fp32_training_the_logits_are_fp32_either_way():
    fp32, bf16 = (memory_per_gpu(_setup(logits, precision="fp32"), SINGLE) for logits in ("fp32", "bf16"))
    assert fp32.total == bf16.total


def test_an_unknown_convention_is_refused():
    with pytest.raises(ValueError, match="--logits 'fp16': one of fp32, bf16"):
        _setup("fp16")


def test_plan_takes_the_option_and_records_it(capsys):
    code = cli.main(["plan", "--preset", "gpt3-760m", "--machine", "1xH100-SXM", "--seq", "2048",
                     "--micro-batch", "4", "--logits", "bf16"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "loss logits in bf16 (as nanoGPT); --logits fp32 upcasts as Hugging Face does" in out
    assert cli.main(["plan", "--preset", "gpt3-760m", "--logits", "fp16"]) == 2
    assert "--logits" in capsys.readouterr().err


def test_bench_passes_the_convention_to_every_run():
    options = BenchOptions(preset="tiny", logits="bf16")
    settings = train_settings(options, PRESETS["tiny"], "ddp", 2)
    assert settings["logits"] == "bf16"
    assert train_settings(BenchOptions(preset="tiny"), PRESETS["tiny"], "ddp", 2)["logits"] == "fp32"


torch = pytest.importorskip("torch")


class _Spy:
    """torch.nn.functional as gpt.py sees it, noting the dtype cross_entropy is given."""

    def __init__(self, functional) -> None:
        self.functional, self.dtypes = functional, []

    def __getattr__(self, name):
        return getattr(self.functional, name)

    def cross_entropy(self, logits, *args, **kwargs):
        self.dtypes.append(logits.dtype)
        return self.functional.cross_entropy(logits, *args, **kwargs)


@pytest.mark.parametrize(("precision", "logits", "dtype"), [
    ("amp-bf16", "fp32", torch.float32), ("amp-bf16", "bf16", torch.bfloat16),
    ("bf16", "fp32", torch.float32), ("bf16", "bf16", torch.bfloat16)])
def test_bench_cpu_run_builds_the_loss_in_the_chosen_dtype(monkeypatch, precision, logits, dtype):
    """bench's training workload on a CPU rank (the path `bench --device cpu` takes): the loss is computed on logits
    of the chosen dtype, under autocast too (which would otherwise run cross_entropy in fp32), and the loss itself
    comes out in that dtype."""
    import gpuready.workloads.gpt as gpt
    from test_workload_train import TINY, fake_ctx
    from gpuready.workloads.train import run_train

    spy = _Spy(gpt.F)
    monkeypatch.setattr(gpt, "F", spy)
    result = run_train(fake_ctx({**TINY, "strategy": "single", "precision": precision, "logits": logits,
                                 "warmup_steps": 0, "steps": 1}))
    assert result["logits"] == logits and result["loss_first"] > 0
    assert spy.dtypes and set(spy.dtypes) == {dtype}


def test_the_model_refuses_an_unknown_convention():
    from gpuready.workloads.gpt import build_model
    with pytest.raises(ValueError, match="logits 'fp16': one of fp32, bf16"):
        build_model(PRESETS["tiny"], logits="fp16")
