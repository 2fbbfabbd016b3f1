"""The report document as rich tables: verdict first, then findings grouped by category, failures first.

Every string of the document may come from outside (log lines, file names, host and GPU names): each reaches rich
as a `Text` (never parsed as markup) after `printable` (safe_text.py) has escaped its control characters.

It reads the JSON document (`Report.to_dict()`, described by `schema/report.schema.json`), so a saved report
(`--out report.json`) renders again as it did. A document from another version, or edited by hand, still renders: a
missing key or a value this version does not know is shown as such, never a traceback.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuready.model import GpuRef, Status, Subject, Verdict
from gpuready.report.safe_text import printable

_STATUS_STYLE = {Status.FAIL.value: "bold red", Status.ERROR.value: "bold magenta", Status.WARN.value: "yellow",
                 Status.PASS.value: "green", Status.SKIP.value: "dim"}
_STATUS_ORDER = [Status.FAIL.value, Status.ERROR.value, Status.WARN.value, Status.PASS.value, Status.SKIP.value]
# A status this version does not know sorts and looks like an error: after `fail`, before `warn`.
_UNRECOGNISED_RANK = 1.5
_UNRECOGNISED_STYLE = _STATUS_STYLE[Status.ERROR.value]
_FIX_SHOWN = (Status.FAIL.value, Status.WARN.value, Status.ERROR.value)
_VERDICT_STYLE = {Verdict.READY.value: "bold green", Verdict.READY_WITH_WARNINGS.value: "bold yellow",
                  Verdict.NOT_READY.value: "bold red", Verdict.UNKNOWN.value: "bold magenta"}
_SCOPES = ("single_node", "multi_node")
# Labels for readers of Chinese first (`--lang zh`); ids, units and messages stay in the field's English.
_LABELS = {
    "en": {"ready": "READY", "ready_with_warnings": "READY WITH WARNINGS", "not_ready": "NOT READY",
           "unknown": "UNKNOWN (not enough evidence)", "judged_for": "verdict judged for",
           "single_node": "single node", "multi_node": "multi node", "fix": "fix",
           "consequence_of": "consequence of", "pass": "pass", "warn": "warn", "fail": "fail", "skip": "skip", "error": "error",
           "summary": "{fail} fail, {warn} warn, {pass_} pass, {skip} skip",
           "verdict_missing": "UNKNOWN (not in this report)",
           "verdict_unrecognised": "UNKNOWN ({value!r} is not a verdict this version knows)",
           "missing": "not in this report", "unrecognised": "{value!r} (not known to this version)",
           "status_missing": "no status",
           "status_unrecognised": "{n} finding(s) with no status or one this version does not know"},
    "zh": {"ready": "就绪 READY", "ready_with_warnings": "就绪但有警告 READY WITH WARNINGS",
           "not_ready": "未就绪 NOT READY", "unknown": "无法判断 UNKNOWN (not enough evidence)",
           "judged_for": "结论依据 verdict judged for", "single_node": "单机 single node", "multi_node": "多机 multi node",
           "fix": "修复 fix", "consequence_of": "后果于 consequence of", "pass": "通过 pass", "warn": "警告 warn",
           "fail": "失败 fail", "skip": "跳过 skip", "error": "错误 error", "summary": "失败 {fail}，警告 {warn}，通过 {pass_}，跳过 {skip}",
           "verdict_missing": "无法判断 UNKNOWN (not in this report)",
           "verdict_unrecognised": "无法判断 UNKNOWN ({value!r} is not a verdict this version knows)",
           "missing": "未记录 not in this report", "unrecognised": "无法识别 {value!r} (not known to this version)",
           "status_missing": "无状态 no status",
           "status_unrecognised": "状态未知 {n} finding(s) with no status or one this version does not know"},
}


EVIDENCE_SHOWN = 3
"""Quoted input lines shown under a finding (the JSON report keeps them all)."""


def render_console(document: dict, console: Console | None = None, verbose: bool = False, lang: str = "en") -> None:
    """Print the report document (`Report.to_dict()`, or the same JSON read back from a file).

    Raises TypeError for anything but a dict (a `Report` object included): that is a caller's mistake, not a document.
    """
    if not isinstance(document, dict):
        raise TypeError(f"render_console takes the report document (Report.to_dict()), not {type(document).__name__}")
    console = console or Console()
    labels = _LABELS.get(lang, _LABELS["en"])
    findings = [_finding(item) for item in _sequence(document.get("findings"))]
    counts = Counter(finding["status"] for finding in findings)
    verdict = document.get("verdict")
    verdict_style = _VERDICT_STYLE.get(verdict, "") if isinstance(verdict, str) else ""
    verdicts = _mapping(document.get("verdicts"))
    host = document.get("host")
    console.print(Text.assemble(
        (f"{'?' if host is None else printable(host)}: ", "bold"),
        (_verdict_label(verdict, labels), verdict_style or _VERDICT_STYLE[Verdict.UNKNOWN.value]),
        f"   ({labels['single_node']}: {_verdict_label(verdicts.get('single_node'), labels)}; "
        f"{labels['multi_node']}: {_verdict_label(verdicts.get('multi_node'), labels)}; "
        f"{labels['judged_for']}: {_scope_label(document.get('judged_for'), labels)})"))
    if document.get("not_enough_evidence"):
        console.print(Text(printable(document["not_enough_evidence"]), style="magenta"))
    console.print(labels["summary"].format(fail=counts[Status.FAIL.value] + counts[Status.ERROR.value],
                                           warn=counts[Status.WARN.value], pass_=counts[Status.PASS.value],
                                           skip=counts[Status.SKIP.value]))
    unrecognised = sum(n for status, n in counts.items() if status not in _STATUS_STYLE)
    if unrecognised:
        console.print(Text(labels["status_unrecognised"].format(n=unrecognised), style=_UNRECOGNISED_STYLE))
    _render_inventory(document, console)
    by_category: dict[str, list[dict]] = defaultdict(list)
    for finding in findings:
        if verbose or finding["status"] != Status.SKIP.value:
            by_category[finding["category"]].append(finding)

    def worst(group: list[dict]) -> float:
        return min(_rank(finding["status"]) for finding in group)

    table = Table(show_lines=False, expand=True)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("subject", no_wrap=True)
    table.add_column("finding", ratio=1)
    ranked = any(finding["evidence"] or finding["consequence_of"] for finding in findings)
    if ranked:  # diagnose: the document's order is the ranking (root causes, each followed by its consequences)
        rows = [finding for finding in findings if verbose or finding["status"] != Status.SKIP.value]
    else:
        rows = [finding for category in sorted(by_category, key=lambda name: (worst(by_category[name]), name))
                for finding in sorted(by_category[category], key=lambda f: _rank(f["status"]))]
    for finding in rows:
        status = finding["status"]
        text = Text()
        if finding["consequence_of"]:
            text.append(f"↳ {labels['consequence_of']} {finding['consequence_of']}: ", style="italic")
        text.append(finding["message"])
        for quoted in finding["evidence"][:EVIDENCE_SHOWN]:
            text.append(f"\n  {quoted}", style="dim")
        if finding["fix"] and (status in _FIX_SHOWN or status not in _STATUS_STYLE):
            text.append(f"\n{labels['fix']}: ", style="bold")
            text.append(finding["fix"])
        table.add_row(Text(_status_label(status, labels), style=_STATUS_STYLE.get(status, _UNRECOGNISED_STYLE)),
                      Text(finding["check_id"]), Text(finding["subject"]), text)
    console.print(table)
    _render_measurements(document, console, verbose)
    _render_strategies(document, console, verbose)
    if not verbose and counts[Status.SKIP.value]:
        console.print(f"[dim]{counts[Status.SKIP.value]} check(s) skipped for lack of facts; --verbose lists them.[/dim]")


def _render_inventory(document: dict, console: Console) -> None:
    gpus = [_mapping(gpu) for gpu in _sequence(_mapping(document.get("facts")).get("gpus"))]
    if not gpus:
        return
    table = Table(title=None, expand=False, box=None, pad_edge=False)
    for column in ("GPU", "bus id", "model", "memory", "CC", "PCIe (cur/max)", "power limit", "temp"):
        table.add_column(column, no_wrap=True)
    for gpu in gpus:
        memory = _number(gpu.get("memory_total_bytes"))
        power = _number(gpu.get("power_limit_w"))
        temperature = _number(gpu.get("temperature_c"))
        cells = (_text(gpu.get("index")), _text(gpu.get("bus_id")), _text(gpu.get("name")),
                 f"{memory / 2**30:,.0f} GiB" if memory else "?", _text(gpu.get("compute_capability")),
                 _text(gpu.get("pcie")), f"{power:.0f} W" if power else "?",
                 f"{temperature:.0f} °C" if temperature is not None else "?")
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)


def _render_measurements(document: dict, console: Console, verbose: bool) -> None:
    measurements = [_mapping(item) for item in _sequence(document.get("measurements"))]
    shown = [m for m in measurements if verbose or "latency_us_" not in _text(m.get("name"))]
    if not shown:
        return
    table = Table(expand=False)
    for column in ("measurement", "subject", "value", "expected", "of expected"):
        table.add_column(column, no_wrap=True, justify="right" if column != "measurement" else "left")
    for measurement in shown:
        unit = _text(measurement.get("unit"), "")
        value = _number(measurement.get("value"))
        expected_value = _number(measurement.get("expected"))
        expected = format_value(expected_value, unit, generic_unit=False) if expected_value else "-"
        share = f"{value / expected_value:.0%}" if expected_value and value is not None else ""
        subject = _mapping(measurement.get("subject"))
        label = _subject_label(subject) if subject.get("gpu") else _text(subject.get("host"))
        method = _mapping(measurement.get("method"))
        if method.get("strategy") and method.get("world_size"):  # bench: which run the figure is of
            label += printable(f" {method['strategy']}×{method['world_size']}")
        table.add_row(*(Text(cell) for cell in (_text(measurement.get("name")), label,
                                                format_value(value, unit),
                                                expected, share)))
    console.print(table)


def format_value(value: float | int | None, unit: str, generic_unit: bool = True) -> str:
    """A figure in the unit a reader expects: seconds below one in ms or µs, fractions in %, bytes in GiB; other
    units as `1,234.5 GB/s` (without the unit where `generic_unit` is False); `?` for an unknown figure."""
    generic = unit.replace("gb_per_s", "GB/s").replace("tflops", "TFLOP/s") if generic_unit else ""
    if value is None or value != value:  # unknown, or NaN from an older or damaged document
        return f"? {generic}".rstrip() if value is None else f"nan {generic}".rstrip()
    if unit == "seconds":
        if abs(value) < 1e-3:
            return f"{value * 1e6:,.1f} µs"
        return f"{value * 1e3:,.1f} ms" if abs(value) < 1 else f"{value:,.2f} s"
    if unit == "fraction":
        return f"{value:.1%}"
    if unit == "bytes":
        return f"{value / 2**30:,.1f} GiB"
    if unit == "tokens_per_s":
        return f"{value:,.0f} tokens/s"
    return f"{value:,.1f} {generic}".rstrip()


STRATEGIES_SHOWN = 8
"""plan: the best-ranked strategies shown on the console (--verbose: all; the JSON has all)."""


def _render_strategies(document: dict, console: Console, verbose: bool) -> None:
    """plan's ranked strategies: per-GPU memory, fit, step time and bottleneck."""
    rows = [_mapping(item) for item in _sequence(document.get("strategies"))]
    if not rows:
        return
    table = Table(title="strategies (best first)", expand=False)
    for column in ("strategy", "fits", "GiB per GPU", "step s", "bottleneck", "why"):
        table.add_column(column, no_wrap=column != "why")
    for row in rows if verbose else rows[:STRATEGIES_SHOWN]:
        total = _number(_mapping(row.get("memory_bytes")).get("total"))
        step = _number(row.get("step_time_s"))
        fits = row.get("fits")
        reasons = [printable(reason) for reason in _sequence(row.get("reasons"))]
        table.add_row(Text(_text(row.get("name"))), Text("?" if fits is None else ("yes" if fits else "no"),
                                                         style="green" if fits else ("red" if fits is False else "")),
                      f"{total / 2**30:,.1f}" if total is not None else "?",
                      f"{step:.3f}" if step is not None else "-", Text(_text(row.get("bottleneck"), "-")),
                      Text("; ".join(reasons[:2])))
    console.print(table)
    if not verbose and len(rows) > STRATEGIES_SHOWN:
        console.print(f"[dim]{len(rows) - STRATEGIES_SHOWN} more strategies; --verbose or --json lists them.[/dim]")


