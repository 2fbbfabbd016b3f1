"""Report documents as JUnit XML, for CI (GitLab, Jenkins, junitparser): one test case per finding.

The schema those tools share: `<testsuites>` (the totals) holds one `<testsuite>` per document (name `verb/host`,
timestamp, hostname, the measurements as `<properties>`, the verdict and the figures as the other views write them in
`<system-out>`), which holds one `<testcase>`
per finding (classname: the category; name: `check_id @ subject`). fail → `<failure>`, error or a status this version
does not know → `<error>`, skip → `<skipped>`, warn → its text in `<system-out>` (a `<failure>` where warnings fail,
`--fail-on warn`), pass → an empty test case. A name that repeats in a suite (compute.low on one GPU for each dtype)
is numbered (`#2`): CI tools key a test's history by its name.

Findings quote text from outside (log lines): xml.etree escapes markup, `printable` (via the document reader) has made
every control character visible, and what XML 1.0 still cannot hold (lone surrogates, U+FFFE, U+FFFF) becomes U+FFFD.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import datetime, timezone

from gpuready.i18n import message
from gpuready.model import UNKNOWN_HOST, Status
from gpuready.report.document import (Finding, host_of, mapping, number, read_finding, sequence, shown_verdict,
                                      text)
from gpuready.report.figures import value_text
from gpuready.report.findings_view import verdict_label
from gpuready.report.headline import headline
from gpuready.report.labels import labels_for
from gpuready.report.translate import in_language
from gpuready.report.verb_of import verb_of

MESSAGE_ATTRIBUTE_CHARS = 500
"""A failure's `message` attribute (the one line a CI list shows) is the message's first line cut here; the element's
body keeps the whole text."""
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")
"""What XML 1.0 forbids besides the C0 controls (which `printable` has already escaped)."""


def junit_xml(documents: list[dict], lang: str = "en", warn_fails: bool = False) -> bytes:
    """The JUnit XML file (UTF-8, with its declaration) of the report documents."""
    root = ET.Element("testsuites", name="gpuready")
    suites = [_suite(document, lang, warn_fails) for document in documents]
    for counter in ("tests", "failures", "errors", "skipped"):
        root.set(counter, str(sum(int(suite.get(counter, 0)) for suite in suites)))
    root.extend(suites)
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _suite(document: dict, lang: str, warn_fails: bool) -> ET.Element:
    labels = labels_for(lang)
    document = in_language(document, lang)
    host = host_of(document, UNKNOWN_HOST)
    suite = ET.Element("testsuite", name=_xml(f"{verb_of(document)}/{host}"))
    cases = [_case(read_finding(item), host, labels, warn_fails) for item in sequence(document.get("findings"))]
    _number_repeated_names(cases)
    outcomes = Counter(child.tag for case in cases for child in case if child.tag != "system-out")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(outcomes["failure"]))
    suite.set("errors", str(outcomes["error"]))
    suite.set("skipped", str(outcomes["skipped"]))
    timestamp = _timestamp(document.get("started_at"))
    if timestamp:
        suite.set("timestamp", timestamp)
    suite.set("hostname", _xml(host))
    properties = _properties(document, host, labels)
    if len(properties):
        suite.append(properties)
    suite.extend(cases)
    figures = [f"{name} @ {subject}: {value_text(measurement, labels)}"  # as the other views write them
               for name, subject, measurement in _measurements(document, host)]
    ET.SubElement(suite, "system-out").text = _xml("\n".join([_verdict_line(document, labels, lang), *figures]))
    return suite


def _case(finding: Finding, host: str, labels: dict, warn_fails: bool) -> ET.Element:
    case = ET.Element("testcase", classname=_xml(finding.category),
                      name=_xml(f"{finding.check_id} @ {subject_name(finding, host)}"))
    status = finding.status
    if status == Status.PASS.value:
        return case
    if status == Status.SKIP.value:
        ET.SubElement(case, "skipped", message=_xml(_headline(finding.message)))
        return case
    body = _xml(_body(finding, labels))
    if status == Status.WARN.value and not warn_fails:
        ET.SubElement(case, "system-out").text = body
        return case
    tag = "failure" if status in (Status.FAIL.value, Status.WARN.value) else "error"
    outcome = ET.SubElement(case, tag, message=_xml(_headline(finding.message)), type=_xml(status or "missing"))
    outcome.text = body
    return case


def subject_name(finding: Finding, document_host: str) -> str:
    """What a finding is about, as a test name says it: the GPU's bus id (`0000:3b:00.0`, a pair as `a↔b`) with its
    NIC and rank, else the NIC and rank, else the host; a host other than the document's is named after it (a bundle
    of several machines)."""
    if finding.gpu is not None:
        gpus = [finding.gpu, *([finding.peer] if finding.peer else [])]
        subject = " ".join(filter(None, ["↔".join(gpu.bus_id or gpu.label() for gpu in gpus), finding.other_subject]))
    else:
        subject = finding.other_subject or finding.host or document_host
    if finding.host and finding.host not in (document_host, subject):
        subject = f"{subject}, {finding.host}"
    return subject


def _number_repeated_names(cases: list[ET.Element]) -> None:
    seen: Counter[str] = Counter()
    for case in cases:
        name = case.get("name", "")
        seen[name] += 1
        if seen[name] > 1:
            case.set("name", f"{name} #{seen[name]}")


def _body(finding: Finding, labels: dict) -> str:
    parts = [finding.message]
    if finding.fix:
        parts.append(f"{labels['fix']}: {finding.fix}")
    if finding.evidence:
        parts.append("\n".join(finding.evidence))
    return "\n\n".join(parts)


def _headline(message_text: str) -> str:
    line = message_text.split("\n", 1)[0]
    return line if len(line) <= MESSAGE_ATTRIBUTE_CHARS else line[:MESSAGE_ATTRIBUTE_CHARS - 1] + "…"


def _properties(document: dict, host: str, labels: dict) -> ET.Element:
    """Each measurement as `name @ subject` = `value unit` (`not measurable: …` where the verb found it cannot be
    right), and its expected figure as `name.expected @ subject`."""
    properties = ET.Element("properties")
    for name, subject, measurement in _measurements(document, host):
        method, unit = mapping(measurement.get("method")), text(measurement.get("unit"), "")
        for key, suffix in (("value", ""), ("expected", ".expected")):
            value = number(measurement.get(key))
            shown = f"{'?' if value is None else value} {unit}".rstrip()
            if key == "value" and method.get("not_measurable") is not None:
                shown = value_text(measurement, labels)
            if value is not None or key == "value":
                ET.SubElement(properties, "property", name=_xml(f"{name}{suffix} @ {subject}"), value=_xml(shown))
    return properties


def _measurements(document: dict, host: str) -> list[tuple[str, str, dict]]:
    """(name, `subject`, measurement) of each measurement; a bench figure's subject names its run."""
    found = []
    for measurement in map(mapping, sequence(document.get("measurements"))):
        subject = subject_name(read_finding({"subject": measurement.get("subject")}), host)
        method = mapping(measurement.get("method"))
        if method.get("strategy") and method.get("world_size"):  # bench: which run the figure is of
            subject += f" {text(method['strategy'])}×{text(method['world_size'])}"
        found.append((text(measurement.get("name")), subject, measurement))
    return found


