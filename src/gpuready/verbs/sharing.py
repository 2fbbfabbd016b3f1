"""The judge of a shared GPU, for every run verb (validate, burn, bench): `<verb>.gpu_shared` findings, the
`--exclusive` refusal, and the blame a low figure gets where another process computes on its GPU.

Who uses which GPU is a fact (facts/gpu_users.py reads it); what that means for a run is judged here.
"""

from __future__ import annotations

import socket
from typing import Any

from gpuready import __version__
from gpuready.facts.gpu_users import GpuUsers, shared
from gpuready.i18n import Said, catalogue, finding_text, json_values, said, said_again
from gpuready.model import Finding, GpuRef, Report, Status, Subject

LOW_FIGURE_CHECKS = frozenset({"compute.low", "compute.straggler", "memory_bw.low", "transfer.low", "p2p.low",
                               "nccl.busbw_low", "burn.straggler", "burn.throughput_low", "burn.power_low",
                               "burn.clocks"})
"""Findings about a figure below its expectation: on a shared GPU the other process is the likely cause."""


def users_of(subject_gpu: Any, users: dict[int, GpuUsers]) -> GpuUsers | None:
    """The shared-GPU entry for a finding's GpuRef (matched by UUID, bus id, then NVML index)."""
    if subject_gpu is None:
        return None
    for entry in users.values():
        if entry.processes and ((entry.uuid and entry.uuid == getattr(subject_gpu, "uuid", None))
                                or (entry.bus_id and entry.bus_id == getattr(subject_gpu, "bus_id", None))):
            return entry
    entry = users.get(getattr(subject_gpu, "index", None))
    return entry if entry and entry.processes and not getattr(subject_gpu, "uuid", None) \
        and not getattr(subject_gpu, "bus_id", None) else None


def holders(entry: GpuUsers) -> list[Said]:
    """The other processes on one GPU, each `pid P (name) holding X GiB`, in the reader's language."""
    described = []
    for process in entry.processes:
        used = process.get("used_memory_bytes")
        held = f"{used / 2**30:,.1f} GiB" if isinstance(used, int) else said("sharing.memory_unknown")
        described.append(said("sharing.process", pid=process.get("pid"), name=process["name"], held=held)
                         if process.get("name") else said("sharing.process.unnamed", pid=process.get("pid"), held=held))
    return described


def add_note(finding: Any, msg_id: str, **values: object) -> None:
    """`finding` said again inside `msg_id` (`{judged}` and a note after it); its fix stays, in every language, by
    `<msg_id>.fix` = `{judged_fix}`. A finding outside the catalogue gets the English note appended."""
    if finding.message_id is None:
        finding.message = said(msg_id, judged=finding.message.rstrip(), **values).english()
        return
    judged = said_again(finding)
    if finding.fix is not None and f"{judged.msg_id}.fix" in catalogue("en"):
        values["judged_fix"] = Said(f"{judged.msg_id}.fix", judged.values)
    text = said(msg_id, judged=judged, **values)
    finding.message, finding.message_id, finding.message_values = \
        text.english(), text.msg_id, json_values(text.values)


def blame_sharing(findings: list[Any], users: dict[int, GpuUsers] | None) -> None:
    """Every non-pass low-figure finding on a shared GPU says the other process is the likely cause."""
    for finding in findings:
        if finding.check_id not in LOW_FIGURE_CHECKS or str(getattr(finding.status, "value", finding.status)) == "pass":
            continue
        entry = users_of(finding.subject.gpu, shared(users))
        if entry is not None:
            add_note(finding, "sharing.blamed", holders=holders(entry))


def sharing_findings(verb: str, host: str, users: dict[int, GpuUsers] | None, exclusive: bool,
                     ran: bool = True) -> list[Finding]:
    """`<verb>.gpu_shared`: warn per GPU another process uses (fail with --exclusive); pass when none does;
    skip when NVML could not say."""
    check_id = f"{verb}.gpu_shared"
    if users is None:
        return [Finding(check_id=check_id, status=Status.SKIP, subject=Subject(host=host),
                        **finding_text(said("sharing.not_checked")))]
    findings = []
    for index, entry in sorted(shared(users).items()):
        status = Status.FAIL if exclusive else Status.WARN
        findings.append(Finding(
            check_id=check_id, status=status,
            subject=Subject(host=host, gpu=GpuRef(index=index, bus_id=entry.bus_id, uuid=entry.uuid)),
            **finding_text(said("sharing.shared" if ran else "sharing.shared.refused", index=index,
                                holders=holders(entry))),
            observed=[{"pid": p.get("pid"), "name": p.get("name"), "used_memory_bytes": p.get("used_memory_bytes")}
                      for p in entry.processes],
            expected="no other compute process"))
    if not findings:
        findings.append(Finding(check_id=check_id, status=Status.PASS, subject=Subject(host=host),
                                **finding_text(said("sharing.none", count=len(users))),
                                observed=[], expected="no other compute process"))
    return findings


def exclusive_refusal(verb: str, users: dict[int, GpuUsers] | None, facts: dict[str, Any]) -> Report | None:
    """The report of a `--exclusive` run refused before anything started, because another process computes on a
    selected GPU; None where none does (or NVML cannot say: the run goes on and the report says sharing was not
    checked). `facts`: what the verb records under `facts[verb]`."""
    if not shared(users):
        return None
    host = socket.gethostname()
    report = Report(tool_version=__version__, host=host,
                    findings=sharing_findings(verb, host, users, exclusive=True, ran=False))
    report.facts[verb] = {**facts, "exclusive": True, "started": False}
    return report
