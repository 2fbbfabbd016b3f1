"""The HTML report's text parts, as escaped markup: the verdict and host, the findings with their filters, the GPU
inventory, the measurements, plan's tables, and the fleet's node table.

Every string of a document may come from outside (log lines, file names, host and GPU names): each passes `escape`
(control characters shown as `\\xNN` by `printable`, then HTML's five special characters as entities) where it is
put into the markup, and nowhere else is document text joined into HTML. Words around the document's own text come
from the catalogue (the console's `label.*` ids and this page's `html.*` ids).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from typing import Any, Callable, Iterable

from gpuready.model import Status
from gpuready.report.charts.base import finite
from gpuready.report.document import (KNOWN_STATUSES, STATUS_ORDER, Finding, host_of, judges_machine, mapping, number,
                                      read_finding, sequence, status_rank, text)
from gpuready.report.fleet_view import FleetView
from gpuready.report.findings_view import EVIDENCE_SHOWN, row_subject, status_label, verdict_label
from gpuready.report.gpu_groups import Row
from gpuready.report.headline import headline
from gpuready.report.verb_of import verb_of
from gpuready.safe_text import printable
from gpuready.report.figures import format_value, measurement_label, value_text

Say = Callable[..., str]
FILTERED_OTHER = "other"
"""The filter value of a status this version does not know (shown like an error, as on the console)."""
CODE_SPAN = re.compile(r"`([^`\n]+)`")
"""A command or a name in a message or fix (`nvidia-smi -q`), shown as `<code>`."""
FLEET_VERDICTS = ("failing", "outlier", "unknown", "healthy")


def escape(value: object) -> str:
    return html.escape(printable(value), quote=True)


def element(tag: str, content: str, **attributes: object) -> str:
    """`<tag attr="…">content</tag>`: `content` is markup already; attribute values are escaped (`class_` → class)."""
    attrs = "".join(f' {name.rstrip("_").replace("_", "-")}="{escape(value)}"' for name, value in attributes.items()
                    if value is not None)
    return f"<{tag}{attrs}>{content}</{tag}>"


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], **attributes: object) -> str:
    """A table of markup cells (each escaped by the caller); headers are plain text."""
    head = "".join(element("th", escape(header)) for header in headers)
    body = "".join(element("tr", "".join(element("td", cell) for cell in row)) for row in rows)
    return element("table", element("thead", element("tr", head)) + element("tbody", body), **attributes)


def run_kind(document: dict) -> str:
    """The verb that wrote the document (`html.run.<verb>`): check, diagnose, validate, burn, bench, plan, or report
    where its facts name none."""
    return verb_of(document)


def with_code(value: object) -> str:
    """`value` escaped, its backticked spans as `<code>` (the text inside escaped too: never markup from a document)."""
    parts = CODE_SPAN.split(printable(value))
    return "".join(element("code", escape(part)) if odd else escape(part) for odd, part in
                   ((index % 2 == 1, part) for index, part in enumerate(parts)))


# --- one document ---------------------------------------------------------------------------------------------------

def header(document: dict, labels: dict, say: Say) -> str:
    """What the document is (verb, host, when) and its verdict."""
    kind = say(f"html.run.{run_kind(document)}")
    host = host_of(document, labels["unknown_host"])
    parts = [element("h2", escape(say("html.document_title", kind=kind, host=host)))]
    if judges_machine(document):
        verdict = document.get("verdict")
        css = verdict if isinstance(verdict, str) and verdict in ("ready", "ready_with_warnings", "not_ready") \
            else "unknown"
        first = headline(document, [read_finding(item) for item in sequence(document.get("findings"))])
        parts.append(element("p", escape(first.first_line(labels)), class_="verdict not_ready") if first else
                     element("p", escape(verdict_label(verdict, labels)), class_=f"verdict {css}"))
        verdicts = mapping(document.get("verdicts"))
        parts.append(element("p", escape((f"{labels['headline_unjudged']}: " if first else "") +
                                         f"{labels['single_node']}: {verdict_label(verdicts.get('single_node'), labels)}"
                                         f"; {labels['multi_node']}: {verdict_label(verdicts.get('multi_node'), labels)}")))
    else:
        facts = mapping(document.get("facts"))
        parts.append(element("p", escape(labels["plan_title"] if "plan" in facts else labels["cpu_run_title"]),
                             class_="verdict unknown"))
    if document.get("not_enough_evidence"):
        parts.append(element("p", escape(document["not_enough_evidence"]), class_="not-enough"))
    details = [say("html.started_at", when=text(document.get("started_at"))),
               say("html.tool_version", version=text(document.get("tool_version")), run=text(document.get("run_id")))]
    parts.append(element("p", escape(" · ".join(details)), class_="meta"))
    return "".join(parts)


def findings_section(document: dict, labels: dict, say: Say) -> str:
    """Every finding, problems first, with a status filter (checkboxes) and a category filter (a list)."""
    findings = [read_finding(item) for item in sequence(document.get("findings"))]
    if not findings:
        return ""
    ranked = any(finding.consequence_of for finding in findings)  # diagnose: causes, each before its consequences
    ordered = findings if ranked else sorted(findings, key=lambda finding: status_rank(finding.status))
    counts = Counter(finding.status for finding in findings)
    summary = labels["summary"].format(fail=counts[Status.FAIL.value] + counts[Status.ERROR.value],
                                       warn=counts[Status.WARN.value], pass_=counts[Status.PASS.value],
                                       skip=counts[Status.SKIP.value])
    statuses = [status for status in STATUS_ORDER if counts[status]]
    if any(status not in KNOWN_STATUSES for status in counts):
        statuses.append(FILTERED_OTHER)
    boxes = "".join(element("label", f'<input type="checkbox" name="status" value="{escape(status)}" checked> '
                            + escape(_filter_status_label(status, labels)), class_=f"status {status}")
                    for status in statuses)
    categories = sorted({finding.category for finding in findings})
    options = element("option", escape(say("html.filter.all_categories")), value="") + "".join(
        element("option", escape(category), value=category) for category in categories)
    controls = element("div", element("span", escape(say("html.filter.status"))) + boxes
                       + element("label", escape(say("html.filter.category")) + " " + element("select", options)),
                       class_="filters")
    host = host_of(document, "")
    rows = [_finding_row(finding, host, labels) for finding in ordered]
    headers = [say("html.column.status"), say("html.column.check"), say("html.column.subject"),
               say("html.column.message")]
    head = "".join(element("th", escape(header_)) for header_ in headers)
    body = "".join(rows)
    return element("section", element("h3", escape(say("html.section.findings"))) + element("p", escape(summary))
                   + controls + element("table", element("thead", element("tr", head)) + element("tbody", body)),
                   class_="findings")


def _filter_status_label(status: str, labels: dict) -> str:
    return labels["status_missing"] if status == FILTERED_OTHER else labels[status]


def _finding_row(finding: Finding, report_host: str, labels: dict) -> str:
    status = finding.status if finding.status in KNOWN_STATUSES else FILTERED_OTHER
    subject = [row_subject(Row(members=[finding]), labels)]  # the console's words for it
    if finding.host and finding.host != report_host:
        subject.append(finding.host)
    message = element("div", with_code(finding.message), class_="message")
    if finding.consequence_of:
        message = element("div", escape(f"↳ {labels['consequence_of']} {finding.consequence_of}"),
                          class_="consequence") + message
    if finding.fix and finding.status not in (Status.PASS.value, Status.SKIP.value):
        message += element("div", element("strong", escape(labels["fix"]) + ": ") + with_code(finding.fix),
                           class_="fix")
    if (level := finding.remediation_words(labels)) and finding.status not in (Status.PASS.value, Status.SKIP.value):
        message += element("div", element("strong", escape(labels["remediation"]) + ": ") + escape(level),
                           class_="fix")
    message += _evidence(finding.evidence, labels)
    cells = [element("span", escape(status_label(finding.status, labels)), class_=f"badge {status}"),
             element("code", escape(finding.check_id)), escape(" ".join(part for part in subject if part)), message]
    return element("tr", "".join(element("td", cell) for cell in cells), data_status=status,
                   data_category=finding.category)


def _evidence(lines: list[str], labels: dict) -> str:
    """The quoted lines as the console shows them (the first EVIDENCE_SHOWN), the rest folded under "N more lines"."""
    if not lines:
        return ""
    shown = element("pre", escape("\n".join(lines[:EVIDENCE_SHOWN])), class_="evidence")
    rest = lines[EVIDENCE_SHOWN:]
    if not rest:
        return shown
    more = labels["html_evidence_one_more"] if len(rest) == 1 else labels["html_evidence_more"].format(n=len(rest))
    return shown + element("details", element("summary", escape(more))
                           + element("pre", escape("\n".join(rest))), class_="evidence")


def inventory_section(document: dict, labels: dict, say: Say) -> str:
    """The GPUs of the machine (or of each machine where the evidence came from several)."""
    facts = mapping(document.get("facts"))
    machines = [mapping(machine) for machine in sequence(facts.get("machines"))]
    groups = [(text(machine.get("machine")), mapping(machine)) for machine in machines] if len(machines) > 1 \
        else [(None, facts)]
    parts = []
    for name, machine in groups:
        gpus = [mapping(gpu) for gpu in sequence(machine.get("gpus"))]
        if not gpus:
            continue
        rows = []
        for gpu in gpus:
            memory, power = number(gpu.get("memory_total_bytes")), number(gpu.get("power_limit_w"))
            temperature = number(gpu.get("temperature_c"))
            rows.append([escape(cell) for cell in (
                text(gpu.get("index")), text(gpu.get("bus_id")), text(gpu.get("name")),
                f"{memory / 2**30:,.0f} GiB" if memory else "?", text(gpu.get("compute_capability")),
                text(gpu.get("pcie")), f"{power:.0f} W" if power else "?",
                f"{temperature:.0f} °C" if temperature is not None else "?")])
        parts.append((element("h4", escape(name)) if name else "") + table(labels["inventory"], rows))
    return element("section", element("h3", escape(say("html.section.gpus"))) + "".join(parts)) if parts else ""


def measurements_section(document: dict, labels: dict, say: Say) -> str:
    measurements = [mapping(item) for item in sequence(document.get("measurements"))]
    if not measurements:
        return ""
    rows = []
    for item in measurements:
        unit = text(item.get("unit"), "")
        value, expected = number(item.get("value")), number(item.get("expected"))
        share = f"{value / expected:.0%}" if expected and value is not None and finite(value) is not None else ""
        rows.append([element("code", escape(text(item.get("name")))), escape(measurement_label(item)),
                     escape(value_text(item, labels)),
                     escape(format_value(expected, unit, generic_unit=False) if expected else "-"), escape(share)])
    return element("section", element("h3", escape(say("html.section.measurements")))
                   + table(labels["measurement_columns"], rows, class_="numbers"))


def plan_section(document: dict, labels: dict, say: Say) -> str:
    """plan's strategies and inference degrees as tables, every row (the console shows the best eight)."""
    parts = []
    plan = mapping(mapping(document.get("facts")).get("plan"))
    model = mapping(plan.get("model"))
    if model:
        parameters = number(model.get("parameters"))
        parts.append(element("p", escape(labels["plan_model"].format(
            name=text(model.get("name")), parameters=f"{parameters / 1e9:,.1f} B" if parameters else "?"))))
    strategies = [mapping(item) for item in sequence(document.get("strategies"))]
    if strategies:
        rows = []
        for row in strategies:
            step = finite(row.get("step_time_s"))
            total = finite(mapping(row.get("memory_bytes")).get("total"))
            rows.append([escape(text(row.get("name"))), escape(_yes_no(row.get("fits"), labels)),
                         escape(f"{total / 2**30:,.1f}" if total is not None else "-"),
                         escape(f"{step:.3f}" if step is not None else "-"), escape(text(row.get("bottleneck"), "-")),
                         escape("; ".join(printable(reason) for reason in sequence(row.get("reasons"))))])
        parts.append(element("h4", escape(labels["strategies_title"]))
                     + table([*labels["strategy_columns"], labels["why"]], rows, class_="numbers"))
    inference = [mapping(item) for item in sequence(document.get("inference"))]
    if inference:
        gib = lambda value: f"{finite(value) / 2**30:,.1f}" if finite(value) is not None else "-"
        rows = [[escape(text(row.get("tp"))), escape(_yes_no(row.get("fits"), labels)), escape(gib(row.get("total_bytes"))),
                 escape(gib(row.get("weights_bytes"))), escape(gib(row.get("kv_cache_bytes"))),
                 escape("; ".join(printable(note) for note in sequence(row.get("notes"))))] for row in inference]
        parts.append(element("h4", escape(labels["inference_title"]))
                     + table(labels["inference_columns"], rows, class_="numbers"))
    cost = mapping(document.get("cost"))
    if cost.get("message"):
        parts.append(element("h4", escape(labels["cost_title"])) + element("p", escape(text(cost["message"]))))
    return element("section", element("h3", escape(say("html.section.plan"))) + "".join(parts)) if parts else ""


