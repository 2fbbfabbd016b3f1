"""The kernel log (`dmesg`, `journalctl -k`, syslog): Xid, SXid, fallen-off-the-bus and PCIe AER lines, and the
events after which earlier ones are history: the NVIDIA driver loading, and a GPU reset."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Iterable, Iterator

from gpuready.facts.types import KernelEvent
from gpuready.facts.units import normalize_bus_id, strip_ansi

# gpud's regex (leptonai/gpud components/accelerator/nvidia/xid/kmsg.go), old drivers omit "PCI:".
_XID = re.compile(r"NVRM: Xid \(((?:PCI:)?[0-9a-fA-F:.]+)\)[^:]*: (\d+),?\s*(.*)")
_SXID = re.compile(r"nvidia-nvswitch(\d+): SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+),?\s*(.*)")
_FALLEN = re.compile(r"NVRM: GPU (?:at )?(?:PCI:)?([0-9a-fA-F:.]+?):?\s+(?:GPU )?has fallen off the bus", re.IGNORECASE)
# Newer drivers split the message over lines: "NVRM: The NVIDIA GPU 0000:b3:00.0" … "fallen off the bus".
_GPU_NAMED = re.compile(r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_FALLEN_GENERIC = re.compile(r"fallen off the bus", re.IGNORECASE)
_AER = re.compile(r"(?:pcieport|nvidia) ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): (?:PCIe Bus Error|AER):?\s*(.*)")
_IOMMU_DOMAIN = re.compile(r"iommu: Default domain type: (\w+)")
_INFOROM = re.compile(r"infoROM is corrupted", re.IGNORECASE)
# The module's banner, printed each time it loads (boot, or `modprobe nvidia` after an unload):
#   NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024
#   NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)
_DRIVER_LOAD = re.compile(
    r"NVRM: loading NVIDIA UNIX (?:Open Kernel Module for \S+|\S+ Kernel Module)\s+(\d+(?:\.\d+)+)")
# Printed with the first Xid of a GPU: names its UUID (`NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-…`).
_GPU_UUID = re.compile(r"NVRM: GPU at (?:PCI:)?([0-9a-fA-F:.]+): (GPU-[0-9a-fA-F-]{36})")
# The driver logs no line when `nvidia-smi -r` resets a GPU; NVIDIA's NVSentinel writes one to syslog after its
# reset (health-monitors/syslog-health-monitor and its gpu-reset script): `GPU reset executed: GPU-…[, success: …]`.
_GPU_RESET = re.compile(r"GPU reset executed: (GPU-[0-9a-fA-F-]{36})(?:, success: (\w+))?")

# Where each line's time is: kernel seconds since boot (`[ 1843.308145]`, also after syslog's `kernel: `), and the
# wall clock of `dmesg --time-format iso`, `dmesg -T`/`--ctime`, syslog and journalctl's default format.
_MONOTONIC = re.compile(r"^(?:.{0,80}?\bkernel:\s*)?\[\s*(\d+\.\d+)\]")
_WALL_CLOCKS = (
    re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"),
    re.compile(r"^\[((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]"),
    re.compile(r"^([A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}) \S+ "),
)
_LINK = re.compile(r"\blink\s*(\d{1,4})", re.IGNORECASE)
# NVIDIA Fabric Manager (`journalctl -u nvidia-fabricmanager`, fabricmanager.log) and CUDA's error 802: the NVSwitch
# fabric was not brought up. The lines sit in the same system logs as the kernel's.
_FM_MISMATCH = re.compile(r"fabric manager NVIDIA GPU driver interface version (\d[\d.]{0,20}) doe?s?n'?t match with "
                          r"driver version (\d[\d.]{0,20}\d)")
_FM_NOTHING = re.compile(r"NV_WARN_NOTHING_TO_DO")
_FM_FAILED = re.compile(r"nvidia-fabricmanager\.service: (?:Main|Control) process exited, code=exited, status=(\d{1,3})")
# Other system-log lines about the driver's view of the GPUs:
# `NVRM: API mismatch: the client has the version 367.44, but` / `NVRM: this kernel module has the version 367.35.`
_API_MISMATCH = re.compile(r"NVRM: API mismatch: the client has the version (\d[\d.]{0,20}\d)")
_MODULE_VERSION = re.compile(r"NVRM: this kernel module has the version (\d[\d.]{0,20}\d)")
# NVML's GPU_IS_LOST as any program words it (`slurmstepd: error: NVML: Failed to get usage(15): GPU is lost`)
_GPU_LOST = re.compile(r"GPU is lost|Unable to determine the device handle for GPU ?([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:"
                       r"[0-9A-Fa-f]{2}\.[0-7])?", re.IGNORECASE)
# CUDA's own report of an uncorrectable ECC error (cudaErrorECCUncorrectable) in a job's output
_CUDA_ECC = re.compile(r"uncorrectable ECC error encountered", re.IGNORECASE)
# the Kubernetes device plugin's health check: `XidCriticalError: Xid=69 on Device=GPU-7540a9b3-…, the device will go
# unhealthy.`
_PLUGIN_XID = re.compile(r"XidCriticalError: Xid=(\d{1,4}) on Device=(GPU-[0-9a-fA-F-]{36})")
# Docker without the NVIDIA runtime: `could not select device driver "" with capabilities: [[gpu]]`
_DOCKER_NO_GPU = re.compile(r'could not select device driver "[^"\n]{0,40}" with capabilities: \[\[gpu\]\]')
# A process asked CUDA for a device number beyond those it sees (more ranks per node than visible GPUs)
_BAD_ORDINAL = re.compile(r"invalid device ordinal", re.IGNORECASE)
_CUDA_NOT_READY = re.compile(r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY",
                             re.IGNORECASE)


def _links(detail: str) -> tuple[int, ...]:
    """The NVLink numbers a line names (`Link 13`, `link 0`), in order, each once."""
    return tuple(dict.fromkeys(int(number) for number in _LINK.findall(detail)))


MARKERS = ("NVRM", "nvswitch", "AER", "PCIe Bus Error", "iommu:", "GPU reset executed", "fabric manager",
           "fabricmanager", "NV_WARN_NOTHING_TO_DO", "not yet initialized", "SystemNotReady", "SYSTEM_NOT_READY",
           "GPU is lost", "device handle", "uncorrectable ECC error encountered", "XidCriticalError",
           "with capabilities: [[gpu]]", "invalid device ordinal")


def _times(line: str) -> tuple[float | None, str | None]:
    stamp = _MONOTONIC.search(line)
    wall = next((match.group(1) for pattern in _WALL_CLOCKS if (match := pattern.search(line))), None)
    return (float(stamp.group(1)) if stamp else None), wall


def _lines(log: str | Iterable[str]) -> Iterator[str]:
    """The log's lines, from its whole text or from its lines as a file yields them (with or without newlines)."""
    if isinstance(log, str):
        return iter(strip_ansi(log).splitlines())
    return (line for item in log for line in (strip_ansi(item).splitlines() or [""]))


