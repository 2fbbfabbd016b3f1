"""The kernel log (`dmesg`, `journalctl -k`, syslog): Xid, SXid, fallen-off-the-bus and PCIe AER lines, and the
events after which earlier ones are history: the NVIDIA driver loading, and a GPU reset."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Iterable, Iterator

from gpuready.facts import nic_kernel
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
# `\blink` in any case; starting with a class rather than a case-blind word lets the regex engine skip to each L
_LINK = re.compile(r"[Ll](?<!\w[Ll])(?i:ink)\s*(\d{1,4})")
# NVIDIA Fabric Manager (`journalctl -u nvidia-fabricmanager`, fabricmanager.log) and CUDA's error 802: the NVSwitch
# fabric was not brought up. The lines sit in the same system logs as the kernel's.
_FM_MISMATCH = re.compile(r"fabric manager NVIDIA GPU driver interface version (\d[\d.]{0,20}) doe?s?n'?t match with "
                          r"driver version (\d[\d.]{0,20}\d)")
_FM_NOTHING = re.compile(r"NV_WARN_NOTHING_TO_DO")
# Fabric Manager not running, as systemd, systemctl and its start script (nvidia-fabricmanager-start.sh) say it:
# `….service: Main process exited, code=exited, status=1/FAILURE`, `….service: Failed with result 'exit-code'`,
# `Job for nvidia-fabricmanager.service failed because …`, `Failed to start NVIDIA fabric manager service.` (the unit's
# Description), `"/usr/bin/nv-fabricmanager -c …" failed! Exit code: 1`.
_FM_FAILED = re.compile(r"nvidia-fabricmanager\.service: (?:(?:Main|Control) process exited, code=exited, status=(\d{1,3})|"
                        r"Failed with result)|Job for nvidia-fabricmanager\.service failed|"
                        r"Failed to start NVIDIA fabric manager|nv-fabricmanager[^\"\n]{0,300}\" failed! Exit code")
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
           "with capabilities: [[gpu]]", "invalid device ordinal", *nic_kernel.MARKERS)


_MARKER = re.compile("|".join(re.escape(marker) for marker in MARKERS))
# What str.splitlines ends a line at besides "\n" (strip_ansi has taken every "\r"): made "\n" so that a line's
# number is a count of "\n" before it.
_OTHER_LINE_BREAKS = re.compile("[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# The last line of a stretch that is not a continuation (an empty line, a line that starts with a character other
# than a space, an indented line with the kernel's time): greedy, so one C-speed pass back from the stretch's end.
_LAST_ANCHOR = re.compile(r"(?s:.*)^(?=\n|\S|[^\n]{0,80}?\bkernel:[^\S\n]*\[[^\S\n]*\d+\.\d+\])", re.MULTILINE)


def _times(line: str) -> tuple[float | None, str | None]:
    stamp = _MONOTONIC.search(line)
    wall = next((match.group(1) for pattern in _WALL_CLOCKS if (match := pattern.search(line))), None)
    return (float(stamp.group(1)) if stamp else None), wall


def _is_continuation(line: str) -> bool:
    """An indented line without a time of its own: the rest of the message above, whose time it takes."""
    return line[:1].isspace() and not _MONOTONIC.search(line)  # the wall clocks start a line: never after a space


def _lines(log: str | Iterable[str]) -> Iterator[str]:
    """The log's lines, from its whole text or from its lines as a file yields them (with or without newlines)."""
    if isinstance(log, str):
        return iter(strip_ansi(log).splitlines())
    return (line for item in log for line in (strip_ansi(item).splitlines() or [""]))


NumberedLine = tuple[str | None, int, str]
"""(file, 1-based line number, text): a line of a log read in part (diagnose, a streamed bundle log)."""


def _numbered(log: Iterable[str] | Iterable[NumberedLine], source: str | None) -> Iterator[NumberedLine]:
    """Every line with its file and number: counted here, or as given by a reader that kept only some lines."""
    number = 0
    for item in log:
        if isinstance(item, tuple):
            yield item[0], item[1], strip_ansi(item[2]).rstrip("\r\n")
            continue
        for line in strip_ansi(item).splitlines() or [""]:
            number += 1
            yield source, number, line


Anchor = tuple[int, str]
"""(line number, text) of the line a continuation line takes its time from."""


