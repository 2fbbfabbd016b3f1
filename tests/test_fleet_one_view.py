"""Issue 32: `fleet` has one view model (report/fleet_view.py) that the console, the HTML page and the Markdown summary
lay out, so each names the cohorts, labels, units and percentages alike.

The fleet: eight copies of the recorded H200 validate (tests/fixtures/h200-shared-gpu/validate-sigterm.json: one H200
SXM, driver 580.159.04; bf16 matmul 806.51 TFLOP/s against an expected 791.2; device copy 4,269.704 GB/s against
4,272.0). node-5's bf16 is lowered to 70 % and node-3's copy to 50 %. Worked by hand:

- bf16: seven nodes at 806.51 and 806.51 x 0.7 = 564.557 → median 806.51; deficit (806.51 - 564.557) / 806.51 = 30.0 %;
  564.557 / 791.2 = 0.7136 → "71% of the expected 791.2 TFLOP/s".
- copy: 4,269.704 x 0.5 = 2,134.852 → 50.0 % worse than 4,269.7; 2,134.852 / 4,272.0 = 0.4997 → "50% of the expected
  4,272.0 GB/s".
"""

from __future__ import annotations

import html
import io
import json
import re

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.verbs.fleet.view import render_fleet

RECORDED = json.loads((FIXTURES / "h200-shared-gpu" / "validate-sigterm.json").read_text())
LOWERED = {(5, "matmul_tflops_bf16"): 0.7, (3, "memory_copy_gb_per_s"): 0.5}

EXPECTED = {
    "en": ["Cohort 1: 1 x H200 SXM, driver 580.159.04",
           "matmul_tflops_bf16 (GPU 0): 564.6 TFLOP/s, 30.0% worse than the cohort's median 806.5 TFLOP/s; "
           "71% of the expected 791.2 TFLOP/s",
           "memory_copy_gb_per_s (GPU 0): 2,134.9 GB/s, 50.0% worse than the cohort's median 4,269.7 GB/s; "
           "50% of the expected 4,272.0 GB/s",
           "node-5", "node-3", "outlier"],
    "zh": ["第 1 组：1 x H200 SXM，驱动 580.159.04", "564.6 TFLOP/s", "比组内中位数 806.5 TFLOP/s 差 30.0%",
           "只有预期值 791.2 TFLOP/s 的 71%", "2,134.9 GB/s", "只有预期值 4,272.0 GB/s 的 50%", "离群"],
}


@pytest.fixture(scope="module")
def views(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Per language: the console, the HTML page's text and the Markdown summary, each as plain text."""
    folder = tmp_path_factory.mktemp("fleet")
    for index in range(8):
        document = json.loads(json.dumps(RECORDED))
        document["host"] = f"node-{index}"
        for measurement in document["measurements"]:
            measurement["subject"]["host"] = f"node-{index}"
            measurement["value"] *= LOWERED.get((index, measurement["name"]), 1.0)
        (folder / f"node-{index}.json").write_text(json.dumps(document))
    shown = {}
    for lang in ("en", "zh"):
        page, summary, saved = (folder.parent / f"{lang}.{kind}" for kind in ("html", "md", "json"))
        assert cli.main(["fleet", str(folder), "--html", str(page), "--markdown", str(summary), "--out", str(saved),
                         "--lang", lang, "--json"]) == 1
        document = json.loads(saved.read_text())
        output = io.StringIO()
        render_fleet(document, lang, console=Console(file=output, width=400), plain=True)
        text = page.read_text(encoding="utf-8")
        shown[lang] = {"console": re.sub(r"\s+", " ", output.getvalue()),
                       "html": html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"(?s)<(script|style)\b.*?</\1>", "",
                                                                          text))),
                       "page": text,
                       "markdown": re.sub(r"\\(.)", r"\1", summary.read_text(encoding="utf-8"))}
    return shown


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("view", ["console", "html", "markdown"])
def test_each_view_names_the_same_cohort_figures_units_and_shares(views, lang, view):
    missing = [words for words in EXPECTED[lang] if words not in views[lang][view]]
    assert not missing


def test_the_page_numbers_cohorts_from_one_and_writes_units_as_readers_do(views):
    page = views["en"]["html"]
    assert "Cohort 0" not in page and " tflops" not in page and " gb_per_s" not in page
    # the distributions' axes: the unit as a reader writes it, as plain text (Bokeh's PlainText model)
    for unit in ("TFLOP/s", "GB/s"):
        assert f'"name":"PlainText","id"' in views["en"]["page"]
        assert re.search(r'"name":"PlainText","id":"p\d+","attributes":\{"text":"' + re.escape(unit) + '"',
                         views["en"]["page"])