def _finding(item: Any) -> dict[str, Any]:
    """One finding of the document with every field the table shows, missing ones as `?` or None."""
    data = _mapping(item)
    check_id = _text(data.get("check_id"))
    status = data.get("status")
    subject = _mapping(data.get("subject"))
    category = data.get("category")
    return {"check_id": check_id,
            "status": status if isinstance(status, str) else None,
            "category": _text(category) if category is not None else check_id.split(".", 1)[0],
            "subject": _subject_label(subject) if subject.get("gpu") or subject.get("nic") else "",
            "message": _text(data.get("message")),
            "fix": _text(data["fix"]) if data.get("fix") else None,
            "consequence_of": _text(data["consequence_of"]) if data.get("consequence_of") else None,
            "evidence": [f"{_text(e.get('file'))}:{_text(e.get('line'))}: {_text(e.get('text'))}"
                         for e in map(_mapping, _sequence(data.get("evidence")))]}


def _subject_label(data: dict) -> str:
    """`Subject.label()` of the document's subject (what the report showed before it was saved)."""
    def gpu(ref: Any) -> GpuRef | None:
        ref = ref if isinstance(ref, dict) else {}
        return GpuRef(index=ref.get("index", "?"), cuda_index=ref.get("cuda_index")) if ref else None
    nic = data.get("nic")
    return printable(Subject(host=_text(data.get("host")), gpu=gpu(data.get("gpu")), peer=gpu(data.get("peer")),
                             nic=str(nic) if nic else None, rank=data.get("rank")).label())


