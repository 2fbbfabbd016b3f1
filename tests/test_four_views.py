"""One result, one story (issue 32): the console, HTML, Markdown and JUnit views of the same document state the same
verdict word, the same headline and every measurement's figure with the same unit.

Documents: the recorded saved reports under tests/fixtures (validate, burn, bench on one H200, a bench of two CPU
ranks with figures that are not measurable), a check of the recorded H200 bundle, diagnoses of recorded DCGM and
torchrun logs, and a plan for a published model on 8×H200 (plan writes no saved report among the fixtures; it is made
the way `plan --json` makes it). Each expected string is read from the JSON and written here the way a reader writes
the unit (`69,950 tokens/s`, `117.1 ms`, `18.0 GiB`, `38.5%`), then looked for in each view's text: the console as
printed, HTML as its text content (scripts and styles aside), Markdown with its escapes undone, JUnit as the XML's
text and attribute values.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.report.console import render_console
from gpuready.report.html import render_html
from gpuready.report.junit import junit_xml
from gpuready.report.markdown import markdown_summary
from gpuready.verbs.diagnose.run import diagnose
from helpers import report_for

SAVED = sorted([*FIXTURES.glob("h200-bench/*.json"), *FIXTURES.glob("h200-shared-gpu/*.json"),
                FIXTURES / "h200-burn" / "burn-60s-report.json", *FIXTURES.glob("h200-validate-timing/*.json"),
                FIXTURES / "cpu-bench" / "bench-tiny-2ranks-1.json"])
LOGS = [FIXTURES / "diagnose" / "dcgm" / "diag_targeted_power_fail_sagemaker.txt",
        FIXTURES / "diagnose" / "recorded" / "torchrun-sigkill.log",
        FIXTURES / "diagnose" / "nccl" / "lo-connect-refused-horovod-584.log"]
VERDICT_WORDS = {"ready": "READY", "ready_with_warnings": "READY WITH WARNINGS", "not_ready": "NOT READY",
                 "no_verdict": "NO VERDICT", "unknown": "UNKNOWN"}
FAILING = ("fail", "error")


def documents() -> list[tuple[str, dict]]:
    found = [(path.relative_to(FIXTURES).as_posix(), json.loads(path.read_text())) for path in SAVED]
    found.append(("check h200-collect", report_for(FIXTURES / "h200-collect").to_dict()))
    found += [(f"diagnose {path.name}", diagnose([path]).to_dict()) for path in LOGS]
    from gpuready.verbs.plan.run import PlanOptions, run_plan  # the plan verb: only for its document
    found.append(("plan llama2-7b 8xH200", run_plan(PlanOptions(preset="llama2-7b", machine="8xH200")).to_dict()))
    return found


DOCUMENTS = documents()


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in ("script", "style")
        if tag in ("br", "p", "div", "tr", "li", "pre", "summary", "h2", "h3", "h4"):
            self.parts.append("\n")

    def handle_endtag(self, tag):
        self.hidden -= tag in ("script", "style")
        if tag in ("td", "th"):
            self.parts.append(" ")

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def views(document: dict) -> dict[str, str]:
    stream = io.StringIO()
    render_console(document, Console(file=stream, width=400, color_system=None), verbose=True)
    page = _Text()
    page.feed(render_html([document], "en"))
    markdown = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown_summary([document], verbose=True))
    root = ET.fromstring(junit_xml([document]))
    junit = "\n".join([*root.itertext(), *(value for element in root.iter() for value in element.attrib.values())])
    return {"console": stream.getvalue(), "html": "".join(page.parts), "markdown": markdown, "junit": junit}


def figure(measurement: dict) -> str:
    """A measurement's value as a reader writes it, from the JSON alone."""
    value, unit = measurement["value"], measurement["unit"]
    if not isinstance(value, (int, float)):  # NaN written as {"value": null, "raw": "nan"}: said why instead
        return "not measurable"
    if unit == "seconds":
        return f"{value * 1e3:,.1f} ms" if value < 1 else f"{value:,.2f} s"
    written = {"tokens_per_s": f"{value:,.0f} tokens/s", "fraction": f"{value * 100:.1f}%",
               "bytes": f"{value / 1024 ** 3:,.1f} GiB", "gb_per_s": f"{value:,.1f} GB/s",
               "tflops": f"{value:,.1f} TFLOP/s"}
    return written.get(unit, f"{value:,.1f} {unit}")


def headline_of(document: dict) -> str | None:
    """`FAIL <check id>` of the first failing root cause, where the machine is not judged (diagnose of logs)."""
    if document.get("verdict") != "unknown":
        return None
    failing = [f for f in document["findings"] if f["status"] in FAILING]
    if not failing:
        return None
    first = next((f for f in failing if not f.get("consequence_of")), failing[0])
    return f"{first['status'].upper()} {first['check_id']}"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize(("name", "document"), DOCUMENTS, ids=[name for name, _ in DOCUMENTS])
def test_every_view_states_the_same_verdict_headline_and_figures(name, document):
    shown = views(document)
    verdict = VERDICT_WORDS[document["verdict"]]
    top = headline_of(document)
    for view, words in shown.items():
        words = flat(words)
        if top:
            assert top in words, (view, top)
        elif "plan" in document["facts"]:  # an estimate: no view states a machine verdict
            assert "plan (an estimate, not a verdict on a machine)" in words and "READY" not in words, view
        else:
            assert re.search(rf"(?<![A-Z])(?<!NOT ){verdict}(?! WITH)", words), (view, verdict)
        if document["verdict"] in ("ready", "ready_with_warnings") and not top:
            assert "NOT READY" not in words, view
        for measurement in document.get("measurements", []):
            assert figure(measurement) in words, (view, measurement["name"], figure(measurement))


def test_the_documents_cover_every_verb_and_verdict():
    verbs = {name.split("/")[0].split(" ")[0] for name, _ in DOCUMENTS}
    assert {"check", "diagnose", "plan", "h200-bench", "h200-burn", "h200-validate-timing", "cpu-bench"} <= verbs
    assert {document["verdict"] for _, document in DOCUMENTS} >= {"ready", "ready_with_warnings", "not_ready",
                                                                    "no_verdict", "unknown"}
    assert sum(len(document.get("measurements", [])) for _, document in DOCUMENTS) > 100
    assert any(headline_of(document) for _, document in DOCUMENTS)
