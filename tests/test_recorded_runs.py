"""Reports recorded on the H200 under real faults (tests/fixtures/h200-shared-gpu): they render again from the saved
document, and they say what a user must read in them."""

import json
from pathlib import Path

import pytest
from rich.console import Console

from gpuready.report.console import render_console

RECORDED = Path(__file__).parent / "fixtures" / "h200-shared-gpu"


def _load(name):
    return json.loads((RECORDED / name).read_text())


def _text(document, lang="en"):
    console = Console(record=True, width=200)
    render_console(document, console=console, lang=lang)
    return console.export_text()


@pytest.mark.parametrize("name", sorted(path.name for path in RECORDED.glob("*.json")))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_recorded_reports_render_again(name, lang):
    text = _text(_load(name), lang)
    assert text.startswith("vm: ")


def test_foreign_loop_burn_blames_the_other_process_not_the_gpu():
    report = _load("burn-foreign-loop.json")
    by_id = {f["check_id"]: f for f in report["findings"]}
    assert (by_id["burn.gpu_shared"]["status"], by_id["burn.errors"]["status"]) == ("warn", "pass")
    assert by_id["burn.throughput_low"]["status"] == "fail"
    assert "Another process shares this GPU (pid 2032 (python3)" in by_id["burn.throughput_low"]["message"]
    text = _text(report)
    assert "NOT READY" in text and "pid 2032 (python3) holding 0.9 GiB" in text


def test_memory_held_by_another_process_is_not_a_silent_error():
    report = _load("burn-memory-held.json")
    statuses = {f["check_id"]: f["status"] for f in report["findings"]}
    assert statuses["burn.gpu_shared"] == "warn" and statuses["burn.errors"] == "pass"
    assert "burn.failed" not in statuses and report["exit_code"] == 0


def test_a_sigterm_report_keeps_its_figures_and_says_it_was_stopped():
    report = _load("validate-sigterm.json")
    assert report["exit_code"] == 143 and report["facts"]["validate"]["interrupted_by"] == "SIGTERM"
    assert [m["name"] for m in report["measurements"]][:2] == ["matmul_tflops_bf16", "matmul_tflops_fp16"]
    assert report["findings"][0]["check_id"] == "validate.interrupted"
