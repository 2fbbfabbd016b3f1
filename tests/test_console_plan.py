"""`plan` on the console prints what its JSON holds: memory per GPU per strategy (inference included), the chosen
strategy and why in at most three lines, batch and learning rate, power and cooling, cost; and no machine verdict."""

import io
import re

import pytest
from rich.console import Console

from gpuready.report.console import render_console
from gpuready.verbs.plan.run import PlanOptions, run_plan

WIDTH = 80
GIB = 2**30


def render(document, verbose=False, lang="en"):
    stream = io.StringIO()
    render_console(document, Console(file=stream, width=WIDTH), verbose=verbose, lang=lang)
    return stream.getvalue()


def flat(text):
    return " ".join(text.split())


@pytest.fixture(scope="module")
def inference():
    return run_plan(PlanOptions(preset="llama3-70b", task="infer", machine="8xH200")).to_dict()


@pytest.fixture(scope="module")
def training():
    return run_plan(PlanOptions(preset="llama2-7b", machine="8xH200", known_batch=256, known_lr=3e-4,
                                known_gpus=4)).to_dict()


def test_inference_shows_the_gib_per_gpu_of_its_json(inference):
    out = render(inference)
    rows = inference["inference"]
    assert [row["tp"] for row in rows] == [2, 4, 8, 1]
    for row in rows:  # TP, fits, GiB per GPU, weights, KV cache: the JSON's figures
        cells = [str(row["tp"]), "yes" if row["fits"] else "no", f"{row['total_bytes'] / GIB:,.1f}",
                 f"{row['weights_bytes'] / GIB:,.1f}", f"{row['kv_cache_bytes'] / GIB:,.1f}"]
        assert re.search(r"^\s*" + r"\s+".join(map(re.escape, cells)), out, re.M), cells
    assert " 2  yes          66.5         65.7           0.2  the fewest GPUs that fit" in out
    fits = next(f for f in inference["findings"] if f["check_id"] == "plan.infer_fits")
    assert fits["message"] == "Fits with tensor parallelism 2: 66.5 GiB per GPU."  # was "0.0 GiB per GPU"
    assert "0.0 GiB" not in out


def test_a_plan_prints_no_machine_verdict(inference, training):
    for document in (inference, training):
        out = render(document)
        assert out.startswith("plan (an estimate, not a verdict on a machine)\n0 fail, 1 warn, 3 pass, 0 skip\n")
        assert "READY" not in out and document["host"] + ":" not in out
    assert render(training, lang="zh").startswith("规划 plan（估算，不是对某台机器的结论）\n")


def test_training_plan_on_one_screen(training):
    out = render(training)
    lines = out.splitlines()
    assert "model: llama2-7b (6.7 B parameters)" in lines
    assert "machine: 8× H200 SXM, 131.3 GiB per GPU (description 8xH200)" in lines  # 141e9 / 2**30
    # memory per GPU per strategy: the eight best, then how many more
    table = lines[lines.index("strategies (best first), memory per GPU in GiB, bandwidth in GB/s") + 2:][:8]
    for line, row in zip(table, training["strategies"]):
        assert line.split()[:4] == [row["name"], "yes", f"{row['memory_bytes']['total'] / GIB:,.1f}",
                                    f"{row['step_time_s']:.3f}"]
    assert "8 more strategies; --verbose or --json lists them." in lines
    # the chosen strategy and why: three lines at most
    picked = next(row for row in training["strategies"] if row["fits"])
    total = picked["memory_bytes"]["total"]  # the view shows the document's figure
    chosen = lines.index(f"chosen: tp=4×dp=2, {total / GIB:.1f} GiB per GPU, about 0.080 s per step (compute-bound)")
    why = lines[chosen + 1:lines.index("batch and learning rate") - 1]
    # steps within 10 % count as equal and the simpler layout (no PP) wins: the faster one is named (issue 32)
    fitting = [row for row in training["strategies"] if row["fits"]]
    fastest = min(fitting, key=lambda row: row["step_time_s"])
    faster = (picked["step_time_s"] / fastest["step_time_s"] - 1) * 100
    assert fastest["name"] == "tp=4×pp=2" and 0 < faster < 10
    assert 1 <= len(why) <= 2 and why[0].startswith(f"why: tp=4×pp=2 is {faster:.1f} % faster (")
    assert flat("the simpler wins: no PP, fewer GPUs per model copy (TP×PP), less memory (4 more reason(s): "
                "--verbose)") in flat("\n".join(why))
    assert picked["reasons"][1] == f"fits: {total / GIB:.1f} of 131.3 GiB per GPU"
    assert "loss logits in fp32 (as Hugging Face upcasts); --logits bf16 keeps them 16-bit" in lines
    assert flat("global batch 256 on 4 GPU(s) → 512 on 8 GPU(s) (×2; micro-batch 1 × 64 accumulation step(s)); "
                "learning rate 0.0003 → 0.000424264 (sqrt rule, adamw)") in flat(out)
    assert flat(training["batch"]["warmup"]) in flat(out)
    assert flat("energy ≈ 7,446 kWh a month ≈ $1,117 at $0.15/kWh") in flat(out)
    for entry in training["power"]["findings"]:  # PSU and cooling (passes) under power; the circuit as a problem
        assert flat(entry["message"]) in flat(out)
    assert "WARN plan.power_circuit" in lines
    assert flat(training["cost"]["message"]) in flat(out)
    assert len(lines) <= 60 and max(map(len, lines)) <= WIDTH and len(out) < 5000


def test_verbose_plan_lists_every_strategy_with_all_its_reasons(training):
    out = render(training, verbose=True)
    for row in training["strategies"]:
        assert re.search(rf"^{re.escape(row['name'])}\s", out, re.M), row["name"]
    assert "more strategies" not in out and "more reason" not in out
    for row in training["strategies"]:  # every reason of every strategy, whole
        assert flat(f"{row['name']}: " + "; ".join(row["reasons"])) in flat(out), row["name"]
    assert max(map(len, out.splitlines())) <= WIDTH


def test_memory_only_plan_has_no_chosen_strategy():
    document = {  # as `plan` writes it on a machine without GPUs and without --machine
        "facts": {"plan": {"model": {"name": "gpt2-small", "parameters": 124_000_000}, "machine": None}},
        "strategies": [{"name": "ddp", "fits": None, "memory_bytes": {"total": 3 * GIB}}],
        "findings": [{"check_id": "plan.fits", "status": "skip", "message": "No GPU here and no --machine."}]}
    out = render(document)
    assert "model: gpt2-small (0.1 B parameters)" in out and "\nddp       ?             3.0       -  -" in out
    assert "chosen" not in out and "1 check(s) skipped" in out
