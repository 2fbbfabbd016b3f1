"""GPU health: Xid/SXid in the kernel log, infoROM, ECC, retired pages, row remapping, PCIe replays."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from gpuready.checks.gpu import allocation
from gpuready.checks.kernel_judge import (SXID_REF, XidGroup, is_nvlink_xid, judge_sxid, judge_xid, line_severity,
                                          root_causes, worst)
from gpuready.checks.nvlink import ranges
from gpuready.checks.registry import CheckContext, check, kernel_evidence, kernel_log_missing, per_gpu
from gpuready.facts.types import Facts, GpuFacts, KernelEvent
from gpuready.i18n import said
from gpuready.knowledge import thresholds, xid_entry
from gpuready.model import Finding

_REMAP_UNREPORTED = said("health.row_remap.unreported")
_REMAP_REF = "NVIDIA GPU memory error management, row remapping: " \
             "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"


@check("health.xid", "No Xid errors in the kernel log", needs_gpus=False)
def health_xid(context: CheckContext) -> list[Finding]:
    """Every Xid but the NVLink ones (nvlink.errors), and a GPU fallen off the bus without a number (as Xid 79); the
    status of a line is the one kernel judge's (checks/kernel_judge.py)."""
    facts = context.facts
    if missing := kernel_log_missing(context, said("health.xid.what")):
        return [missing]
    window = _window(facts)
    gpu_by_bus = {gpu.bus_id: gpu for gpu in context.gpus if gpu.bus_id}
    allocated = allocation(context)
    events = [event for event in facts.kernel_log if event.kind == "fallen_off_bus"
              or (event.kind == "xid" and not is_nvlink_xid(event.code))]
    if not events:
        return [context.passed(f"No Xid or fallen-off-the-bus messages in the kernel log ({window}); NVLink Xids are "
                               "nvlink.errors'.")]
    findings = []
    grouped: dict[tuple[str | None, int, bool], list[KernelEvent]] = {}
    for event in events:
        code = 79 if event.kind == "fallen_off_bus" else event.code
        grouped.setdefault((event.bus_id or event.uuid, code, event.superseded_by is not None), []).append(event)
    causes = _cascade(facts.kernel_log)
    for (bus_id, code, history), group in sorted(grouped.items(), key=lambda item: (
            str(item[0][0]), item[0][1] or 0, item[0][2])):
        gpu = gpu_by_bus.get(bus_id) if bus_id else None
        where = f"GPU{gpu.index} ({bus_id})" if gpu else (bus_id or "an unnamed GPU")  # bus id, else the UUID
        outside = allocated.outside(bus_id) if bus_id and not bus_id.startswith("GPU-") else False
        judged = [judge_xid(code, detail, history=history, outside=outside)
                  for detail in dict.fromkeys(event.detail for event in group)]
        judgement = judged[-1]
        status = worst(item.status for item in judged)
        last = group[-1]
        notes = [f"last {_when(last, facts.host.uptime_s)}", f"blame: {judgement.blame}"]
        if history:
            notes.append(f"before the {_marker_name(last.superseded_by)} "
                         f"{_when(last.superseded_by, facts.host.uptime_s)}, so history: the GPU state since then is "
                         "what counts (ECC and row-remap counters, a new Xid)")
        if outside:
            notes.append(f"the node has a faulty GPU outside this {allocated.container} container (not allocated "
                         "to it): its jobs are not affected, but the node needs attention")
        cause = causes.get((bus_id, code, id(group[0].superseded_by)))
        if cause is not None:
            notes.append(f"it follows from {cause[0]}: {cause[1]}")
        if judgement.blame == "application":
            notes.append("the catalog blames the application: check the application first")
        elif judgement.blame == "unknown":
            notes.append("not in gpuready's catalog: look it up")
        entry = xid_entry(code)
        findings.append(context.finding(
            status,
            f"{judgement.name} on {where}, {len(group)}×: {judgement.meaning.rstrip('.')} ({'; '.join(notes)}). "
            f"Last: {last.line[:200]}",
            gpu=gpu,
            observed={"xid": code, "count": len(group), "severity": entry["severity"] if entry else None,
                      "blame": judgement.blame, "history": history, "outside_allocation": outside,
                      "why": "; ".join(judgement.reasons), "follows_from": cause[0] if cause else None,
                      "last": _when(last, facts.host.uptime_s),
                      "last_age_s": _age_s(last, facts.host.uptime_s)},
            expected="no Xid",
            fix=judgement.action + (" Tell the node's operator: the GPU is not in this container." if outside else ""),
            refs=[judgement.ref], evidence=kernel_evidence(group)))
    return findings


