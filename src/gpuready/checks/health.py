"""GPU health: Xid/SXid in the kernel log, infoROM, ECC, retired pages, row remapping, PCIe replays."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from gpuready.checks.gpu import allocation
from gpuready.checks.kernel_judge import XID_CHECK
from gpuready.checks.kernel_judge import (SXID_REF, is_nvlink_xid, judge_sxid, judge_xid, line_severity, worst,
                                          xid_cascade, xid_code)
from gpuready.checks.nvlink import ranges
from gpuready.checks.registry import CheckContext, check, kernel_evidence, kernel_log_missing, per_gpu
from gpuready.facts.types import Facts, GpuFacts, KernelEvent
from gpuready.i18n import Said, said
from gpuready.knowledge import thresholds, xid_entry, xid_evidence_ref, xids_evidence_of
from gpuready.model import Finding

_REMAP_UNREPORTED = said("health.row_remap.unreported")
_REMAP_REF = "NVIDIA GPU memory error management, row remapping: " \
             "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"


@check(XID_CHECK, needs_gpus=False)
def health_xid(context: CheckContext) -> list[Finding]:
    """No Xid errors in the kernel log.

    Every Xid but the NVLink ones (nvlink.errors), and a GPU fallen off the bus without a number (as the Xid xid.toml
    names); the status of a line is the one kernel judge's (checks/kernel_judge.py). This check owns the line: the
    memory checks that read it as evidence take its judgement (`_memory_lines`)."""
    facts = context.facts
    if missing := kernel_log_missing(context, said("health.xid.what")):
        return [missing]
    window = _window(facts)
    gpu_by_bus = {gpu.bus_id: gpu for gpu in context.gpus if gpu.bus_id}
    allocated = allocation(context)
    events = [event for event in facts.kernel_log if event.kind == "fallen_off_bus"
              or (event.kind == "xid" and not is_nvlink_xid(event.code))]
    if not events:
        return [context.passed(said("health.xid.none", window=window))]
    findings = []
    grouped: dict[tuple[str | None, int, bool], list[KernelEvent]] = {}
    for event in events:
        code = xid_code(event)
        grouped.setdefault((event.bus_id or event.uuid, code, event.superseded_by is not None), []).append(event)
    causes = xid_cascade(facts.kernel_log)
    for (bus_id, code, history), group in sorted(grouped.items(), key=lambda item: (
            str(item[0][0]), item[0][1] or 0, item[0][2])):
        gpu = gpu_by_bus.get(bus_id) if bus_id else None
        where = gpu_where(gpu, bus_id) if gpu or not bus_id else bus_id  # bus id, else the UUID
        outside = allocated.outside(bus_id) if bus_id and not bus_id.startswith("GPU-") else False
        judged = [judge_xid(code, detail, history=history, outside=outside)
                  for detail in dict.fromkeys(event.detail for event in group)]
        judgement = judged[-1]
        status = worst(item.status for item in judged)
        last = group[-1]
        uptime = facts.host.uptime_s
        notes = [said("health.xid.note.last", when=_when(last, uptime)),
                 said("health.xid.note.blame", blame=judgement.blame_text)]
        if history:
            notes.append(said("health.xid.note.history", marker=_marker_name(last.superseded_by),
                              when=_when(last.superseded_by, uptime)))
        if outside:
            notes.append(said("health.xid.note.outside", container=allocated.container))
        cause = causes.get((bus_id, code, id(group[0].superseded_by)))
        if cause is not None:
            notes.append(said("health.xid.note.follows", cause=cause[0], why=cause[1]))
        if judgement.blame == "application":
            notes.append(said("xid.reason.application"))
        elif judgement.blame == "unknown":
            notes.append(said("health.xid.note.unknown"))
        entry = xid_entry(code)
        action = said("health.xid.action_outside", action=judgement.action_text) if outside \
            else judgement.action_text
        findings.append(context.finding(
            status,
            said("health.xid.found", name=judgement.title, where=where, count=len(group),
                 meaning=judgement.meaning_text, notes=notes, line=last.line[:200], action=action),
            gpu=gpu,
            observed={"xid": code, "count": len(group), "severity": entry["severity"] if entry else None,
                      "blame": judgement.blame, "history": history, "outside_allocation": outside,
                      "why": "; ".join(judgement.reasons), "follows_from": cause[0].english() if cause else None,
                      "last": _when(last, uptime).english(), "last_age_s": _age_s(last, uptime)},
            expected="no Xid", refs=[judgement.ref], evidence=kernel_evidence(group)))
    return findings


def gpu_where(gpu: GpuFacts | None, bus_id: str | None) -> Said:
    """`GPU3 (0000:5d:00.0)`, `the GPU at 0000:5d:00.0` (a bus id no GPU of the run has) or `an unnamed GPU`."""
    if gpu is not None:
        return said("xid.where.gpu", index=gpu.index, bus_id=bus_id)
    return said("xid.where.bus", bus_id=bus_id) if bus_id else said("xid.where.unnamed")


def _window(facts: Facts) -> Said:
    """What the kernel log covers: since boot, and the last driver load in it."""
    loads = [event for event in facts.kernel_log or [] if event.kind == "driver_load"]
    if loads:
        return said("health.window.loaded", version=loads[-1].detail, when=_when(loads[-1], facts.host.uptime_s))
    return said("health.window")


def _age_s(event: KernelEvent | None, uptime_s: float | None) -> float | None:
    """Seconds since the event: kernel timestamps count from boot, so the age is uptime minus the timestamp."""
    if event is None or event.timestamp_s is None or uptime_s is None or not math.isfinite(uptime_s) \
            or event.timestamp_s > uptime_s:
        return None  # an uptime that is not a number of seconds (NaN, inf) is no uptime
    return round(uptime_s - event.timestamp_s, 1)


def _when(event: KernelEvent | None, uptime_s: float | None) -> Said:
    if event is None:
        return said("health.when.unknown")
    age = _age_s(event, uptime_s)
    if age is not None:
        return said("health.when.ago", age=_duration(age), kernel_s=event.timestamp_s, uptime_s=uptime_s)
    if event.wall_time:
        return said("health.when.at", wall_time=event.wall_time)
    if event.timestamp_s is not None:
        return said("health.when.after_boot", age=_duration(event.timestamp_s))
    return said("health.when.no_stamp")


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _marker_name(mark: KernelEvent | None) -> Said:
    if mark is None:
        return said("health.marker.reload")
    if mark.kind == "driver_load":
        return said("health.marker.load", version=mark.detail)
    return said("health.marker.reset", detail=mark.detail)  # the log's words: `GPU reset executed`


_Evidence = list[tuple[KernelEvent, KernelEvent | None]]
"""(Xid event, the later driver load or GPU reset that made it history, or None), in log order."""


def _xid_evidence(context: CheckContext, codes: tuple[int, ...]) -> dict[str, _Evidence]:
    """Bus id → (Xid event, the later driver load/GPU reset or None) for the given codes, in log order."""
    found: dict[str, _Evidence] = {}
    for event in context.facts.kernel_log or []:
        if event.kind == "xid" and event.code in codes and event.bus_id:
            found.setdefault(event.bus_id, []).append((event, event.superseded_by))
    return found


def _ecc_counted(gpu: GpuFacts) -> bool:
    return gpu.ecc_uncorrected_volatile is not None or gpu.ecc_uncorrected_aggregate is not None


# Memory condition (xid.toml `evidence_of`) → whether a GPU's own report of it was read (then its Xid lines are not
# the evidence).
_COUNTED = {"uncorrectable_memory_error": _ecc_counted,
            "row_remap_pending": lambda gpu: gpu.remap_pending is not None,
            "row_remap_failure": lambda gpu: gpu.remap_failure is not None}


def _memory_lines(context: CheckContext) -> dict[str, dict[str, _Evidence]]:
    """Condition → bus id → the Xid lines that health.ecc_uncorrected or health.row_remap_* read as the evidence of
    that condition, for the GPUs whose own counters were not read (none for the ECC check where CUDA's own
    uncorrectable-ECC error decides it)."""
    cuda_decides = any(event.kind == "cuda_ecc" for event in context.facts.kernel_log or [])
    lines: dict[str, dict[str, _Evidence]] = {}
    for condition, counted in _COUNTED.items():
        logged = {} if condition == "uncorrectable_memory_error" and cuda_decides \
            else _xid_evidence(context, xids_evidence_of(condition))
        lines[condition] = {gpu.bus_id: logged[gpu.bus_id] for gpu in context.gpus
                            if gpu.bus_id in logged and not counted(gpu)}
    return lines


def _summarize(evidence: _Evidence, uptime_s: float | None) -> Said:
    counts = Counter(event.code for event, _mark in evidence)
    listed = ", ".join(f"Xid {code} ×{count}" for code, count in sorted(counts.items()))
    return said("health.xid_summary", listed=listed, when=_when(evidence[-1][0], uptime_s))


@check("health.sxid", needs=("kernel_log",), needs_gpus=False)
def health_sxid(context: CheckContext) -> list[Finding]:
    """No NVSwitch SXid errors.

    One finding per NVSwitch; each line judged by the one kernel judge (fatal as the line says)."""
    per_switch: dict[tuple[str | None, str | None], list[KernelEvent]] = {}
    for event in context.facts.kernel_log:
        if event.kind == "sxid":
            switch = _SWITCH.search(event.line)
            per_switch.setdefault((int(switch.group(1)) if switch else None, event.bus_id), []).append(event)
    if not per_switch:
        return [context.passed(said("health.sxid.none"))]
    return [_switch_errors(context, switch, bus_id, events)
            for (switch, bus_id), events in sorted(per_switch.items(), key=lambda item: (item[0][0] is None,
                                                                                           item[0][0] or 0))]


_SWITCH = re.compile(r"nvidia-nvswitch(\d{1,3})")


def _switch_errors(context: CheckContext, switch: int | None, bus_id: str | None,
                   events: list[KernelEvent]) -> Finding:
    where = said("health.sxid.where", switch=switch, bus_id=bus_id) if switch is not None \
        else said("health.sxid.where_bus", bus_id=bus_id)
    history = all(event.superseded_by is not None for event in events)
    by_code: dict[int | None, list[KernelEvent]] = {}
    for event in events:
        by_code.setdefault(event.code, []).append(event)
    parts, statuses, actions = [], [], []
    observed: dict[str, Any] = {"switch": switch, "bus_id": bus_id, "sxids": {}, "history": history}
    for code, group in sorted(by_code.items(), key=lambda item: item[0] or 0):
        judged = [judge_sxid(code, detail, history=history) for detail in dict.fromkeys(e.detail for e in group)]
        status = worst(item.status for item in judged)
        statuses.append(status)
        words = {line_severity(event.detail) for event in group}
        state = "fatal" if "fatal" in words else "non_fatal" if "non-fatal" in words else "unstated"
        links = {link for event in group for link in event.links}
        parts.append(said("health.sxid.part_links" if links else "health.sxid.part", code=code, count=len(group),
                          state=said(f"health.sxid.state.{state}"), **({"links": ranges(links)} if links else {})))
        observed["sxids"][str(code)] = {"count": len(group), "fatal": "fatal" in words, "status": status.value,
                                        "links": sorted(links)}
        actions.append(next(item.action_text for item in judged if item.status == status))
    status = worst(statuses)
    values = {"where": where, "parts": parts, "line": events[-1].line[:200], "action": actions[statuses.index(status)]}
    message = said("health.sxid.found_history", **values, marker=_marker_name(events[-1].superseded_by)) \
        if history else said("health.sxid.found", **values)
    return context.finding(status, message, observed=observed, expected="no SXid", refs=[SXID_REF],
                           evidence=kernel_evidence(events))


@check("health.inforom")
def health_inforom(context: CheckContext) -> list[Finding]:
    """infoROM valid."""
    log_corrupt = any(event.kind == "inforom" for event in context.facts.kernel_log or [])

    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.inforom_valid is False:
            return context.fail(said("health.inforom.corrupted", index=gpu.index), gpu=gpu, observed="corrupted",
                                expected="valid", refs=["NVML nvmlDeviceValidateInforom"])
        return None
    if all(gpu.inforom_valid is None for gpu in context.gpus) and not log_corrupt:
        return [context.skip(said("health.inforom.not_reported"))]
    findings = per_gpu(context, judge, said("health.inforom.all_good"),
                       reported=lambda gpu: gpu.inforom_valid is not None or log_corrupt,
                       unreported=said("health.inforom.unreported"))
    if log_corrupt and all(finding.status.value == "pass" for finding in findings):
        return [context.fail(said("health.inforom.log_corrupted"), refs=["NVML nvmlDeviceValidateInforom"])]
    return findings


def _ecc_of_unnamed(context: CheckContext) -> list[Finding]:
    """A `-q` "ECC Errors" section pasted without its GPU's header line: uncorrectable counts on a GPU of this host."""
    found = []
    for gpu in context.facts.unnamed_gpus:
        volatile, aggregate = gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate
        if volatile:
            found.append(context.fail(said("health.ecc_uncorrected.volatile_unnamed", count=volatile),
                                      observed={"volatile": volatile, "aggregate": aggregate}, expected=0,
                                      refs=["NVML ECC", "nvidia-smi(1) ECC Errors"]))
        elif aggregate:
            found.append(context.warn(said("health.ecc_uncorrected.aggregate_unnamed", count=aggregate),
                                      observed={"aggregate": aggregate}, expected=0))
    return found


