"""Report documents as a Markdown summary for a ticket or a pull request: the verdict and the machine, the problems
worst first with their fix (one fault on several GPUs as one item, as the console groups it), the key figures, and the
passes counted per category; in the reader's language.

Every text of the document is shown literally: Markdown's active characters are escaped (`*`, `_`, `<`, `|`, a `#`
or `-` opening a line, …) so that a log line cannot format, link or inject HTML; a message's `code spans` stay code;
a table cell keeps to one line, its `|` escaped (inside code too, as GitHub's tables need).
"""

from __future__ import annotations

import re
from collections import Counter

from gpuready.i18n import message
from gpuready.model import Status
from gpuready.report.document import (KNOWN_STATUSES, Finding, host_of, judges_machine, mapping, read_finding,
                                      sequence, status_rank, text)
from gpuready.report.figures import measurement_cells, shown_measurements
from gpuready.report.findings_view import (EVIDENCE_SHOWN, QUIET, machine_label, scope_label, row_subject,
                                           status_label, verdict_label)
from gpuready.report.gpu_groups import Row, group_rows
from gpuready.report.headline import headline
from gpuready.report.labels import category_label, labels_for
from gpuready.report.plan_view import (STRATEGIES_SHOWN, chosen_line, chosen_strategy, inference_cells,
                                       strategy_cells)
from gpuready.report.translate import in_language
from gpuready.report.verb_of import verb_of

_CODE_SPAN = re.compile(r"`[^`\n]+`")
_ACTIVE = re.compile(r"[\\`*_\[\]<>&|~]")
"""Characters that format, link or open HTML anywhere in a line."""
_LINE_MARKER = re.compile(r"(?m)^(?:#{1,6}|[+\-]|\d{1,9}[.)])(?=[ \t]|$)|^(?:=+|-+)(?=[ \t]*$)")
"""What opens a heading, a list item or a setext underline at the start of a line (`>` and `*` are escaped anyway)."""
_NUMERIC_COLUMNS = (2, 3, 4)
"""value, expected, share: right-aligned."""
_STRATEGY_NUMERIC = (2, 3)
"""GiB per GPU, step time."""
_INFERENCE_NUMERIC = (0, 2, 3, 4)
"""TP degree and the GiB columns."""


def markdown_summary(documents: list[dict], lang: str = "en", verbose: bool = False) -> str:
    """The summary of each document, one after the other; `verbose` lists latency figures too."""
    return "\n\n".join(_document(document, lang, verbose) for document in documents) + "\n"


def _document(document: dict, lang: str, verbose: bool) -> str:
    labels = labels_for(lang)
    document = in_language(document, lang)
    findings = [read_finding(item) for item in sequence(document.get("findings"))]
    title = message("report_files.md.title", lang, verb=verb_of(document), machine=machine_label(document, labels))
    blocks = [f"## {inline(title)}", _verdict(document, labels)]
    if document.get("not_enough_evidence"):
        blocks.append(inline(text(document["not_enough_evidence"])))
    counts = Counter(finding.status for finding in findings)
    blocks.append(inline(labels["summary"].format(
        fail=counts[Status.FAIL.value] + counts[Status.ERROR.value], warn=counts[Status.WARN.value],
        pass_=counts[Status.PASS.value], skip=counts[Status.SKIP.value])))
    unrecognised = sum(n for status, n in counts.items() if status not in KNOWN_STATUSES)
    if unrecognised:
        blocks.append(inline(labels["status_unrecognised"].format(n=unrecognised)))
    problems = _problem_rows(findings)
    if problems:
        blocks.append(f"### {inline(message('report_files.md.problems', lang))}")
        blocks += [_problem_item(row, host_of(document, ""), labels) for row in problems]
    blocks += _plan_blocks(document, labels, verbose)
    figures = shown_measurements(document, verbose)
    if figures:
        blocks += [f"### {inline(message('report_files.md.figures', lang))}", _figures_table(figures, labels)]
    passed = Counter(finding.category for finding in findings if finding.status == Status.PASS.value)
    if passed:
        blocks.append(f"### {inline(message('report_files.md.passed', lang))}")
        blocks.append("\n".join(f"- {inline(labels['passed_line'].format(category=category_label(category, labels), n=count))}"
                                for category, count in passed.items()))
    if counts[Status.SKIP.value]:
        blocks.append(inline(message("report_files.md.skipped", lang, n=counts[Status.SKIP.value])))
    return "\n\n".join(blocks)


def _verdict(document: dict, labels: dict) -> str:
    """The verdict in bold with the single- and multi-node ones; for a verb that judges no machine, what it was."""
    if not judges_machine(document):
        title = labels["plan_title"] if "plan" in mapping(document.get("facts")) else labels["cpu_run_title"]
        return f"**{inline(title)}**"
    verdicts = mapping(document.get("verdicts"))
    scopes = (f"{labels['single_node']}: {verdict_label(verdicts.get('single_node'), labels)}; "
              f"{labels['multi_node']}: {verdict_label(verdicts.get('multi_node'), labels)}; "
              f"{labels['judged_for']}: {scope_label(document.get('judged_for'), labels)}")
    first = headline(document, [read_finding(item) for item in sequence(document.get("findings"))])
    if first:  # unknown, yet a finding fails: what failed first heads the summary
        return f"**{inline(first.first_line(labels))}**\n\n{inline(labels['headline_unjudged'])} ({inline(scopes)})"
    return f"**{inline(verdict_label(document.get('verdict'), labels))}** ({inline(scopes)})"


