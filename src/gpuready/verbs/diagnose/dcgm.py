"""`dcgmi diag -r N` output pasted into a ticket: which test failed on which GPU and why.

Parsing (rows, folding them into tests) is facts/dcgm_diag.py; this module only judges: a failed test is
`dcgm.diag_failed` (fail; a `Warn` result warns), a test that failed with DCGM's own `internal error` (or a diagnostic
that could not run) is `dcgm.diag_error` (warn: the diagnostic failed, the GPU was not judged), a run where every test
passed is `dcgm.diag_passed`. `Info` rows are notes, never failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.facts import dcgm_diag as parse
from gpuready.i18n import finding_text, said
from gpuready.model import Finding, GpuRef, Status, Subject
from gpuready.verbs.diagnose.evidence import DiagnoseContext, Line, Reader, quote

MAX_RUNS = 64
MAX_ROWS = 4096
"""Rows kept per run (dcgmi prints some 10 per test and GPU: a 4096-row table is already extreme)."""
MAX_REASON_CHARS = 300

REFS = ["https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html",
        "NVIDIA/DCGM dcgmi/Diag.cpp (the table: `Fail - GPU: n`, `GPUn: Fail`, `Warning` rows)"]
_DEPLOYMENT_FIXES = {
    "persistence mode": "persistence_mode", "environment variables": "environment_variables",
    "graphics processes": "graphics_processes", "page retirement/row remap": "row_remap",
    "permissions and os blocks": "permissions", "inforom": "inforom",
}
"""DCGM's deployment tests → the kind of fix (`dcgm.diag_failed.<kind>` in the catalogue)."""


@dataclass
class _Run:
    source: str
    lines: list[parse.DiagLine] = field(default_factory=list)
    refs: list[Line] = field(default_factory=list)


