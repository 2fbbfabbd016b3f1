"""GPU health: Xid/SXid in the kernel log, infoROM, ECC, retired pages, row remapping, PCIe replays."""

from __future__ import annotations

from collections import Counter

from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.types import GpuFacts, KernelEvent
from gpuready.knowledge import thresholds, xid_entry
from gpuready.model import Finding

_REMAP_UNREPORTED = "Row remapping not reported (pre-Ampere GPU, or not in this run)."
_XID_REF = "NVIDIA Xid catalog, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


@check("health.xid", "No Xid errors in the kernel log", needs_gpus=False)
def health_xid(context: CheckContext) -> list[Finding]:
    facts = context.facts
    if facts.kernel_log is None:
        reason = "the kernel log was not readable (dmesg needs root or group adm)" \
            if facts.kernel_log_readable is False else "no dmesg.txt in this run"
        return [context.skip(f"Xid not judged: {reason}.", fix="sudo gpuready check, or `sudo dmesg > dmesg.txt` "
                             "into the bundle")]
    gpu_by_bus = {gpu.bus_id: gpu for gpu in context.gpus}
    events = [event for event in facts.kernel_log if event.kind in ("xid", "fallen_off_bus")]
    if not events:
        return [context.passed("No Xid or fallen-off-the-bus messages in the kernel log.")]
    findings = []
    grouped: dict[tuple[str | None, int | None], list[KernelEvent]] = {}
    for event in events:
        code = 79 if event.kind == "fallen_off_bus" else event.code
        grouped.setdefault((event.bus_id, code), []).append(event)
    for (bus_id, code), group in sorted(grouped.items(), key=lambda item: (str(item[0][0]), item[0][1] or 0)):
        entry = xid_entry(code) if code is not None else None
        gpu = gpu_by_bus.get(bus_id) if bus_id else None
        where = f"GPU{gpu.index} ({bus_id})" if gpu else (bus_id or "an unnamed GPU")
        severity = entry["severity"] if entry else "error"
        name = f"Xid {code} {entry['name']}" if entry else f"Xid {code} (not in the catalog)"
        meaning = entry["meaning"] if entry else "unknown to gpuready's catalog; see NVIDIA's Xid catalog"
        status = context.fail if severity in ("critical", "error") else context.warn
        if entry and entry.get("app_fault") and severity != "critical":
            status = context.warn
        findings.append(status(
            f"{name} on {where}, {len(group)}×: {meaning}. Last: {group[-1].line[:200]}", gpu=gpu,
            observed={"xid": code, "count": len(group), "severity": severity}, expected="no Xid",
            fix=entry["action"] if entry else "Look the Xid up in NVIDIA's catalog; run `dcgmi diag -r 3`.",
            refs=[entry["source"] if entry else _XID_REF]))
    return findings


@check("health.sxid", "No NVSwitch SXid errors", needs=("kernel_log",), needs_gpus=False)
def health_sxid(context: CheckContext) -> list[Finding]:
    events = [event for event in context.facts.kernel_log if event.kind == "sxid"]
    if not events:
        return [context.passed("No NVSwitch SXid messages in the kernel log.")]
    counts = Counter(event.code for event in events)
    fatal = [event for event in events if "fatal" in event.detail.lower() and "non-fatal" not in event.detail.lower()]
    summary = ", ".join(f"SXid {code} ×{count}" for code, count in counts.most_common())
    status = context.fail if fatal else context.warn
    return [status(f"NVSwitch errors in the kernel log: {summary}; last: {events[-1].line[:200]}",
                   observed=dict(counts), expected="no SXid",
                   fix="Check `nvidia-smi -q` fabric state and `journalctl -u nvidia-fabricmanager`; fatal SXids need a "
                       "node reboot and, if they recur, the vendor (NVSwitch tray/baseboard).",
                   refs=["NVIDIA Fabric Manager User Guide, SXid errors: "
                         "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"])]


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
    findings = per_gpu(context, judge, "infoROM valid on all {count} GPU(s).")
    if log_corrupt and all(finding.status.value == "pass" for finding in findings):
        return [context.fail("The kernel log reports a corrupted infoROM.", fix="Run `nvidia-smi` to see which GPU; "
                             "contact the vendor.", refs=["NVML nvmlDeviceValidateInforom"])]
    return findings


