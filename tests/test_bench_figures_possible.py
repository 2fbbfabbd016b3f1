"""A bench figure that cannot be right is not printed as a measurement (issue 32): a scaling efficiency above 100 %
beyond the step times' noise and a negative exposed communication become `not measurable: <why>` in the JSON
(value NaN, the reason and the computed figure in the method) and in every view; figures within reach stay numbers."""

import io
import json
import math
from pathlib import Path

from rich.console import Console

from gpuready.report.console import render_console
from gpuready.report.figures import value_text
from gpuready.report.html import render_html
from gpuready.report.junit import junit_xml
from gpuready.report.labels import labels_for
from gpuready.report.markdown import markdown_summary
from gpuready.verbs.bench.judge import BenchJudge, median_noise

FIXTURES = Path(__file__).parent / "fixtures"
CPU = FIXTURES / "cpu-bench" / "bench-tiny-2ranks-1.json"


def rank(strategy, world_size, steps, device="cuda"):
    return {"strategy": strategy, "world_size": world_size, "precision": "bf16", "seq": 100, "micro_batch": 1,
            "accumulation": 1, "tokens_per_step": 100 * world_size, "step_times_s": steps, "device_type": device,
            "peak_reserved_bytes": None if device == "cpu" else 1 << 30, "versions": {}}


def judged(single_steps, ddp_steps, device="cuda"):
    runs = [{"strategy": name, "world_size": n, "telemetry": None,
             "results": {r: rank(name, n, steps, device) for r in range(n)}}
            for name, n, steps in (("single", 1, single_steps), ("ddp", 2, ddp_steps))]
    judge = BenchJudge("node", runs)
    judge.judge()
    return {m.name: m for m in judge.measurements if m.method.get("strategy") == "ddp"}, judge


def test_a_slower_n_rank_step_keeps_its_figures():
    figures, _ = judged([0.100] * 5, [0.105] * 5)
    assert round(figures["scaling_efficiency"].value, 6) == round(0.100 / 0.105, 6) == 0.952381
    assert round(figures["exposed_communication_s"].value, 6) == 0.005
    assert "not_measurable" not in figures["scaling_efficiency"].method


def test_a_faster_n_rank_step_beyond_noise_is_not_measurable():
    figures, judge = judged([0.100] * 5, [0.090] * 5, device="cpu")
    for name in ("scaling_efficiency", "exposed_communication_s", "exposed_communication_share"):
        assert math.isnan(figures[name].value) and figures[name].samples == []
    assert figures["scaling_efficiency"].method["computed_value"] == 1.111111
    assert figures["exposed_communication_s"].method["computed_value"] == -0.01
    assert figures["scaling_efficiency"].method["not_measurable"].startswith("the computed 111.1% is above 100 %")
    scaling = [f for f in judge.findings if f.check_id == "bench.scaling_low"][0]
    assert "vs 1,000 for single on 1 CPU rank, scaling efficiency not measurable" in scaling.message
    assert "on one GPU" not in scaling.message


def test_within_noise_above_one_stays_a_figure():
    noisy = [0.080, 0.090, 0.100, 0.110, 0.120]  # IQR 0.02 s: ±2σ of the median ≈ 12 % per run
    assert round(median_noise(noisy), 4) == round(1.2533 * (0.02 / 1.349) / math.sqrt(5) / 0.100, 4) == 0.0831
    figures, _ = judged(noisy, [s * 0.97 for s in noisy])
    assert round(figures["scaling_efficiency"].value, 4) == round(1 / 0.97, 4) == 1.0309


def test_the_recorded_cpu_run_prints_not_measurable_in_every_view():
    document = json.loads(CPU.read_text())
    fsdp = {m["name"]: m for m in document["measurements"] if m["method"]["strategy"] == "fsdp2"}
    steps = {m["method"]["strategy"]: m["value"] for m in document["measurements"] if m["name"] == "step_time_s"}
    assert (steps["single"], steps["fsdp2"]) == (0.142071, 0.079065)
    assert fsdp["scaling_efficiency"]["value"] == {"value": None, "raw": "nan"}
    # from the recorded medians (rounded to the microsecond, hence the tolerance): 256 vs 2 × 128 tokens per step
    assert abs(fsdp["scaling_efficiency"]["method"]["computed_value"] - 0.142071 / 0.079065) < 1e-5
    assert abs(fsdp["exposed_communication_s"]["method"]["computed_value"] - (0.079065 - 0.142071)) < 1e-5
    why = value_text(fsdp["exposed_communication_s"])
    assert why == ("not measurable: the median step of fsdp2 on 2 CPU ranks was 63.0 ms shorter than that of single "
                   "on 1 CPU rank for the same work per rank, so no communication time can be read off it")
    assert value_text(fsdp["exposed_communication_s"], labels_for("zh")).startswith("无法测量 not measurable：")
    stream = io.StringIO()
    render_console(document, Console(file=stream, width=400, color_system=None))
    for text in (stream.getvalue(), markdown_summary([document]), render_html([document], "en"),
                 junit_xml([document]).decode()):
        assert "not measurable: the computed 179.7% is above 100 %" in text
        assert "63.0 ms shorter" in text and "-63.0 ms" not in text and "179.7%" not in text.replace("computed 179.7%", "")


def test_recorded_gpu_reports_show_numbers_only():
    for path in sorted((FIXTURES / "h200-bench").glob("*.json")):
        document = json.loads(path.read_text())
        assert all(not value_text(m).startswith("not measurable") for m in document["measurements"])
