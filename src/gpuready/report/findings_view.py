"""Problems first: the verdict and its machine, then failures and warnings (worst first, each with evidence and fix),
then one line per category of passes and one line of skips. `verbose` lists every finding on its own.

Each finding is a paragraph, not a table row: a paragraph wraps at any width and cuts nothing, and piped it is plain
text. Every string reaches rich as a `Text` (never markup).
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.text import Text

from gpuready.model import INPUTS_HOST, UNKNOWN_HOST, Status, Verdict
from gpuready.report.document import (KNOWN_STATUSES, Finding, host_of, judges_machine, mapping, sequence,
                                      status_rank)
from gpuready.report.gpu_groups import Row, group_rows
from gpuready.report.headline import headline
from gpuready.report.labels import category_label
from gpuready.report.paragraph import print_paragraph
from gpuready.safe_text import printable

STATUS_STYLE = {Status.FAIL.value: "bold red", Status.ERROR.value: "bold magenta", Status.WARN.value: "bold yellow",
                Status.PASS.value: "green", Status.SKIP.value: "dim"}
UNRECOGNISED_STYLE = STATUS_STYLE[Status.ERROR.value]
VERDICT_STYLE = {Verdict.READY.value: "bold green", Verdict.READY_WITH_WARNINGS.value: "bold yellow",
                 Verdict.NOT_READY.value: "bold red", Verdict.UNKNOWN.value: "bold magenta",
                 Verdict.NO_VERDICT.value: "bold magenta"}
SCOPES = ("single_node", "multi_node")
QUIET = (Status.PASS.value, Status.SKIP.value)
"""Statuses summed up in the default view; every other status (an unknown one too) is a problem, shown whole."""
EVIDENCE_SHOWN = 3
"""Quoted input lines shown under a row (the JSON report keeps them all)."""
INDENT = 2


def render_header(document: dict, findings: list[Finding], console: Console, labels: dict) -> None:
    """The verdict and the machine it is about; for a verb that judges no machine, what the run was instead."""
    if judges_machine(document):
        verdict = document.get("verdict")
        verdicts = mapping(document.get("verdicts"))
        style = VERDICT_STYLE.get(verdict, "") if isinstance(verdict, str) else ""
        first = headline(document, findings)  # unknown, yet a finding fails: what failed first heads the report
        print_paragraph(console, Text.assemble((f"{machine_label(document, labels)}: ", "bold"),
                                    (first.first_line(labels), STATUS_STYLE[first.status]) if first else
                                    (verdict_label(verdict, labels), style or VERDICT_STYLE[Verdict.UNKNOWN.value])))
        print_paragraph(console, Text((f"{labels['headline_unjudged']} " if first else "") +
                           f"({labels['single_node']}: {verdict_label(verdicts.get('single_node'), labels)}; "
                           f"{labels['multi_node']}: {verdict_label(verdicts.get('multi_node'), labels)}; "
                           f"{labels['judged_for']}: {scope_label(document.get('judged_for'), labels)})"))
    else:
        facts = mapping(document.get("facts"))
        print_paragraph(console, Text(labels["plan_title"] if "plan" in facts else labels["cpu_run_title"], style="bold"))
    if document.get("not_enough_evidence"):
        print_paragraph(console, Text(printable(document["not_enough_evidence"]), style="magenta"))
    counts = Counter(finding.status for finding in findings)
    print_paragraph(console, Text(labels["summary"].format(fail=counts[Status.FAIL.value] + counts[Status.ERROR.value],
                                                warn=counts[Status.WARN.value], pass_=counts[Status.PASS.value],
                                                skip=counts[Status.SKIP.value])))
    unrecognised = sum(n for status, n in counts.items() if status not in KNOWN_STATUSES)
    if unrecognised:
        print_paragraph(console, Text(labels["status_unrecognised"].format(n=unrecognised), style=UNRECOGNISED_STYLE))


def machine_label(document: dict, labels: dict) -> str:
    """The machine the verdict is about, in the reader's language where gpuready named it (several machines, or files
    that name none); a host name as the document has it."""
    machines = sequence(mapping(document.get("facts")).get("machines"))
    if len(machines) > 1:
        return labels["machines"].format(n=len(machines))
    host = host_of(document, labels["unknown_host"])
    return {UNKNOWN_HOST: labels["unknown_host"], INPUTS_HOST: labels["inputs_host"]}.get(host, host)


def render_findings(document: dict, findings: list[Finding], console: Console, labels: dict, verbose: bool) -> None:
    """Problems (grouped over GPUs) worst first, then passes per category and the skip count; `verbose`: every
    finding alone. A diagnose report that ties findings to causes keeps its own order: root causes, each followed by
    its consequences."""
    ranked = any(finding.consequence_of for finding in findings)
    ordered = findings if ranked else sorted(findings, key=lambda finding: status_rank(finding.status))
    host = host_of(document, "")
    if verbose:
        for finding in ordered:
            _render_row(Row(members=[finding]), host, console, labels)
        return
    problems = group_rows([finding for finding in ordered if finding.status not in QUIET])
    if problems:
        console.print()
    for row in problems:
        _render_row(row, host, console, labels)
    passed = Counter(finding.category for finding in findings if finding.status == Status.PASS.value)
    if passed:
        console.print()
    for category, count in passed.items():
        print_paragraph(console, Text(labels["passed_line"].format(category=category_label(category, labels), n=count),
                                      style="green"))
    skipped = sum(finding.status == Status.SKIP.value for finding in findings)
    if skipped:
        print_paragraph(console, Text(labels["skipped_line"].format(n=skipped), style="dim"))


def _render_row(row: Row, report_host: str, console: Console, labels: dict) -> None:
    first = row.first
    status = first.status
    head = Text()
    head.append(status_label(status, labels).upper(), style=STATUS_STYLE.get(status, UNRECOGNISED_STYLE))
    head.append(f" {first.check_id}", style="bold")
    subject = row_subject(row, labels)
    if first.host and first.host != report_host:
        subject = f"{subject}, {first.host}" if subject else first.host
    if subject:
        head.append(f"  {subject}")
    print_paragraph(console, head)
    body = Text()
    if first.consequence_of:
        body.append(f"↳ {labels['consequence_of']} {first.consequence_of}: ", style="italic")
    body.append(row.message())
    if len(row.members) > 1 and any(gpu.bus_id for gpu in row.gpus):
        body.append(f"\n{labels['bus_ids']}: {', '.join(gpu.bus_id or '?' for gpu in row.gpus)}")
    print_paragraph(console, body, INDENT)
    evidence = row.evidence()
    quoted = Text("\n".join(evidence[:EVIDENCE_SHOWN]), style="dim")
    if len(evidence) > EVIDENCE_SHOWN:
        quoted.append("\n" + labels["evidence_more"].format(n=len(evidence) - EVIDENCE_SHOWN))
    if evidence:
        print_paragraph(console, quoted, 2 * INDENT)
    fix = row.fix()
    if fix and status not in QUIET:
        print_paragraph(console, Text.assemble((f"{labels['fix']}: ", "bold"), fix), INDENT)
    if (level := first.remediation_words(labels)) and status not in QUIET:
        print_paragraph(console, Text.assemble((f"{labels['remediation']}: ", "bold"), level), INDENT)


def row_subject(row: Row, labels: dict) -> str:
    """`GPU3 0000:3b:00.0`, `GPU0↔GPU1 …`, `GPU 0–7 (8 GPUs)` (bus ids in the body), plus NIC and rank."""
    first = row.first
    parts = []
    if len(row.members) > 1:
        parts.append(f"{row.gpu_label()} ({labels['gpu_count'].format(n=len(row.members))})")
    elif first.gpu is not None:
        names = [first.gpu.label()] + ([first.peer.label()] if first.peer else [])
        bus_ids = [gpu.bus_id for gpu in (first.gpu, first.peer) if gpu is not None and gpu.bus_id]
        parts.append("↔".join(names) + (f" {'↔'.join(bus_ids)}" if bus_ids and first.gpu.index is not None else ""))
    if first.other_subject:
        parts.append(first.other_subject)
    return " ".join(parts)


def verdict_label(value: object, labels: dict) -> str:
    if value is None:
        return labels["verdict_missing"]
    known = isinstance(value, str) and value in VERDICT_STYLE
    return labels[value] if known else printable(labels["verdict_unrecognised"].format(value=value))


def scope_label(value: object, labels: dict) -> str:
    if value is None:
        return labels["missing"]
    if isinstance(value, str) and value in SCOPES:
        return labels[value]
    return printable(labels["unrecognised"].format(value=value))


def status_label(status: str | None, labels: dict) -> str:
    if status is None:
        return labels["status_missing"]
    return labels[status] if status in KNOWN_STATUSES else f"{printable(status)}?"

