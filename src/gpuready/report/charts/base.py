"""What every chart of the HTML report shares: the `Chart` a builder returns, the figure factory (tools described in
the reader's language, no logo: nothing on the page links out), the palette, and reading numbers and GPUs out of a
document that may come from another version or be edited by hand.

A builder returns no chart for a document without its data: the page never shows an empty chart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from bokeh.models import BoxZoomTool, HoverTool, LayoutDOM, PanTool, ResetTool, SaveTool, WheelZoomTool
from bokeh.plotting import figure

from gpuready.report.document import mapping, number
from gpuready.safe_text import printable

Say = Callable[..., str]
"""`say("html.chart.busbw")`: the catalogue's text in the reader's language (its values filled)."""

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
"""Matplotlib's "tab10": ten colours told apart also by most colour-blind readers."""
MEASURED_COLOUR = "#4c78a8"
EXPECTED_COLOUR = "#222222"
OUTLIER_COLOUR = "#d62728"
HEIGHT_PX = 260
BAR_PX, BARS_BASE_PX, PAGE_PX = 90, 260, 1100
"""A bar chart is as wide as its bars need (one bar across the page read as a wall), at most the page."""


@dataclass(kw_only=True)
class Chart:
    """One chart of the page: `key` names it in the page (`data-chart`), `title` and `note` are plain text (escaped
    where the page is written), `legend` is (CSS colour, text) pairs for what a plot cannot label itself (shaded
    boxes)."""
    key: str
    title: str
    model: LayoutDOM
    note: str | None = None
    legend: list[tuple[str, str]] = field(default_factory=list)


def new_figure(say: Say, *, tooltips: list[tuple[str, str]] | None = None, height: int = HEIGHT_PX,
               bars: int | None = None, **options: Any) -> Any:
    """A figure with pan, zoom, reset and save (each described in the reader's language) and a hover where
    `tooltips` are given; it stretches to the page's width, or is as wide as its number of `bars` needs."""
    tools = [PanTool(description=say("html.tool.pan")), BoxZoomTool(description=say("html.tool.box_zoom")),
             WheelZoomTool(description=say("html.tool.wheel_zoom")), ResetTool(description=say("html.tool.reset")),
             SaveTool(description=say("html.tool.save"))]
    if tooltips:
        tools.append(HoverTool(tooltips=tooltips, description=say("html.tool.hover")))
    size = {"width": min(PAGE_PX, BARS_BASE_PX + BAR_PX * bars), "sizing_mode": "fixed"} if bars else \
        {"sizing_mode": "stretch_width"}
    result = figure(height=height, tools=tools, active_drag=None, active_scroll=None, **size, **options)
    result.toolbar.logo = None
    return result


def legend_outside(plot: Any) -> None:
    """The legend right of the plot, where it hides no bar."""
    plot.add_layout(plot.legend[0], "right")


def finite(value: Any) -> float | None:
    """A finite number of the document as a float, else None (missing, text, NaN, infinity)."""
    figure_ = number(value)
    return float(figure_) if figure_ is not None and math.isfinite(figure_) else None


def as_plotted(value: Any) -> float:
    """A value for a plotted column: NaN where the document has no finite number (Bokeh leaves a gap)."""
    figure_ = finite(value)
    return math.nan if figure_ is None else figure_


def gpu_index(subject_gpu: Any) -> int | None:
    index = mapping(subject_gpu).get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def gpu_label(subject_gpu: Any) -> str:
    """`GPU3` by NVML index, else the bus id or UUID; '' for no GPU."""
    gpu = mapping(subject_gpu)
    index = gpu_index(gpu)
    if index is not None:
        return f"GPU{index}"
    for key in ("bus_id", "uuid"):
        if isinstance(gpu.get(key), str) and gpu[key]:
            return printable(gpu[key])
    return ""


def measurements(document: dict) -> list[dict]:
    return [item for item in document.get("measurements") or [] if isinstance(item, dict)] \
        if isinstance(document.get("measurements"), list) else []
