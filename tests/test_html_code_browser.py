"""The HTML report's commands and quoted evidence in Chromium (issue 32): a backticked span of a message or fix is a
`<code>` element whose text is the command (no backticks left on the page, markup inside it shown as text), the
first three quoted lines are shown and the rest fold under a readable "2 more lines" / "另外 2 行" control that opens
on a click, and the title names the verb that wrote the document (a diagnosis is no "check").

Skipped, saying why, where Chromium or Playwright is missing (as tests/test_html_browser.py, whose browser it uses).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.report.html import render_html
from gpuready.verbs.diagnose.run import diagnose

sync_api = pytest.importorskip("playwright.sync_api", reason="the pip package playwright is not installed")
from test_html_browser import CHROMIUM, Visit, browser  # noqa: E402,F401  (one browser for the module)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
DCGM = Path(__file__).parent / "fixtures" / "diagnose" / "dcgm" / "diag_targeted_power_fail_sagemaker.txt"
HOSTILE_CODE = "<img src=x onerror=window.pwned=1>"
EVIDENCE = [f"dmesg.txt:{n}: pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0" for n in range(1, 6)]


def document() -> dict:
    return {"schema_version": "1.0", "host": "node-a", "verdict": "not_ready", "facts": {"sources": {}},
            "findings": [{"check_id": "pcie.aer", "category": "pcie", "status": "fail",
                          "subject": {"host": "node-a", "gpu": {"index": 0, "bus_id": "0000:01:00.0"}},
                          "message": f"GPU0 reported corrected errors; see `{HOSTILE_CODE}`.",
                          "fix": "Reseat it and read `sudo lspci -vv -s 0000:01:00.0` (LnkSta).",
                          "evidence": [{"file": "dmesg.txt", "line": n, "text": line.split(": ", 1)[1]}
                                       for n, line in enumerate(EVIDENCE, start=1)]}]}


def _open(browser, tmp_path: Path, name: str, page: str) -> Visit:
    path = tmp_path / name
    path.write_text(page, encoding="utf-8")
    return Visit(browser, path)


@pytest.mark.parametrize(("lang", "more"), [("en", "2 more lines"), ("zh", "另外 2 行")])
def test_commands_are_code_and_evidence_folds_under_a_readable_control(browser, tmp_path, lang, more):
    visit = _open(browser, tmp_path, f"check-{lang}.html", render_html([document()], lang))
    page = visit.page
    assert page.locator(".fix code").all_inner_texts() == ["sudo lspci -vv -s 0000:01:00.0"]
    assert page.locator(".message code").all_inner_texts() == [HOSTILE_CODE]  # shown as text, never an element
    assert page.locator("img").count() == 0 and page.evaluate("window.pwned === undefined")
    assert "`" not in page.locator("section.findings").inner_text()
    summary = page.locator("details.evidence summary")
    assert summary.all_inner_texts() == [more]
    assert "▶" not in summary.inner_text() and "⋯" not in page.locator("section.findings").inner_text()
    shown = page.locator("pre.evidence").inner_text()
    assert [line.split(": ", 1)[0] for line in shown.splitlines()] == ["dmesg.txt:1", "dmesg.txt:2", "dmesg.txt:3"]
    folded = page.locator("details.evidence pre")
    assert not folded.is_visible()
    summary.click()
    assert folded.is_visible() and folded.inner_text().splitlines()[-1].startswith("dmesg.txt:5:")
    visit.clean()


def test_a_diagnosis_is_titled_as_one(browser, tmp_path):
    report = diagnose([DCGM]).to_dict()
    for lang, title in (("en", "diagnosis: "), ("zh", "诊断 diagnose")):
        visit = _open(browser, tmp_path, f"diagnose-{lang}.html", render_html([report], lang))
        heading = visit.page.locator("h2").first.inner_text()
        assert heading.startswith(title) and "check" not in heading
        visit.clean()
