"""A run on CPU ranks is no verdict on a machine: `"verdict": "no_verdict"` with `"no_verdict_reason": "cpu_run"` in
the JSON, and every view says so (issue 32); older saved CPU reports that still say `ready` are read the same way."""

import io
import json
from importlib import resources
from pathlib import Path

import pytest
from rich.console import Console

from gpuready.model import CPU_RUN, Report
from gpuready.report.compare import _summary
from gpuready.report.console import render_console
from gpuready.report.document import shown_verdict
from gpuready.report.html import render_html
from gpuready.report.junit import junit_xml
from gpuready.report.markdown import markdown_summary
from gpuready.runner.local import RunOutcome
from gpuready.verbs.validate.run import build_report

FIXTURE = Path(__file__).parent / "fixtures" / "cpu-bench" / "bench-tiny-2ranks-1.json"
H200 = Path(__file__).parent / "fixtures" / "h200-bench" / "bench-760M-bf16-mb4.json"


def console_text(document):
    stream = io.StringIO()
    render_console(document, Console(file=stream, width=200, color_system=None))
    return stream.getvalue()


def recorded():
    return json.loads(FIXTURE.read_text())


def older(document):
    """The same document as gpuready wrote it before `no_verdict` (issue 32): `ready`, no reason."""
    document = dict(document, verdict="ready", verdicts={"single_node": "ready", "multi_node": "ready"})
    document.pop("no_verdict_reason", None)
    return document


def test_a_cpu_run_says_no_verdict_in_its_json_and_keeps_its_exit_code():
    data = Report(tool_version="t", host="vm", no_verdict_reason=CPU_RUN).to_dict()
    assert (data["verdict"], data["verdicts"], data["no_verdict_reason"], data["exit_code"]) == (
        "no_verdict", {"single_node": "no_verdict", "multi_node": "no_verdict"}, "cpu_run", 0)
    assert "no_verdict_reason" not in Report(tool_version="t", host="vm").to_dict()


def test_the_recorded_cpu_bench_says_no_verdict_and_matches_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("gpuready").joinpath("schema/report.schema.json").read_text())
    document = recorded()
    assert (document["verdict"], document["no_verdict_reason"], document["exit_code"]) == ("no_verdict", "cpu_run", 0)
    jsonschema.validate(document, schema)


def test_validate_on_cpu_ranks_is_no_verdict_and_on_gpus_a_verdict():
    cpu = build_report(RunOutcome(results={0: {"rank": 0}}, failures=[]), None, "vm", device="cpu")
    gpu = build_report(RunOutcome(results={0: {"rank": 0}}, failures=[]), None, "vm", device="cuda")
    assert (cpu.to_dict()["verdict"], gpu.to_dict()["verdict"]) == ("no_verdict", "ready")


@pytest.mark.parametrize("make", [recorded, lambda: older(recorded())], ids=["new", "older"])
def test_every_view_says_no_verdict(make, tmp_path):
    document = make()
    assert shown_verdict(document) == "no_verdict"
    assert _summary(document, "f.json")["verdict"] == "no_verdict"
    junit = junit_xml([document]).decode()
    for text in (console_text(document), markdown_summary([document]), render_html([document], "en")):
        assert "not a verdict on a machine" in text and "READY" not in text
    assert "verdict: NO VERDICT (a CPU-only run is no verdict on a machine)" in junit and "READY" not in junit


def test_a_gpu_report_keeps_its_verdict():
    document = json.loads(H200.read_text())
    assert shown_verdict(document) == document["verdict"] != "no_verdict"