def _cascade(events: list[KernelEvent]) -> dict[tuple[str | None, int, int], tuple[str, str]]:
    """(bus id, code, id of the load/reset that ends its period) → (root cause, why), for Xids that follow from an
    earlier error on the same GPU or from an NVSwitch SXid (kernel_judge.CASCADES)."""
    groups: dict[tuple[str | None, int, int], XidGroup] = {}
    first_sxid = None
    for position, event in enumerate(events):
        if event.kind == "sxid" and first_sxid is None:
            first_sxid = (position, event.clock)
        if event.kind in ("xid", "fallen_off_bus"):
            code = 79 if event.kind == "fallen_off_bus" else event.code
            key = (event.bus_id, code, id(event.superseded_by))
            if key not in groups:
                groups[key] = XidGroup(bus_id=event.bus_id, code=code, epoch=key[2], first=position,
                                       first_clock=event.clock)
    roots = root_causes(list(groups.values()), first_sxid)
    return {key: roots[group] for key, group in groups.items() if group in roots}


def _window(facts: Facts) -> str:
    """What the kernel log covers: since boot, and the last driver load in it."""
    loads = [event for event in facts.kernel_log or [] if event.kind == "driver_load"]
    text = "the kernel log since boot"
    if loads:
        text += f"; NVIDIA driver {loads[-1].detail} loaded {_when(loads[-1], facts.host.uptime_s)}"
    return text


def _age_s(event: KernelEvent | None, uptime_s: float | None) -> float | None:
    """Seconds since the event: kernel timestamps count from boot, so the age is uptime minus the timestamp."""
    if event is None or event.timestamp_s is None or uptime_s is None or event.timestamp_s > uptime_s:
        return None
    return round(uptime_s - event.timestamp_s, 1)


def _when(event: KernelEvent | None, uptime_s: float | None) -> str:
    if event is None:
        return "at an unknown time"
    age = _age_s(event, uptime_s)
    if age is not None:
        return f"{_duration(age)} ago (kernel time {event.timestamp_s:,.0f} s, uptime {uptime_s:,.0f} s)"
    if event.wall_time:
        return f"at {event.wall_time}"
    if event.timestamp_s is not None:
        return f"{_duration(event.timestamp_s)} after boot (uptime not in this run)"
    return "at an unknown time (the log line has no time stamp)"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _marker_name(mark: KernelEvent | None) -> str:
    if mark is None:
        return "driver reload"
    if mark.kind == "driver_load":
        return f"driver (re)load (NVIDIA {mark.detail})"
    return f"reset of this GPU ({mark.detail})"


_Evidence = list[tuple[KernelEvent, KernelEvent | None]]
"""(Xid event, the later driver load or GPU reset that made it history, or None), in log order."""


def _xid_evidence(context: CheckContext, codes: tuple[int, ...]) -> dict[str, _Evidence]:
    """Bus id → (Xid event, the later driver load/GPU reset or None) for the given codes, in log order."""
    found: dict[str, _Evidence] = {}
    for event in context.facts.kernel_log or []:
        if event.kind == "xid" and event.code in codes and event.bus_id:
            found.setdefault(event.bus_id, []).append((event, event.superseded_by))
    return found


def _summarize(evidence: _Evidence, uptime_s: float | None) -> str:
    counts = Counter(event.code for event, _mark in evidence)
    listed = ", ".join(f"Xid {code} ×{count}" for code, count in sorted(counts.items()))
    return f"{listed}, last {_when(evidence[-1][0], uptime_s)}"