def _verdict_label(value: Any, labels: dict[str, str]) -> str:
    if value is None:
        return labels["verdict_missing"]
    known = isinstance(value, str) and value in _VERDICT_STYLE
    return labels[value] if known else printable(labels["verdict_unrecognised"].format(value=value))


def _scope_label(value: Any, labels: dict[str, str]) -> str:
    if value is None:
        return labels["missing"]
    if isinstance(value, str) and value in _SCOPES:
        return labels[value]
    return printable(labels["unrecognised"].format(value=value))


def _status_label(status: str | None, labels: dict[str, str]) -> str:
    if status is None:
        return labels["status_missing"]
    return labels[status] if status in _STATUS_STYLE else f"{printable(status)}?"


def _rank(status: str | None) -> float:
    return _STATUS_ORDER.index(status) if status in _STATUS_ORDER else _UNRECOGNISED_RANK


def _number(value: Any) -> float | int | None:
    """A number of the document; a non-finite one (`{"value": null, "raw": "nan"}`) as the float it was; else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, dict) and value.get("raw") in ("nan", "inf", "-inf"):
        return float(value["raw"])
    return None


def _text(value: Any, missing: str = "?") -> str:
    """A value of the document as it is shown: control characters escaped (`printable`), `missing` for none."""
    return missing if value is None or value == "" else printable(value)


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _sequence(value: Any) -> list:
    return value if isinstance(value, list) else []
