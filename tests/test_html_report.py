"""The HTML report without a browser: what each document draws (and what it does not), the words in both languages,
escaping of hostile text, and the size of a typical page. tests/test_html_browser.py loads the pages in Chromium."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser

import pytest

pytest.importorskip("bokeh")

from bokeh.models import BoxAnnotation, GlyphRenderer  # noqa: E402

import html_documents as docs  # noqa: E402
from gpuready.report.charts import fleet_charts  # noqa: E402
from gpuready.report.html import charts_for, render_fleet_html, render_html, write_fleet_html, write_html  # noqa: E402
from helpers import report_for  # noqa: E402
from conftest import FIXTURES  # noqa: E402

BUDGET_BYTES = 5_000_000


class Elements(HTMLParser):
    """Every start tag with its attributes, and each script's text."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append((dict(attrs), ""))

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] = (self.scripts[-1][0], self.scripts[-1][1] + data)


def plots(chart) -> list:
    """A chart's figures: itself, or each of a grid's, left to right."""
    return [chart.model] if hasattr(chart.model, "renderers") else [child[0] for child in chart.model.children]


def sources(chart) -> list[dict]:
    """The data of each glyph renderer of a chart, in drawing order."""
    return [renderer.data_source.data for plot in plots(chart) for renderer in plot.renderers
            if isinstance(renderer, GlyphRenderer)]


def chart_keys(document: dict) -> list[str]:
    return [chart.key for chart in charts_for(document, "en")]


def test_recorded_burn_draws_telemetry_with_the_power_cap_shaded_and_compute(tmp_path):
    """The H200 burn (tests/fixtures/h200-burn): 66 samples a second apart; NVML reported SW power cap (bit 0x4) from
    the sample at 5.006 s to the one at 64.006 s, which holds until the next sample at 65.006 s: one box per plot."""
    charts = charts_for(docs.burn(), "en")
    assert [chart.key for chart in charts] == ["telemetry-GPU0", "compute"]
    telemetry = charts[0]
    boxes = [(box.left, box.right) for plot in plots(telemetry) for box in plot.center
             if isinstance(box, BoxAnnotation) and box.fill_color == "#f2b134"]
    assert boxes == [(5.006, 65.006)] * 3  # temperature, power, SM clock
    curves = sources(telemetry)
    assert [len(data["t_s"]) for data in curves] == [66] * 4  # 3 curves and the power limit
    assert max(curves[0]["value"]) == 63.0 and curves[2]["value"][0] == 700.0  # peak °C; the limit line
    assert telemetry.legend and "power cap" in telemetry.legend[0][1]
    (bars,) = sources(charts[1])
    assert bars["value"] == [664.85] and math.isnan(bars["expected"][0])  # burn's TFLOP/s has no expected figure
    out = tmp_path / "burn.html"
    write_html([docs.burn()], out, "en")
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '<html lang="en">' in page
    assert len(page.encode()) < BUDGET_BYTES
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=', page)  # nothing loaded from elsewhere


def test_a_day_of_telemetry_is_thinned_keeping_its_spike():
    """86,400 one-second samples at 60 °C with one of 95 °C at 50,000 s, and the power cap flickering every other
    second: the curve keeps 2,000 points (the lowest and highest of each stretch) with the spike, and the flicker is
    one box per plot, not 43,200."""
    day = [float(t) for t in range(86_400)]
    temperatures = [95.0 if t == 50_000 else 60.0 for t in range(86_400)]
    document = {"series": [
        {"subject": {"gpu": {"index": 0}}, "metric": "temperature_c", "t_s": day, "values": temperatures},
        {"subject": {"gpu": {"index": 0}}, "metric": "clock_event_reasons", "t_s": day,
         "values": [4.0 if t % 2 else 0.0 for t in range(86_400)]}]}
    (chart,) = charts_for(document, "en")
    (curve,) = sources(chart)
    assert len(curve["t_s"]) <= 2000 and (50_000.0, 95.0) in zip(curve["t_s"], curve["value"])
    assert curve["t_s"] == sorted(curve["t_s"])
    boxes = [(box.left, box.right) for plot in plots(chart) for box in plot.center if isinstance(box, BoxAnnotation)]
    assert boxes == [(1.0, 86_400.0)]


