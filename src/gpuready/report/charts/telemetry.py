"""Burn (and any run's) telemetry per GPU: temperature, power (against its limit) and SM clock over time, with the
spans where a clock-event ("throttle") reason was active shaded on each plot.

Reads the document's `series` (`{"subject": {"gpu": …}, "metric", "unit", "t_s", "values"}`, telemetry.py's
sampler). The reasons are NVML's bit flags (`clock_event_reasons`), decoded by facts/clock_reasons.py and grouped by
knowledge/clock_reasons.toml; the power cap is shaded too, because a GPU held at its cap is what explains a lower
clock.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from bokeh.layouts import gridplot
from bokeh.models import BoxAnnotation, ColumnDataSource

from gpuready.facts.clock_reasons import reasons_from_mask
from gpuready.knowledge import clock_reasons
from gpuready.report.charts.base import PALETTE, Chart, Say, as_plotted, finite, gpu_label, new_figure
from gpuready.report.document import mapping, sequence

CURVES = (("temperature_c", "html.axis.temperature_c", PALETTE[3]), ("power_w", "html.axis.power_w", PALETTE[1]),
          ("sm_clock_mhz", "html.axis.sm_clock_mhz", PALETTE[0]))
"""The plotted metrics, each with its axis label id and colour."""
LIMIT_OF = {"power_w": "power_limit_w"}
"""A metric drawn with its limit as a dashed line."""
REASONS = "clock_event_reasons"
SHADES = (("power_cap", "#f2b134"), ("thermal", "#d62728"), ("hardware", "#7b3294"))
"""Reason group → shade, drawn in this order (a later one over an earlier)."""
SHADE_ALPHA = 0.18
CURVE_HEIGHT_PX = 220
POINTS_PER_CURVE = 2000
"""A longer curve keeps each stretch's lowest and highest sample (a spike stays visible): a 24-h burn at one sample
a second would otherwise put 86,400 points per curve into the page (the 5 MB budget: benchmarks/html_report_size.py)."""


def telemetry_charts(document: dict, say: Say) -> list[Chart]:
    """One chart per GPU with telemetry (three plots side by side sharing their time axis)."""
    by_gpu: dict[str, dict[str, dict]] = defaultdict(dict)
    for item in sequence(document.get("series")):
        series = mapping(item)
        if isinstance(series.get("metric"), str):
            by_gpu[gpu_label(mapping(series.get("subject")).get("gpu"))][series["metric"]] = series
    charts = []
    for label, metrics in by_gpu.items():
        chart = _gpu_chart(label, metrics, say)
        if chart is not None:
            charts.append(chart)
    return charts


def _gpu_chart(label: str, metrics: dict[str, dict], say: Say) -> Chart | None:
    spans = _reason_spans(metrics.get(REASONS))
    plots, x_range = [], None
    for metric, axis_id, colour in CURVES:
        points = _points(metrics.get(metric))
        if not points:
            continue
        options = {"x_range": x_range} if x_range is not None else {}
        plot = new_figure(say, height=CURVE_HEIGHT_PX, title=say(axis_id), x_axis_label=say("html.axis.time_s"),
                          tooltips=[(say("html.axis.time_s"), "@t_s{0.0}"), (say(axis_id), "@value{0.0}")], **options)
        x_range = plot.x_range
        plot.line("t_s", "value", source=ColumnDataSource(_columns(points)), color=colour, line_width=2)
        limit = _points(metrics.get(LIMIT_OF.get(metric, "")))
        if limit:
            plot.line("t_s", "value", source=ColumnDataSource(_columns(limit)), color="#555555", line_dash="dashed",
                      line_width=1.5, legend_label=say("html.legend.power_limit"))
            plot.legend.location = "bottom_right"
        for group, colour_ in SHADES:
            for left, right in spans.get(group, []):
                plot.add_layout(BoxAnnotation(left=left, right=right, fill_color=colour_, fill_alpha=SHADE_ALPHA,
                                              line_alpha=0, level="underlay"))
        plots.append(plot)
    if not plots:
        return None
    legend = [(_translucent(colour), say(f"html.shade.{group}")) for group, colour in SHADES if spans.get(group)]
    return Chart(key=f"telemetry-{label or 'host'}", title=say("html.chart.telemetry", gpu=label or "-"),
                 model=gridplot([plots], sizing_mode="stretch_width", toolbar_location="right"), legend=legend,
                 note=say("html.note.shaded") if legend else None)


def _points(series: dict | None) -> list[tuple[float, float]]:
    """(t_s, value) pairs with a finite time; a missing value stays as a gap. [] where no value is finite."""
    if not series:
        return []
    times, values = sequence(series.get("t_s")), sequence(series.get("values"))
    points = [(finite(t), as_plotted(v)) for t, v in zip(times, values)]
    points = [(t, v) for t, v in points if t is not None]
    if not any(v == v for _t, v in points):  # NaN != NaN
        return []
    return _thinned(points) if len(points) > POINTS_PER_CURVE else points


def _thinned(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """`POINTS_PER_CURVE` points at most: of each run of consecutive samples, its lowest and highest, in time order."""
    buckets = POINTS_PER_CURVE // 2
    kept: list[tuple[float, float]] = []
    for number in range(buckets):
        run = points[number * len(points) // buckets:(number + 1) * len(points) // buckets]
        known = [point for point in run if point[1] == point[1]] or run[:1]
        low, high = min(known, key=lambda point: point[1]), max(known, key=lambda point: point[1])
        kept += sorted({low, high})
    return kept


def _columns(points: list[tuple[float, float]]) -> dict[str, list[float]]:
    return {"t_s": [t for t, _v in points], "value": [v for _t, v in points]}


def _reason_spans(series: dict | None) -> dict[str, list[tuple[float, float]]]:
    """Group → [(start_s, end_s)]: each sample holds until the next one (the last one for the median interval);
    spans of one group that touch, or lie closer than a drawn step of the curves, are merged."""
    samples = [(t, v) for t, v in ((finite(t), finite(v)) for t, v in
                                   zip(sequence(mapping(series).get("t_s")), sequence(mapping(series).get("values"))))
               if t is not None and v is not None and v >= 0]
    if not samples:
        return {}
    gaps = [later[0] - earlier[0] for earlier, later in zip(samples, samples[1:])]
    last_s = statistics.median(gaps) if gaps else 1.0
    # spans closer than a curve's drawn step are one box: a reason that flickers all day is not 40,000 boxes
    join_s = max(0.0, (samples[-1][0] - samples[0][0]) * 2 / POINTS_PER_CURVE)
    groups = {"power_cap": frozenset({"sw_power_cap"}), "thermal": clock_reasons("thermal"),
              "hardware": clock_reasons("hardware")}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for position, (start, mask) in enumerate(samples):
        end = samples[position + 1][0] if position + 1 < len(samples) else start + last_s
        active = reasons_from_mask(int(mask))
        for group, names in groups.items():
            if active & names:
                if spans[group] and start - spans[group][-1][1] <= join_s:
                    spans[group][-1] = (spans[group][-1][0], end)
                else:
                    spans[group].append((start, end))
    return dict(spans)


def _translucent(colour: str) -> str:
    """`#rrggbb` as the CSS colour of its shade on the plots (the legend's swatch looks like the box)."""
    red, green, blue = (int(colour[position:position + 2], 16) for position in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {SHADE_ALPHA * 2})"
