"""The fleet document on the console: what it covers, each cohort in one line, the nodes with a problem first with
what is low and by how much, the healthy ones counted; --verbose adds each cohort's spreads.

It reads the document alone (the --json output, read back, renders the same). Host names, file names and reasons
come from outside: each reaches rich as Text (never markup) through `printable`.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from gpuready.i18n import message, text_in
from gpuready.report.document import mapping, number, sequence, text
from gpuready.report.paragraph import print_paragraph
from gpuready.safe_text import printable
from gpuready.report.tables import table
from gpuready.report.figures import format_value

NAMED_AT_MOST = 20
"""Unreadable files named on the console; the --json document names every one."""
PROBLEMS = ("failing", "outlier", "unknown")


def render_fleet(document: dict[str, Any], lang: str = "en", verbose: bool = False,
                 console: Console | None = None, plain: bool | None = None) -> None:
    console = console or Console()
    plain = not console.is_terminal if plain is None else plain
    say = _Say(lang)
    summary = mapping(document.get("summary"))
    print_paragraph(console, Text(say("fleet.header", **{key: _count(summary.get(key)) for key in (
        "nodes", "cohorts", "outlier", "failing", "unknown", "healthy")}), style="bold"))
    cohorts = [mapping(cohort) for cohort in sequence(document.get("cohorts"))]
    for number_, cohort in enumerate(cohorts, 1):
        print_paragraph(console, _cohort_line(cohort, number_, document, say))
    _render_input_notes(document, console, say)
    rows = [mapping(row) for row in sequence(document.get("nodes"))]
    problems = [row for row in rows if row.get("verdict") in PROBLEMS]
    if problems:
        console.print()
        nodes = table([say("fleet.column.node"), say("fleet.column.verdict"), say("fleet.column.what")], plain)
        for row in problems:
            nodes.add_row(Text(_host(row, say)), Text(say(f"fleet.verdict.{row.get('verdict')}")),
                          Text("\n".join(_what(row, say)) or "-"))
        console.print(nodes)
    console.print()
    print_paragraph(console, say("fleet.healthy", count=_count(summary.get("healthy"))))
    limits = mapping(document.get("limits"))
    print_paragraph(console, say("fleet.rule", z=number(limits.get("z_limit")) or 0,
                                 floor=number(limits.get("floor_pct")) or 0,
                                 fraction=number(limits.get("expected_fraction")) or 0))
    if document.get("saved_baseline"):
        print_paragraph(console, say("fleet.baseline.saved", path=printable(document["saved_baseline"])))
    if verbose:
        for number_, cohort in enumerate(cohorts, 1):
            _render_spreads(cohort, number_, console, plain, say)


class _Say:
    """The catalogue's text in the reader's language: `say("fleet.healthy", count=3)`."""

    def __init__(self, lang: str):
        self.lang = lang

    def __call__(self, msg_id: str, **values: Any) -> str:
        return message(msg_id, self.lang, **values)


def _count(value: Any) -> int:
    """A count of the document (a document edited by hand may hold anything there)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cohort_line(cohort: dict, index: int, document: dict, say: _Say) -> str:
    key = cohort.get("key")
    nodes = _count(cohort.get("nodes"))
    if isinstance(key, dict):
        line = say("fleet.cohort", index=index, count=key.get("gpu_count", "?"), model=text(key.get("gpu_model")),
                   driver=text(key.get("driver_version")), nodes=nodes)
    else:
        line = say("fleet.cohort.unknown", index=index, nodes=nodes)
    if cohort.get("basis") == "baseline":
        return say("fleet.cohort.note", line=line, note=say("fleet.cohort.baseline", path=text(document.get("baseline"))))
    if cohort.get("weak"):
        minimum = mapping(document.get("limits")).get("min_robust_nodes", "?")
        return say("fleet.cohort.note", line=line, note=say("fleet.cohort.weak", nodes=nodes, minimum=minimum))
    return line


