"""The CUDA error a rank (or its NCCL watchdog) stopped on, judged by what the error means (knowledge/cuda_errors.toml).

facts/torch_errors.py reads the error from any wrapper (`CUDA error: …` inside ProcessGroupNCCL's `watchdog thread
terminated with exception`, NCCL's `Cuda failure N '…'`, nccl-tests, Triton); here each class of the table becomes the
finding of the check that owns that fault: `gpu_lost` (cudaErrorUnknown) gpu.lost's, `nvlink` (cudaErrorNvlinkUncorrectable)
nvlink.errors', `application` and `busy` torch.cuda_error's (checks/torch_logs.py). `ecc` stays health.ecc_uncorrected's,
which reads the same line as the kernel log does. This module owns no check id: each judge writes the id of the check
that calls it (`context.check_id`). Where the kernel log shows Xids, those are the root cause and these findings their
consequence.
"""

from __future__ import annotations

import functools
from typing import Any

from gpuready.checks.kernel_judge import XID_CHECK
from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext
from gpuready.facts.log_facts import Line
from gpuready.i18n import Said, finding_text, said
from gpuready.knowledge import load_table
from gpuready.model import Finding, Status, Subject

Stopped = tuple[Any, list[Line], dict[str, Any]]
"""(the error (facts.torch_errors.CudaError, through TorchLogFacts.cuda_errors), its lines, its row of knowledge/cuda_errors.toml)."""


@functools.cache
def _rows() -> dict[int, dict[str, Any]]:
    return {row["code"]: row for row in load_table("cuda_errors")["error"]}


def _refs() -> list[str]:
    judge = load_table("cuda_errors")["judge"]
    return [judge["source"], judge["watchdog_source"]]


def stopped_on(context: CheckContext, classes: tuple[str, ...]) -> list[Stopped]:
    """The CUDA errors of these classes the torch reader saw, in the order they came."""
    torch = context.facts.logs.torch if context.facts.logs is not None else None
    if torch is None:
        return []
    found = [(error, lines, _rows()[error.code]) for error, lines, _order in sorted(torch.cuda_errors,
                                                                                    key=lambda item: item[2])]
    return [item for item in found if item[2]["class"] in classes]


def _current_xids(context: CheckContext) -> list[int]:
    return sorted({event.code for event in context.facts.kernel_log or []
                   if event.kind == "xid" and event.superseded_by is None and event.code is not None})


def _who(errors: list[Stopped]) -> Said:
    """`rank 3`, `ranks 0, 5`, `rank 3 on 10.0.0.2`, or `one process` where no line names a rank."""
    ranks = sorted({error.rank for error, _, _ in errors if error.rank is not None})
    hosts = sorted({error.host for error, _, _ in errors if error.host})
    if not ranks:
        return said("torch.cuda_error.who.process")
    return said("torch.cuda_error.who.rank" + ("s" if len(ranks) > 1 else "") + ("_on_host" if hosts else ""),
                ranks=", ".join(map(str, ranks)), hosts=", ".join(hosts))


def _where(errors: list[Stopped]) -> Said:
    return said("torch.cuda_error.where." + ("watchdog" if any(error.watchdog for error, _, _ in errors)
                                              else "process"))


def _group(errors: list[Stopped]) -> list[list[Stopped]]:
    """The errors by code, in the order each code first came."""
    groups: dict[int, list[Stopped]] = {}
    for item in errors:
        groups.setdefault(item[0].code, []).append(item)
    return list(groups.values())


def _finding(context: CheckContext, status: Status, group: list[Stopped], kind: str) -> Finding:
    error, _, row = group[0]
    xids = _current_xids(context)
    hardware = [code for code in xids if code in row.get("xids_hardware", ())]
    application = [code for code in xids if code in row.get("xids_application", ())]
    ranks = sorted({item[0].rank for item in group if item[0].rank is not None})
    text = said(f"torch.cuda_error.{kind}", who=_who(group), where=_where(group), error=error.message,
                name=error.name, code=error.code,
                xids=", ".join(map(str, row.get("xids_hardware", ()))),
                app_xids=", ".join(map(str, row.get("xids_application", ()))))
    return Finding(
        check_id=context.check_id, status=status,
        subject=Subject(host=group[0][0].host or context.host, rank=ranks[0] if len(ranks) == 1 else None),
        **finding_text(text),
        observed={"cuda_error": error.name, "code": error.code, "message": error.message, "ranks": ranks,
                  "in_watchdog": any(item[0].watchdog for item in group), "class": row["class"],
                  "kernel_xids_hardware": hardware, "kernel_xids_application": application},
        expected="no CUDA error in a rank", refs=[*_refs(), row["source"]],
        consequence_of=XID_CHECK if xids else None,
        evidence=quote([line for item in group for line in item[1]]))


def lost_gpu_in_torch_logs(context: CheckContext) -> list[Finding]:
    """gpu.lost's finding from a rank that stopped on cudaErrorUnknown: after a GPU fault (fallen off the bus, a GSP
    timeout, an uncontained memory error) the runtime can name nothing else; the kernel log's Xids say which."""
    return [_finding(context, Status.FAIL, group, "gpu_lost")
            for group in _group(stopped_on(context, ("gpu_lost",)))]


def nvlink_fault_in_torch_logs(context: CheckContext) -> list[Finding]:
    """nvlink.errors' finding from a rank that stopped on cudaErrorNvlinkUncorrectable: an NVLink of its GPU failed
    (the kernel log shows it as Xid 74 on that GPU)."""
    return [_finding(context, Status.FAIL, group, "nvlink")
            for group in _group(stopped_on(context, ("nvlink",)))]


def application_cuda_errors(context: CheckContext) -> list[Finding]:
    """torch.cuda_error's findings: a kernel of the job (or of a library it calls) faulted, or the GPU refused a
    context. A warning: the GPU is suspect only where the kernel log shows a hardware Xid with it."""
    return [_finding(context, Status.WARN, group, group[0][2]["class"])
            for group in _group(stopped_on(context, ("application", "busy")))]