@check("health.ecc_uncorrected", needs_gpus=False)
def health_ecc_uncorrected(context: CheckContext) -> list[Finding]:
    """No uncorrectable ECC errors."""
    cuda = [event for event in context.facts.kernel_log or [] if event.kind == "cuda_ecc"]
    if cuda:  # CUDA failed a job on it: the strongest evidence there is, whatever the counters said when read
        return [context.fail(said("health.ecc_uncorrected.cuda", count=len(cuda)), observed=cuda[-1].line[:200],
                             expected="no uncorrectable ECC error", refs=[xid_evidence_ref()],
                             evidence=kernel_evidence(cuda))]
    if not context.gpus:
        return _ecc_of_unnamed(context) or [context.skip(said("registry.no_gpu"))]
    logged = _memory_lines(context)["uncorrectable_memory_error"]
    uptime = context.facts.host.uptime_s

    def judge(gpu: GpuFacts) -> Finding | None:
        volatile, aggregate = gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate
        corrected = gpu.ecc_corrected_volatile
        if gpu.bus_id in logged:
            return _ecc_from_log(context, gpu, logged[gpu.bus_id], uptime)
        if volatile:
            codes = " / ".join(str(code) for code in xids_evidence_of("uncorrectable_memory_error"))
            return context.fail(said("health.ecc_uncorrected.volatile", index=gpu.index, count=volatile), gpu=gpu,
                                observed={"volatile": volatile, "aggregate": aggregate}, expected=0,
                                refs=[f"Xid {codes}", "NVML ECC"])
        if aggregate:
            return context.warn(said("health.ecc_uncorrected.aggregate", index=gpu.index, count=aggregate), gpu=gpu,
                                observed={"aggregate": aggregate}, expected=0)
        if corrected:
            return context.passed(said("health.ecc_uncorrected.corrected", index=gpu.index, count=corrected),
                                  gpu=gpu, observed={"corrected_volatile": corrected})
        return None
    return per_gpu(context, judge, said("health.ecc_uncorrected.all_good"),
                   reported=lambda gpu: _ecc_counted(gpu) or gpu.bus_id in logged,
                   unreported=said("health.ecc_uncorrected.unreported"))


