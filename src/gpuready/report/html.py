"""The report as one self-contained HTML file: the verdict, the findings (problems first, filtered by status and
category), and charts where a reader would rather look than read (burn telemetry, P2P and topology matrices, NCCL
busbw against size, figures per GPU against expectation, bench's runs, plan's memory), then the tables.

Offline by construction: the charts are Bokeh's, with its JavaScript inlined from the installed package
(`bokeh.resources.INLINE`; none is kept in this repository), no font or script is fetched, and the few lines of the
filters are plain JavaScript. A chart is drawn only where the document has its data. Text of the document is escaped
where it enters the markup (html_sections.py); in the charts it travels inside Bokeh's JSON, which Bokeh escapes for
its script tag and draws as text.

It reads the JSON documents (`Report.to_dict()`, or the fleet document), so a saved report renders again; a missing
key or a value of the wrong type draws nothing for that part, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

from bokeh.document import Document
from bokeh.embed import file_html
from bokeh.resources import INLINE
from jinja2 import Template

from gpuready.i18n import LANGUAGES, message
from gpuready.report.charts.fleet import MAX_CHARTS, charts_left_out
from gpuready.report.fleet_view import fleet_view
from gpuready.report.charts import (Chart, collective_charts, fleet_charts, matrix_charts, per_gpu_charts, plan_charts,
                                    scaling_charts, telemetry_charts)
from gpuready.report.html_sections import (element, escape, findings_section, fleet_header, fleet_nodes_section,
                                           header, inventory_section, measurements_section, plan_section)
from gpuready.report.labels import labels_for
from gpuready.report.translate import in_language
from gpuready.safe_text import encoded

__all__ = ["charts_for", "render_fleet_html", "render_html", "write_fleet_html", "write_html"]

CHART_BUILDERS = (telemetry_charts, matrix_charts, collective_charts, per_gpu_charts, scaling_charts, plan_charts)
"""In the order the page shows them: what went wrong over time first, then the machine's shape, then its figures."""
HTML_LANG = {"en": "en", "zh": "zh-CN"}


def write_html(documents: list[dict], path: Path, lang: str) -> None:
    """Write the report documents (`Report.to_dict()` each, or the same JSON read back) as one HTML file at `path`.

    Raises TypeError for anything but a list of dicts (a caller's mistake, not a document), OSError where `path`
    cannot be written."""
    Path(path).write_bytes(encoded(render_html(documents, lang)))


def write_fleet_html(fleet: dict, path: Path, lang: str) -> None:
    """Write the fleet document (verbs/fleet) as one HTML file at `path`: the nodes, then one distribution per
    measurement with the outliers marked."""
    Path(path).write_bytes(encoded(render_fleet_html(fleet, lang)))


def render_html(documents: list[dict], lang: str) -> str:
    if not isinstance(documents, list) or not all(isinstance(document, dict) for document in documents):
        raise TypeError("render_html takes a list of report documents (Report.to_dict() each)")
    lang = lang if lang in LANGUAGES else "en"
    say = _sayer(lang)
    labels = labels_for(lang)
    page = _Page()
    for document in documents:
        document = in_language(document, lang)
        page.add(element("header", header(document, labels, say)))
        page.add(findings_section(document, labels, say))
        charts = _charts(document, say)
        if charts:
            page.add(element("h3", escape(say("html.section.charts"))))
        for chart in charts:
            page.chart(chart)
        page.add(plan_section(document, labels, say))
        page.add(inventory_section(document, labels, say))
        page.add(measurements_section(document, labels, say))
        page.add("<hr>")
    return page.render(say("html.page_title"), lang, say)


def render_fleet_html(fleet: dict, lang: str) -> str:
    if not isinstance(fleet, dict):
        raise TypeError("render_fleet_html takes the fleet document (a dict)")
    lang = lang if lang in LANGUAGES else "en"
    say = _sayer(lang)
    page = _Page()
    view = fleet_view(fleet, lang)
    page.add(element("header", fleet_header(view, say)))
    page.add(fleet_nodes_section(view, say))
    charts = fleet_charts(fleet, say)
    if charts:
        page.add(element("h3", escape(say("html.section.distributions"))))
    for chart in charts:
        page.chart(chart)
    if charts_left_out(fleet):
        page.add(element("p", escape(say("fleet.charts_dropped", count=charts_left_out(fleet), limit=MAX_CHARTS))))
    return page.render(say("html.fleet.title"), lang, say)


def charts_for(document: dict, lang: str) -> list[Chart]:
    """The charts the page draws for one report document (none for a part the document lacks)."""
    lang = lang if lang in LANGUAGES else "en"
    return _charts(in_language(document, lang), _sayer(lang))


def _charts(document: dict, say) -> list[Chart]:
    return [chart for build in CHART_BUILDERS for chart in build(document, say)]


def _sayer(lang: str):
    return lambda msg_id, **values: message(msg_id, lang, **values)


