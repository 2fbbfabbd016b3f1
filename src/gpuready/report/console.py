"""The report document on the console, problems first.

Order: the verdict and the machine it is about (or, for a verb that judges no machine, what the run was), the GPU
inventory, failures and warnings worst first (the same finding on several GPUs as one row), one line per category of
passes, one line of skips; then measurements and plan's own parts. `verbose` lists every finding on its own.

Nothing is cut: every cell and paragraph wraps, at 80 columns and when piped; piped (`plain`, by default whenever
the console is not a terminal) there are no box-drawing characters. Every string of the document may come from
outside (log lines, file names, host and GPU names): each reaches rich as a `Text` (never parsed as markup) after
`printable` (safe_text.py) has escaped its control characters.

It reads the JSON document (`Report.to_dict()`, described by `schema/report.schema.json`), so a saved report
(`--out report.json`) renders again as it did. A document from another version, or edited by hand, still renders: a
missing key or a value this version does not know is shown as such, never a traceback.
"""

from __future__ import annotations

from rich.console import Console

from gpuready.report.document import read_finding, sequence
from gpuready.report.findings_view import EVIDENCE_SHOWN, render_findings, render_header
from gpuready.report.labels import labels_for
from gpuready.report.plan_view import STRATEGIES_SHOWN, render_plan, render_plan_subject
from gpuready.report.tables import render_inventory, render_measurements
from gpuready.report.figures import format_value
from gpuready.report.translate import in_language

__all__ = ["EVIDENCE_SHOWN", "STRATEGIES_SHOWN", "format_value", "render_console"]


def render_console(document: dict, console: Console | None = None, verbose: bool = False, lang: str = "en",
                   plain: bool | None = None) -> None:
    """Print the report document (`Report.to_dict()`, or the same JSON read back from a file).

    `plain`: no box-drawing characters; None decides from the console (plain unless it writes to a terminal).
    Raises TypeError for anything but a dict (a `Report` object included): that is a caller's mistake, not a document.
    """
    if not isinstance(document, dict):
        raise TypeError(f"render_console takes the report document (Report.to_dict()), not {type(document).__name__}")
    console = console or Console()
    plain = not console.is_terminal if plain is None else plain
    labels = labels_for(lang)
    document = in_language(document, lang)
    findings = [read_finding(item) for item in sequence(document.get("findings"))]
    render_header(document, findings, console, labels)
    render_plan_subject(document, console, labels)
    render_inventory(document, console, labels, plain)
    render_findings(document, findings, console, labels, verbose)
    render_measurements(document, console, labels, plain, verbose)
    render_plan(document, console, labels, plain, verbose)
