"""The fleet document as a Markdown summary (`gpuready fleet … --markdown FILE`): the header, each cohort, the nodes
with a problem and what is low, the notes on the inputs and the rule, laid out from the fleet's one view model
(report/fleet_view.py) that the console and the HTML page lay out too. Every text is literal Markdown (report/
markdown.py `inline`): a host name cannot format, link or inject HTML."""

from __future__ import annotations

from typing import Any

from gpuready.i18n import message
from gpuready.report.fleet_view import fleet_view
from gpuready.report.markdown import inline


def fleet_markdown(document: dict[str, Any], lang: str = "en") -> str:
    view = fleet_view(document, lang)
    blocks = [f"## {inline(message('html.fleet.title', lang))}", f"**{inline(view.header)}**",
              "\n".join(f"- {inline(line)}" for line in [cohort.line for cohort in view.cohorts] + view.domains + view.pairs)]
    blocks += [inline(note) for note in view.notes]
    if view.problems:
        columns = [view.column[key] for key in ("node", "verdict", "cohort", "what")]
        lines = ["| " + " | ".join(inline(column, cell=True) for column in columns) + " |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(inline(cell, cell=True) for cell in (
            node.host, node.verdict_label, node.cohort, "; ".join(node.lines) or "-")) + " |" for node in view.problems]
        blocks.append("\n".join(lines))
    blocks += [inline(view.healthy), inline(view.rule)] + ([inline(view.saved)] if view.saved else [])
    return "\n\n".join(block for block in blocks if block) + "\n"
