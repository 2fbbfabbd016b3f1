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


# What each recording must say, read off the runs (README.md there): burn --exclusive refused to start on the GPU
# another process computed on (one fail, nothing measured); burn beside the foreign loop ran at 47 % of its
# expectation (throughput fails, the sharing warns, 8 checks pass); burn beside 130.5 GiB held elsewhere ran at full
# speed (only the sharing warns); validate beside the loop: five compute rates and the memory bandwidth fail, the
# sharing warns, NCCL is skipped on one GPU; validate stopped by SIGTERM warns that it was interrupted and keeps 7
# passing checks. (verdict, zh verdict, fail, warn, pass, skip)
RECORDED_OUTCOMES = {
    "burn-exclusive.json": ("NOT READY", "未就绪 NOT READY", 1, 0, 0, 0),
    "burn-foreign-loop.json": ("NOT READY", "未就绪 NOT READY", 1, 1, 8, 0),
    "burn-memory-held.json": ("READY WITH WARNINGS", "就绪但有警告 READY WITH WARNINGS", 0, 1, 9, 0),
    "validate-foreign-loop.json": ("NOT READY", "未就绪 NOT READY", 6, 1, 4, 1),
    "validate-sigterm.json": ("READY WITH WARNINGS", "就绪但有警告 READY WITH WARNINGS", 0, 1, 7, 0),
}


@pytest.mark.parametrize("name", sorted(RECORDED_OUTCOMES))
def test_recorded_reports_render_again(name):
    assert sorted(path.name for path in RECORDED.glob("*.json")) == sorted(RECORDED_OUTCOMES)
    verdict, verdict_zh, fail, warn, passed, skip = RECORDED_OUTCOMES[name]
    document = _load(name)
    english, chinese = _text(document).splitlines(), _text(document, "zh").splitlines()
    assert english[0] == f"vm: {verdict}" and chinese[0] == f"vm: {verdict_zh}"
    assert english[2] == f"{fail} fail, {warn} warn, {passed} pass, {skip} skip"
    assert chinese[2] == f"失败 {fail}，警告 {warn}，通过 {passed}，跳过 {skip}"
    # every finding a user must act on is shown with its status, id and whole message; skips are counted
    flat = " ".join(" ".join(english).split())
    assert (f"{skip} check(s) skipped" in flat) == bool(skip)
    for finding in document["findings"]:
        if finding["status"] in ("fail", "warn"):
            assert f"{finding['status'].upper()} {finding['check_id']}" in flat
            assert " ".join(finding["message"].split()) in flat
    for measurement in document["measurements"]:  # per-collective latencies only with --verbose
        assert (measurement["name"] in flat) == ("latency" not in measurement["name"])


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