def _ecc_from_log(context: CheckContext, gpu: GpuFacts, evidence: _Evidence, uptime: float | None) -> Finding:
    """The memory condition the ECC Xid lines show. The lines are health.xid's: quoted there, and judged here by the
    same kernel judge (history, another container's GPU), so both findings give them one status."""
    outside = allocation(context).outside(gpu.bus_id)
    status = worst(judge_xid(event.code, event.detail, history=mark is not None, outside=outside).status
                   for event, mark in evidence)
    current = [(event, mark) for event, mark in evidence if mark is None]
    if current:
        summary = _summarize(current, uptime)
        return context.finding(status, said("health.ecc_uncorrected.log_current", index=gpu.index, summary=summary),
                               gpu=gpu, observed={"kernel_log": summary.english(), "counters": None},
                               expected="no uncorrectable error", refs=[xid_evidence_ref()])
    mark, summary = evidence[-1][1], _summarize(evidence, uptime)
    return context.finding(status, said("health.ecc_uncorrected.log_history", index=gpu.index, summary=summary,
                                        marker=_marker_name(mark), when=_when(mark, uptime)), gpu=gpu,
                           observed={"kernel_log": summary.english(), "history": True, "counters": None},
                           expected="no uncorrectable error", refs=[xid_evidence_ref()])