NumberedLine = tuple[str | None, int, str]
"""(file, 1-based line number, text): a line of a log read in part (diagnose, a streamed bundle log)."""


def _numbered(log: str | Iterable[str] | Iterable[NumberedLine], source: str | None) -> Iterator[NumberedLine]:
    """Every line with its file and number: counted here for a whole log, or as given by a reader that kept only some
    lines."""
    if isinstance(log, str):
        yield from ((source, number, line) for number, line in enumerate(_lines(log), 1))
        return
    number = 0
    for item in log:
        if isinstance(item, tuple):
            yield item[0], item[1], strip_ansi(item[2]).rstrip("\r\n")
            continue
        for line in strip_ansi(item).splitlines() or [""]:
            number += 1
            yield source, number, line


def relevant_lines(log: str | Iterable[str], numbered: bool = False) -> Iterator[str] | Iterator[NumberedLine]:
    """The lines parse_kernel_log uses, each with its newline: those with a marker, and before an indented continuation
    line that has one, the line whose time it takes. parse_kernel_log gives the same events from these as from the
    whole log, so a log of any size is read line by line keeping only these (bundle/reader.py). `numbered`: each as
    (None, its line number in the whole log, text), so the events keep where they were."""
    anchor: tuple[int, str] | None = None
    anchor_kept = True
    for number, line in enumerate(_lines(log), 1):
        continuation = line[:1].isspace() and _times(line) == (None, None)
        if not continuation:
            anchor, anchor_kept = (number, line), False
        if any(marker in line for marker in MARKERS):
            if not continuation:
                anchor_kept = True
            elif not anchor_kept and anchor is not None:
                anchor_kept = True
                yield (None, anchor[0], anchor[1]) if numbered else anchor[1] + "\n"
            yield (None, number, line) if numbered else line + "\n"