def _render_input_notes(document: dict, console: Console, say: _Say) -> None:
    unreadable = [mapping(item) for item in sequence(document.get("unreadable"))]
    if unreadable:
        named = [say("fleet.file_reason", file=text(item.get("file")), reason=_reason(item, say))
                 for item in unreadable[:NAMED_AT_MOST]]
        more = len(unreadable) - len(named)
        print_paragraph(console, say("fleet.unreadable", count=len(unreadable), named=say("list.separator").join(named))
                        + (" " + say("fleet.unreadable.more", count=more) if more else ""))
    for key in ("superseded", "skipped"):
        files = [text(path) for path in sequence(document.get(key))]
        if files:
            shown = ", ".join(files[:NAMED_AT_MOST]) + (" …" if len(files) > NAMED_AT_MOST else "")
            print_paragraph(console, say(f"fleet.{key}", count=len(files), files=shown))


def _reason(item: dict, say: _Say) -> str:
    said = mapping(item.get("reason_text"))
    if isinstance(said.get("message_id"), str):
        translated = text_in(say.lang, said["message_id"], mapping(said.get("message_values")))
        if translated is not None:
            return printable(translated)
    return text(item.get("reason"))


def _host(row: dict, say: _Say) -> str:
    host = row.get("host")
    if host:
        return text(host)
    files = sequence(row.get("files"))
    return say("fleet.unknown_host", file=text(files[0] if files else None))


def _what(row: dict, say: _Say) -> list[str]:
    """One line per low figure, worst first; a node whose own report failed says so first."""
    lines = []
    if row.get("verdict") == "failing":
        failed = [text(report.get("file")) for report in map(mapping, sequence(row.get("reports")))
                  if report.get("verdict") == "not_ready"]
        lines.append(say("fleet.own_report.not_ready", files=", ".join(failed)))
    elif row.get("verdict") == "unknown":
        lines.append(say("fleet.own_report.unknown"))
    for outlier in map(mapping, sequence(row.get("outliers"))):
        unit = text(outlier.get("unit"), "")
        value, median = number(outlier.get("value")), number(outlier.get("median"))
        subject = mapping(outlier.get("subject"))
        where = _subject(subject, say)
        name = say("fleet.low.where", name=text(outlier.get("name")), where=where) if where else \
            text(outlier.get("name"))
        rules = [rule for rule in sequence(outlier.get("rules")) if isinstance(rule, str)]
        parts = []
        if "fleet" in rules or "baseline" in rules:
            parts.append(say("fleet.low.baseline" if "baseline" in rules else "fleet.low.fleet",
                             deficit=number(outlier.get("deficit_pct")) or 0.0,
                             median=format_value(median, unit)))
        if "expected" in rules:
            parts.append(say("fleet.low.expected", share=number(outlier.get("share_of_expected")) or 0.0,
                             expected=format_value(number(outlier.get("expected")), unit)))
        lines.append(say("fleet.low", name=name, value=format_value(value, unit), why=say("list.separator").join(parts)))
    return lines


def _subject(subject: dict, say: _Say) -> str:
    gpu, peer = subject.get("gpu"), subject.get("peer")
    if gpu is None:
        return ""
    if peer is not None:
        return say("fleet.subject.pair", gpu=text(gpu), peer=text(peer))
    return say("fleet.subject.gpu", gpu=text(gpu))


def _render_spreads(cohort: dict, index: int, console: Console, plain: bool, say: _Say) -> None:
    measurements = mapping(cohort.get("measurements"))
    if not measurements:
        return
    console.print()
    print_paragraph(console, say("fleet.spreads", index=index))
    spreads = table([say(f"fleet.column.spread.{column}") for column in range(5)], plain, numeric=(2, 3, 4))
    for name, entry in measurements.items():
        entry = mapping(entry)
        unit = text(entry.get("unit"), "")
        spreads.add_row(*(Text(cell) for cell in (
            text(name), say("fleet.sense.higher" if entry.get("higher_is_better") else "fleet.sense.lower"),
            format_value(number(entry.get("median")), unit), format_value(number(entry.get("mad")), unit),
            text(entry.get("n")))))
    console.print(spreads)
