"""The kernel-log reader of `gpuready diagnose`: Xid, SXid, fallen-off-the-bus, AER and GPU-reset lines pasted from
`dmesg`, `journalctl -k` or syslog, turned into cause → evidence → fix.

Parsing is facts/kernel_log.py's (`parse_kernel_log`, `superseded_by` through checks/health.py's `history_marks`);
the judgement per Xid comes from the catalog (knowledge/xid.toml). What this module adds is the cascade: which Xids
follow from which (`consequence_of`), kept in the small `CASCADES` table below.

Memory stays bounded whatever the log's size: lines are parsed in chunks of `CHUNK_LINES`; per (kind, device, code,
epoch) at most `KEEP_PER_GROUP` events are kept with their lines, the rest only counted (and the latest one kept);
`MAX_GROUPS` caps the number of such groups.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from gpuready.checks.health import history_marks
from gpuready.facts.kernel_log import MARKERS, event_clock, parse_kernel_log
from gpuready.facts.types import KernelEvent
from gpuready.facts.units import normalize_bus_id
from gpuready.knowledge import xid_entry, xid_level
from gpuready.model import Finding, GpuRef, Status, Subject
from gpuready.verbs.diagnose.evidence import MAX_EVIDENCE, DiagnoseContext, Line, Reader, quote

CHUNK_LINES = 2000
"""Lines parsed at a time; the last `CONTEXT_LINES` of a chunk are parsed again as the head of the next one (a
multi-line message, the time of a continuation line), their events not counted twice."""
CONTEXT_LINES = 8
KEEP_PER_GROUP = MAX_EVIDENCE
"""Events kept with their line per (kind, device, code, epoch); later ones are counted and the latest kept."""
MAX_GROUPS = 2000
"""Distinct (kind, device, code, epoch) groups kept; events of further groups are counted in `dropped_events`."""
SXID_WINDOW_S = 60.0
"""gpuready's choice: an Xid on a GPU up to this long after an NVSwitch SXid (same clock) follows from it. A real
NVSwitch cascade logs within seconds (tests/fixtures/public/xid/xid79-sxid-dmesg.txt: 12 s between the GPU's Xid 79
and the switches' SXid 20034). Without comparable times, log order alone decides."""

_XID_REF = "NVIDIA Xid catalog, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
_SXID_REF = ("NVIDIA Fabric Manager User Guide, SXid errors: "
             "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/")

NVLINK_XIDS = (74, 144, 145, 146, 147, 148, 149, 150)
MEMORY_ROOTS = (48,)
MEMORY_CHAIN = (63, 64, 94, 95, 154)


@dataclass(frozen=True)
class Cascade:
    causes: tuple[int, ...]
    """Xid codes that start the cascade on a GPU (the earliest one present is the root)."""
    effects: tuple[int, ...]
    """Xid codes on the same GPU that follow from it."""
    later_only: bool
    """The effect must come after the cause in the log (False: anywhere in the same driver load, as the memory chain
    logs Xid 63 between the DBE and the 94)."""
    why: str


CASCADES: tuple[Cascade, ...] = (
    # The GPU is gone: whatever the driver says about it afterwards follows from that.
    Cascade(causes=(79,), effects=(), later_only=True,
            why="the GPU had fallen off the bus: later errors on it follow from that"),
    # NVIDIA: Xid 48 (DBE) → 63 (row marked for remap) / 64 (remap failed) → 94/95 (contained/uncontained) → 154.
    Cascade(causes=MEMORY_ROOTS, effects=MEMORY_CHAIN, later_only=False,
            why="the uncorrectable memory error (Xid 48, DBE) causes the row remap, the containment and the recovery "
                "action"),
    Cascade(causes=(94, 95), effects=(63, 64, 154), later_only=False,
            why="the uncorrectable memory error (Xid 94/95) causes the row remap and the recovery action"),
    # NVLink error tears down the channels (45) or halts a micro-controller (62).
    Cascade(causes=NVLINK_XIDS, effects=(45, 62, 154), later_only=True,
            why="the NVLink error tore down the job's channels"),
    # 45 (preemptive cleanup) and 154 (recovery action) are about an earlier Xid on the same GPU, whatever it is.
    Cascade(causes=(), effects=(45, 154), later_only=True,
            why="the catalog says it follows an earlier error on the GPU"),
)
"""Rules in priority order: the first that applies names an Xid's cause. `causes=()`: any earlier Xid on the GPU."""

SXID_NEVER_CAUSES = (13, 31)
"""Application faults: an NVSwitch error does not explain them."""

BLAME: dict[int, str] = {
    **{code: "fabric" for code in (*NVLINK_XIDS, 136)},
    **{code: "driver" for code in (38, 61, 119, 120)},
}
"""Who is to blame, where the catalog's `app_fault` (application) does not say: NVLink codes → fabric, driver and GSP
firmware codes → driver; everything else → GPU."""

_NEXT_STEP = {
    "RESTART_APP": "restart the job", "WORKFLOW_XID_13": "restart the job", "WORKFLOW_XID_31": "restart the job",
    "WORKFLOW_XID_45": "restart the job", "RESET_GPU": "reset the GPU", "WORKFLOW_XID_48": "reset the GPU",
    "RESTART_BM": "drain the node and reboot", "CHECK_MECHANICALS": "drain the node and check the hardware",
    "CONTACT_SUPPORT": "drain the node; RMA if it recurs", "WORKFLOW_NVLINK_ERR": "drain the node",
    "WORKFLOW_NVLINK5_ERR": "drain the node", "IGNORE": "none for this Xid", "XID_154": "follow the recovery action",
}
"""NVIDIA's immediate-action bucket (xid.toml `nvidia_immediate`) in a few words."""

_SERIAL = re.compile(r"NVRM: (?:GPU Board Serial Number: |GPU ([0-9a-fA-F:.]+): GPU serial number is )(\w+)")
_GPU_AT = re.compile(r"NVRM: GPU at (?:PCI:)?([0-9a-fA-F:.]+): (GPU-[0-9a-fA-F-]{36})")
_NVSWITCH = re.compile(r"(nvidia-nvswitch\d+): SXid")
_RESET = re.compile(r"GPU reset executed: (GPU-[0-9a-fA-F-]{36}), success: (\w+)")
_RECOVERY = re.compile(r"GPU recovery action changed from .*? to (0x[0-9a-fA-F]+ \(([^)]*)\))")
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")


@dataclass
class _Seen:
    seq: int
    event: KernelEvent
    lines: list[Line]
    weight: int = 1
    """How many events this one stands for (the last kept event of a group also counts the ones not kept)."""


@dataclass
class _Group:
    kept: list[_Seen] = field(default_factory=list)
    last: _Seen | None = None
    not_kept: int = 0


class KernelReader(Reader):
    """Xid / SXid / fallen off the bus / AER / GPU reset lines → `xid.<code>`, `nvswitch.sxid`, `gpu.fallen_off_bus`,
    `gpu.reset`, `pcie.aer` findings, with the cascades between them."""

    name = "kernel"
    markers = "|".join(re.escape(marker) for marker in (*MARKERS, "fallen off the bus"))

    def __init__(self) -> None:
        self._pending: list[Line] = []
        self._context: list[Line] = []
        self._seq = 0
        self._epoch = 0
        self._groups: dict[tuple, _Group] = {}
        self._markers: list[_Seen] = []
        self.dropped_events = 0
        self._uuid: dict[str, str] = {}
        """Bus id → UUID, as the log names them (`NVRM: GPU at PCI:…: GPU-…`)."""
        self._serial: dict[str, str] = {}
        self._last_named: str | None = None
        self._failed_resets: list[tuple[str, Line]] = []
        self._switch_names: dict[str, str] = {}

    # --- reading ------------------------------------------------------------------------------------------------

    def feed(self, line: Line) -> None:
        text = line.text
        if match := _GPU_AT.search(text):
            if bus := normalize_bus_id(match.group(1)):
                self._uuid.setdefault(bus, match.group(2))
                self._last_named = bus
        if match := _SERIAL.search(text):
            bus = normalize_bus_id(match.group(1)) if match.group(1) else self._last_named
            if bus:
                self._serial.setdefault(bus, match.group(2))
        if (match := _RESET.search(text)) and match.group(2).lower() != "true" and len(self._failed_resets) < 100:
            self._failed_resets.append((match.group(1).lower(), line))
        self._pending.append(line)
        if len(self._pending) >= CHUNK_LINES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        lines = self._context + self._pending
        events = parse_kernel_log(line.text for line in lines)
        position = 0
        for event in events:
            while position < len(lines) and lines[position].text.strip() != event.line:
                position += 1
            if position >= len(lines):
                break
            if position >= len(self._context):
                self._take(event, lines, position)
            position += 1
        self._context = lines[-CONTEXT_LINES:]
        self._pending = []

    def _take(self, event: KernelEvent, lines: list[Line], position: int) -> None:
        self._seq += 1
        quoted = [lines[position]]
        short = (event.bus_id or "")[5:]
        if event.kind == "fallen_off_bus" and event.bus_id and short not in lines[position].text.lower():
            # a multi-line message: quote back to the line that names the GPU
            for back in range(position - 1, max(position - 4, -1), -1):
                quoted.insert(0, lines[back])
                if short in lines[back].text.lower():
                    break
            else:
                quoted = [lines[position]]
        if event.kind == "sxid" and (match := _NVSWITCH.search(event.line)) and event.bus_id:
            self._switch_names.setdefault(event.bus_id, match.group(1))
        seen = _Seen(seq=self._seq, event=event, lines=quoted)
        if event.kind in ("driver_load", "gpu_reset"):
            self._epoch += 1
            if len(self._markers) < 1000:
                self._markers.append(seen)
            return
        if event.kind not in ("xid", "sxid", "fallen_off_bus", "aer"):
            return
        key = (event.kind, event.bus_id, event.code, self._epoch)
        group = self._groups.get(key)
        if group is None:
            if len(self._groups) >= MAX_GROUPS:
                self.dropped_events += 1
                return
            group = self._groups[key] = _Group()
        if len(group.kept) < KEEP_PER_GROUP:
            group.kept.append(seen)
        else:
            group.not_kept += 1
            group.last = seen

    # --- judging ------------------------------------------------------------------------------------------------

    def findings(self, context: DiagnoseContext) -> list[Finding]:
        self._flush()
        seen: list[_Seen] = list(self._markers)
        for group in self._groups.values():
            seen.extend(group.kept)
            if group.last is not None:
                group.last.weight = group.not_kept
                seen.append(group.last)
        if not seen and not self._failed_resets:
            return []
        seen.sort(key=lambda item: item.seq)
        gpus = list(getattr(context.facts, "gpus", None) or [])
        events = [self._with_uuid_bus(item.event) for item in seen]
        marks = history_marks(gpus, events)
        for item, event in zip(seen, events):
            item.event = event
        judge = _Judge(self, context, gpus, seen, marks)
        return judge.findings()

    def _with_uuid_bus(self, event: KernelEvent) -> KernelEvent:
        if event.kind == "gpu_reset" and not event.bus_id and event.uuid:
            bus = next((bus for bus, uuid in self._uuid.items() if uuid.lower() == event.uuid), None)
            if bus:
                return dataclasses.replace(event, bus_id=bus)
        return event


@dataclass
class _Xid:
    """One GPU and code: its events in log order (each with the driver load / reset that made it history)."""
    bus_id: str | None
    code: int
    items: list[tuple[_Seen, KernelEvent | None]]
    fallen_lines: list[Line] = field(default_factory=list)

    @property
    def first(self) -> _Seen:
        return self.items[0][0]

    @property
    def count(self) -> int:
        return sum(item.weight for item, _mark in self.items)

    @property
    def current(self) -> list[_Seen]:
        return [item for item, mark in self.items if mark is None]

    @property
    def check_id(self) -> str:
        return f"xid.{self.code}"


class _Judge:
    def __init__(self, reader: KernelReader, context: DiagnoseContext, gpus: list, seen: list[_Seen],
                 marks: list[KernelEvent | None]) -> None:
        self.reader, self.context = reader, context
        self.seen = list(zip(seen, marks))
        self.index_by_bus = {normalize_bus_id(gpu.bus_id): gpu.index for gpu in gpus if gpu.bus_id}
        self.uuid_by_bus = {normalize_bus_id(gpu.bus_id): gpu.uuid for gpu in gpus if gpu.bus_id and gpu.uuid}
        self.serial_by_bus = {normalize_bus_id(gpu.bus_id): gpu.serial for gpu in gpus if gpu.bus_id and gpu.serial}
        self.next_index = max(self.index_by_bus.values(), default=-1) + 1

    # subjects

    def gpu_ref(self, bus_id: str | None) -> GpuRef | None:
        if bus_id is None:
            return None
        if bus_id not in self.index_by_bus:
            self.index_by_bus[bus_id] = self.next_index
            self.next_index += 1
        uuid = self.uuid_by_bus.get(bus_id) or self.reader._uuid.get(bus_id)
        return GpuRef(index=self.index_by_bus[bus_id], bus_id=bus_id, uuid=uuid)

    def where(self, bus_id: str | None) -> str:
        if bus_id is None:
            return "a GPU the log does not name"
        ref = self.gpu_ref(bus_id)
        text = f"{ref.label()} ({bus_id}"
        if ref.uuid:
            text += f", {ref.uuid}"
        if serial := self.serial_by_bus.get(bus_id) or self.reader._serial.get(bus_id):
            text += f", serial {serial}"
        return text + ")"

    def subject(self, bus_id: str | None) -> Subject:
        return Subject(host=self.context.host, gpu=self.gpu_ref(bus_id))

    # the judgement

    def findings(self) -> list[Finding]:
        for item, _mark in self.seen:  # stable indices: order of first appearance in the log
            if item.event.kind in ("xid", "fallen_off_bus", "gpu_reset") and item.event.bus_id:
                self.gpu_ref(item.event.bus_id)
        xids = self._xids()
        switches = self._by_device("sxid")
        causes = self._causes(xids, switches)
        findings: list[Finding] = []
        for key in sorted(switches, key=lambda bus: switches[bus][0][0].seq):
            findings.append(self._sxid_finding(key, switches[key]))
        for xid in sorted(xids.values(), key=lambda xid: xid.first.seq):
            findings.append(self._xid_finding(xid, causes.get((xid.bus_id, xid.code))))
        findings.extend(self._fallen_findings(xids))
        findings.extend(self._reset_findings())
        findings.extend(self._aer_findings())
        return findings

    def _xids(self) -> dict[tuple[str | None, int], _Xid]:
        xids: dict[tuple[str | None, int], _Xid] = {}
        for item, mark in self.seen:
            if item.event.kind == "xid" and item.event.code is not None:
                key = (item.event.bus_id, item.event.code)
                xids.setdefault(key, _Xid(item.event.bus_id, item.event.code, [])).items.append((item, mark))
        return xids

    def _by_device(self, kind: str) -> dict[str | None, list[tuple[_Seen, KernelEvent | None]]]:
        found: dict[str | None, list[tuple[_Seen, KernelEvent | None]]] = {}
        for item, mark in self.seen:
            if item.event.kind == kind:
                found.setdefault(item.event.bus_id, []).append((item, mark))
        return found

    def _between(self, earlier: _Seen, later: _Seen, bus_id: str | None) -> bool:
        """A driver load (any GPU) or a reset of this GPU logged between the two events: they are not one cascade."""
        return any(earlier.seq < item.seq < later.seq and (item.event.kind == "driver_load" or (
            item.event.kind == "gpu_reset" and item.event.bus_id == bus_id)) for item, _mark in self.seen)

    def _causes(self, xids: dict[tuple[str | None, int], _Xid],
                switches: dict[str | None, list[tuple[_Seen, KernelEvent | None]]]) -> dict[tuple, tuple[str, str]]:
        """(bus, code) → (the check_id of its root cause, why)."""
        direct: dict[tuple, tuple[tuple | str, str]] = {}
        first_sxid = min((items[0][0] for items in switches.values()), key=lambda item: item.seq, default=None)
        for key, xid in xids.items():
            bus, code = key
            on_gpu = [other for other in xids.values() if other.bus_id == bus and other.code != code]
            cause = None
            for rule in CASCADES:
                if rule.effects and code not in rule.effects or code in rule.causes:
                    continue
                candidates = [other for other in on_gpu if (other.code in rule.causes if rule.causes
                                                             else other.code not in rule.effects)
                              and not self._between(*sorted((other.first, xid.first), key=lambda s: s.seq), bus)
                              and (other.first.seq < xid.first.seq or not rule.later_only)]
                if rule.causes == (79,):  # the GPU's fall, as Xid 79 or as the plain message
                    fallen = [item for item, _mark in self.seen if item.event.kind == "fallen_off_bus"
                              and item.event.bus_id == bus and item.seq < xid.first.seq
                              and not self._between(item, xid.first, bus)]
                    if fallen and not any(other.code == 79 for other in candidates):
                        cause = ("gpu.fallen_off_bus" if (bus, 79) not in xids else (bus, 79), rule.why)
                        break
                if candidates:
                    if rule.causes:
                        root = min(candidates, key=lambda other: (rule.causes.index(other.code), other.first.seq))
                    else:  # the latest earlier Xid
                        root = max(candidates, key=lambda other: other.first.seq)
                    cause = ((bus, root.code), rule.why)
                    break
            if cause is None and first_sxid is not None and code not in SXID_NEVER_CAUSES \
                    and first_sxid.seq < xid.first.seq and _within(first_sxid.event, xid.first.event, SXID_WINDOW_S):
                cause = ("nvswitch.sxid", "it follows an NVSwitch error (SXid) on the fabric")
            if cause is not None:
                direct[key] = cause
        roots: dict[tuple, tuple[str, str]] = {}
        for key in direct:
            target, why = direct[key]
            hops = 0
            while isinstance(target, tuple) and target in direct and hops < 20:
                target = direct[target][0]
                hops += 1
            roots[key] = (f"xid.{target[1]}" if isinstance(target, tuple) else target, why)
        return roots

    def _xid_finding(self, xid: _Xid, cause: tuple[str, str] | None) -> Finding:
        entry = xid_entry(xid.code)
        where = self.where(xid.bus_id)
        first, last = xid.first, xid.items[-1][0]
        current = xid.current
        lines = [line for item, _mark in xid.items for line in item.lines]
        observed: dict[str, Any] = {"xid": xid.code, "count": xid.count, "first": _time(first.event),
                                    "last": _time(last.event), "history": not current}
        if entry is None:
            status = Status.WARN
            message = (f"Xid {xid.code} on {where}, {xid.count}×: not in gpuready's catalog "
                       f"(first {_time(first.event)}, last {_time(last.event)}). Line: {first.event.line[:200]}")
            fix = "Look the Xid up in NVIDIA's catalog; run `dcgmi diag -r 3` on the GPU if it recurs."
            observed["blame"] = None
        else:
            blame = "application" if entry.get("app_fault") else BLAME.get(xid.code, "GPU")
            status = _status(entry)
            observed.update(name=entry["name"], severity=entry["severity"], blame=blame,
                            next_step=_NEXT_STEP.get(entry.get("nvidia_immediate", ""), "see the action"))
            notes = [f"first {_time(first.event)}", f"last {_time(last.event)}", f"blame: {blame}"]
            if recovery := _RECOVERY.search(last.event.line):
                observed["recovery_action"] = recovery.group(2)
                notes.append(f"recovery action now: {recovery.group(1)}")
            if caused := _CAUSED_BY.search(first.event.line):
                notes.append(f"the driver says: caused by previous Xid {caused.group(1)}")
            message = (f"Xid {xid.code} {entry['name']} on {where}, {xid.count}×: {entry['meaning'].rstrip('.')} "
                       f"({'; '.join(notes)}).")
            fix = entry["action"]
        if not current:
            mark = xid.items[-1][1]
            status = Status.WARN if status == Status.FAIL else status
            message += (f" All of them come before the {_marker(mark)} at {_time(mark)}, so they are history: what the "
                        "GPU logged since then is what counts.")
            observed["history"] = True
        elif len(current) < len(xid.items):
            message += f" ({len(xid.items) - len(current)} earlier ones come before a driver reload or reset.)"
        if cause is not None:
            observed["consequence_of"] = cause[0]
            message += f" It follows from {cause[0]}: {cause[1]}."
        evidence = quote(lines + ([] if xid.code != 79 else self._fallen_lines(xid.bus_id)))
        return Finding(check_id=xid.check_id, status=status, subject=self.subject(xid.bus_id), message=message,
                       observed=observed, expected="no Xid", fix=fix,
                       refs=[entry["source"] if entry else _XID_REF], evidence=evidence,
                       consequence_of=cause[0] if cause else None)

    def _fallen_lines(self, bus_id: str | None) -> list[Line]:
        return [line for item, _mark in self.seen if item.event.kind == "fallen_off_bus"
                and item.event.bus_id == bus_id for line in item.lines]

    def _fallen_findings(self, xids: dict[tuple[str | None, int], _Xid]) -> list[Finding]:
        findings = []
        for bus, items in self._by_device("fallen_off_bus").items():
            if (bus, 79) in xids:
                continue  # the Xid 79 finding quotes these lines
            count = sum(item.weight for item, _mark in items)
            first, last = items[0][0], items[-1][0]
            status, message = Status.FAIL, (
                f"{self.where(bus)} has fallen off the bus, {count}× (first {_time(first.event)}, last "
                f"{_time(last.event)}): the driver can no longer talk to it; the log has no Xid 79 line for it "
                "(older drivers, or the newer multi-line message).")
            if all(mark is not None for _item, mark in items):
                status = Status.WARN
                message += (f" It comes before the {_marker(items[-1][1])} at {_time(items[-1][1])}, so it is history; "
                            "check that the GPU is present now (`nvidia-smi -L`).")
            findings.append(Finding(
                check_id="gpu.fallen_off_bus", status=status, subject=self.subject(bus), message=message,
                observed={"count": count, "first": _time(first.event), "last": _time(last.event), "blame": "GPU"},
                expected="the GPU on the bus",
                fix="Drain the node and reboot; reseat the GPU, check its power cables and the PCIe slot/riser "
                    "(`lspci -vvv`, AER lines in `dmesg`); if it falls off again, run `dcgmi diag -r 3` and RMA it.",
                refs=[(xid_entry(79) or {}).get("source", _XID_REF)],
                evidence=quote([line for item, _mark in items for line in item.lines])))
        return findings

    def _sxid_finding(self, bus: str | None, items: list[tuple[_Seen, KernelEvent | None]]) -> Finding:
        events = [item.event for item, _mark in items]
        count = sum(item.weight for item, _mark in items)
        fatal = [event for event in events if "fatal" in event.detail.lower() and "non-fatal" not in
                 event.detail.lower() and "nonfatal" not in event.detail.lower()]
        codes = sorted({event.code for event in events if event.code is not None})
        name = self.reader._switch_names.get(bus, "an NVSwitch")
        status = Status.FAIL if fatal else Status.WARN
        message = (f"NVSwitch errors on {name} ({bus}): SXid {', '.join(map(str, codes))}, {count} line(s)"
                   f"{', fatal' if fatal else ''} (first {_time(events[0])}, last {_time(events[-1])}); blame: fabric.")
        if all(mark is not None for _item, mark in items):
            status = Status.WARN
            message += f" They come before the {_marker(items[-1][1])}, so they are history."
        return Finding(check_id="nvswitch.sxid", status=status, subject=Subject(host=self.context.host),
                       message=message, observed={"switch": name, "bus_id": bus, "sxid": codes, "count": count,
                                                  "fatal": bool(fatal), "blame": "fabric"},
                       expected="no SXid",
                       fix="Check `nvidia-smi -q` fabric state and `journalctl -u nvidia-fabricmanager`; fatal SXids "
                           "need the node drained and rebooted and, if they recur, the vendor (NVSwitch tray or "
                           "baseboard).",
                       refs=[_SXID_REF], evidence=quote([line for item, _mark in items for line in item.lines]))

    def _reset_findings(self) -> list[Finding]:
        findings = []
        for item, _mark in self.seen:
            event = item.event
            if event.kind != "gpu_reset":
                continue
            after = [other for other, _m in self.seen if other.seq > item.seq and other.event.kind == "xid"
                     and other.event.bus_id and other.event.bus_id == event.bus_id]
            before = [other for other, _m in self.seen if other.seq < item.seq and other.event.kind == "xid"
                      and other.event.bus_id and other.event.bus_id == event.bus_id]
            where = self.where(event.bus_id) if event.bus_id else event.uuid
            if after:
                status = Status.WARN
                message = (f"{where} was reset at {_time(event)}, and Xids came back after it "
                           f"(Xid {', '.join(sorted({str(other.event.code) for other in after}))}).")
            else:
                status = Status.PASS
                message = (f"{where} was reset at {_time(event)}" + (
                    f"; the {sum(other.weight for other in before)} Xid line(s) on it before are history."
                    if before else "."))
            findings.append(Finding(
                check_id="gpu.reset", status=status, subject=self.subject(event.bus_id), message=message,
                observed={"uuid": event.uuid, "time": _time(event), "xids_after": len(after)},
                fix="Watch the GPU: `nvidia-smi -q -d ECC,ROW_REMAPPER`; run `dcgmi diag -r 3` if Xids return."
                if after else None, evidence=quote(item.lines)))
        for uuid, line in self.reader._failed_resets:
            bus = next((bus for bus, known in {**self.reader._uuid, **self.uuid_by_bus}.items()
                        if known and known.lower() == uuid), None)
            findings.append(Finding(
                check_id="gpu.reset", status=Status.WARN, subject=self.subject(bus),
                message=f"A reset of {self.where(bus) if bus else uuid} did not succeed: the GPU keeps its error "
                        "state.",
                observed={"uuid": uuid, "success": False}, fix="Drain the node and reboot it.",
                evidence=quote([line])))
        return findings

    def _aer_findings(self) -> list[Finding]:
        findings = []
        for bus, items in self._by_device("aer").items():
            details = " ".join(item.event.detail for item, _mark in items).lower()
            severe = "uncorrected" in details or "fatal" in details
            count = sum(item.weight for item, _mark in items)
            gpu = self.gpu_ref(bus) if bus in self.index_by_bus else None
            findings.append(Finding(
                check_id="pcie.aer", status=Status.WARN, subject=Subject(host=self.context.host, gpu=gpu),
                message=f"PCIe AER errors on {bus}, {count} line(s){' (uncorrected)' if severe else ''}: the link "
                        f"retried or lost transfers (first {_time(items[0][0].event)}).",
                observed={"bus_id": bus, "count": count, "uncorrected": severe}, expected="no AER error",
                fix="Check the link with `lspci -vvv -s " + str(bus) + "` (LnkSta, AER status); reseat the card or "
                    "riser; a marginal link may need the slot set one PCIe generation lower.",
                evidence=quote([line for item, _mark in items for line in item.lines])))
        return findings


def _status(entry: dict[str, Any] | None) -> Status:
    """The catalog's rule, as `health.xid` applies it (knowledge.xid_level)."""
    return Status(xid_level(entry))


def _time(event: KernelEvent | None) -> str:
    if event is None:
        return "an unknown time"
    if event.wall_time:
        return event.wall_time
    if event.timestamp_s is not None:
        return f"{event.timestamp_s:.6f} s after boot"
    return "an unknown time (no time stamp)"


def _marker(mark: KernelEvent | None) -> str:
    if mark is None or mark.kind == "driver_load":
        return f"NVIDIA driver load{f' ({mark.detail})' if mark is not None and mark.detail else ''}"
    return "reset of this GPU"


def _within(earlier: KernelEvent, later: KernelEvent, window_s: float) -> bool:
    mine, theirs = event_clock(earlier), event_clock(later)
    if mine is None or theirs is None or mine[0] != theirs[0]:
        return True  # no comparable clock: log order decides
    return 0 <= theirs[1] - mine[1] <= window_s