class _Page:
    """The page's parts in order: markup, or a chart (its Bokeh model placed by its position among the roots)."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, object]] = []
        self.models: list = []
        self.keys: set[str] = set()

    def add(self, markup: str) -> None:
        if markup:
            self.parts.append(("html", markup))

    def chart(self, chart: Chart) -> None:
        legend = "".join(element("span", element("i", "", style=f"background:{colour}") + escape(label),
                                 class_="swatch") for colour, label in chart.legend)
        key, n = chart.key, 1
        while key in self.keys:  # several documents on one page: compute, compute-2
            n += 1
            key = f"{chart.key}-{n}"
        self.keys.add(key)
        self.add(f'<figure class="chart" data-chart="{escape(key)}">'
                 + element("figcaption", escape(chart.title)))
        self.parts.append(("chart", len(self.models)))
        self.models.append(chart.model)
        note = element("p", escape(chart.note), class_="note") if chart.note else ""
        self.add((element("p", legend, class_="legend") if legend else "") + note + "</figure>")

    def render(self, title: str, lang: str, say) -> str:
        variables = {"parts": self.parts, "lang": HTML_LANG[lang], "style": STYLE, "script": FILTER_SCRIPT,
                     "footer": escape(say("html.footer"))}
        if not self.models:  # no chart: no Bokeh either (a check of a bundle is then a few kB)
            return PAGE.render(title=title, bokeh_css="", bokeh_js="", plot_script="", roots=[], **variables)
        document = Document()
        with document.models.freeze():  # one walk of the models: adding each root re-walks every earlier one
            for model in self.models:
                document.add_root(model)
        return file_html(document, INLINE, title, template=PAGE, template_variables=variables)


PAGE = Template("""<!DOCTYPE html>
<html lang="{{ lang }}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title | e }}</title>
<style>{{ style }}</style>
{{ bokeh_css }}
{{ bokeh_js }}
</head>
<body>
<main>
{% for kind, value in parts %}{% if kind == "chart" %}<div id="{{ roots[value].elementid }}" \
data-root-id="{{ roots[value].id }}" style="display: contents;"></div>{% else %}{{ value }}{% endif %}
{% endfor %}
<footer>{{ footer }}</footer>
</main>
{{ plot_script }}
<script>{{ script }}</script>
</body>
</html>
""")
"""The page; every value but `title` is markup already escaped (html_sections.py) or Bokeh's own output."""

FILTER_SCRIPT = """
document.querySelectorAll("section.findings").forEach(function (section) {
  function update() {
    var shown = {};
    section.querySelectorAll("input[name=status]:checked").forEach(function (box) { shown[box.value] = true; });
    var select = section.querySelector("select");
    var category = select ? select.value : "";
    section.querySelectorAll("tbody tr").forEach(function (row) {
      row.hidden = !(shown[row.dataset.status] && (category === "" || row.dataset.category === category));
    });
  }
  section.addEventListener("change", update);
  update();
});
"""
"""The filters: a row shows where its status is ticked and its category chosen (or all categories)."""

STYLE = """
body { font-family: system-ui, "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif; margin: 0;
       color: #222; background: #fafafa; }
main { max-width: 1200px; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h2 { margin: 1.2rem 0 .3rem; } h3 { margin: 1.6rem 0 .5rem; border-bottom: 1px solid #ddd; }
.verdict { display: inline-block; padding: .25rem .8rem; border-radius: .3rem; font-weight: bold; color: #fff; }
.verdict.ready { background: #2e7d32; } .verdict.ready_with_warnings { background: #b26a00; }
.verdict.not_ready { background: #c62828; } .verdict.unknown { background: #6a1b9a; }
.meta, .note { color: #666; font-size: .9rem; } .not-enough { color: #6a1b9a; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: .9rem; }
th, td { text-align: left; vertical-align: top; padding: .35rem .5rem; border-bottom: 1px solid #eee; }
table.numbers td { font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 0 .4rem; border-radius: .25rem; color: #fff; white-space: nowrap; }
.badge.fail, .badge.failing { background: #c62828; } .badge.error, .badge.other { background: #6a1b9a; }
.badge.warn, .badge.outlier { background: #b26a00; } .badge.pass, .badge.healthy { background: #2e7d32; }
.badge.skip, .badge.unknown { background: #888; }
.fix { margin-top: .3rem; } .consequence { font-style: italic; color: #555; }
pre { white-space: pre-wrap; word-break: break-all; background: #f3f3f3; padding: .4rem; margin: .3rem 0 0; }
.message code, .fix code { background: #f0f0f0; padding: 0 .2rem; border-radius: .2rem; overflow-wrap: anywhere; }
details.evidence pre { margin-top: 0; } details.evidence summary { cursor: pointer; color: #555; font-size: .85rem; }
.filters { margin: .5rem 0; display: flex; flex-wrap: wrap; gap: .8rem; align-items: center; }
figure.chart { margin: 1rem 0 1.6rem; background: #fff; padding: .5rem; border: 1px solid #eee; }
figcaption { font-weight: bold; margin-bottom: .3rem; }
.legend { margin: .3rem 0 0; font-size: .85rem; } .swatch { margin-right: 1rem; }
.swatch i { display: inline-block; width: .9rem; height: .9rem; margin-right: .3rem; vertical-align: -.1rem; }
footer { margin-top: 2rem; color: #888; font-size: .8rem; }
"""