@check("health.sxid", "No NVSwitch SXid errors", needs=("kernel_log",), needs_gpus=False)
def health_sxid(context: CheckContext) -> list[Finding]:
    """One finding per NVSwitch; each line judged by the one kernel judge (fatal as the line says)."""
    per_switch: dict[tuple[str | None, str | None], list[KernelEvent]] = {}
    for event in context.facts.kernel_log:
        if event.kind == "sxid":
            switch = _SWITCH.search(event.line)
            per_switch.setdefault((int(switch.group(1)) if switch else None, event.bus_id), []).append(event)
    if not per_switch:
        return [context.passed("No NVSwitch SXid messages in the kernel log.")]
    return [_switch_errors(context, switch, bus_id, events)
            for (switch, bus_id), events in sorted(per_switch.items(), key=lambda item: (item[0][0] is None,
                                                                                           item[0][0] or 0))]


_SWITCH = re.compile(r"nvidia-nvswitch(\d{1,3})")


def _switch_errors(context: CheckContext, switch: int | None, bus_id: str | None,
                   events: list[KernelEvent]) -> Finding:
    where = f"NVSwitch {switch} ({bus_id})" if switch is not None else f"the NVSwitch at {bus_id}"
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
        state = "fatal" if "fatal" in words else "non-fatal" if "non-fatal" in words else "severity not stated"
        links = {link for event in group for link in event.links}
        parts.append(f"SXid {code}, {len(group)} line(s) ({state})" + (f" on link(s) {ranges(links)}" if links else ""))
        observed["sxids"][str(code)] = {"count": len(group), "fatal": "fatal" in words, "status": status.value,
                                        "links": sorted(links)}
        actions.append(next(item.action for item in judged if item.status == status))
    status = worst(statuses)
    message = f"NVSwitch errors on {where}: {'; '.join(parts)}. Last: {events[-1].line[:200]}"
    if history:
        message += f" All before the {_marker_name(events[-1].superseded_by)}: history."
    return context.finding(status, message, observed=observed, expected="no SXid",
                           fix=actions[statuses.index(status)], refs=[SXID_REF], evidence=kernel_evidence(events))


@check("health.inforom", "infoROM valid")
def health_inforom(context: CheckContext) -> list[Finding]:
    log_corrupt = any(event.kind == "inforom" for event in context.facts.kernel_log or [])

    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.inforom_valid is False:
            return context.fail(f"GPU{gpu.index}'s infoROM is corrupted: ECC and error history cannot be trusted "
                                "or recorded.", gpu=gpu, observed="corrupted", expected="valid",
                                fix="Contact the vendor for an infoROM reflash or RMA.",
                                refs=["NVML nvmlDeviceValidateInforom"])
        return None
    if all(gpu.inforom_valid is None for gpu in context.gpus) and not log_corrupt:
        return [context.skip("infoROM validity not reported (nvml.json or plain nvidia-smi warnings hold it).")]
    findings = per_gpu(context, judge, said("health.inforom.all_good"),
                       reported=lambda gpu: gpu.inforom_valid is not None or log_corrupt,
                       unreported=said("health.inforom.unreported"))
    if log_corrupt and all(finding.status.value == "pass" for finding in findings):
        return [context.fail("The kernel log reports a corrupted infoROM.", fix="Run `nvidia-smi` to see which GPU; "
                             "contact the vendor.", refs=["NVML nvmlDeviceValidateInforom"])]
    return findings


# Xids that are evidence of an uncorrectable memory error where the ECC counters are not in the run.
_ECC_XIDS = (48, 94, 95)
_KERNEL_LOG_REF = "NVIDIA Xid catalog (48 DBE, 94/95 contained/uncontained ECC, 63 row remap, 64 remap failure), " \
                  "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