def _problem_rows(findings: list[Finding]) -> list[Row]:
    """Failures, errors and warnings worst first, one fault on several GPUs as one row; a diagnose report that ties
    findings to causes keeps its own order (root causes, each followed by its consequences)."""
    ranked = any(finding.consequence_of for finding in findings)
    ordered = findings if ranked else sorted(findings, key=lambda finding: status_rank(finding.status))
    return group_rows([finding for finding in ordered if finding.status not in QUIET])


def _problem_item(row: Row, report_host: str, labels: dict) -> str:
    first = row.first
    subject = row_subject(row, labels)
    if first.host and first.host != report_host:
        subject = f"{subject}, {first.host}" if subject else first.host
    head = f"- **{inline(status_label(first.status, labels).upper())}** {code(first.check_id)}"
    paragraphs = [f"{head} {inline(subject)}" if subject else head]
    said = row.message()
    if first.consequence_of:
        said = f"↳ {labels['consequence_of']} {first.consequence_of}: {said}"
    paragraphs.append(_indented(inline(said)))
    if len(row.members) > 1 and any(gpu.bus_id for gpu in row.gpus):
        paragraphs.append(_indented(inline(f"{labels['bus_ids']}: {', '.join(gpu.bus_id or '?' for gpu in row.gpus)}")))
    evidence = row.evidence()
    if evidence:
        paragraphs.append(_indented(fenced(evidence[:EVIDENCE_SHOWN])))
        if len(evidence) > EVIDENCE_SHOWN:
            paragraphs.append(_indented(inline(labels["evidence_more"].format(n=len(evidence) - EVIDENCE_SHOWN))))
    fix = row.fix()
    if fix:
        paragraphs.append(_indented(f"**{inline(labels['fix'])}:** {inline(fix)}"))
    if level := first.remediation_words(labels):
        paragraphs.append(_indented(f"**{inline(labels['remediation'])}:** {inline(level)}"))
    return "\n\n".join(paragraphs)


def _figures_table(measurements: list[dict], labels: dict) -> str:
    rows = []
    for measurement in measurements:
        name, *others = measurement_cells(measurement, labels)
        rows.append([code(name, cell=True), *(inline(cell, cell=True) for cell in others)])
    return _table(labels["measurement_columns"], rows, _NUMERIC_COLUMNS)


def _plan_blocks(document: dict, labels: dict, verbose: bool) -> list[str]:
    """plan's strategies (the first few; all with `verbose`), the one it recommends, and the inference degrees: the
    console's tables (plan_view.py's cells)."""
    blocks = []
    strategies = [mapping(item) for item in sequence(document.get("strategies"))]
    if strategies:
        shown = strategies if verbose else strategies[:STRATEGIES_SHOWN]
        blocks += [f"### {inline(labels['strategies_title'])}",
                   _table(labels["strategy_columns"], [[inline(cell, cell=True) for cell in strategy_cells(row, labels)]
                                                       for row in shown], _STRATEGY_NUMERIC)]
        if len(strategies) > len(shown):
            blocks.append(inline(labels["more_strategies"].format(n=len(strategies) - len(shown))))
        chosen = chosen_strategy(document)
        if chosen is not None:
            blocks.append(f"**{inline(chosen_line(chosen, labels))}**")
    degrees = [mapping(item) for item in sequence(document.get("inference"))]
    if degrees:
        blocks += [f"### {inline(labels['inference_title'])}",
                   _table(labels["inference_columns"], [[inline(cell, cell=True) for cell in inference_cells(row, labels)]
                                                        for row in degrees], _INFERENCE_NUMERIC)]
    return blocks


def _table(columns: tuple[str, ...], rows: list[list[str]], numeric: tuple[int, ...]) -> str:
    """A GitHub table; `rows` hold Markdown already (each cell one line, its `|` escaped)."""
    alignments = ["---:" if position in numeric else "---" for position in range(len(columns))]
    lines = ["| " + " | ".join(inline(column, cell=True) for column in columns) + " |", f"|{'|'.join(alignments)}|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


# --- text of the document as literal Markdown ------------------------------------------------------------------------

def inline(value: str, *, cell: bool = False) -> str:
    """`value` shown literally in a paragraph (or, with `cell`, in one table cell); its `code spans` kept as code."""
    if cell:
        value = value.replace("\r", " ").replace("\n", " ")
    pieces, position = [], 0
    for span in _CODE_SPAN.finditer(value):
        pieces += [_escaped(value[position:span.start()]), span.group().replace("|", r"\|") if cell else span.group()]
        position = span.end()
    pieces.append(_escaped(value[position:]))
    if cell:
        return "".join(pieces)
    return _LINE_MARKER.sub(_escape_marker, re.sub(r"(?m)^[ \t]+", "", "".join(pieces)))  # indent would be code


def _escape_marker(match: re.Match) -> str:
    marker = match.group()
    return f"{marker[:-1]}\\{marker[-1]}" if marker[0].isdigit() else f"\\{marker}"


def _escaped(plain: str) -> str:
    return _ACTIVE.sub(lambda match: "\\" + match.group(), plain)


def code(value: str, *, cell: bool = False) -> str:
    """`value` as one code span: fenced by more backticks than it holds in a row, newlines as spaces."""
    value = value.replace("\r", " ").replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall("`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    spanned = f"{fence}{pad}{value}{pad}{fence}"
    return spanned.replace("|", r"\|") if cell else spanned


def fenced(lines: list[str]) -> str:
    """Quoted input lines as a code block, its fence longer than any run of backticks they hold."""
    body = "\n".join(lines)
    fence = "`" * max(3, max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    return f"{fence}\n{body}\n{fence}"


def _indented(block: str) -> str:
    """A block inside a list item: every line under the item's two spaces (a blank line stays blank)."""
    return "\n".join(f"  {line}" if line.strip() else "" for line in block.split("\n"))