def parse_kernel_log(log: str | Iterable[str] | Iterable[NumberedLine], source: str | None = None
                     ) -> list[KernelEvent]:
    """The events, in the order of the log: later events come later in the list (checks rely on it), each with its
    file and line and, where a later driver load or reset makes it history, that event (`mark_history`, without
    the GPUs' UUIDs; facts/build.py marks again once the GPUs are known).

    `log`: the whole text, or its lines read one at a time (an open file, `relevant_lines(...)`), or numbered lines
    (file, number, text) a reader kept."""
    events: list[KernelEvent] = []
    last_named_gpu: str | None = None
    bus_by_uuid: dict[str, str] = {}
    anchor = ""  # the last line that is not a continuation: its time is a continuation line's
    for file, number, line in _numbered(log, source):
        marked = any(marker in line for marker in MARKERS)
        if not marked:
            # a line's time is only read where a marked line needs it (most lines are neither): linear, and cheap
            if not line[:1].isspace() or (line.strip() and _times(line) != (None, None)):
                anchor = line
            continue
        times = _times(line)
        if times == (None, None) and line[:1].isspace():
            times = _times(anchor)  # a continuation line of the message above
        else:
            anchor = line
        timestamp_s, wall_time = times

        def event(kind: str, **fields) -> None:
            events.append(KernelEvent(kind=kind, line=line.strip(), timestamp_s=timestamp_s, wall_time=wall_time,
                                      source=file, line_number=number, **fields))
        if match := _XID.search(line):
            event("xid", bus_id=normalize_bus_id(match.group(1)), code=int(match.group(2)),
                  detail=match.group(3).strip(), links=_links(match.group(3)))
        elif match := _SXID.search(line):
            event("sxid", bus_id=normalize_bus_id(match.group(2)), code=int(match.group(3)),
                  detail=match.group(4).strip(), links=_links(match.group(4)))
        elif match := _FALLEN.search(line):
            event("fallen_off_bus", bus_id=normalize_bus_id(match.group(1)))
        elif _FALLEN_GENERIC.search(line):
            event("fallen_off_bus", bus_id=last_named_gpu)
        elif match := _DRIVER_LOAD.search(line):
            event("driver_load", detail=match.group(1))
        elif match := _GPU_UUID.search(line):
            if bus_id := normalize_bus_id(match.group(1)):
                bus_by_uuid[match.group(2).lower()] = bus_id
        elif match := _GPU_RESET.search(line):
            if (match.group(2) or "true").lower() == "true":
                uuid = match.group(1).lower()
                event("gpu_reset", bus_id=bus_by_uuid.get(uuid), uuid=uuid, detail="GPU reset executed")
        elif match := _GPU_NAMED.search(line):
            last_named_gpu = normalize_bus_id(match.group(1))
        elif match := _AER.search(line):
            event("aer", bus_id=normalize_bus_id(match.group(1)), detail=match.group(2).strip())
        elif match := _IOMMU_DOMAIN.search(line):
            event("iommu", detail=match.group(0))
        elif _INFOROM.search(line):
            event("inforom")
        elif match := _FM_MISMATCH.search(line):
            event("fabric_manager", detail=f"version_mismatch {match.group(1)} {match.group(2)}")
        elif _FM_NOTHING.search(line):
            event("fabric_manager", detail="nothing_to_do")
        elif match := _FM_FAILED.search(line):
            event("fabric_manager", detail="failed")
        elif _CUDA_NOT_READY.search(line):
            event("cuda_not_ready")
        elif match := _API_MISMATCH.search(line):
            event("api_mismatch", detail=f"client {match.group(1)}")
        elif (match := _MODULE_VERSION.search(line)) and events and events[-1].kind == "api_mismatch":
            events[-1].detail += f", kernel module {match.group(1)}"
        elif match := _PLUGIN_XID.search(line):
            uuid = match.group(2).lower()
            event("xid", bus_id=bus_by_uuid.get(uuid), uuid=uuid, code=int(match.group(1)),
                  detail="reported by the Kubernetes device plugin")
        elif match := _GPU_LOST.search(line):
            event("gpu_lost", bus_id=normalize_bus_id(match.group(1)) if match.group(1) else None)
        elif _CUDA_ECC.search(line):
            event("cuda_ecc")
        elif _DOCKER_NO_GPU.search(line):
            event("docker_no_gpu_runtime")
        elif _BAD_ORDINAL.search(line):
            event("cuda_bad_ordinal")
    mark_history(events)
    return events


