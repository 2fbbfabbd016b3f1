"""The fleet document on the console: what it covers, each cohort in one line, the nodes with a problem first with
what is low and by how much, the healthy ones counted; --verbose adds each cohort's spreads.

It lays out the fleet's one view model (report/fleet_view.py), which the HTML page and the Markdown summary lay out
too: the same cohort names, labels, units and percentages in each. Host names, file names and reasons come from
outside: each reaches rich as Text (never markup).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from gpuready.report.fleet_view import CohortView, Say, fleet_view
from gpuready.report.paragraph import print_paragraph
from gpuready.report.tables import table


def render_fleet(document: dict[str, Any], lang: str = "en", verbose: bool = False,
                 console: Console | None = None, plain: bool | None = None) -> None:
    console = console or Console()
    plain = not console.is_terminal if plain is None else plain
    view = fleet_view(document, lang)
    print_paragraph(console, Text(view.header, style="bold"))
    for cohort in view.cohorts:
        print_paragraph(console, cohort.line)
    for line in view.domains:
        print_paragraph(console, line)
    for line in view.pairs:
        print_paragraph(console, line)
    for note in view.notes:
        print_paragraph(console, note)
    if view.problems:
        console.print()
        nodes = table([view.column["node"], view.column["verdict"], view.column["what"]], plain)
        for node in view.problems:
            nodes.add_row(Text(node.host), Text(node.verdict_label), Text("\n".join(node.lines) or "-"))
        console.print(nodes)
    console.print()
    print_paragraph(console, view.healthy)
    print_paragraph(console, view.rule)
    if view.saved:
        print_paragraph(console, view.saved)
    if verbose:
        for cohort in view.cohorts:
            _render_spreads(cohort, console, plain, Say(lang))


def _render_spreads(cohort: CohortView, console: Console, plain: bool, say: Say) -> None:
    if not cohort.spreads:
        return
    console.print()
    print_paragraph(console, say("fleet.spreads", index=cohort.index))
    spreads = table([say(f"fleet.column.spread.{column}") for column in range(5)], plain, numeric=(2, 3, 4))
    for row in cohort.spreads:
        spreads.add_row(*(Text(cell) for cell in row))
    console.print(spreads)