def _marked_in_text(log: str, source: str | None) -> Iterator[tuple[str | None, int, str, Anchor | None, bool]]:
    """(file, number, line, anchor, continuation) of each line of a whole log with a marker; `anchor`: the last line before it
    that is not a continuation, or None. The markers are searched over the whole text and only their lines are
    touched: a log of any shape (blank lines, tabs) costs a few C-speed passes."""
    text = _OTHER_LINE_BREAKS.sub("\n", strip_ansi(log))
    number, counted_to = 1, 0  # the number of the line that starts at counted_to
    anchor: Anchor | None = None  # the last line before `position` that is not a continuation
    position = 0  # the start of the first line not looked at yet
    continuations: dict[str, bool] = {}  # a line the log repeats is looked at once
    while match := _MARKER.search(text, position):
        start = text.rfind("\n", position, match.start()) + 1 or position
        end = text.find("\n", match.end())
        end = len(text) if end < 0 else end
        number += text.count("\n", counted_to, start)
        counted_to, line = start, text[start:end]
        continuation = continuations.get(line)
        if continuation is None:
            continuation = continuations[line] = _is_continuation(line)
        if continuation and (found := _LAST_ANCHOR.match(text, position, start)):
            anchor = (number - text.count("\n", found.end(), start), text[found.end():text.index("\n", found.end())])
        yield source, number, line, anchor, continuation
        if not continuation:
            anchor = (number, line)
        position = end + 1


def _marked_in_lines(log: Iterable[str] | Iterable[NumberedLine], source: str | None
                     ) -> Iterator[tuple[str | None, int, str, Anchor | None, bool]]:
    """(file, number, line, anchor, continuation) of each marked line of a log given line by line."""
    anchor: Anchor | None = None
    for file, number, line in _numbered(log, source):
        continuation = _is_continuation(line)
        if _MARKER.search(line):
            yield file, number, line, anchor, continuation
        if not continuation:
            anchor = (number, line)


def _marked(log: str | Iterable[str] | Iterable[NumberedLine], source: str | None
            ) -> Iterator[tuple[str | None, int, str, Anchor | None, bool]]:
    return _marked_in_text(log, source) if isinstance(log, str) else _marked_in_lines(log, source)


def relevant_lines(log: str | Iterable[str], numbered: bool = False) -> Iterator[str] | Iterator[NumberedLine]:
    """The lines parse_kernel_log uses, each with its newline: those with a marker, and before an indented continuation
    line that has one, the line whose time it takes. parse_kernel_log gives the same events from these as from the
    whole log, so a log of any size is read line by line keeping only these (bundle/reader.py). `numbered`: each as
    (None, its line number in the whole log, text), so the events keep where they were."""
    kept_anchor = 0  # the number of the last line kept that a continuation may take its time from
    for _file, number, line, anchor, continuation in _marked(log, None):
        if not continuation:
            kept_anchor = number
        elif anchor is not None and anchor[0] != kept_anchor:
            kept_anchor = anchor[0]
            yield (None, anchor[0], anchor[1]) if numbered else anchor[1] + "\n"
        yield (None, number, line) if numbered else line + "\n"


# What a marked line may say, tried in this order: the first pattern found anywhere in the line decides.
_READINGS = (("xid", _XID), ("sxid", _SXID), ("fallen", _FALLEN), ("fallen_generic", _FALLEN_GENERIC),
             ("driver_load", _DRIVER_LOAD), ("gpu_uuid", _GPU_UUID), ("gpu_reset", _GPU_RESET),
             ("gpu_named", _GPU_NAMED), ("aer", _AER), ("iommu", _IOMMU_DOMAIN), ("inforom", _INFOROM),
             ("fm_mismatch", _FM_MISMATCH), ("fm_nothing", _FM_NOTHING), ("fm_failed", _FM_FAILED),
             ("cuda_not_ready", _CUDA_NOT_READY), ("api_mismatch", _API_MISMATCH),
             ("module_version", _MODULE_VERSION), ("plugin_xid", _PLUGIN_XID), ("gpu_lost", _GPU_LOST),
             ("cuda_ecc", _CUDA_ECC), ("docker", _DOCKER_NO_GPU), ("bad_ordinal", _BAD_ORDINAL),
             ("nic", nic_kernel.LINE))
Reading = tuple[str, tuple]
"""(what, groups): groups[0] the whole match, groups[i] its group i."""


def _readings(line: str, start: int = 0) -> tuple[Reading, ...]:
    """The first reading of a line; after a module version also the next (it only adds to an API mismatch just before,
    else the line reads on)."""
    for index in range(start, len(_READINGS)):
        what, pattern = _READINGS[index]
        if match := pattern.search(line):
            reading = (what, (match.group(0), *match.groups()))
            return (reading, *_readings(line, index + 1)) if what == "module_version" else (reading,)
    return ()


Times = tuple[float | None, str | None]
"""(kernel seconds since boot, wall clock as printed) of a line; either may be None."""
Said = tuple[Times, tuple[Reading, ...], str, "tuple[str, dict] | None"]
"""What a marked line says by itself: its times, readings, stripped text, and its event's kind and fields where they
depend on the line alone (None: they depend on the lines before)."""


