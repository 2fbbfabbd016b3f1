"""What it takes to clear each finding (model.Remediation): the level from knowledge/remediation.toml by check id, and
for an Xid from NVIDIA's catalog (xid.toml `nvidia_immediate`). Every verb's findings get it before they are written
(cli/output.py `emit`); `fleet --actions` reads it back from the saved reports."""

from __future__ import annotations

from typing import Any, Iterable

from gpuready.knowledge import load_table, xid_entry
from gpuready.model import Finding, Remediation, Status

QUIET = frozenset({Status.PASS, Status.SKIP})
"""Statuses that need nothing done, whatever the check."""


class NoLevel(LookupError):
    """A check id that knowledge/remediation.toml neither names nor prefixes."""


def _row(check_id: str) -> dict[str, Any]:
    rows = load_table("remediation")["check"]
    exact = next((row for row in rows if row["id"] == check_id), None)
    if exact is not None:
        return exact
    prefixes = [row for row in rows if row["id"][-1] in "._" and check_id.startswith(row["id"])]
    if not prefixes:
        raise NoLevel(check_id)
    return max(prefixes, key=lambda row: len(row["id"]))


def xid_level(code: int) -> Remediation | None:
    """The level NVIDIA's catalog gives Xid `code` (remediation.toml [xid_codes], [xid_evidence], [xid_immediate]), or
    None for a code the catalogue lacks or whose action the table does not map."""
    table = load_table("remediation")
    if str(code) in table["xid_codes"]:
        return Remediation(table["xid_codes"][str(code)])
    entry = xid_entry(code)
    if entry is None:
        return None
    by_evidence = table["xid_evidence"].get(entry.get("evidence_of") or "")
    if by_evidence:
        return Remediation(by_evidence)
    by_action = table["xid_immediate"].get(entry.get("nvidia_immediate") or "")
    return Remediation(by_action) if by_action else None


def _xid_of(observed: Any) -> int | None:
    """The Xid a finding is about: `observed` is the code (NVML's events) or holds it under `xid` (a kernel log)."""
    code = observed.get("xid") if isinstance(observed, dict) else observed
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def level_of(check_id: str, status: Status, observed: Any = None) -> Remediation:
    """The level of one finding: none for a pass or a skip; the table's (or, for an Xid, the catalog's) otherwise; a
    failure at least restart_job (an `error` is gpuready's own or the input's, not the machine's: as the table says). Raises NoLevel for a check id the table does not cover."""
    row = _row(check_id)
    if status in QUIET:
        return Remediation.NONE
    level = Remediation(row["level"])
    code = _xid_of(observed) if row.get("rule") == "xid" else None
    if code is not None:
        level = xid_level(code) or level
    if status == Status.FAIL and level == Remediation.NONE:
        return Remediation.RESTART_JOB
    return level


def assign_levels(findings: Iterable[Finding]) -> None:
    """Set `remediation` on each finding that has none yet; a check id the table lacks keeps None (written as null,
    tests/test_remediation.py fails on it) rather than a guessed level."""
    for finding in findings:
        if finding.remediation is None:
            try:
                finding.remediation = level_of(finding.check_id, finding.status, finding.observed)
            except NoLevel:
                continue