@check("health.ecc_uncorrected", "No uncorrectable ECC errors", needs_gpus=False)
def health_ecc_uncorrected(context: CheckContext) -> list[Finding]:
    cuda = [event for event in context.facts.kernel_log or [] if event.kind == "cuda_ecc"]
    if cuda:  # CUDA failed a job on it: the strongest evidence there is, whatever the counters said when read
        return [context.fail(
            f"CUDA stopped a job with 'uncorrectable ECC error encountered' ({len(cuda)} line(s)): a GPU's memory "
            "returned data ECC could not correct; results were lost and the GPU needs a reset (row remap) or "
            "replacement.", observed=cuda[-1].line[:200], expected="no uncorrectable ECC error",
            fix="Find the GPU: `nvidia-smi -q -d ECC,ROW_REMAPPER` (volatile uncorrectable counts, remap pending) and "
                "`dmesg | grep -i xid` (48/63/94/95); drain it, reset it or reboot, run `dcgmi diag -r 3`; RMA if "
                "errors return.", refs=[_KERNEL_LOG_REF], evidence=kernel_evidence(cuda))]
    if not context.gpus:
        return [context.skip("No NVIDIA GPU is visible, so there is nothing to judge (see gpu.present).")]
    logged = _xid_evidence(context, _ECC_XIDS)
    uptime = context.facts.host.uptime_s

    def counted(gpu: GpuFacts) -> bool:
        return gpu.ecc_uncorrected_volatile is not None or gpu.ecc_uncorrected_aggregate is not None

    def judge(gpu: GpuFacts) -> Finding | None:
        volatile, aggregate = gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate
        corrected = gpu.ecc_corrected_volatile
        if not counted(gpu) and gpu.bus_id in logged:
            return _ecc_from_log(context, gpu, logged[gpu.bus_id], uptime)
        if volatile:
            return context.fail(f"GPU{gpu.index} has {volatile} uncorrectable ECC error(s) since the last driver "
                                "load: results may be wrong and jobs on it die.", gpu=gpu,
                                observed={"volatile": volatile, "aggregate": aggregate}, expected=0,
                                fix="Drain the GPU, reset it or reboot (a row remap/page retirement applies then); "
                                    "run `dcgmi diag -r 3`; RMA if errors return.",
                                refs=["Xid 48 / 94 / 95", "NVML ECC"])
        if aggregate:
            return context.warn(f"GPU{gpu.index} has {aggregate} uncorrectable ECC error(s) in its lifetime (none "
                                "since the last driver load).", gpu=gpu, observed={"aggregate": aggregate},
                                expected=0, fix="Watch it: check remapped rows/retired pages; RMA if the count grows.")
        if corrected:
            return context.passed(f"GPU{gpu.index}: {corrected} corrected ECC error(s) since boot, no uncorrectable "
                                  "ones (corrected errors are handled by ECC; not a fault).", gpu=gpu,
                                  observed={"corrected_volatile": corrected})
        return None
    return per_gpu(context, judge, said("health.ecc_uncorrected.all_good"),
                   reported=lambda gpu: counted(gpu) or gpu.bus_id in logged,
                   unreported=said("health.ecc_uncorrected.unreported"))


def _ecc_from_log(context: CheckContext, gpu: GpuFacts, evidence: _Evidence, uptime: float | None) -> Finding:
    current = [(event, mark) for event, mark in evidence if mark is None]
    fix = (f"Read the counters: `nvidia-smi -q -d ECC,ROW_REMAPPER -i {gpu.index}`; drain the GPU, reset it "
           f"(`sudo nvidia-smi -r -i {gpu.index}`) or reboot so the row remap applies; run `dcgmi diag -r 3`; "
           "RMA if errors return.")
    if current:
        return context.fail(
            f"GPU{gpu.index}: the kernel log shows uncorrectable ECC errors ({_summarize(current, uptime)}) since the "
            "last driver load; the ECC counters are not in this run, so the evidence is the kernel log.", gpu=gpu,
            observed={"kernel_log": _summarize(current, uptime), "counters": None}, expected="no uncorrectable error",
            fix=fix, refs=[_KERNEL_LOG_REF])
    mark = evidence[-1][1]
    return context.warn(
        f"GPU{gpu.index}: the kernel log shows uncorrectable ECC errors ({_summarize(evidence, uptime)}) before the "
        f"{_marker_name(mark)} {_when(mark, uptime)}: history. The ECC counters are not in this run; they would tell "
        "whether errors continued.", gpu=gpu,
        observed={"kernel_log": _summarize(evidence, uptime), "history": True, "counters": None},
        expected="no uncorrectable error", fix=fix, refs=[_KERNEL_LOG_REF])


