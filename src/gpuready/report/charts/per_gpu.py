"""Figures per GPU against their expectation, as bars with the expected figure marked on each: compute (validate's
matmul TFLOP/s per precision, burn's sustained TFLOP/s), device memory copy, and host↔device copies.

Reads the document's `measurements`; a measurement without an expectation is a bar alone (burn's TFLOP/s is judged
against the best GPU, not a figure).
"""

from __future__ import annotations

import math
import re

from bokeh.models import ColumnDataSource, FactorRange

from gpuready.report.charts.base import (EXPECTED_COLOUR, MEASURED_COLOUR, Chart, Say, as_plotted, finite, gpu_label,
                                         legend_outside, measurements, new_figure)
from gpuready.report.document import mapping

FAMILIES = (
    ("compute", re.compile(r"^(matmul|burn)_tflops_(?P<kind>\w+)$"), "html.axis.tflops"),
    ("memory_copy", re.compile(r"^(?P<kind>memory_copy)_gb_per_s$"), "html.axis.gb_per_s"),
    ("host_transfer", re.compile(r"^(?P<kind>[hd]2[hd]_(pinned|pageable))_gb_per_s$"), "html.axis.gb_per_s"),
)
"""Chart key, the measurement names it draws (`kind`: the bar's name under its GPU) and its value axis."""


def per_gpu_charts(document: dict, say: Say) -> list[Chart]:
    charts = []
    for key, pattern, axis_id in FAMILIES:
        rows = []
        for item in measurements(document):
            match = pattern.match(str(item.get("name")))
            value = finite(item.get("value"))
            if match and value is not None:
                kind = match["kind"]
                label = say(f"html.kind.{kind}") if kind in _NAMED_KINDS else kind
                if str(item.get("name")).startswith("burn_"):
                    label = say("html.kind.burn", dtype=kind)
                gpu = gpu_label(mapping(item.get("subject")).get("gpu")) or "-"
                rows.append((gpu, label, value, as_plotted(item.get("expected")), str(item.get("expected_source") or "")))
        if rows:
            charts.append(_bars(key, rows, axis_id, say))
    return charts


_NAMED_KINDS = frozenset({"memory_copy", "h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"})


def _bars(key: str, rows: list[tuple[str, str, float, float, str]], axis_id: str, say: Say) -> Chart:
    factors = list(dict.fromkeys((gpu, kind) for gpu, kind, *_rest in rows))
    source = ColumnDataSource({"x": [(gpu, kind) for gpu, kind, *_rest in rows], "value": [row[2] for row in rows],
                               "expected": [row[3] for row in rows], "source": [row[4] for row in rows]})
    plot = new_figure(say, x_range=FactorRange(*factors), y_axis_label=say(axis_id), bars=len(factors),
                      tooltips=[(say("html.legend.measured"), "@value{0,0.0}"),
                                (say("html.legend.expected"), "@expected{0,0.0}"),
                                (say("html.legend.expected_source"), "@source")])
    plot.vbar(x="x", top="value", width=0.8, source=source, color=MEASURED_COLOUR,
              legend_label=say("html.legend.measured"))
    if any(not math.isnan(row[3]) for row in rows):
        plot.scatter(x="x", y="expected", source=source, marker="dash", size=28, line_width=3,
                     color=EXPECTED_COLOUR, legend_label=say("html.legend.expected"))
    plot.y_range.start = 0
    plot.xaxis.major_label_orientation = 0.8 if len(factors) > 8 else 0
    legend_outside(plot)
    return Chart(key=key, title=say(f"html.chart.{key}"), model=plot)