def _verdict_line(document: dict, labels: dict, lang: str) -> str:
    planned = "plan" in mapping(document.get("facts"))  # an estimate, no machine verdict: the other views' title
    verdict = labels["plan_title"] if planned else verdict_label(shown_verdict(document), labels)
    lines = [message("report_files.junit.verdict", lang, verdict=verdict, code=text(document.get("exit_code")))]
    first = headline(document, [read_finding(item) for item in sequence(document.get("findings"))])
    if first:  # what failed first heads the verdict, as on the console
        lines[:0] = [first.first_line(labels), labels["headline_unjudged"]]
    if document.get("not_enough_evidence"):
        lines.append(text(document["not_enough_evidence"]))
    return "\n".join(lines)


def _timestamp(started_at: object) -> str | None:
    """ISO 8601 in UTC without the offset: the schema Jenkins validates against takes no time zone."""
    try:
        moment = datetime.fromisoformat(str(started_at))
    except ValueError:
        return None
    if moment.tzinfo is not None:
        try:
            moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
        except OverflowError:  # 9999-12-31T23:00-05:00 is in year 10000 in UTC: no timestamp rather than a wrong one
            return None
    return moment.isoformat(timespec="seconds")


def _xml(value: str) -> str:
    return _NOT_XML.sub("\ufffd", value)