@check("health.retired_pages", "Retired memory pages within limits")
def health_retired_pages(context: CheckContext) -> list[Finding]:
    limit = thresholds("retired_pages")

    def judge(gpu: GpuFacts) -> Finding | None:
        retired = (gpu.retired_pages_sbe or 0) + (gpu.retired_pages_dbe or 0)
        if gpu.retired_pages_pending:
            return context.warn(f"GPU{gpu.index} has a page retirement pending: it applies at the next GPU reset or "
                                "reboot.", gpu=gpu, observed={"retired": retired, "pending": True},
                                expected="no pending retirement", fix="Reset the GPU (`sudo nvidia-smi -r -i "
                                f"{gpu.index}` when idle) or reboot.", refs=[limit["source"]])
        if retired >= limit["fail_at"]:
            return context.fail(f"GPU{gpu.index} has retired {retired} pages, at DCGM's limit of {limit['fail_at']}.",
                                gpu=gpu, observed=retired, expected=f"< {limit['fail_at']}",
                                fix="RMA the GPU.", refs=[limit["source"]])
        if retired >= limit["warn_at"]:
            return context.warn(f"GPU{gpu.index} has retired {retired} pages (DCGM's soft limit is "
                                f"{limit['warn_at']}).", gpu=gpu, observed=retired, expected=f"< {limit['warn_at']}",
                                fix="Watch the count; plan an RMA if it grows.", refs=[limit["source"]])
        return None
    retires = [gpu for gpu in context.gpus if gpu.retired_pages_sbe is not None or gpu.retired_pages_dbe is not None
               or gpu.retired_pages_pending is not None]
    if not retires and any(gpu.remap_pending is not None for gpu in context.gpus):
        return [context.passed("Page retirement not used: these GPUs remap rows instead (see health.row_remap_*).")]
    return per_gpu(context, judge, said("health.retired_pages.all_good"),
                   reported=lambda gpu: gpu.retired_pages_sbe is not None or gpu.retired_pages_dbe is not None
                   or gpu.retired_pages_pending is not None,
                   unreported=said("health.retired_pages.unreported"))


@check("health.row_remap_pending", "No row remap waiting for a reset")
def health_row_remap_pending(context: CheckContext) -> list[Finding]:
    logged = _xid_evidence(context, (63,))
    uptime = context.facts.host.uptime_s
    fix = "Reset the GPU when idle (`sudo nvidia-smi -r -i {index}`) or reboot."

    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.remap_pending:
            return context.fail(f"GPU{gpu.index} has a memory row remap pending: the faulty row stays in use until "
                                "the GPU is reset.", gpu=gpu, observed="Pending: Yes", expected="No",
                                fix=fix.format(index=gpu.index), refs=[_REMAP_REF])
        if gpu.remap_pending is None and gpu.bus_id in logged:
            evidence = logged[gpu.bus_id]
            current = [(event, mark) for event, mark in evidence if mark is None]
            if current:
                return context.fail(
                    f"GPU{gpu.index}: the kernel log marks a memory row for remapping ({_summarize(current, uptime)}) "
                    "and no GPU reset or driver reload follows: the remap is pending, the faulty row stays in use "
                    "until the GPU is reset (the row-remapper state is not in this run).", gpu=gpu,
                    observed={"kernel_log": _summarize(current, uptime), "pending": None}, expected="No",
                    fix=fix.format(index=gpu.index) + f" Confirm with `nvidia-smi -q -d ROW_REMAPPER -i {gpu.index}`.",
                    refs=[_REMAP_REF, _KERNEL_LOG_REF])
            mark = evidence[-1][1]
            return context.passed(
                f"GPU{gpu.index}: the row remap the kernel log marked ({_summarize(evidence, uptime)}) was followed by "
                f"the {_marker_name(mark)} {_when(mark, uptime)}, which applies it.", gpu=gpu,
                observed={"kernel_log": _summarize(evidence, uptime), "history": True}, refs=[_REMAP_REF])
        return None
    return per_gpu(context, judge, said("health.row_remap_pending.all_good"),
                   reported=lambda gpu: gpu.remap_pending is not None or gpu.bus_id in logged,
                   unreported=_REMAP_UNREPORTED)