class _Log:
    """What parse_kernel_log knows as it reads: the events so far, the last GPU a message named, each UUID's bus id.
    A line read once is not read again (a log that repeats one line thousands of times)."""

    def __init__(self) -> None:
        self.events: list[KernelEvent] = []
        self.last_named_gpu: str | None = None
        self.bus_by_uuid: dict[str, str] = {}
        self._said: dict[str, Said] = {}

    def said(self, line: str) -> Said:
        said = self._said.get(line)
        if said is None:
            readings = _readings(line)
            plain = _PLAIN_EVENTS[readings[0][0]](readings[0][1]) if len(readings) == 1 and readings[0][0] in \
                _PLAIN_EVENTS else None
            said = self._said[line] = (_times(line), readings, line.strip(), plain)
        return said

    def add(self, file: str | None, number: int, line: str, anchor: Anchor | None, continuation: bool) -> None:
        times, readings, stripped, plain = self.said(line)
        if continuation:
            times = self.said(anchor[1])[0] if anchor is not None else (None, None)
        kind, fields = plain or self._event_fields(readings)
        if kind:
            self.events.append(KernelEvent(kind=kind, line=stripped, timestamp_s=times[0], wall_time=times[1],
                                           source=file, line_number=number, **fields))

    def _event_fields(self, readings: tuple[Reading, ...]) -> tuple[str | None, dict]:
        """The event of a line whose readings depend on the lines before (kind None: no event, or only the log
        learns something)."""
        what, groups = readings[0] if readings else ("", ())
        if what == "module_version":
            if self.events and self.events[-1].kind == "api_mismatch":
                self.events[-1].detail += f", kernel module {groups[1]}"
                return None, {}
            return self._event_fields(readings[1:])
        if what == "fallen_generic":
            return "fallen_off_bus", {"bus_id": self.last_named_gpu}
        if what == "gpu_uuid":
            if bus_id := normalize_bus_id(groups[1]):
                self.bus_by_uuid[groups[2].lower()] = bus_id
        elif what == "gpu_reset" and (groups[2] or "true").lower() == "true":
            uuid = groups[1].lower()
            return "gpu_reset", {"bus_id": self.bus_by_uuid.get(uuid), "uuid": uuid, "detail": "GPU reset executed"}
        elif what == "gpu_named":
            self.last_named_gpu = normalize_bus_id(groups[1])
        elif what == "plugin_xid":
            uuid = groups[2].lower()
            return "xid", {"bus_id": self.bus_by_uuid.get(uuid), "uuid": uuid, "code": int(groups[1]),
                           "detail": "reported by the Kubernetes device plugin"}
        elif what in _PLAIN_EVENTS:
            return _PLAIN_EVENTS[what](groups)
        return None, {}


def _code_event(kind: str, bus: str, code: str, detail: str) -> tuple[str, dict]:
    """An Xid or SXid: the GPU or switch, the number, the message after it and the NVLinks it names."""
    return kind, {"bus_id": normalize_bus_id(bus), "code": int(code), "detail": detail.strip(), "links": _links(detail)}


# The readings whose event depends on the line alone.
_PLAIN_EVENTS = {
    "xid": lambda groups: _code_event("xid", *groups[1:4]),
    "sxid": lambda groups: _code_event("sxid", *groups[2:5]),
    "fallen": lambda groups: ("fallen_off_bus", {"bus_id": normalize_bus_id(groups[1])}),
    "driver_load": lambda groups: ("driver_load", {"detail": groups[1]}),
    "aer": lambda groups: ("aer", {"bus_id": normalize_bus_id(groups[1]), "detail": groups[2].strip()}),
    "iommu": lambda groups: ("iommu", {"detail": groups[0]}),
    "inforom": lambda groups: ("inforom", {}),
    "fm_mismatch": lambda groups: ("fabric_manager", {"detail": f"version_mismatch {groups[1]} {groups[2]}"}),
    "fm_nothing": lambda groups: ("fabric_manager", {"detail": "nothing_to_do"}),
    "fm_failed": lambda groups: ("fabric_manager", {"detail": "failed"}),
    "cuda_not_ready": lambda groups: ("cuda_not_ready", {}),
    "api_mismatch": lambda groups: ("api_mismatch", {"detail": f"client {groups[1]}"}),
    "gpu_lost": lambda groups: ("gpu_lost", {"bus_id": normalize_bus_id(groups[1]) if groups[1] else None}),
    "cuda_ecc": lambda groups: ("cuda_ecc", {}),
    "docker": lambda groups: ("docker_no_gpu_runtime", {}),
    "bad_ordinal": lambda groups: ("cuda_bad_ordinal", {}),
    "nic": nic_kernel.nic_event,
}


