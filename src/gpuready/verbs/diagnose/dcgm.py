"""`dcgmi diag -r N` output pasted into a ticket: which test failed on which GPU and why.

Parsing (rows, folding them into tests) is facts/dcgm_diag.py; this module only judges: a failed test is
`dcgm.diag_failed` (fail; a `Warn` result warns), a test that failed with DCGM's own `internal error` (or a diagnostic
that could not run) is `dcgm.diag_error` (warn: the diagnostic failed, the GPU was not judged), a run where every test
passed is `dcgm.diag_passed`. `Info` rows are notes, never failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.facts import dcgm_diag as parse
from gpuready.model import Finding, GpuRef, Status, Subject
from gpuready.verbs.diagnose.evidence import DiagnoseContext, Line, Reader, quote

MAX_RUNS = 64
MAX_ROWS = 4096
"""Rows kept per run (dcgmi prints some 10 per test and GPU: a 4096-row table is already extreme)."""
MAX_REASON_CHARS = 300

REFS = ["https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html",
        "NVIDIA/DCGM dcgmi/Diag.cpp (the table: `Fail - GPU: n`, `GPUn: Fail`, `Warning` rows)"]
_DEPLOYMENT_FIXES = {
    "persistence mode": "enable persistence mode: `sudo nvidia-smi -pm 1` (or the nvidia-persistenced service)",
    "environment variables": "unset the CUDA/NCCL variables DCGM names (e.g. CUDA_VISIBLE_DEVICES) for the diagnostic",
    "graphics processes": "stop the display server / graphics processes on the GPU (`nvidia-smi` lists them)",
    "page retirement/row remap": ("reset the GPU or reboot so pending row remaps apply (`nvidia-smi -q -d "
                                  "ROW_REMAPPER`); uncorrectable errors that remain mean an RMA"),
    "permissions and os blocks": "run dcgmi as root and check nothing (cgroups, SELinux) blocks /dev/nvidia*",
    "inforom": "the GPU's InfoROM is corrupted: `nvidia-smi -q | grep -i inforom`; it needs a firmware update or RMA",
}


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
                    message=f"dcgmi could not run the diagnostic: {diag.failed_to_run[:MAX_REASON_CHARS]}",
                    observed={"error": diag.failed_to_run[:MAX_REASON_CHARS]},
                    fix=_ERROR_FIX, refs=REFS, evidence=quote(run.refs[-1:])))
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
        where = ("every GPU" if test.all_gpus_failed else f"GPU {gpus[0]}" if len(gpus) == 1 else
                 f"GPUs {', '.join(map(str, gpus))}" if gpus else "the node")
        reasons = [m.text[:MAX_REASON_CHARS] for m in test.warnings if m.text][:5]
        lines = [run.refs[index] for index in test.rows if index < len(run.refs)]
        subject = Subject(host=host, gpu=GpuRef(index=gpus[0]) if len(gpus) == 1 and not test.all_gpus_failed else None)
        observed = {"test": test.name, "section": test.section, "result": test.result, "gpus": gpus,
                    "all_gpus": test.all_gpus_failed, "reasons": reasons,
                    "dcgm_version": diag.metadata.get("DCGM Version"),
                    "driver_version": diag.metadata.get("Driver Version Detected")}
        section = f" ({test.section})" if test.section and test.section != test.name else ""
        if test.internal_error:
            return Finding(
                check_id="dcgm.diag_error", status=Status.WARN, subject=subject,
                message=(f"DCGM diagnostic `{test.name}`{section} failed with an internal error of DCGM itself, not "
                         f"a GPU fault: {reasons[0] if reasons else 'no reason given'}"),
                observed=observed, fix=_ERROR_FIX, refs=REFS, evidence=quote(lines))
        status = Status.FAIL if test.result == "Fail" else Status.WARN
        verb = "failed" if test.result == "Fail" else "warned"
        return Finding(
            check_id="dcgm.diag_failed", status=status, subject=subject,
            message=(f"DCGM diagnostic `{test.name}`{section} {verb} on {where}"
                     + (f": {reasons[0]}" if reasons else ".")),
            observed=observed, expected="Pass", fix=_fix(test, gpus, reasons), refs=REFS, evidence=quote(lines))

    def _passed(self, host: str, passed: list[tuple[_Run, parse.DiagRun]]) -> Finding:
        tests = [test for _run, diag in passed for test in diag.tests]
        skipped = sorted({test.name for test in tests if test.result == "Skip"})
        ran = sorted({test.name for test in tests if test.result == "Pass"})
        versions = sorted({diag.metadata["DCGM Version"] for _run, diag in passed if "DCGM Version" in diag.metadata})
        return Finding(
            check_id="dcgm.diag_passed", status=Status.PASS, subject=Subject(host=host),
            message=(f"DCGM diagnostics passed: {len(ran)} test(s)" + (f" in {len(passed)} runs" if len(passed) > 1
                                                                       else "")
                     + (f"; skipped: {', '.join(skipped)}" if skipped else "") + "."),
            observed={"passed": ran, "skipped": skipped, "runs": len(passed), "dcgm_version": versions},
            refs=REFS, evidence=quote([run.refs[0] for run, _diag in passed if run.refs]))


_ERROR_FIX = ("The diagnostic itself failed, so the GPU was not judged: make sure nothing else runs on the GPUs "
              "(drain the node; under Slurm use `--exclusive`), restart the host engine (`systemctl restart "
              "nvidia-dcgm` or nv-hostengine), check DCGM's logs (/var/log/nv-hostengine.log, nvvs.log) and that "
              "the DCGM version supports this driver, then rerun `dcgmi diag -r 3`.")


def _fix(test: parse.DiagTest, gpus: list[int], reasons: list[str]) -> str:
    gpu = str(gpus[0]) if len(gpus) == 1 else "<gpu>"
    name, text = test.name.lower(), " ".join(reasons).lower()
    rerun = f"rerun `dcgmi diag -r 3 -i {gpu}`; a GPU that fails again goes to RMA with `nvidia-bug-report.sh` output"
    if name in _DEPLOYMENT_FIXES:
        return _DEPLOYMENT_FIXES[name][0].upper() + _DEPLOYMENT_FIXES[name][1:] + f"; then {rerun}."
    if "thermal" in text or "temperature" in text or "cooling" in text:
        return (f"GPU {gpu} overheats under load: check its fans, airflow and inlet temperature (`nvidia-smi -q -d "
                f"TEMPERATURE,PERFORMANCE -i {gpu}` shows the clock-event reasons); `gpuready burn` reproduces it "
                f"with telemetry; {rerun}.")
    if "power" in name or "stress" in name or "bandwidth" in name or "power" in text:
        return (f"GPU {gpu} did not reach its target: check power limits and clock-event reasons (`nvidia-smi -q -d "
                f"POWER,PERFORMANCE -i {gpu}`), cooling and PSU; compare it with its peers (`gpuready burn`); "
                f"{rerun}.")
    if "pcie" in name or "nvlink" in name or "pcie" in text or "nvlink" in text:
        return ("Check the GPU's links: `nvidia-smi topo -m`, `nvidia-smi nvlink -s` / `-e`, and `gpuready check` "
                "(pcie.link_degraded, nvlink.* findings); reseat the GPU or its riser if a link is degraded; "
                f"{rerun}.")
    if "memory" in name or "memtest" in name or "diagnostic" in name or "ecc" in text or "remap" in text:
        return (f"GPU {gpu} memory fault: `nvidia-smi -q -d ECC,ROW_REMAPPER -i {gpu}`; reset the GPU (`nvidia-smi "
                f"-r -i {gpu}`) or reboot so pending row remaps apply; {rerun}.")
    return f"Follow the reason DCGM gives above; {rerun}."