@check("health.row_remap_failure", "No failed row remap")
def health_row_remap_failure(context: CheckContext) -> list[Finding]:
    logged = _xid_evidence(context, (64,))
    uptime = context.facts.host.uptime_s

    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.remap_failure:
            return context.fail(f"GPU{gpu.index} failed to remap a memory row: it has run out of spare rows.",
                                gpu=gpu, observed="Remapping Failure Occurred: Yes", expected="No",
                                fix="RMA the GPU (NVIDIA: a remap failure requires replacement).",
                                refs=[_REMAP_REF])
        if gpu.remap_failure is None and gpu.bus_id in logged:
            evidence = logged[gpu.bus_id]
            return context.fail(
                f"GPU{gpu.index}: the kernel log shows a failed row remap ({_summarize(evidence, uptime)}): the faulty "
                "memory could not be isolated. A reset or driver reload does not undo that, so an earlier one still "
                "counts (the row-remapper state is not in this run).", gpu=gpu,
                observed={"kernel_log": _summarize(evidence, uptime), "failure": None}, expected="no Xid 64",
                fix=f"Confirm with `nvidia-smi -q -d ROW_REMAPPER -i {gpu.index}` (Remapping Failure Occurred); "
                    "drain the GPU, run `dcgmi diag -r 3` and RMA it.", refs=[_REMAP_REF, _KERNEL_LOG_REF])
        if gpu.remapped_rows_uncorrectable:
            return context.passed(f"GPU{gpu.index} has remapped {gpu.remapped_rows_uncorrectable} row(s) after "
                                  "uncorrectable errors; remapping works as designed.", gpu=gpu,
                                  observed={"uncorrectable_rows": gpu.remapped_rows_uncorrectable})
        return None
    return per_gpu(context, judge, said("health.row_remap_failure.all_good"),
                   reported=lambda gpu: gpu.remap_failure is not None or gpu.bus_id in logged,
                   unreported=_REMAP_UNREPORTED)


@check("health.pcie_replay", "PCIe replay rate", needs=("host.uptime_s",))
def health_pcie_replay(context: CheckContext) -> list[Finding]:
    limit = thresholds("pcie_replay")
    minutes = max(context.facts.host.uptime_s / 60, 1.0)

    def judge(gpu: GpuFacts) -> Finding | None:
        replays = gpu.pcie_replay_count
        if not replays:
            return None
        rate = replays / minutes
        if rate > limit["warn_above_per_minute"]:
            return context.warn(f"GPU{gpu.index} has {replays:,} PCIe replays since boot ({rate:.1f}/min on "
                                "average): the link is retrying transfers.", gpu=gpu, observed=f"{rate:.1f}/min",
                                expected=f"<= {limit['warn_above_per_minute']}/min",
                                fix="Reseat the GPU/riser; check `lspci -vv` for AER errors; a marginal link may "
                                    "need the slot set one generation lower.", refs=[limit["source"]])
        return context.passed(f"GPU{gpu.index}: {replays:,} PCIe replays since boot ({rate:.2f}/min), below "
                              f"{limit['warn_above_per_minute']}/min: not a fault.", gpu=gpu, observed=replays)
    return per_gpu(context, judge, said("health.pcie_replay.all_good"),
                   reported=lambda gpu: gpu.pcie_replay_count is not None,
                   unreported=said("health.pcie_replay.unreported"))
