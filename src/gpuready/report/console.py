"""The report as rich tables: verdict first, then findings grouped by category, failures first."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuready.model import Finding, Report, Status

_STATUS_STYLE = {Status.FAIL: "bold red", Status.ERROR: "bold magenta", Status.WARN: "yellow",
                 Status.PASS: "green", Status.SKIP: "dim"}
_STATUS_ORDER = [Status.FAIL, Status.ERROR, Status.WARN, Status.PASS, Status.SKIP]
_VERDICT_STYLE = {"ready": "bold green", "ready_with_warnings": "bold yellow", "not_ready": "bold red",
                  "unknown": "bold magenta"}
# Labels for readers of Chinese first (`--lang zh`); ids, units and messages stay in the field's English.
_LABELS = {
    "en": {"ready": "READY", "ready_with_warnings": "READY WITH WARNINGS", "not_ready": "NOT READY",
           "unknown": "UNKNOWN (not enough evidence)", "judged_for": "verdict judged for",
           "single_node": "single node", "multi_node": "multi node", "fix": "fix",
           "pass": "pass", "warn": "warn", "fail": "fail", "skip": "skip", "error": "error",
           "summary": "{fail} fail, {warn} warn, {pass_} pass, {skip} skip"},
    "zh": {"ready": "就绪 READY", "ready_with_warnings": "就绪但有警告 READY WITH WARNINGS",
           "not_ready": "未就绪 NOT READY", "unknown": "无法判断 UNKNOWN (not enough evidence)",
           "judged_for": "结论依据 verdict judged for", "single_node": "单机 single node", "multi_node": "多机 multi node",
           "fix": "修复 fix", "pass": "通过 pass", "warn": "警告 warn", "fail": "失败 fail", "skip": "跳过 skip",
           "error": "错误 error", "summary": "失败 {fail}，警告 {warn}，通过 {pass_}，跳过 {skip}"},
}


def render_console(report: Report, console: Console | None = None, verbose: bool = False, lang: str = "en") -> None:
    console = console or Console()
    labels = _LABELS.get(lang, _LABELS["en"])
    verdict = report.verdict().value
    counts = defaultdict(int)
    for finding in report.findings:
        counts[finding.status] += 1
    verdicts = report.verdicts()
    console.print(Text.assemble(
        (f"{report.host}: ", "bold"), (labels[verdict], _VERDICT_STYLE[verdict]),
        f"   ({labels['single_node']}: {labels[verdicts['single_node'].value]}; "
        f"{labels['multi_node']}: {labels[verdicts['multi_node'].value]}; "
        f"{labels['judged_for']}: {labels['multi_node' if report.multi_node else 'single_node']})"))
    if report.not_enough_evidence:
        console.print(Text(report.not_enough_evidence, style="magenta"))
    console.print(labels["summary"].format(fail=counts[Status.FAIL] + counts[Status.ERROR], warn=counts[Status.WARN],
                                           pass_=counts[Status.PASS], skip=counts[Status.SKIP]))
    _render_inventory(report, console)
    by_category: dict[str, list[Finding]] = defaultdict(list)
    for finding in report.findings:
        if verbose or finding.status != Status.SKIP:
            by_category[finding.category].append(finding)

    def worst(findings: list[Finding]) -> int:
        return min(_STATUS_ORDER.index(finding.status) for finding in findings)

    table = Table(show_lines=False, expand=True)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("subject", no_wrap=True)
    table.add_column("finding", ratio=1)
    for category in sorted(by_category, key=lambda name: (worst(by_category[name]), name)):
        for finding in sorted(by_category[category], key=lambda f: _STATUS_ORDER.index(f.status)):
            text = Text(finding.message)
            if finding.fix and finding.status in (Status.FAIL, Status.WARN, Status.ERROR):
                text.append(f"\n{labels['fix']}: ", style="bold")
                text.append(finding.fix)
            table.add_row(Text(labels[finding.status.value], style=_STATUS_STYLE[finding.status]),
                          finding.check_id, finding.subject.label() if finding.subject.gpu or finding.subject.nic
                          else "", text)
    console.print(table)
    _render_measurements(report, console, verbose)
    if not verbose and counts[Status.SKIP]:
        console.print(f"[dim]{counts[Status.SKIP]} check(s) skipped for lack of facts; --verbose lists them.[/dim]")


def _render_inventory(report: Report, console: Console) -> None:
    gpus = report.facts.get("gpus") or []
    if not gpus:
        return
    table = Table(title=None, expand=False, box=None, pad_edge=False)
    for column in ("GPU", "bus id", "model", "memory", "CC", "PCIe (cur/max)", "power limit", "temp"):
        table.add_column(column, no_wrap=True)
    for gpu in gpus:
        memory = gpu.get("memory_total_bytes")
        table.add_row(str(gpu["index"]), gpu["bus_id"] or "?", gpu.get("name") or "?",
                      f"{memory / 2**30:,.0f} GiB" if memory else "?", gpu.get("compute_capability") or "?",
                      gpu.get("pcie") or "?", f"{gpu['power_limit_w']:.0f} W" if gpu.get("power_limit_w") else "?",
                      f"{gpu['temperature_c']:.0f} °C" if gpu.get("temperature_c") is not None else "?")
    console.print(table)


def _render_measurements(report: Report, console: Console, verbose: bool) -> None:
    shown = [m for m in report.measurements if verbose or "latency_us_" not in m.name]
    if not shown:
        return
    table = Table(expand=False)
    for column in ("measurement", "subject", "value", "expected", "of expected"):
        table.add_column(column, no_wrap=True, justify="right" if column != "measurement" else "left")
    for measurement in shown:
        unit = measurement.unit.replace("gb_per_s", "GB/s").replace("tflops", "TFLOP/s")
        expected = f"{measurement.expected:,.1f}" if measurement.expected else "-"
        share = f"{measurement.value / measurement.expected:.0%}" if measurement.expected else ""
        subject = measurement.subject.label() if measurement.subject.gpu else measurement.subject.host
        table.add_row(measurement.name, subject, f"{measurement.value:,.1f} {unit}", expected, share)
    console.print(table)
