"""One distribution per fleet measurement: every node's figure, lowest to highest, with the fleet's median as a
dashed line and the nodes the fleet judge named as outliers marked.

Reads the fleet's view model (report/fleet_view.py `measurement_views`): each measurement's label, its unit as a
reader writes it, its spread (`median`, `mad`, `n`) and, where present, `values` (`[{"host", "value"}]`), and the
figures the fleet judge named low. The judgement is the fleet's: this draws its outliers, it does not pick its own.
Without `values` only the outliers are drawn against the median. Every label, title and tooltip is plain text
(`PlainText` axis labels; a tooltip's label is text): a unit like `$$\\color{green}{HEALTHY}$$` is shown as written, never typeset.
At most MAX_CHARTS are drawn, those with an outlier first.
"""

from __future__ import annotations

from bokeh.models import BoxAnnotation, ColumnDataSource, PlainText

from gpuready.report.charts.base import EXPECTED_COLOUR, MEASURED_COLOUR, OUTLIER_COLOUR, Chart, Say, finite, new_figure
from gpuready.report.document import mapping, sequence
from gpuready.report.fleet_view import MeasurementView, measurement_views
from gpuready.safe_text import printable

MAD_ALPHA = 0.12
MAX_CHARTS = 64
"""Distributions drawn on one page (each is ~70 ms and ~10 kB of Bokeh): the --json report and the console hold every
measurement."""


def fleet_charts(fleet: dict, say: Say) -> list[Chart]:
    drawn = []
    for position, measurement in enumerate(measurement_views(fleet)):
        chart = _distribution(position, measurement, say)
        if chart is not None:
            drawn.append((not measurement.outliers, position, chart))
    # The measurements that named an outlier first: those are what the reader came for.
    return [chart for _none, _position, chart in sorted(drawn, key=lambda item: item[:2])[:MAX_CHARTS]]


def charts_left_out(fleet: dict) -> int:
    """The measurements beyond MAX_CHARTS that the page does not draw."""
    return max(0, len(mapping(fleet.get("measurements"))) - MAX_CHARTS)


def _distribution(position: int, measurement: MeasurementView, say: Say) -> Chart | None:
    spread, outliers = measurement.spread, measurement.outliers
    points = [(printable(mapping(item).get("host") or "?"), finite(mapping(item).get("value")))
              for item in sequence(spread.get("values"))]
    points = [(host, value) for host, value in points if value is not None]
    every_node = bool(points)
    points = points or sorted(outliers)
    if not points:
        return None
    points.sort(key=lambda point: point[1])
    marked = [(host, value) in outliers for host, value in points]
    source = ColumnDataSource({"rank": list(range(1, len(points) + 1)), "host": [host for host, _v in points],
                               "value": [value for _h, value in points],
                               "colour": [OUTLIER_COLOUR if flag else MEASURED_COLOUR for flag in marked],
                               "size": [9 if flag else 5 for flag in marked]})
    plot = new_figure(say, x_axis_label=PlainText(say("html.axis.node_rank")),
                      y_axis_label=PlainText(measurement.unit or measurement.label),
                      tooltips=[(say("html.axis.host"), "@host"),
                                (measurement.label, "@value{0,0.00}")])
    plot.scatter("rank", "value", source=source, color="colour", size="size")
    plot.xaxis.ticker.min_interval = 1  # ranks are whole nodes
    median, mad = finite(spread.get("median")), finite(spread.get("mad"))
    legend = [(OUTLIER_COLOUR, say("html.legend.outlier"))] + \
        ([(MEASURED_COLOUR, say("html.legend.node"))] if every_node else [])
    if median is not None:
        plot.line([0.5, len(points) + 0.5], [median, median], color=EXPECTED_COLOUR, line_dash="dashed", line_width=2,
                  legend_label=say("html.legend.median", value=median))
        plot.legend.location = "top_left"
        if mad:
            plot.add_layout(BoxAnnotation(bottom=median - mad, top=median + mad, fill_color=EXPECTED_COLOUR,
                                          fill_alpha=MAD_ALPHA, line_alpha=0, level="underlay"))
            legend.append((f"rgba(34, 34, 34, {MAD_ALPHA})", say("html.legend.mad", mad=mad)))
    note = None if every_node else say("html.note.outliers_only", nodes=spread.get("n", "?"))
    return Chart(key=f"fleet-{position}", title=measurement.label, model=plot, legend=legend, note=note)
