"""`dcgmi diag -r N` output pasted into a ticket (facts.log_facts.DcgmDiagFacts): which test failed on which GPU, and
why.

A failed test is `dcgm.diag_failed` (fail; a `Warn` result warns); a diagnostic that could not run is `dcgm.diag_error`
(warn); a test that failed with DCGM's own `internal error`, or because CUDA could not start (error 802, the NVSwitch
fabric: gpu.fabric's finding), never tested a GPU: `dcgm.diag_error` as a skip that says why. A set of runs where every
test passed is `dcgm.diag_passed`. `Info` rows are notes, never failures.
"""

from __future__ import annotations

from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, log_check
from gpuready.facts.log_facts import DcgmDiagFacts, DcgmRun
from gpuready.i18n import finding_text, said
from gpuready.model import Finding, GpuRef, Status, Subject

MAX_REASON_CHARS = 300
REFS = ["https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html",
        "NVIDIA/DCGM dcgmi/Diag.cpp (the table: `Fail - GPU: n`, `GPUn: Fail`, `Warning` rows)"]
CUDA_802_REF = "CUDA Runtime API cudaErrorSystemNotReady = 802 ('system not yet initialized'); Fabric Manager User Guide"
_DEPLOYMENT_FIXES = {
    "persistence mode": "persistence_mode", "environment variables": "environment_variables",
    "graphics processes": "graphics_processes", "page retirement/row remap": "row_remap",
    "permissions and os blocks": "permissions", "inforom": "inforom",
}
"""DCGM's deployment tests → the kind of fix (`dcgm.diag_failed.<kind>` in the catalogue)."""


def _runs(context: CheckContext) -> list[DcgmRun]:
    """The runs with something to judge: tests, or a diagnostic that could not run."""
    dcgm: DcgmDiagFacts | None = context.facts.logs.dcgm
    return [run for run in (dcgm.runs if dcgm else []) if run.diag.tests or run.diag.failed_to_run is not None]


def _flagged(run: DcgmRun) -> list:
    """The tests of a run that did not pass (Fail, Warn)."""
    return [test for test in run.diag.tests if test.result in ("Fail", "Warn")]


@log_check("dcgm.diag_failed")
def dcgm_diag_failed(context: CheckContext) -> list[Finding]:
    """Every DCGM test passed on every GPU."""
    return [_test_finding(context, run, test) for run in _runs(context) for test in _flagged(run)
            if not _not_judged(test)]


def _not_judged(test) -> bool:
    """The test never judged a GPU: DCGM's own internal error, or CUDA could not start (802: gpu.fabric's finding)."""
    return test.internal_error or test.cuda_not_ready


@log_check("dcgm.diag_error")
def dcgm_diag_error(context: CheckContext) -> list[Finding]:
    """The diagnostic itself ran: it could not run at all, or a test failed with DCGM's own internal error."""
    found = []
    for run in _runs(context):
        if run.diag.failed_to_run is not None:
            error = run.diag.failed_to_run[:MAX_REASON_CHARS]
            found.append(context.warn(said("dcgm.diag_error.not_run", error=error), observed={"error": error},
                                      refs=REFS, evidence=quote(run.refs[-1:])))
        found += [_test_finding(context, run, test) for test in _flagged(run) if _not_judged(test)]
    return found


@log_check("dcgm.diag_passed")
def dcgm_diag_passed(context: CheckContext) -> list[Finding]:
    """The runs where every test passed, where none failed, warned or could not run."""
    runs = _runs(context)
    if any(run.diag.failed_to_run is not None or _flagged(run) for run in runs):
        return []
    passed = runs
    if not passed:
        return []
    tests = [test for run in passed for test in run.diag.tests]
    skipped = sorted({test.name for test in tests if test.result == "Skip"})
    ran = sorted({test.name for test in tests if test.result == "Pass"})
    versions = sorted({run.diag.metadata["DCGM Version"] for run in passed if "DCGM Version" in run.diag.metadata})
    return [context.passed(
        said("dcgm.diag_passed" + (".runs" if len(passed) > 1 else "") + (".skipped" if skipped else ""),
             tests=len(ran), runs=len(passed), skipped=", ".join(skipped)),
        observed={"passed": ran, "skipped": skipped, "runs": len(passed), "dcgm_version": versions},
        refs=REFS, evidence=quote([run.refs[0] for run in passed if run.refs]))]


def _test_finding(context: CheckContext, run: DcgmRun, test) -> Finding:
    diag = run.diag
    gpus = sorted(set(test.failed_gpus or test.warned_gpus or [m.gpu for m in test.warnings if m.gpu is not None]))
    where = "all" if test.all_gpus_failed else "one" if len(gpus) == 1 else "several" if gpus else "node"
    reasons = [m.text[:MAX_REASON_CHARS] for m in test.warnings if m.text][:5]
    lines = [run.refs[index] for index in test.rows if index < len(run.refs)]
    subject = Subject(host=context.host,
                      gpu=GpuRef(index=gpus[0]) if len(gpus) == 1 and not test.all_gpus_failed else None)
    observed = {"test": test.name, "section": test.section, "result": test.result, "gpus": gpus,
                "all_gpus": test.all_gpus_failed, "reasons": reasons,
                "dcgm_version": diag.metadata.get("DCGM Version"),
                "driver_version": diag.metadata.get("Driver Version Detected")}
    name = f"`{test.name}`" + (f" ({test.section})" if test.section and test.section != test.name else "")
    reason = "" if reasons else ".no_reason"
    if _not_judged(test):
        # not a finding about the machine (the GPUs were not tested): a skip that says why; CUDA's 802 is gpu.fabric's
        kind = "internal" + reason if test.internal_error else "cuda_not_ready"
        return Finding(check_id=context.check_id, status=Status.SKIP, subject=subject,
                       **finding_text(said(f"dcgm.diag_error.{kind}", test=name,
                                           reason=reasons[0] if reasons else None)),
                       observed=observed, refs=REFS + ([CUDA_802_REF] if test.cuda_not_ready else []),
                       evidence=quote(lines))
    verb = "failed" if test.result == "Fail" else "warned"
    # the kind of fix picks the id (its fix); what DCGM said, where and whether it gave a reason, the summary
    summary = said(f"dcgm.diag_failed.summary.{verb}.{where}{reason}", test=name, gpus=", ".join(map(str, gpus)),
                   reason=reasons[0] if reasons else None)
    text = said(f"dcgm.diag_failed.{_fix_kind(test, reasons)}", summary=summary,
                gpu=",".join(map(str, gpus)) or "<gpu>", select=f" -i {','.join(map(str, gpus))}" if gpus else "")
    return Finding(check_id=context.check_id, status=Status.FAIL if test.result == "Fail" else Status.WARN,
                   subject=subject, **finding_text(text), observed=observed, expected="Pass", refs=REFS,
                   evidence=quote(lines))


def _fix_kind(test, reasons: list[str]) -> str:
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