# A driver load prints its banner after probing the GPUs: what the probe logged (a GPU fallen off the bus) lands
# just before the banner and belongs to that load, not to the one before. The checks pass knowledge's value.
SAME_LOAD_WINDOW_S = 10.0
_WALL_FORMATS = ("%a %b %d %H:%M:%S %Y", "%b %d %H:%M:%S")


def event_clock(event: KernelEvent) -> tuple[str, float] | None:
    """(clock, seconds) to compare two events of one log: the kernel's seconds since boot, else the wall clock."""
    if event.timestamp_s is not None:
        return "boot", event.timestamp_s
    if not event.wall_time:
        return None
    text = event.wall_time
    try:
        if text[:4].isdigit():  # ISO 8601, dmesg writes a comma before the fraction
            return "wall", datetime.fromisoformat(text.replace(",", ".")).timestamp()
        for layout in _WALL_FORMATS:
            try:
                moment = datetime.strptime(" ".join(text.split()), layout)
            except ValueError:
                continue
            # syslog omits the year and the zone: comparable only with lines of the same log and kind
            clock = "syslog" if layout == _WALL_FORMATS[1] else "ctime"
            return clock, moment.replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None
    return None


def superseded_by(events: list[KernelEvent],
                  same_load_window_s: float = SAME_LOAD_WINDOW_S) -> list[KernelEvent | None]:
    """For each event, the first later driver load (any GPU) or GPU reset (that GPU) after which it is history;
    None for events still current (and for the markers themselves).

    Events logged within `same_load_window_s` before a driver load belong to that load (its probe), not to the past.
    A reset that names only a UUID the log never tied to a bus id applies to no event. One pass from the end: linear
    in the events (a log of many Xids and many driver loads).
    """
    result: list[KernelEvent | None] = [None] * len(events)
    later_loads: list[tuple[int, KernelEvent]] = []  # driver loads after the current position, nearest last
    next_reset: dict[str, tuple[int, KernelEvent]] = {}  # bus id → the nearest later reset of that GPU
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.kind == "driver_load":
            later_loads.append((index, event))
            continue
        if event.kind == "gpu_reset":
            if event.bus_id:
                next_reset[event.bus_id] = (index, event)
            continue
        found = [mark for mark in (_first_other_load(event, later_loads, same_load_window_s),
                                   next_reset.get(event.bus_id) if event.bus_id else None) if mark is not None]
        result[index] = min(found, key=lambda mark: mark[0])[1] if found else None
    return result


def _first_other_load(event: KernelEvent, later_loads: list[tuple[int, KernelEvent]],
                      window_s: float) -> tuple[int, KernelEvent] | None:
    """The nearest later load that is not the event's own (a probe logs just before its load's banner); a load's own
    window holds few loads, so only the nearest few are looked at."""
    for mark in reversed(later_loads[-8:]):
        if not _same_load(event, mark[1], window_s):
            return mark
    return later_loads[-9] if len(later_loads) > 8 else None


def mark_history(events: list[KernelEvent], bus_by_uuid: dict[str, str] | None = None,
                 same_load_window_s: float = SAME_LOAD_WINDOW_S) -> None:
    """Set each event's `superseded_by`; a reset the log names only by UUID gets its GPU's bus id from `bus_by_uuid`
    (the GPUs' own UUIDs, lower case) first."""
    for event in events:
        if event.kind in ("gpu_reset", "xid") and not event.bus_id and event.uuid and bus_by_uuid:
            event.bus_id = bus_by_uuid.get(event.uuid.lower())
    for event, mark in zip(events, superseded_by(events, same_load_window_s)):
        event.superseded_by = mark
        event.clock = event_clock(event)


def _same_load(event: KernelEvent, load: KernelEvent, window_s: float) -> bool:
    mine, theirs = event_clock(event), event_clock(load)
    if mine is None or theirs is None or mine[0] != theirs[0]:
        return False
    return 0 <= theirs[1] - mine[1] <= window_s