def parse_kernel_log(log: str | Iterable[str] | Iterable[NumberedLine], source: str | None = None
                     ) -> list[KernelEvent]:
    """The events, in the order of the log: later events come later in the list (checks rely on it), each with its
    file and line and, where a later driver load or reset makes it history, that event (`mark_history`, without
    the GPUs' UUIDs; facts/build.py marks again once the GPUs are known).

    `log`: the whole text, or its lines read one at a time (an open file, `relevant_lines(...)`), or numbered lines
    (file, number, text) a reader kept. Only the lines with a marker are read; an indented one without a time of its
    own takes the time of the line above that is not (its anchor)."""
    state = _Log()
    for file, number, line, anchor, continuation in _marked(log, source):
        state.add(file, number, line, anchor, continuation)
    mark_history(state.events)
    return state.events


def read_message(text: str) -> list[KernelEvent]:
    """The events a program's own message states (a worker's exception: `CUDA error: GPU is lost`), each line read as
    parse_kernel_log reads a log's, in any case and without its marker search: a message need not carry the kernel's
    words."""
    state = _Log()
    for number, line in enumerate(strip_ansi(text).splitlines(), start=1):
        state.add(None, number, line, None, False)
    return state.events


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


def superseded_by(events: list[KernelEvent], same_load_window_s: float = SAME_LOAD_WINDOW_S,
                  clocks: list[tuple[str, float] | None] | None = None) -> list[KernelEvent | None]:
    """For each event, the first later driver load (any GPU) or GPU reset (that GPU) after which it is history;
    None for events still current (and for the markers themselves).

    Events logged within `same_load_window_s` before a driver load belong to that load (its probe), not to the past.
    A reset that names only a UUID the log never tied to a bus id applies to no event. One pass from the end: linear
    in the events (a log of many Xids and many driver loads). `clocks`: each event's event_clock, where known.
    """
    if clocks is None:
        clocks = [event_clock(event) for event in events]
    result: list[KernelEvent | None] = [None] * len(events)
    later_loads: list[tuple[int, KernelEvent, tuple[str, float] | None]] = []  # after the position, nearest last
    next_reset: dict[str, tuple[int, KernelEvent]] = {}  # bus id → the nearest later reset of that GPU
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.kind == "driver_load":
            later_loads.append((index, event, clocks[index]))
            continue
        if event.kind == "gpu_reset":
            if event.bus_id:
                next_reset[event.bus_id] = (index, event)
            continue
        load = _first_other_load(clocks[index], later_loads, same_load_window_s)
        reset = next_reset.get(event.bus_id) if event.bus_id else None
        if load is not None and (reset is None or load[0] < reset[0]):
            result[index] = load[1]
        elif reset is not None:
            result[index] = reset[1]
    return result


def _first_other_load(clock: tuple[str, float] | None, later_loads: list[tuple[int, KernelEvent, object]],
                      window_s: float) -> tuple[int, KernelEvent, object] | None:
    """The nearest later load that is not the event's own (a probe logs just before its load's banner); a load's own
    window holds few loads, so only the nearest few are looked at."""
    if clock is None:  # no load is its own
        return later_loads[-1] if later_loads else None
    kind, seconds = clock
    for mark in reversed(later_loads[-8:]):
        theirs = mark[2]  # _same_load, inlined: called for each event and each of its nearest loads
        if theirs is None or theirs[0] != kind or not 0 <= theirs[1] - seconds <= window_s:
            return mark
    return later_loads[-9] if len(later_loads) > 8 else None


def mark_history(events: list[KernelEvent], bus_by_uuid: dict[str, str] | None = None,
                 same_load_window_s: float = SAME_LOAD_WINDOW_S) -> None:
    """Set each event's `superseded_by`; a reset the log names only by UUID gets its GPU's bus id from `bus_by_uuid`
    (the GPUs' own UUIDs, lower case) first."""
    for event in events:
        if event.kind in ("gpu_reset", "xid") and not event.bus_id and event.uuid and bus_by_uuid:
            event.bus_id = bus_by_uuid.get(event.uuid.lower())
    clocks = _clocks(events)
    for event, mark, clock in zip(events, superseded_by(events, same_load_window_s, clocks), clocks):
        event.superseded_by = mark
        event.clock = clock


def _clocks(events: list[KernelEvent]) -> list[tuple[str, float] | None]:
    """Each event's event_clock, a time the log repeats (lines of one second, one repeated line) parsed once."""
    by_time: dict[tuple[float | None, str | None], tuple[str, float] | None] = {}
    clocks = []
    for event in events:
        key = (event.timestamp_s, event.wall_time)
        if key not in by_time:
            by_time[key] = event_clock(event)
        clocks.append(by_time[key])
    return clocks


def _same_load(mine: tuple[str, float] | None, theirs: tuple[str, float] | None, window_s: float) -> bool:
    if mine is None or theirs is None or mine[0] != theirs[0]:
        return False
    return 0 <= theirs[1] - mine[1] <= window_s