def test_eight_gpu_validate_draws_matrices_busbw_and_bars():
    charts = {chart.key: chart for chart in charts_for(docs.validate_8gpu(), "en")}
    assert list(charts) == ["p2p-unidirectional", "topology-0", "busbw", "compute", "host_transfer"]
    p2p = sources(charts["p2p-unidirectional"])[0]
    cells = dict(zip(zip(p2p["gpu"], p2p["peer"]), p2p["value"]))
    assert len(cells) == 56 and cells[("GPU3", "GPU5")] == 120.0 and cells[("GPU5", "GPU3")] == 360.0
    topology = sources(charts["topology-0"])[0]
    assert len(topology["link"]) == 64 and topology["link"].count("X") == 8
    busbw, expected = sources(charts["busbw"])[0], sources(charts["busbw"])[2]
    # out of place beats in place (5 GB/s lower) at every size: the out-of-place figures, sizes ascending
    assert busbw["size"] == docs.BUSBW_SIZES and busbw["busbw"] == docs.BUSBW_ALL_REDUCE
    assert list(expected["y"]) == [docs.EXPECTED_BUSBW] * 2
    hosts = sources(charts["host_transfer"])[0]
    assert hosts["value"] == [55.0 - index for index in range(8)] and hosts["expected"] == [50.0] * 8


def test_bench_runs_with_the_ideal_scaling_marked():
    """Ideal for 8 GPUs: 8 × 70,000 = 560,000 tokens/s; none for the 1-GPU run."""
    charts = {chart.key: chart for chart in charts_for(docs.bench_scaling(), "en")}
    assert list(charts) == ["bench-throughput", "bench-memory"]
    throughput = sources(charts["bench-throughput"])[0]
    assert throughput["run"] == ["single ×1", "ddp ×8"] and throughput["value"] == [70_000.0, 500_000.0]
    assert math.isnan(throughput["ideal"][0]) and throughput["ideal"][1] == 560_000.0
    memory = sources(charts["bench-memory"])[0]
    assert memory["value"] == [20.0, 20.0] and memory["limit"] == [141.0, 141.0]  # GiB


def test_recorded_bench_draws_its_one_run():
    document = json.loads((FIXTURES / "h200-bench" / "bench-760M-bf16-mb4.json").read_text())
    charts = {chart.key: chart for chart in charts_for(document, "en")}
    assert list(charts) == ["bench-throughput", "bench-memory"]
    assert sources(charts["bench-throughput"])[0]["value"] == [69950.066309]  # recorded single_tokens_per_s


def test_a_bundle_check_has_no_chart_and_no_bokeh(tmp_path):
    """A check of the recorded H200 bundle has findings and GPUs but no measurement or series: nothing to draw."""
    document = report_for(FIXTURES / "h200-collect").to_dict()
    assert charts_for(document, "en") == []
    page = render_html([document], "en")
    assert 'class="chart"' not in page and "Bokeh" not in page
    assert len(page.encode()) < 100_000
    assert "NVIDIA H200" in page and "0000:00:06.0" in page


def test_a_check_draws_its_topology_from_nvidia_smi_topo():
    """The published two-socket 8× RTX 4090 `nvidia-smi topo -m`: PIX pairs, PXB within a socket, SYS across."""
    document = report_for(FIXTURES / "public" / "pcie-8gpu-2socket").to_dict()
    charts = {chart.key: chart for chart in charts_for(document, "en")}
    assert list(charts) == ["topology-0"]
    topology = sources(charts["topology-0"])[0]
    cells = dict(zip(zip(topology["gpu"], topology["peer"]), topology["link"]))
    assert len(cells) == 64 and list(cells.values()).count("X") == 8
    assert (cells[("GPU0", "GPU1")], cells[("GPU0", "GPU2")], cells[("GPU3", "GPU4")], cells[("GPU7", "GPU6")]) == \
        ("PIX", "PXB", "SYS", "PIX")


