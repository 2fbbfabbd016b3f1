"""One distribution per fleet measurement: every node's figure, lowest to highest, with the fleet's median as a
dashed line and the nodes the fleet judge named as outliers marked.

Reads the fleet document (verbs/fleet): `measurements` maps each measurement's name (`name`, or `name (kind)` where
one name is measured of several kinds) to its spread (`median`, `mad`, `n`) and, where present, `values`
(`[{"host", "value"}]`); `nodes[].outliers` name the low figures (`name`, `subject.kind`, `value`). The judgement is
the fleet's: this draws its outliers, it does not pick its own. Without `values` only the outliers are drawn against
the median.
"""

from __future__ import annotations

from bokeh.models import BoxAnnotation, ColumnDataSource

from gpuready.report.charts.base import EXPECTED_COLOUR, MEASURED_COLOUR, OUTLIER_COLOUR, Chart, Say, finite, new_figure
from gpuready.report.document import mapping, sequence
from gpuready.safe_text import printable


MAD_ALPHA = 0.12


def fleet_charts(fleet: dict, say: Say) -> list[Chart]:
    drawn = []
    for position, (key, spread) in enumerate(mapping(fleet.get("measurements")).items()):
        outliers = _outliers(fleet, str(key))
        chart = _distribution(position, printable(key), mapping(spread), outliers, say)
        if chart is not None:
            drawn.append((not outliers, chart))
    # The measurements that named an outlier first: those are what the reader came for.
    return [chart for _none, chart in sorted(drawn, key=lambda item: item[0])]


def _outliers(fleet: dict, key: str) -> set[tuple[str, float]]:
    """(host, value) of each outlier the fleet judge named for the measurement `key`."""
    named = set()
    for node in map(mapping, sequence(fleet.get("nodes"))):
        for outlier in map(mapping, sequence(node.get("outliers"))):
            name, kind = outlier.get("name"), mapping(outlier.get("subject")).get("kind")
            value = finite(outlier.get("value"))
            if value is not None and key in (name, f"{name} ({kind})"):
                named.add((printable(node.get("host") or "?"), value))
    return named


def _distribution(position: int, key: str, spread: dict, outliers: set[tuple[str, float]], say: Say) -> Chart | None:
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
    unit = printable(spread.get("unit") or "")
    plot = new_figure(say, x_axis_label=say("html.axis.node_rank"), y_axis_label=unit or key,
                      tooltips=[(say("html.axis.host"), "@host"), (key, "@value{0,0.00}")])
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
    return Chart(key=f"fleet-{position}", title=key, model=plot, legend=legend, note=note)
