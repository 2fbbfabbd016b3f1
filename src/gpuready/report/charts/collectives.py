"""NCCL bus bandwidth against message size, one line per collective, with the expected busbw as a dashed line.

Reads validate's `<collective>_busbw_gb_per_s` measurements: their `method.rows` hold each size and placement as
nccl-tests prints them (`size_bytes`, `placement`, `busbw_gb_per_s`); a size measured out of place and in place is
drawn at the better of the two (the figure validate judges is the peak over both). A measurement without rows draws
nothing: one peak is no curve.
"""

from __future__ import annotations

from collections import defaultdict

from bokeh.models import ColumnDataSource

from gpuready.report.charts.base import EXPECTED_COLOUR, PALETTE, Chart, Say, finite, measurements, new_figure
from gpuready.report.document import mapping, sequence
from gpuready.safe_text import printable

SUFFIX = "_busbw_gb_per_s"


def collective_charts(document: dict, say: Say) -> list[Chart]:
    curves: dict[str, dict[float, float]] = {}
    expected: float | None = None
    for item in measurements(document):
        name = str(item.get("name"))
        if not name.endswith(SUFFIX):
            continue
        best: dict[float, float] = defaultdict(float)
        for row in map(mapping, sequence(mapping(item.get("method")).get("rows"))):
            size, busbw = finite(row.get("size_bytes")), finite(row.get("busbw_gb_per_s"))
            if size is not None and size > 0 and busbw is not None:
                best[size] = max(best[size], busbw)
        if best:
            curves[printable(name[:-len(SUFFIX)])] = dict(sorted(best.items()))
            expected = expected if expected is not None else finite(item.get("expected"))
    if not curves:
        return []
    plot = new_figure(say, x_axis_type="log", x_axis_label=say("html.axis.size_bytes"),
                      y_axis_label=say("html.axis.busbw"),
                      tooltips=[(say("html.axis.collective"), "@collective"), (say("html.axis.size_bytes"), "@size{0,0}"),
                                (say("html.axis.busbw"), "@busbw{0,0.0}")])
    for position, (collective, points) in enumerate(curves.items()):
        source = ColumnDataSource({"size": list(points), "busbw": list(points.values()),
                                   "collective": [collective] * len(points)})
        colour = PALETTE[position % len(PALETTE)]
        plot.line("size", "busbw", source=source, color=colour, line_width=2, legend_label=collective)
        plot.scatter("size", "busbw", source=source, color=colour, size=5, legend_label=collective)
    if expected is not None:  # a line over the sizes measured, not a Span: the axis then takes it in
        sizes = [size for points in curves.values() for size in points]
        plot.line([min(sizes), max(sizes)], [expected, expected], color=EXPECTED_COLOUR, line_dash="dashed",
                  line_width=2, legend_label=say("html.legend.expected_value", value=expected))
    plot.y_range.start = 0
    plot.legend.location = "top_left"
    plot.legend.click_policy = "hide"
    return [Chart(key="busbw", title=say("html.chart.busbw"), model=plot, note=say("html.note.busbw"))]