def test_a_check_of_several_machines_draws_each_topology_once():
    """The DGX H100 folder holds four machines' files; only the fourth (no host or driver named) has the topology."""
    from gpuready.evidence.reader import read_bundle
    from gpuready.checks.registry import CheckOptions
    from gpuready.pipeline import check_files
    document = check_files(read_bundle(FIXTURES / "public" / "dgx-h100-nvswitch"), CheckOptions())[0].to_dict()
    charts = charts_for(document, "en")
    assert [(chart.key, chart.title) for chart in charts] == [
        ("topology-3", "GPU topology of machine 4 (files that name no host or driver)")]
    links = sources(charts[0])[0]["link"]
    assert len(links) == 64 and links.count("NV18") == 56


def test_chinese_page_from_the_catalogue():
    """Labels, chart titles and the findings' messages in Chinese (messages through their catalogue ids)."""
    document = report_for(FIXTURES / "h200-collect").to_dict()
    page = render_html([document, docs.validate_8gpu()], "zh")
    assert '<html lang="zh-CN">' in page
    for words in ("检查结果", "显示：", "全部类别", "GPU 间 P2P 带宽（单向）", "GPU 拓扑", "单机 single node", "通过 pass"):
        assert words in page
    # gpu.model_mismatch on the one-GPU bundle, in the catalogue's Chinese and not in its English
    assert "只有一个 GPU：无需比较。" in page and "One GPU: nothing to compare." not in page
    assert "One GPU: nothing to compare." in render_html([document], "en")


def test_hostile_text_is_escaped_everywhere(tmp_path):
    """Host, findings, evidence, units, GPU labels and series subjects carry markup that would close the page's
    attributes, cells and scripts: none of it becomes an element, a handler or a script."""
    page = render_html([docs.hostile()], "en")
    fleet = render_fleet_html(docs.hostile_fleet(), "en")
    for text in (page, fleet):
        elements = Elements(text)
        assert "img" not in [tag for tag, _attributes in elements.tags]
        assert not any(name.startswith("on") for _tag, attributes in elements.tags for name in attributes)
        code = [script for attributes, script in elements.scripts if attributes.get("type") != "application/json"]
        data = [script for attributes, script in elements.scripts if attributes.get("type") == "application/json"]
        # Bokeh's library, its log level and its embedding, then the filters; nothing else
        assert len(code) == (4 if data else 1)
        assert not any("pwned" in script for script in code)
        assert all("<" not in script for script in data)  # Bokeh's JSON holds the text as entities
        assert "<script>window.pwned" not in text and "\x1b" not in text
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in text or "\\u003cscript" in text
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;/td&gt;" in page  # the host, as text


def test_fleet_page_marks_the_outliers(tmp_path):
    out = tmp_path / "fleet.html"
    write_fleet_html(docs.fleet(), out, "en")
    page = out.read_text(encoding="utf-8")
    assert "Fleet: 6 node(s) in 1 cohort(s): 1 outlier(s), 0 failing their own report, 0 not judged, 5 healthy." in page
    assert "all_reduce_busbw_gb_per_s: 200.0 GB/s, 44.4% worse than the cohort&#x27;s median 360.0 GB/s" in page
    (chart,) = fleet_charts(docs.fleet(), lambda msg_id, **values: msg_id)
    points = sources(chart)[0]
    assert points["value"] == [200.0, 358.0, 359.0, 360.0, 361.0, 362.0]  # lowest first
    assert points["colour"][0] != points["colour"][1] and len(set(points["colour"][1:])) == 1  # node-f alone marked


