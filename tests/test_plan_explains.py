"""`plan` says why it chose (issue 32): the tie rule where it decides, one unit for memory (GiB), an ambiguous
`--machine` named as such, and how to get the batch/learning-rate advice.

The step times and memory figures are read from the plan's own document; what the tests work out by hand is the
rule's arithmetic (how much faster the faster layout is) and the unit conversions (80 GB = 80e9 / 2**30 GiB)."""

from __future__ import annotations

import re

import pytest

from gpuready.cli import main as cli
from gpuready.estimate.machine import MachineError, machine_from_description
from gpuready.verbs.plan.run import PlanOptions, run_plan

RULE = "but within 10 % the simpler wins: no PP, fewer GPUs per model copy (TP×PP), less memory"


@pytest.fixture(scope="module")
def llama_on_h100() -> dict:
    """The issue's case: Llama-2 7B on 8 H100 SXM, the default micro-batch and sequence."""
    return run_plan(PlanOptions(preset="llama2-7b", machine="8xH100-SXM")).to_dict()


def _console(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_tie_rule_is_given_where_it_decides(llama_on_h100):
    """tp=4×dp=2 is chosen though tp=4×pp=2 takes a shorter step: 0.080 against 0.078 s is within 10 %, and a layout
    without a pipeline is the simpler one. Its first reason, in the JSON and its catalogue form, says so."""
    rows = llama_on_h100["strategies"]
    chosen, fastest = rows[0], min((row for row in rows if row["fits"]), key=lambda row: row["step_time_s"])
    assert (chosen["name"], fastest["name"]) == ("tp=4×dp=2", "tp=4×pp=2")
    slower = chosen["step_time_s"] / fastest["step_time_s"]
    assert 1 < slower < 1.10
    assert chosen["memory_bytes"]["total"] > fastest["memory_bytes"]["total"]  # the rule, not memory, decided
    assert chosen["reasons"][0] == f"tp=4×pp=2 is {(slower - 1) * 100:.1f} % faster ({fastest['step_time_s']:.3g} s), " \
                                   + RULE
    assert chosen["reasons_text"][0]["message_id"] == "plan.reason.tie_rule"
    # the other rows keep their own reasons: the rule is said once, where it decided
    assert not any(reason.endswith(RULE) for row in rows[1:] for reason in row["reasons"])


def test_no_tie_rule_where_the_chosen_layout_is_also_the_fastest():
    """GPT-2 small on one H100 SXM: `single` is the only layout without offload and needs no rule."""
    rows = run_plan(PlanOptions(preset="gpt2-small", machine="1xH100-SXM")).to_dict()["strategies"]
    assert rows[0]["name"] == "single" and rows[0]["fits"]
    assert not any(reason.endswith(RULE) for reason in rows[0]["reasons"])


def test_the_console_prints_the_rule_and_memory_in_gib_only(capsys):
    code, out = _console(capsys, "--preset", "llama2-7b", "--machine", "8xH100-SXM")
    assert code == 0
    flat = " ".join(out.split())
    assert "strategies (best first), memory per GPU in GiB, bandwidth in GB/s" in out
    assert "chosen: tp=4×dp=2," in out and "why: tp=4×pp=2 is " in flat and RULE in flat
    # 80 GB = 80e9 / 2**30 = 74.5 GiB: the machine line and the reasons say GiB, never a decimal GB of memory
    assert "machine: 8× H100 SXM, 74.5 GiB per GPU (description 8xH100-SXM)" in out
    assert not re.search(r"\d GB\b(?!/s)", out), re.findall(r".{30}\d GB\b(?!/s).{10}", out)


def test_an_ambiguous_machine_lists_the_matching_entries():
    with pytest.raises(MachineError) as raised:
        machine_from_description("8xH100")
    said = str(raised.value)
    assert "'H100' matches several GPUs of gpuready's table (H100 NVL, H100 PCIe, H100 SXM); name one" in said
    with pytest.raises(MachineError, match=r"\(A100 PCIe 80GB, A100 SXM4 80GB\)"):
        machine_from_description("8xA100 80GB")


def test_an_ambiguous_machine_is_a_usage_error_in_one_sentence(capsys):
    code, out = _console(capsys, "--preset", "llama2-7b", "--machine", "8xH100")
    assert code == 2
    assert out.strip().count("\n") == 0 and "Traceback" not in out
    assert "H100 NVL, H100 PCIe, H100 SXM" in out and "--machine 8x" in out


@pytest.mark.parametrize(("description", "model"), [
    ("8xH100-SXM", "H100 SXM"),  # the table's name
    ("8xH200", "H200 SXM"),  # nvidia-smi names the SXM board `NVIDIA H200`
    ("2x4090", "RTX 4090"),  # the only row holding the word
    ("4xH100 NVL", "H100 NVL"),
])
def test_an_exact_or_unique_machine_still_works(description, model):
    assert machine_from_description(description).gpu_name == model


def test_without_a_known_run_the_console_says_how_to_get_batch_and_lr(capsys):
    hint = "batch and learning rate: give --known-batch, --known-lr and --known-gpus of a run that trained well"
    _, out = _console(capsys, "--preset", "gpt2-small", "--machine", "8xH100-SXM")
    assert hint in " ".join(out.split())
    _, out = _console(capsys, "--preset", "gpt2-small", "--machine", "8xH100-SXM", "--known-batch", "256",
                      "--known-lr", "3e-4", "--known-gpus", "4")
    assert hint not in " ".join(out.split()) and "learning rate 0.0003 →" in " ".join(out.split())


def test_the_hint_and_the_rule_are_said_in_chinese(capsys):
    _, out = _console(capsys, "--preset", "llama2-7b", "--machine", "8xH100-SXM", "--lang", "zh")
    flat = " ".join(out.split())
    assert "tp=4×pp=2 快 " in flat and "以内更简单的布局优先" in flat
    assert "--known-batch、--known-lr 和 --known-gpus" in flat and "GiB" in flat
