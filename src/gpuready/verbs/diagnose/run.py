"""`gpuready diagnose PATH...`: read what people paste into tickets and say what went wrong, with evidence and a fix.

Inputs are files, folders and bundles (a folder or a .tar.gz), any number, recognised by their content, read by the
evidence reader (evidence/stream.py): every text file is streamed once, in chunks, in bounded memory, and each log
reader is fed the lines its markers are on. Files that the `check` parsers read (nvidia-smi, topo -m, lspci, ...) also
become facts, and the static checks run on them. Findings are ranked: root causes first, each followed by its consequences.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

from gpuready import __version__
from gpuready.checks.registry import CheckOptions
from gpuready.evidence.limits import DEFAULT_LIMITS, InputLimits, size_text
from gpuready.evidence.markers import KernelLines
from gpuready.evidence.stream import InputFile, Scanner
from gpuready.facts.log_facts import log_facts
from gpuready.facts.log_lines import Reader
from gpuready.facts.step_time_reader import StepTimeReader
from gpuready.facts.torch_log_reader import may_be_flight_recorder
from gpuready.i18n import finding_text, said
from gpuready.model import INPUTS_HOST, Finding, Report, Status, Subject
from gpuready.pipeline import check_files, log_findings, log_readers

_STATUS_ORDER = {status: status.rank for status in Status}  # model.STATUS_ORDER


def default_readers() -> list[Reader]:
    """Every reader diagnose knows: the kernel log's lines (judged with the machine's facts) and the log readers."""
    return [KernelLines(), *log_readers(), StepTimeReader()]


def diagnose(paths: Iterable[Path], *, expect_busbw_gb_per_s: float | None = None,
             readers: Callable[[], list[Reader]] = default_readers, limits: InputLimits = DEFAULT_LIMITS) -> Report:
    """The report for the given inputs; InputError where a path cannot be read at all.

    One judgement: the tool outputs and kernel-log lines among the inputs become facts, and the check registry judges
    them exactly as `check --bundle` would (same findings, same `not_enough_evidence`); the log readers' facts are
    judged by the same registry's checks of logs (NCCL, PyTorch, launcher, nccl-tests, DCGM, Kubernetes)."""
    scanner = Scanner(readers(), limits, whole_file_head=may_be_flight_recorder)
    for path in paths:
        scanner.add_path(Path(path))
    checked, facts = _check(scanner)
    host = checked.host if checked is not None else INPUTS_HOST
    findings = log_findings(log_facts(scanner.readers), host=host, facts=facts,
                            options=CheckOptions(expect_busbw_gb_per_s=expect_busbw_gb_per_s))
    if checked is not None:
        findings.extend(f for f in checked.findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN))
    if scanner.over_budget:
        findings.append(_over_budget(scanner, host))
    if not [f for f in findings if f.status != Status.SKIP]:
        findings.append(_nothing_found(scanner, host))
    report = Report(tool_version=__version__, host=host, findings=rank(findings),
                    not_enough_evidence=checked.not_enough_evidence if checked is not None else _LOGS_ONLY,
                    input_error=checked.input_error if checked is not None else False)
    report.facts["diagnose"] = {"inputs": [_describe(entry) for entry in scanner.files],
                                "readers": [reader.name for reader in scanner.readers]}
    if scanner.not_listed:
        report.facts["diagnose"]["inputs_not_listed"] = scanner.not_listed
    if scanner.kernel is not None and scanner.kernel.not_kept:
        report.facts["diagnose"]["kernel_lines_not_kept"] = scanner.kernel.not_kept
    if checked is not None:
        report.facts.update(checked.facts)
    return report


def _check(scanner: Scanner) -> tuple[Report | None, object | None]:
    """(the check report, the first machine's facts) over what the inputs hold: tool outputs, and each file's
    kernel-log lines as a kernel log of its own; (None, None) where the inputs hold neither."""
    files = scanner.check_files()
    if files is None:
        return None, None
    report, machines = check_files(files, CheckOptions())
    return report, machines[0]


_LOGS_ONLY = said("evidence.logs_only")


def rank(findings: list[Finding]) -> list[Finding]:
    """Root causes first (fail, error, warn, pass, skip), each followed by the findings that are its consequences."""
    ids = {finding.check_id for finding in findings}
    roots = [f for f in findings if not f.consequence_of or f.consequence_of not in ids]
    roots.sort(key=lambda finding: _STATUS_ORDER.get(finding.status, 5))  # stable: the checks' order within a status
    by_cause: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.consequence_of and finding.consequence_of in ids:
            by_cause.setdefault(finding.consequence_of, []).append(finding)
    ordered: list[Finding] = []
    placed: set[int] = set()

    def place(finding: Finding) -> None:
        if id(finding) in placed:
            return
        placed.add(id(finding))
        ordered.append(finding)
        for consequence in by_cause.pop(finding.check_id, []):
            place(consequence)
    for finding in roots:
        place(finding)
    for rest in by_cause.values():  # a cycle of consequences: kept, after the rest
        for finding in rest:
            place(finding)
    return ordered


_KIND_WORDS = {"unreadable": "diagnose.inputs.unreadable", "log": "diagnose.inputs.log",
               "binary": "diagnose.inputs.binary", "flight recorder": "diagnose.inputs.flight_recorder",
               "flight recorder (pickle, not read)": "diagnose.inputs.flight_recorder_pickle"}
"""The kinds of input diagnose names in words (the catalogue's); the others are the bundle file names whose parser
read them (`nvidia-smi-q.txt`), said as they are."""


def _nothing_found(scanner: Scanner, host: str) -> Finding:
    read = [entry for entry in scanner.files if entry.note is None or entry.lines]
    kinds = Counter(entry.kind or "unreadable" for entry in scanner.files)
    counted = [said(_KIND_WORDS[kind], count=count) if kind in _KIND_WORDS else
               said("diagnose.inputs.file", count=count, kind=kind) for kind, count in sorted(kinds.items())]
    return Finding(check_id="diagnose.nothing_found", status=Status.PASS, subject=Subject(host=host),
                   **finding_text(said("diagnose.nothing_found", read=len(read), kinds=counted)),
                   observed={"files": len(scanner.files)})


def _over_budget(scanner: Scanner, host: str) -> Finding:
    names = scanner.over_budget
    limits = scanner.limits
    text = said("diagnose.inputs_skipped" + (".more" if len(names) > 20 else ""), count=len(names),
                inputs=", ".join(names[:20]), more=len(names) - 20, max_input=size_text(limits.max_input_bytes),
                max_held=size_text(limits.max_held_bytes))
    return Finding(check_id="diagnose.inputs_skipped", status=Status.WARN, subject=Subject(host=host),
                   **finding_text(text),
                   observed={"inputs": names[:100], "read_bytes": scanner.read_bytes, "held_bytes": scanner.held_bytes},
                   expected={"max_input_bytes": limits.max_input_bytes, "max_held_bytes": limits.max_held_bytes})


def _describe(entry: InputFile) -> dict:
    data = {"file": entry.name, "kind": entry.kind, "bytes_read": entry.bytes_read, "lines": entry.lines,
            "fed": dict(entry.fed)}
    if entry.note:
        data["note"] = entry.note
    return data
