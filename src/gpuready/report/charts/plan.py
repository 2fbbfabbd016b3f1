"""plan's memory per GPU for each strategy, stacked by what holds it (parameters, gradients, optimizer state,
activations, the rest), against the GPU's memory: which strategies fit, and what to shrink in the ones that do not.

Reads `strategies[].memory_bytes` and `facts.plan.machine.memory_bytes_per_gpu`.
"""

from __future__ import annotations

from bokeh.models import ColumnDataSource

from gpuready.report.charts.base import EXPECTED_COLOUR, PALETTE, Chart, Say, finite, legend_outside, new_figure
from gpuready.report.document import mapping, sequence
from gpuready.safe_text import printable

TERMS = ("parameters", "gradients", "optimizer", "activations", "other")
GIB = 2**30


def plan_charts(document: dict, say: Say) -> list[Chart]:
    rows = [(printable(strategy.get("name")), mapping(strategy.get("memory_bytes")))
            for strategy in map(mapping, sequence(document.get("strategies"))) if isinstance(strategy.get("name"), str)]
    rows = [(name, terms) for name, terms in rows if any(finite(terms.get(term)) for term in TERMS)]
    if not rows:
        return []
    names = list(dict.fromkeys(name for name, _terms in rows))
    columns = {"strategy": names}
    for term in TERMS:
        by_name = {name: (finite(terms.get(term)) or 0.0) / GIB for name, terms in rows}
        columns[term] = [by_name[name] for name in names]
    plot = new_figure(say, x_range=names, y_axis_label=say("html.axis.gib_per_gpu"), bars=len(names),
                      tooltips=[(say("html.axis.strategy"), "@strategy"),
                                *((say(f"html.term.{term}"), f"@{term}{{0,0.0}}") for term in TERMS)])
    plot.vbar_stack(list(TERMS), x="strategy", width=0.7, source=ColumnDataSource(columns),
                    color=list(PALETTE[:len(TERMS)]), legend_label=[say(f"html.term.{term}") for term in TERMS])
    memory = finite(mapping(mapping(mapping(document.get("facts")).get("plan")).get("machine")).get(
        "memory_bytes_per_gpu"))
    if memory:
        plot.line([names[0], names[-1]], [memory / GIB] * 2, color=EXPECTED_COLOUR, line_dash="dashed", line_width=2,
                  legend_label=say("html.legend.gpu_memory"))
    plot.y_range.start = 0
    plot.xaxis.major_label_orientation = 0.8 if len(names) > 6 else 0
    legend_outside(plot)
    plot.legend.click_policy = "hide"
    return [Chart(key="plan-memory", title=say("html.chart.plan_memory"), model=plot)]