@check("health.ecc_uncorrected", "No uncorrectable ECC errors")
def health_ecc_uncorrected(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        volatile, aggregate = gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate
        corrected = gpu.ecc_corrected_volatile
        if volatile:
            return context.fail(f"GPU{gpu.index} has {volatile} uncorrectable ECC error(s) since the last driver "
                                "load: results may be wrong and jobs on it die.", gpu=gpu,
                                observed={"volatile": volatile, "aggregate": aggregate}, expected=0,
                                fix="Drain the GPU, reset it or reboot (a row remap/page retirement applies then); "
                                    "run `dcgmi diag -r 3`; RMA if errors return.", refs=["Xid 48 / 94 / 95", "NVML ECC"])
        if aggregate:
            return context.warn(f"GPU{gpu.index} has {aggregate} uncorrectable ECC error(s) in its lifetime (none "
                                "since the last driver load).", gpu=gpu, observed={"aggregate": aggregate},
                                expected=0, fix="Watch it: check remapped rows/retired pages; RMA if the count grows.")
        if corrected:
            return context.passed(f"GPU{gpu.index}: {corrected} corrected ECC error(s) since boot, no uncorrectable "
                                  "ones (corrected errors are handled by ECC; not a fault).", gpu=gpu,
                                  observed={"corrected_volatile": corrected})
        return None
    return per_gpu(context, judge, "No uncorrectable ECC errors on any of {count} GPU(s).",
                   reported=lambda gpu: gpu.ecc_uncorrected_volatile is not None
                   or gpu.ecc_uncorrected_aggregate is not None,
                   unreported="No ECC counters reported (ECC off, or a GPU without ECC).")


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
    if all(gpu.retired_pages_sbe is None and gpu.retired_pages_dbe is None and gpu.retired_pages_pending is None
           for gpu in context.gpus):
        return [context.passed("Page retirement not reported: GPUs from Ampere on remap rows instead "
                               "(see health.row_remap_*).")]
    return per_gpu(context, judge, "Retired pages within limits on all {count} GPU(s).")


@check("health.row_remap_pending", "No row remap waiting for a reset")
def health_row_remap_pending(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.remap_pending:
            return context.fail(f"GPU{gpu.index} has a memory row remap pending: the faulty row stays in use until "
                                "the GPU is reset.", gpu=gpu, observed="Pending: Yes", expected="No",
                                fix=f"Reset the GPU when idle (`sudo nvidia-smi -r -i {gpu.index}`) or reboot.",
                                refs=["NVIDIA GPU memory error management, row remapping: "
                                      "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"])
        return None
    return per_gpu(context, judge, "No row remap pending on any of {count} GPU(s).",
                   reported=lambda gpu: gpu.remap_pending is not None, unreported=_REMAP_UNREPORTED)


@check("health.row_remap_failure", "No failed row remap")
def health_row_remap_failure(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.remap_failure:
            return context.fail(f"GPU{gpu.index} failed to remap a memory row: it has run out of spare rows.",
                                gpu=gpu, observed="Remapping Failure Occurred: Yes", expected="No",
                                fix="RMA the GPU (NVIDIA: a remap failure requires replacement).",
                                refs=["https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"])
        if gpu.remapped_rows_uncorrectable:
            return context.passed(f"GPU{gpu.index} has remapped {gpu.remapped_rows_uncorrectable} row(s) after "
                                  "uncorrectable errors; remapping works as designed.", gpu=gpu,
                                  observed={"uncorrectable_rows": gpu.remapped_rows_uncorrectable})
        return None
    return per_gpu(context, judge, "No row remap failure on any of {count} GPU(s).",
                   reported=lambda gpu: gpu.remap_failure is not None, unreported=_REMAP_UNREPORTED)


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
    return per_gpu(context, judge, "No PCIe replays on any of {count} GPU(s).",
                   reported=lambda gpu: gpu.pcie_replay_count is not None,
                   unreported="No PCIe replay counters reported.")