class DcgmDiagReader(Reader):
    """Reader name "dcgm": the tables `dcgmi diag` prints (DCGM 2.x/3.x summary rows, DCGM 4.x per-GPU rows)."""

    name = "dcgm"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self.runs: list[_Run] = []
        self.current: _Run | None = None
        self.runs_dropped = 0

    def feed(self, line: Line) -> None:
        parsed = parse.parse_line(line.text)
        if parsed is None:
            return
        run = self.current if self.current is not None and self.current.source == line.source else None
        if parsed.kind in ("start", "failed_to_run") or (parsed.kind == "header" and run is not None and run.lines):
            run = self._new_run(line.source)
        elif run is None:
            if parsed.kind == "row" and not (parsed.name and parse.is_result(parsed.info)) \
                    and not parsed.name.startswith(("Warning", "Error")):
                return  # a stray table row, not a dcgmi table
            run = self._new_run(line.source)
        if run is None or parsed.kind in ("start", "header"):
            return
        if len(run.lines) < MAX_ROWS:
            run.lines.append(parsed)
            run.refs.append(line)

    def _new_run(self, source: str) -> _Run | None:
        if len(self.runs) >= MAX_RUNS:
            self.runs_dropped += 1
            self.current = None
            return None
        self.current = _Run(source=source)
        self.runs.append(self.current)
        return self.current

    # ------------------------------------------------------------------ judging

    def findings(self, context: DiagnoseContext) -> list[Finding]:
        found: list[Finding] = []
        passed: list[tuple[_Run, parse.DiagRun]] = []
        for run in self.runs:
            diag = parse.fold(run.lines)
            if not diag.tests and diag.failed_to_run is None:
                continue
            before = len(found)
            if diag.failed_to_run is not None:
                found.append(Finding(
                    check_id="dcgm.diag_error", status=Status.WARN, subject=Subject(host=context.host),
                    **finding_text(said("dcgm.diag_error.not_run", error=diag.failed_to_run[:MAX_REASON_CHARS])),
                    observed={"error": diag.failed_to_run[:MAX_REASON_CHARS]}, refs=REFS,
                    evidence=quote(run.refs[-1:])))
            for test in diag.tests:
                if test.result in ("Fail", "Warn"):
                    found.append(self._test_finding(context.host, run, diag, test))
            if len(found) == before:
                passed.append((run, diag))
        if passed and not found:
            found.append(self._passed(context.host, passed))
        return found

    def _test_finding(self, host: str, run: _Run, diag: parse.DiagRun, test: parse.DiagTest) -> Finding:
        gpus = sorted(set(test.failed_gpus or test.warned_gpus
                          or [m.gpu for m in test.warnings if m.gpu is not None]))
        where = "all" if test.all_gpus_failed else "one" if len(gpus) == 1 else "several" if gpus else "node"
        reasons = [m.text[:MAX_REASON_CHARS] for m in test.warnings if m.text][:5]
        lines = [run.refs[index] for index in test.rows if index < len(run.refs)]
        subject = Subject(host=host, gpu=GpuRef(index=gpus[0]) if len(gpus) == 1 and not test.all_gpus_failed else None)
        observed = {"test": test.name, "section": test.section, "result": test.result, "gpus": gpus,
                    "all_gpus": test.all_gpus_failed, "reasons": reasons,
                    "dcgm_version": diag.metadata.get("DCGM Version"),
                    "driver_version": diag.metadata.get("Driver Version Detected")}
        name = f"`{test.name}`" + (f" ({test.section})" if test.section and test.section != test.name else "")
        reason = "" if reasons else ".no_reason"
        if test.internal_error:
            return Finding(
                check_id="dcgm.diag_error", status=Status.WARN, subject=subject,
                **finding_text(said("dcgm.diag_error.internal" + reason, test=name,
                                    reason=reasons[0] if reasons else None)),
                observed=observed, refs=REFS, evidence=quote(lines))
        status = Status.FAIL if test.result == "Fail" else Status.WARN
        verb = "failed" if test.result == "Fail" else "warned"
        # the kind of fix picks the id (its fix); what DCGM said, where and whether it gave a reason, the summary
        summary = said(f"dcgm.diag_failed.summary.{verb}.{where}{reason}", test=name, gpus=", ".join(map(str, gpus)),
                       reason=reasons[0] if reasons else None)
        text = said(f"dcgm.diag_failed.{_fix_kind(test, reasons)}", summary=summary,
                    gpu=str(gpus[0]) if len(gpus) == 1 else "<gpu>")
        return Finding(
            check_id="dcgm.diag_failed", status=status, subject=subject, **finding_text(text),
            observed=observed, expected="Pass", refs=REFS, evidence=quote(lines))

    def _passed(self, host: str, passed: list[tuple[_Run, parse.DiagRun]]) -> Finding:
        tests = [test for _run, diag in passed for test in diag.tests]
        skipped = sorted({test.name for test in tests if test.result == "Skip"})
        ran = sorted({test.name for test in tests if test.result == "Pass"})
        versions = sorted({diag.metadata["DCGM Version"] for _run, diag in passed if "DCGM Version" in diag.metadata})
        return Finding(
            check_id="dcgm.diag_passed", status=Status.PASS, subject=Subject(host=host),
            **finding_text(said("dcgm.diag_passed" + (".runs" if len(passed) > 1 else "")
                                + (".skipped" if skipped else ""),
                                tests=len(ran), runs=len(passed), skipped=", ".join(skipped))),
            observed={"passed": ran, "skipped": skipped, "runs": len(passed), "dcgm_version": versions},
            refs=REFS, evidence=quote([run.refs[0] for run, _diag in passed if run.refs]))


def _fix_kind(test: parse.DiagTest, reasons: list[str]) -> str:
    name, text = test.name.lower(), " ".join(reasons).lower()
    if name in _DEPLOYMENT_FIXES:
        return _DEPLOYMENT_FIXES[name]
    if "thermal" in text or "temperature" in text or "cooling" in text:
        return "thermal"
    if "power" in name or "stress" in name or "bandwidth" in name or "power" in text:
        return "power"
    if "pcie" in name or "nvlink" in name or "pcie" in text or "nvlink" in text:
        return "links"
    if "memory" in name or "memtest" in name or "diagnostic" in name or "ecc" in text or "remap" in text:
        return "memory"
    return "other"
