"""GPU × GPU matrices as heatmaps: the P2P copy bandwidth validate measured per pair (one heatmap per direction
kind), and the link between each pair (`nvidia-smi topo -m`) where the document's facts carry the topology.

P2P: measurements `p2p_<direction>_gb_per_s` whose subject has a GPU and a peer. Topology: `facts.topology` (or each
of `facts.machines[].topology`) as `{"gpu_labels": [...], "links": [[...], ...]}` or with `links` keyed `"i,j"`.
"""

from __future__ import annotations

import re

from bokeh.models import ColumnDataSource, LinearColorMapper
from bokeh.palettes import Viridis256

from gpuready.report.charts.base import Chart, Say, finite, gpu_label, measurements, new_figure
from gpuready.report.document import mapping, sequence
from gpuready.safe_text import printable

P2P = re.compile(r"^p2p_(?P<direction>[a-z]+)_gb_per_s$")
LINK_RANKS = (("NV", "#1a9850"), ("PIX", "#91cf60"), ("PXB", "#d9ef8b"), ("PHB", "#fee08b"), ("NODE", "#fc8d59"),
              ("SYS", "#d73027"))
"""nvidia-smi's link kinds, fastest first (its own legend's order), with a green-to-red shade."""
LIGHT_CELL_FROM = 0.55
"""Viridis is light (green to yellow) above this share of its range: dark text there, white below."""
DARK_TEXT, LIGHT_TEXT = "#222222", "#ffffff"
SELF_COLOUR = "#dddddd"
UNKNOWN_COLOUR = "#ffffff"
CELL_PX = 46
MAX_SIDE_PX = 620


def matrix_charts(document: dict, say: Say) -> list[Chart]:
    return _p2p_charts(document, say) + _topology_charts(document, say)


def _p2p_charts(document: dict, say: Say) -> list[Chart]:
    cells: dict[str, dict[tuple[str, str], float]] = {}
    for item in measurements(document):
        match = P2P.match(str(item.get("name")))
        subject = mapping(item.get("subject"))
        source, target = gpu_label(subject.get("gpu")), gpu_label(subject.get("peer"))
        value = finite(item.get("value"))
        if match and source and target and value is not None:
            cells.setdefault(match["direction"], {})[(source, target)] = value
    charts = []
    for direction, values in cells.items():
        labels = _ordered({label for pair in values for label in pair})
        high = max(values.values()) or 1.0
        source = ColumnDataSource({"gpu": [pair[0] for pair in values], "peer": [pair[1] for pair in values],
                                   "value": list(values.values()),
                                   "text": [f"{value:,.0f}" for value in values.values()],
                                   "text_colour": [DARK_TEXT if value / high > LIGHT_CELL_FROM else LIGHT_TEXT
                                                   for value in values.values()]})
        plot = _grid(labels, say, [(say("html.axis.gpu"), "@gpu"), (say("html.axis.peer"), "@peer"),
                                   (say("html.axis.gb_per_s"), "@value{0,0.0}")])
        mapper = LinearColorMapper(palette=Viridis256, low=0, high=high)
        plot.rect(x="peer", y="gpu", width=1, height=1, source=source, fill_color={"field": "value",
                  "transform": mapper}, line_color="white")
        plot.text(x="peer", y="gpu", text="text", source=source, text_align="center", text_baseline="middle",
                  text_color="text_colour", text_font_size="11px")
        direction_label = say(f"html.p2p.{direction}") if direction in ("unidirectional", "bidirectional") \
            else printable(direction)
        charts.append(Chart(key=f"p2p-{direction}", title=say("html.chart.p2p", direction=direction_label),
                            model=plot, note=say("html.note.p2p")))
    return charts


def _topology_charts(document: dict, say: Say) -> list[Chart]:
    facts = mapping(document.get("facts"))
    # check's document of several machines repeats the first machine's facts at the top: draw each machine once.
    machines = [(mapping(machine).get("machine"), mapping(machine).get("topology"))
                for machine in sequence(facts.get("machines"))] or [(None, facts.get("topology"))]
    charts = []
    for position, (machine, topology) in enumerate(machines):
        links = _links(mapping(topology))
        labels = _ordered({label for pair in links for label in pair})
        if len(labels) < 2:  # one GPU has no link to show
            continue
        colours = [_link_colour(link, gpu == peer) for (gpu, peer), link in links.items()]
        source = ColumnDataSource({"gpu": [pair[0] for pair in links], "peer": [pair[1] for pair in links],
                                   "link": list(links.values()), "colour": colours,
                                   "text_colour": [LIGHT_TEXT if colour in ("#1a9850", "#d73027") else DARK_TEXT
                                                   for colour in colours]})
        plot = _grid(labels, say, [(say("html.axis.gpu"), "@gpu"), (say("html.axis.peer"), "@peer"),
                                   (say("html.axis.link"), "@link")])
        plot.rect(x="peer", y="gpu", width=1, height=1, source=source, fill_color="colour", line_color="white")
        plot.text(x="peer", y="gpu", text="link", source=source, text_align="center", text_baseline="middle",
                  text_color="text_colour", text_font_size="11px")
        title = say("html.chart.topology.machine", machine=printable(machine)) if machine \
            else say("html.chart.topology")
        legend = [(colour, kind) for kind, colour in LINK_RANKS]
        charts.append(Chart(key=f"topology-{position}", title=title, model=plot, legend=legend,
                            note=say("html.note.topology")))
    return charts


def _links(topology: dict) -> dict[tuple[str, str], str]:
    """(row GPU, column GPU) → link text, from a matrix (rows of `gpu_labels`) or `"i,j"` keys."""
    labels = [printable(label) for label in sequence(topology.get("gpu_labels"))]
    links = topology.get("links")
    result: dict[tuple[str, str], str] = {}
    if isinstance(links, list):
        for i, row in enumerate(links):
            for j, link in enumerate(sequence(row)):
                if i < len(labels) and j < len(labels) and isinstance(link, str):
                    result[(labels[i], labels[j])] = printable(link)
    elif isinstance(links, dict):
        for key, link in links.items():
            parts = str(key).split(",")
            if len(parts) == 2 and all(part.strip().isdigit() for part in parts) and isinstance(link, str):
                i, j = (int(part) for part in parts)
                name = lambda k: labels[k] if k < len(labels) else f"GPU{k}"
                result[(name(i), name(j))] = printable(link)
    return result


def _link_colour(link: str, diagonal: bool) -> str:
    if diagonal or link == "X":
        return SELF_COLOUR
    return next((colour for kind, colour in LINK_RANKS if link.startswith(kind)), UNKNOWN_COLOUR)


def _grid(labels: list[str], say: Say, tooltips: list[tuple[str, str]]):
    side = min(MAX_SIDE_PX, 120 + CELL_PX * len(labels))
    plot = new_figure(say, x_range=labels, y_range=list(reversed(labels)), height=side, tooltips=tooltips,
                      x_axis_location="above", x_axis_label=say("html.axis.peer"), y_axis_label=say("html.axis.gpu"))
    plot.sizing_mode = "fixed"
    plot.width = side + 60
    plot.grid.grid_line_color = None
    plot.axis.axis_line_color = None
    plot.axis.major_tick_line_color = None
    return plot


def _ordered(labels: set[str]) -> list[str]:
    """`GPU2` before `GPU10`; names that are not `GPU<n>` after them, alphabetically."""
    def key(label: str) -> tuple[int, int, str]:
        match = re.fullmatch(r"GPU(\d+)", label)
        return (0, int(match[1]), "") if match else (1, 0, label)
    return sorted(labels, key=key)