@check("health.retired_pages")
def health_retired_pages(context: CheckContext) -> list[Finding]:
    """Retired memory pages within limits."""
    limit = thresholds("retired_pages")

    def judge(gpu: GpuFacts) -> Finding | None:
        retired = (gpu.retired_pages_sbe or 0) + (gpu.retired_pages_dbe or 0)
        if gpu.retired_pages_pending:
            return context.warn(said("health.retired_pages.pending", index=gpu.index), gpu=gpu,
                                observed={"retired": retired, "pending": True}, expected="no pending retirement",
                                refs=[limit["source"]])
        if retired >= limit["fail_at"]:
            return context.fail(said("health.retired_pages.at_limit", index=gpu.index, retired=retired,
                                     limit=limit["fail_at"]),
                                gpu=gpu, observed=retired, expected=f"< {limit['fail_at']}", refs=[limit["source"]])
        if retired >= limit["warn_at"]:
            return context.warn(said("health.retired_pages.soft_limit", index=gpu.index, retired=retired,
                                     limit=limit["warn_at"]),
                                gpu=gpu, observed=retired, expected=f"< {limit['warn_at']}", refs=[limit["source"]])
        return None
    retires = [gpu for gpu in context.gpus if gpu.retired_pages_sbe is not None or gpu.retired_pages_dbe is not None
               or gpu.retired_pages_pending is not None]
    if not retires and any(gpu.remap_pending is not None for gpu in context.gpus):
        return [context.passed(said("health.retired_pages.not_used"))]
    return per_gpu(context, judge, said("health.retired_pages.all_good"),
                   reported=lambda gpu: gpu.retired_pages_sbe is not None or gpu.retired_pages_dbe is not None
                   or gpu.retired_pages_pending is not None,
                   unreported=said("health.retired_pages.unreported"))


