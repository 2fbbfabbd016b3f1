"""Issue 32, hostile input round 3, fleet's part: numbers that break the arithmetic, names that make the page grow,
and text that Bokeh would typeset. Each fails closed: the node flagged or the file refused in one sentence, a
documented exit code, finite JSON, plain text.

Reports are copies of the recorded H200 validate (tests/fixtures/h200-shared-gpu/validate-sigterm.json: bf16 matmul
806.51 TFLOP/s, expected 791.2, one H200 SXM, driver 580.159.04).
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.verbs.fleet.view import render_fleet

RECORDED_TEXT = (FIXTURES / "h200-shared-gpu" / "validate-sigterm.json").read_text()
BIG_INT = "9" * 401
NOT_A_BASELINE = "it is not a baseline written by gpuready fleet --save-baseline"


def write_nodes(folder: Path, count: int, bf16_of=lambda index: None) -> Path:
    """`count` copies of the recorded report; `bf16_of(index)` is the raw JSON text of that node's bf16 figure, or
    None to keep the recorded one."""
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        document = json.loads(RECORDED_TEXT)
        document["host"] = f"node-{index}"
        raw = bf16_of(index)
        text = json.dumps(document)
        if raw is not None:
            text = text.replace('"value": 806.51', f'"value": {raw}', 1)
            assert raw in text
        (folder / f"node-{index}.json").write_text(text)
    return folder


def run_fleet(capsys, *argv) -> tuple[int, dict, str]:
    code = cli.main(["fleet", *map(str, argv), "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def console_of(document: dict) -> str:
    output = io.StringIO()
    render_fleet(document, "en", console=Console(file=output, width=300), plain=True)
    return re.sub(r"\s+", " ", output.getvalue())


@pytest.mark.parametrize("raw", ["1.7e308", BIG_INT, "-" + BIG_INT])
def test_a_figure_too_large_for_the_statistics_flags_its_node(tmp_path, capsys, raw):
    """Two copies of 1.7e308 would overflow a median's mean ((a + b) / 2 = inf); a 401-digit integer no float holds.
    Ten healthy nodes and node-3 with that figure: node-3 is an outlier, `value out of range`; the others' median is
    the recorded 806.51; the JSON is finite (allow_nan=False wrote it)."""
    folder = write_nodes(tmp_path / "r", 11, lambda index: raw if index == 3 else None)
    code, document, _err = run_fleet(capsys, folder)
    assert code == ExitCode.NOT_READY
    [row] = [row for row in document["nodes"] if row["verdict"] == "outlier"]
    assert row["host"] == "node-3"
    assert [(outlier["name"], outlier["rules"]) for outlier in row["outliers"]] == [
        ("matmul_tflops_bf16", ["out_of_range"])]
    assert document["cohorts"][0]["measurements"]["matmul_tflops_bf16"]["median"] == 806.51
    assert document["cohorts"][0]["measurements"]["matmul_tflops_bf16"]["n"] == 10
    assert "matmul_tflops_bf16: value out of range (beyond ±4.5e+307), not judged" in console_of(document)


def test_a_ratio_that_overflows_stays_finite(tmp_path, capsys):
    """Four nodes at 1e-300 TFLOP/s and one at 1e300 (both in range): the median is 1e-300, so the high node's z is
    0.6745 x 1e300 / MAD... and a low node's deficit against a 1e300 median would be 1e602 %. With node-0 at 1e-300
    and the rest at 1e300 (median 1e300, MAD 0): node-0's deficit (1e300 - 1e-300) / 1e300 = 100 %, and its share of
    the expected 791.2 is 1.3e-303. Nothing overflows into the JSON; node-0 is the outlier."""
    folder = write_nodes(tmp_path / "r", 5, lambda index: "1e-300" if index == 0 else "1e300")
    code, document, _err = run_fleet(capsys, folder)
    assert code == ExitCode.NOT_READY
    [outlier] = document["nodes"][0]["outliers"]
    assert document["nodes"][0]["host"] == "node-0" and outlier["deficit_pct"] == 100.0
    assert outlier["rules"] == ["fleet", "expected"]


def test_a_latency_over_a_tiny_median_is_bounded(tmp_path, capsys):
    """Lower is better: four nodes at 1e-300 µs, node-4 at 1e300 µs: deficit (1e300 - 1e-300) / 1e-300 x 100 = 1e602 %
    overflows a float; the document says 1e300 (the bound), finite JSON, node-4 the outlier."""
    folder = tmp_path / "r"
    folder.mkdir()
    for index in range(5):
        document = json.loads(RECORDED_TEXT)
        document["host"] = f"node-{index}"
        document["measurements"] = [{"name": "all_reduce_latency_us", "unit": "us", "value": 1e300 if index == 4
                                     else 1e-300, "expected": None, "subject": {"host": f"node-{index}"}}]
        (folder / f"node-{index}.json").write_text(json.dumps(document))
    code, document, _err = run_fleet(capsys, folder)
    assert code == ExitCode.NOT_READY
    [outlier] = document["nodes"][0]["outliers"]
    assert document["nodes"][0]["host"] == "node-4" and outlier["deficit_pct"] == 1e300


@pytest.mark.parametrize("cohort, item", [
    ({"gpu_model": "H200 SXM", "gpu_count": "1e999", "driver_version": "580.159.04"},
     {"name": "matmul_tflops_bf16", "subject": "gpu", "median": 800.0, "mad": 3.0, "n": 10}),
    ({"gpu_model": "H200 SXM", "gpu_count": 1, "driver_version": "580.159.04"},
     {"name": "matmul_tflops_bf16", "subject": "gpu", "median": "1e308", "mad": "1e-300", "n": 10}),
    ({"gpu_model": "H200 SXM", "gpu_count": 1, "driver_version": "580.159.04"},
     {"name": "matmul_tflops_bf16", "subject": "gpu", "median": 800.0, "mad": "1e-300", "n": 10}),
    ({"gpu_model": "H200 SXM", "gpu_count": 1, "driver_version": "580.159.04"},
     {"name": "matmul_tflops_bf16", "subject": "gpu", "median": 800.0, "mad": 3.0, "n": BIG_INT}),
])
def test_a_baseline_of_impossible_numbers_is_not_a_baseline(tmp_path, capsys, cohort, item):
    """gpu_count 1e999 (json reads infinity; int() of it overflows), medians of 1e308 over MADs of 1e-300 (a z-score
    of 1e608), a median 8e302 MADs wide: one sentence, exit 2, nothing judged."""
    folder = write_nodes(tmp_path / "r", 3)
    text = json.dumps({"format": "gpuready.fleet-baseline", "version": 1, "cohorts": [
        {"key": cohort, "nodes": 10, "measurements": {"matmul_tflops_bf16": {**item, "unit": "tflops",
                                                                             "higher_is_better": True}}}]})
    for key in ("gpu_count", "median", "mad", "n"):
        text = text.replace(f'"{key}": "{cohort.get(key, item.get(key))}"', f'"{key}": {cohort.get(key, item.get(key))}')
    baseline = tmp_path / "baseline.json"
    baseline.write_text(text)
    code = cli.main(["fleet", str(folder), "--baseline", str(baseline)])
    captured = capsys.readouterr()
    assert code == ExitCode.USAGE
    assert NOT_A_BASELINE in captured.err and "Traceback" not in captured.err + captured.out


def test_one_report_inventing_names_is_cut_at_64(tmp_path, capsys):
    """node-0 writes 1,000 invented measurement names (GB/s, so each is judged) after the recorded six: 64 names are
    kept (the six and 58 invented), 942 measurements dropped and said so; the fleet judges the rest as before."""
    folder = write_nodes(tmp_path / "r", 3)
    document = json.loads((folder / "node-0.json").read_text())
    document["measurements"] += [{"name": f"invented_{index}_gb_per_s", "unit": "gb_per_s", "value": 1.0,
                                  "subject": {"host": "node-0"}} for index in range(1000)]
    (folder / "node-0.json").write_text(json.dumps(document))
    code, fleet, _err = run_fleet(capsys, folder)
    row = next(row for row in fleet["nodes"] if row["host"] == "node-0")
    assert row["dropped_measurements"] == 942
    assert len(fleet["measurements"]) == 64
    assert "942 measurement(s) beyond the first 64 names of a report were not read" in console_of(fleet)


def test_a_unit_written_as_tex_is_plain_text_in_the_page(tmp_path):
    """A unit `$$\\color{green}{\\text{HEALTHY}}$$` would make Bokeh typeset the axis label and inline MathJax
    (3 MB). The page keeps the literal text as a PlainText model and is no larger than with a plain unit."""
    from gpuready.report.html import render_fleet_html
    import html_documents as docs
    plain = render_fleet_html(docs.fleet(), "en")
    hostile = docs.fleet()
    tex = r"$$\color{green}{\text{HEALTHY}}$$"
    hostile["measurements"]["all_reduce_busbw_gb_per_s"]["unit"] = tex
    page = render_fleet_html(hostile, "en")
    assert json.dumps(tex)[1:-1] in page
    assert re.search(r'"name":"PlainText","id":"p\d+","attributes":\{"text":"' + re.escape(json.dumps(tex)[1:-1]),
                     page)
    assert len(page) < len(plain) * 1.01  # Bokeh's MathJax bundle alone is ~1.8 MB


BROWSER = shutil.which("chromium")


@pytest.mark.skipif(BROWSER is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_in_chromium_no_mathjax_is_loaded_and_the_label_is_literal(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the pip package playwright is not installed")
    from gpuready.report.html import render_fleet_html
    import html_documents as docs
    hostile = docs.fleet()
    tex = r"$$\color{green}{\text{HEALTHY}}$$"
    hostile["measurements"]["all_reduce_busbw_gb_per_s"]["unit"] = tex
    path = tmp_path / "fleet.html"
    path.write_text(render_fleet_html(hostile, "en"), encoding="utf-8")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
        page = browser.new_page()
        outside = []
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                   else (outside.append(route.request.url), route.abort()))
        page.goto(path.resolve().as_uri())
        page.wait_for_function("window.Bokeh !== undefined && Bokeh.documents.length > 0 && "
                               "Bokeh.documents[0].is_idle")
        labels = page.evaluate("""() => [...Bokeh.documents[0].all_models].filter(m => m.type === "PlainText")
                                                                          .map(m => m.text)""")
        assert tex in labels
        assert page.evaluate("typeof MathJax === 'undefined'")
        assert page.locator("mjx-container").count() == 0 and not outside
        browser.close()
