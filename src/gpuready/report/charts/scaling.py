"""bench's runs side by side (1 GPU against N GPUs): throughput with the ideal N × the 1-GPU figure marked, and peak
memory per GPU against the GPU's memory.

Reads bench's measurements: each carries its run in `method` (`strategy`, `world_size`); throughput is
`<strategy>_tokens_per_s`, memory `peak_memory_allocated_bytes` / `peak_memory_reserved_bytes` (expected: the GPU's
memory).
"""

from __future__ import annotations

import math

from bokeh.models import ColumnDataSource, FactorRange

from gpuready.report.charts.base import (EXPECTED_COLOUR, MEASURED_COLOUR, PALETTE, Chart, Say, as_plotted, finite,
                                         legend_outside, measurements, new_figure)
from gpuready.report.document import mapping
from gpuready.safe_text import printable

GIB = 2**30
MEMORY = ("peak_memory_allocated_bytes", "peak_memory_reserved_bytes")


def scaling_charts(document: dict, say: Say) -> list[Chart]:
    runs: dict[str, dict] = {}
    for item in measurements(document):
        method = mapping(item.get("method"))
        strategy, world_size = method.get("strategy"), finite(method.get("world_size"))
        if not isinstance(strategy, str) or world_size is None:
            continue
        run = runs.setdefault(f"{printable(strategy)} ×{world_size:g}", {"world_size": world_size})
        name, value = str(item.get("name")), finite(item.get("value"))
        if value is None:
            continue
        if name == f"{strategy}_tokens_per_s":
            run["tokens_per_s"] = value
        elif name in MEMORY:
            run[name] = value / GIB
            expected = finite(item.get("expected"))
            if expected:
                run["memory_gib"] = expected / GIB
    charts = []
    throughput = {label: run for label, run in runs.items() if "tokens_per_s" in run}
    if throughput:
        charts.append(_throughput(throughput, say))
    memory = {label: run for label, run in runs.items() if any(name in run for name in MEMORY)}
    if memory:
        charts.append(_memory(memory, say))
    return charts


def _throughput(runs: dict[str, dict], say: Say) -> Chart:
    single = next((run["tokens_per_s"] for run in runs.values() if run["world_size"] == 1), None)
    labels = list(runs)
    ideal = [run["world_size"] * single if single is not None and run["world_size"] > 1 else math.nan
             for run in runs.values()]
    source = ColumnDataSource({"run": labels, "value": [run["tokens_per_s"] for run in runs.values()],
                               "ideal": ideal})
    plot = new_figure(say, x_range=labels, y_axis_label=say("html.axis.tokens_per_s"), bars=len(labels),
                      tooltips=[(say("html.axis.run"), "@run"), (say("html.legend.measured"), "@value{0,0}"),
                                (say("html.legend.ideal"), "@ideal{0,0}")])
    plot.vbar(x="run", top="value", width=0.6, source=source, color=MEASURED_COLOUR,
              legend_label=say("html.legend.measured"))
    if any(not math.isnan(value) for value in ideal):
        plot.scatter(x="run", y="ideal", source=source, marker="dash", size=40, line_width=3, color=EXPECTED_COLOUR,
                     legend_label=say("html.legend.ideal"))
    plot.y_range.start = 0
    legend_outside(plot)
    return Chart(key="bench-throughput", title=say("html.chart.bench_throughput"), model=plot,
                 note=say("html.note.ideal") if single is not None and len(runs) > 1 else None)


def _memory(runs: dict[str, dict], say: Say) -> Chart:
    kinds = [(name, say(f"html.kind.{name}")) for name in MEMORY if any(name in run for run in runs.values())]
    factors = [(label, kind) for label in runs for _name, kind in kinds]
    rows = [(label, kind, as_plotted(run.get(name)), run.get("memory_gib", math.nan))
            for label, run in runs.items() for name, kind in kinds]
    source = ColumnDataSource({"x": factors, "value": [row[2] for row in rows], "limit": [row[3] for row in rows]})
    plot = new_figure(say, x_range=FactorRange(*factors), y_axis_label=say("html.axis.gib_per_gpu"),
                      bars=len(factors),
                      tooltips=[(say("html.legend.measured"), "@value{0,0.0}"),
                                (say("html.legend.gpu_memory"), "@limit{0,0.0}")])
    plot.vbar(x="x", top="value", width=0.8, source=source, color=PALETTE[2], legend_label=say("html.legend.measured"))
    if any(not math.isnan(row[3]) for row in rows):
        plot.scatter(x="x", y="limit", source=source, marker="dash", size=28, line_width=3, color=EXPECTED_COLOUR,
                     legend_label=say("html.legend.gpu_memory"))
    plot.y_range.start = 0
    legend_outside(plot)
    return Chart(key="bench-memory", title=say("html.chart.bench_memory"), model=plot)