def _unnamed_remap(context: CheckContext, flagged: str, msg_id: str, observed: str) -> list[Finding] | None:
    """A `-q` paste that begins inside a GPU's section (its header line cut) still shows a fact about a GPU: judged
    without its index. None where GPUs are listed (judged per GPU) or nothing is flagged (the registry's skip)."""
    if context.gpus:
        return None
    found = [context.fail(said(msg_id), expected="No", refs=[_REMAP_REF],
                          observed={"state": observed, "uncorrectable_rows": gpu.remapped_rows_uncorrectable})
             for gpu in context.facts.unnamed_gpus if getattr(gpu, flagged)]
    return found or [context.skip(said("registry.no_gpu"))]


@check("health.row_remap_pending", needs_gpus=False)
def health_row_remap_pending(context: CheckContext) -> list[Finding]:
    """No row remap waiting for a reset."""
    if (unnamed := _unnamed_remap(context, "remap_pending", "health.row_remap_pending.pending_unnamed",
                                  "Pending: Yes")) is not None:
        return unnamed
    logged = _memory_lines(context)["row_remap_pending"]
    uptime = context.facts.host.uptime_s

    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.remap_pending:
            return context.fail(said("health.row_remap_pending.pending", index=gpu.index), gpu=gpu,
                                observed="Pending: Yes", expected="No", refs=[_REMAP_REF])
        if gpu.bus_id in logged:
            evidence = logged[gpu.bus_id]
            current = [(event, mark) for event, mark in evidence if mark is None]
            if current:
                summary = _summarize(current, uptime)
                return context.fail(said("health.row_remap_pending.log_pending", index=gpu.index, summary=summary),
                                    gpu=gpu, observed={"kernel_log": summary.english(), "pending": None},
                                    expected="No", refs=[_REMAP_REF, xid_evidence_ref()])
            mark, summary = evidence[-1][1], _summarize(evidence, uptime)
            return context.passed(said("health.row_remap_pending.log_applied", index=gpu.index, summary=summary,
                                       marker=_marker_name(mark), when=_when(mark, uptime)), gpu=gpu,
                                  observed={"kernel_log": summary.english(), "history": True}, refs=[_REMAP_REF])
        return None
    return per_gpu(context, judge, said("health.row_remap_pending.all_good"),
                   reported=lambda gpu: gpu.remap_pending is not None or gpu.bus_id in logged,
                   unreported=_REMAP_UNREPORTED)