def _yes_no(value: Any, labels: dict) -> str:
    return labels["yes"] if value is True else labels["no"] if value is False else labels["yes_no_unknown"]


# --- the fleet ------------------------------------------------------------------------------------------------------

def fleet_header(view: FleetView, say: Say) -> str:
    return element("h2", escape(say("html.fleet.title"))) + element(
        "p", escape(view.header), class_=f"verdict {'not_ready' if view.alarm else 'ready'}") + "".join(
        element("p", escape(line)) for line in [cohort.line for cohort in view.cohorts] + view.domains + view.pairs + view.notes)


def fleet_nodes_section(view: FleetView, say: Say) -> str:
    """Every node, problems first (as the fleet judge ordered them), filtered by verdict like findings by status."""
    if not view.nodes:
        return ""
    verdicts = [verdict for verdict in FLEET_VERDICTS + (FILTERED_OTHER,) if any(node.verdict == verdict
                                                                                for node in view.nodes)]
    boxes = "".join(element("label", f'<input type="checkbox" name="status" value="{verdict}" checked> '
                            + escape(say(f"html.fleet.verdict.{verdict}")), class_=f"status {verdict}")
                    for verdict in verdicts)
    controls = element("div", element("span", escape(say("html.filter.verdict"))) + boxes, class_="filters")
    rows = []
    for node in view.nodes:
        cells = [escape(node.host), element("span", escape(node.verdict_label), class_=f"badge {node.verdict}"),
                 escape(node.cohort), "<br>".join(escape(line) for line in node.lines) or "-"]
        rows.append(element("tr", "".join(element("td", cell) for cell in cells), data_status=node.verdict,
                            data_category=""))
    head = "".join(element("th", escape(view.column[key])) for key in ("node", "verdict", "cohort", "what"))
    return element("section", element("h3", escape(say("html.section.nodes"))) + controls
                   + element("table", element("thead", element("tr", head)) + element("tbody", "".join(rows))),
                   class_="findings")