def test_the_fleet_verbs_own_document(tmp_path, capsys):
    """`gpuready fleet` over eight copies of the recorded H200 validate (validate-sigterm.json), node-5's bf16 matmul
    lowered to 70 %: every measurement is drawn node by node, the one with an outlier first, node-5 lowest and alone
    marked."""
    from gpuready.cli import main as cli
    recorded = json.loads((FIXTURES / "h200-shared-gpu" / "validate-sigterm.json").read_text())
    for index in range(8):
        document = json.loads(json.dumps(recorded))
        document["host"] = f"node-{index}"
        for measurement in document["measurements"]:
            measurement["subject"]["host"] = f"node-{index}"
            if index == 5 and measurement["name"] == "matmul_tflops_bf16":
                measurement["value"] *= 0.7
        (tmp_path / f"node-{index}.json").write_text(json.dumps(document))
    cli.main(["fleet", str(tmp_path), "--json"])
    fleet = json.loads(capsys.readouterr().out)
    charts = fleet_charts(fleet, lambda msg_id, **values: msg_id)
    measured = {m["name"] for m in recorded["measurements"]}
    assert charts[0].title == "matmul_tflops_bf16" and {chart.title for chart in charts} == measured
    assert all(len(sources(chart)[0]["value"]) == 8 and chart.note is None for chart in charts)
    points = sources(charts[0])[0]
    bf16 = next(m for m in recorded["measurements"] if m["name"] == "matmul_tflops_bf16")["value"]
    assert points["host"][0] == "node-5" and points["value"][0] == pytest.approx(bf16 * 0.7)
    assert points["value"][1:] == [pytest.approx(bf16)] * 7
    assert len({points["colour"][0], points["colour"][1]}) == 2 and len(set(points["colour"][1:])) == 1
    assert "node-5" in render_fleet_html(fleet, "zh")


def test_plan_tables_and_memory_chart():
    """fsdp: 2 + 2 + 12 + 12 + 2 = 30 GiB per GPU; ddp: 13 + 13 + 50 + 18 + 2 = 96 GiB, over the GPU's 80 GB
    (80e9 / 2**30 = 74.5 GiB, the dashed line)."""
    document = docs.plan()
    (chart,) = charts_for(document, "en")
    stacked, memory_line = sources(chart)[0], sources(chart)[-1]
    assert stacked["strategy"] == ["fsdp", "ddp"] and stacked["optimizer"] == [12.0, 50.0]
    assert [round(y, 1) for y in memory_line["y"]] == [74.5, 74.5]
    page = render_html([document], "en")
    assert "<td>fsdp</td><td>yes</td><td>30.0</td><td>0.500</td><td>compute</td><td>fsdp &lt;reason&gt;</td>" in page
    assert "<td>ddp</td><td>no</td><td>96.0</td>" in page
    assert "<td>2</td><td>yes</td><td>12.0</td><td>7.0</td><td>3.0</td>" in page  # inference at TP=2
    assert "model: llama2-7b (6.7 B parameters)" in page


@pytest.mark.parametrize("broken", [
    {}, {"findings": "x", "measurements": [1, "a", None], "series": {"a": 1}, "facts": []},
    {"measurements": [{"name": "p2p_unidirectional_gb_per_s", "value": "fast", "subject": {"gpu": 1, "peer": None}},
                      {"name": "all_reduce_busbw_gb_per_s", "method": {"rows": [{"size_bytes": -1}, "x"]}},
                      {"name": "matmul_tflops_bf16", "value": {"value": None, "raw": "nan"}}],
     "series": [{"metric": "power_w", "t_s": [0, 1], "values": [None, None]}, {"metric": 3}],
     "facts": {"topology": {"gpu_labels": "GPU0", "links": [[1]]}}, "strategies": [{"name": 3}]},
])
def test_odd_documents_render_without_empty_charts(broken):
    assert charts_for(broken, "en") == []
    assert render_html([broken], "zh").startswith("<!DOCTYPE html>")


def test_not_a_list_of_documents_is_a_type_error():
    with pytest.raises(TypeError):
        render_html(docs.burn(), "en")
    with pytest.raises(TypeError):
        render_fleet_html([], "en")