@check("health.row_remap_failure", needs_gpus=False)
def health_row_remap_failure(context: CheckContext) -> list[Finding]:
    """No failed row remap."""
    if (unnamed := _unnamed_remap(context, "remap_failure", "health.row_remap_failure.failed_unnamed",
                                  "Remapping Failure Occurred: Yes")) is not None:
        return unnamed
    logged = _memory_lines(context)["row_remap_failure"]
    uptime = context.facts.host.uptime_s

    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.remap_failure:
            return context.fail(said("health.row_remap_failure.failed", index=gpu.index), gpu=gpu,
                                observed="Remapping Failure Occurred: Yes", expected="No", refs=[_REMAP_REF])
        if gpu.bus_id in logged:
            summary = _summarize(logged[gpu.bus_id], uptime)
            codes = ", ".join(f"Xid {code}" for code in xids_evidence_of("row_remap_failure"))
            return context.fail(said("health.row_remap_failure.log_failed", index=gpu.index, summary=summary),
                                gpu=gpu, observed={"kernel_log": summary.english(), "failure": None},
                                expected=f"no {codes}", refs=[_REMAP_REF, xid_evidence_ref()])
        if gpu.remapped_rows_uncorrectable:
            return context.passed(said("health.row_remap_failure.remapped", index=gpu.index,
                                       rows=gpu.remapped_rows_uncorrectable), gpu=gpu,
                                  observed={"uncorrectable_rows": gpu.remapped_rows_uncorrectable})
        return None
    return per_gpu(context, judge, said("health.row_remap_failure.all_good"),
                   reported=lambda gpu: gpu.remap_failure is not None or gpu.bus_id in logged,
                   unreported=_REMAP_UNREPORTED)


@check("health.pcie_replay", needs=("host.uptime_s",))
def health_pcie_replay(context: CheckContext) -> list[Finding]:
    """PCIe replay rate."""
    limit = thresholds("pcie_replay")
    if not math.isfinite(context.facts.host.uptime_s):
        return [context.skip(said("health.pcie_replay.odd_uptime"))]
    minutes = max(context.facts.host.uptime_s / 60, 1.0)

    def judge(gpu: GpuFacts) -> Finding | None:
        replays = gpu.pcie_replay_count
        if not replays:
            return None
        rate = replays / minutes
        if rate > limit["warn_above_per_minute"]:
            return context.warn(said("health.pcie_replay.high", index=gpu.index, replays=replays, rate=rate),
                                gpu=gpu, observed=f"{rate:.1f}/min",
                                expected=f"<= {limit['warn_above_per_minute']}/min", refs=[limit["source"]])
        return context.passed(said("health.pcie_replay.low", index=gpu.index, replays=replays, rate=rate,
                                   limit=limit["warn_above_per_minute"]), gpu=gpu, observed=replays)
    return per_gpu(context, judge, said("health.pcie_replay.all_good"),
                   reported=lambda gpu: gpu.pcie_replay_count is not None,
                   unreported=said("health.pcie_replay.unreported"))
