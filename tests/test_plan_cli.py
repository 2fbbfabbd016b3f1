"""`gpuready plan` and `gpuready launch` from the command line: the interface other tools script against."""

import json
import subprocess
import sys

import pytest

from gpuready.cli import main as cli

jsonschema = pytest.importorskip("jsonschema")
from test_diagnose_cli import SCHEMA  # noqa: E402

GPT2_SMALL = ["--layers", "12", "--hidden", "768", "--heads", "12", "--vocab", "50257", "--seq", "1024"]


def _plan(capsys, *args):
    code = cli.main(["plan", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def test_every_strategy_with_its_memory_terms(capsys):
    code, report, _ = _plan(capsys, *GPT2_SMALL, "--micro-batch", "8", "--nproc-per-node", "8", "--machine", "8xH100-SXM",
                            "--precision", "amp-bf16", "--optimizer", "adamw", "--recompute", "none")
    jsonschema.validate(report, SCHEMA)
    names = [row["name"] for row in report["strategies"]]
    assert {"ddp", "zero1", "zero2", "fsdp"} <= set(names) and any(name.startswith("tp=") for name in names)
    for row in report["strategies"]:
        terms = row["memory_bytes"]
        assert set(terms) == {"parameters", "gradients", "optimizer", "activations", "other", "backward_working",
                              "total"}
        # the peak is one of two moments: the start of backward (no gradients yet) or its end (all of them)
        start = terms["activations"]
        end = terms["gradients"] + terms["backward_working"]
        assert terms["total"] == terms["parameters"] + terms["optimizer"] + terms["other"] + max(start, end)
        assert row["memory_peak"] == ("backward_end" if end > start else "backward_start")
        assert isinstance(row["fits"], bool)
    ddp = next(row for row in report["strategies"] if row["name"] == "ddp")
    # model states of mixed-precision Adam under DDP: 16 bytes per parameter (ZeRO paper, 2 + 2 + 12)
    states = ddp["memory_bytes"]["parameters"] + ddp["memory_bytes"]["gradients"] + ddp["memory_bytes"]["optimizer"]
    assert states == 16 * 124_439_808
    assert code == 0 and report["findings"][0]["check_id"] == "plan.fits"


def test_one_strategy_and_no_fit_is_exit_1(capsys):
    code, report, _ = _plan(capsys, "--preset", "llama2-7b", "--machine", "1xRTX4090", "--strategies", "single")
    assert [row["name"] for row in report["strategies"]] == ["single"]
    assert report["strategies"][0]["fits"] is False
    assert code == 1 and report["findings"][0]["status"] == "fail"


def test_without_a_gpu_or_machine_memory_is_given_and_fit_not_judged(capsys, monkeypatch):
    from gpuready.verbs.plan import run
    monkeypatch.setattr(run, "plan_machine", lambda options: None)
    code, report, _ = _plan(capsys, *GPT2_SMALL, "--nproc-per-node", "8")
    assert code == 0 and all(row["fits"] is None for row in report["strategies"])
    assert [(f["check_id"], f["status"]) for f in report["findings"]] == [("plan.fits", "skip")]


def test_inference_and_batch_scaling(capsys):
    code, report, _ = _plan(capsys, "--preset", "llama3-70b", "--machine", "8xH200-SXM", "--task", "infer",
                            "--batch", "1", "--context", "4096")
    assert report["inference"][0]["tp"] == 2 and report["inference"][0]["fits"] is True
    code, report, _ = _plan(capsys, *GPT2_SMALL, "--machine", "8xH100-SXM", "--known-batch", "256",
                            "--known-lr", "3e-4", "--known-gpus", "1", "--micro-batch", "8")
    assert report["batch"]["rule"] == "sqrt" and report["batch"]["verify"] is False  # 8x: at the boundary


def test_bad_plan_options_exit_2(capsys):
    assert cli.main(["plan", "--layers", "2"]) == 2
    assert "give the model" in capsys.readouterr().err
    assert cli.main(["plan", "--preset", "gpt5"]) == 2
    assert cli.main(["plan", "--preset", "gpt2-small", "--machine", "8xTPU"]) == 2
    assert cli.main(["plan", "--preset", "gpt2-small", "--utilisation", "1.5"]) == 2


def test_launch_prints_a_script_bash_accepts(tmp_path, capsys):
    assert cli.main(["launch", "slurm", "--nnodes", "2", "--nproc-per-node", "8", "--", "train.py", "--lr", "3e-4",
                     "a b"]) == 0
    script = capsys.readouterr().out
    assert "#SBATCH --nodes=2" in script and "train.py --lr 3e-4 'a b'" in script
    (tmp_path / "job.sbatch").write_text(script)
    assert subprocess.run(["bash", "-n", str(tmp_path / "job.sbatch")]).returncode == 0
    assert cli.main(["launch", "slurm", "--nnodes", "2", "--nproc-per-node", "8"]) == 2
    assert "after `--`" in capsys.readouterr().err
    assert cli.main(["launch", "slurm", "--run", "--nproc-per-node", "1", "--", "x.py"]) == 2


def test_measured_figures_replace_the_datasheet_assumption(capsys):
    from pathlib import Path
    report_path = Path(__file__).parent / "fixtures" / "plan" / "h200-validate-compute.json"
    base = ["--preset", "gpt2-xl", "--machine", "1xH200-SXM", "--micro-batch", "8", "--strategies", "single"]
    _, assumed, _ = _plan(capsys, *base)
    _, measured, _ = _plan(capsys, *base, "--validate-report", str(report_path))
    assert any("assumed" in reason for reason in assumed["strategies"][0]["reasons"])
    assert any("measured 770.692 TFLOP/s" in reason for reason in measured["strategies"][0]["reasons"])
    # the same FLOPs at 770.7 instead of 0.8 x 989 = 791.2 TFLOP/s: 791.2 / 770.692 longer
    ratio = measured["strategies"][0]["compute_s"] / assumed["strategies"][0]["compute_s"]
    assert ratio == pytest.approx(791.2 / 770.692, rel=1e-3)
    assert cli.main(["plan", *base, "--validate-report", str(Path(__file__))]) == 2
