"""Which machine each input file comes from, so that files from different machines are not merged into one.

A ticket often holds outputs of several nodes (`nvidia-smi` of node A, `dmesg` of node B). Each file tells what it can:
a host name (a bundle's manifest, syslog's and journalctl's host column) and the NVIDIA driver version (nvidia-smi,
`-q`, `-q -x`, nvml.json, the kernel module's load banner). Files that agree, or say nothing, are one machine; files
that name different hosts or different drivers are different machines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpuready.evidence.bundle import Bundle
from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.sniff import kind_of

_DRIVER = {
    "nvidia-smi.txt": re.compile(r"Driver Version:\s{0,8}(\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)"),
    "nvidia-smi-q.txt": re.compile(r"^Driver Version\s{0,40}:\s{0,4}(\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)", re.MULTILINE),
    "nvidia-smi-q.xml": re.compile(r"<driver_version>\s{0,4}(\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)\s{0,4}</driver_version>"),
    "nvml.json": re.compile(r'"driver_version"\s{0,4}:\s{0,4}"(\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)"'),
    # the last load of the kernel module in the log is the driver running now
    "dmesg.txt": re.compile(r"NVRM: loading NVIDIA UNIX [^\n]{0,60}?Kernel Module(?: for \S{1,20})?\s{1,8}"
                            r"(\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)"),
}
# syslog / journalctl: `Mar  1 10:00:00 node1 kernel: …`, `2024-11-15T12:02:03+00:00 node1 kernel: …`
_SYSLOG_HOST = re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.,+-]{8,32}) "
                          r"([A-Za-z0-9][A-Za-z0-9._-]{0,62}) (?:kernel|systemd|nv-fabricmanager)", re.MULTILINE)
MAX_LOOK_CHARS = 4 * 1024 * 1024
"""Only a file's first 4 MiB are looked at for its machine (a driver banner, a host column show early)."""


@dataclass(frozen=True)
class MachineId:
    host: str | None = None
    driver: str | None = None

    def describe(self) -> str:
        parts = [f"host {self.host}" if self.host else "", f"driver {self.driver}" if self.driver else ""]
        return ", ".join(part for part in parts if part) or "files that name no host or driver"


def machine_of(kind: str | None, text: str) -> MachineId:
    """What one file says about its machine."""
    head = text[:MAX_LOOK_CHARS]
    host = None
    if kind == "manifest.json":
        try:
            manifest = json.loads(head)
            host = manifest.get("host") if isinstance(manifest, dict) and isinstance(manifest.get("host"), str) \
                else None
        except ValueError:
            host = None
    elif kind == "dmesg.txt":
        hosts = {match.group(1) for match in _SYSLOG_HOST.finditer(head[:65536])}
        host = hosts.pop() if len(hosts) == 1 else None
    pattern = _DRIVER.get(kind or "")
    drivers = pattern.findall(head) if pattern else []
    return MachineId(host=host or None, driver=drivers[-1] if drivers else None)


@dataclass
class Machine:
    id: MachineId
    files: list[str] = field(default_factory=list)


def group_by_machine(kinds: dict[str, str | None], texts: dict[str, str]) -> list[Machine]:
    """The input files, machine by machine: a host name or driver version that differs starts a new machine; files
    that say neither join the one machine, or, where there are several, are judged as a machine of their own."""
    machines: list[Machine] = []
    silent: list[str] = []
    for name in sorted(texts):
        found = machine_of(kinds.get(name), texts[name])
        if found.host is None and found.driver is None:
            silent.append(name)
            continue
        match = next((machine for machine in machines if _same(machine.id, found)), None)
        if match is None:
            machines.append(Machine(found, [name]))
        else:
            match.id = MachineId(host=match.id.host or found.host, driver=match.id.driver or found.driver)
            match.files.append(name)
    if len(machines) <= 1:
        return [Machine(machines[0].id if machines else MachineId(), (machines[0].files if machines else []) + silent)]
    if silent:  # with several machines, a file that names none cannot be given to any of them
        machines.append(Machine(MachineId(), silent))
    return machines


def _same(known: MachineId, found: MachineId) -> bool:
    if known.host and found.host:
        return known.host == found.host and (not known.driver or not found.driver or known.driver == found.driver)
    return not known.driver or not found.driver or known.driver == found.driver


def split_bundle(files: dict[str, str]) -> list[tuple[MachineId, dict[str, str]]]:
    """The files as one bundle per machine (a `Bundle` keeps what its reader said about each file)."""
    kinds = dict(files.kinds) if isinstance(files, Bundle) else {}
    for name in files:
        kinds.setdefault(name, name if name in BUNDLE_FILES else kind_of(files[name]))
    machines = group_by_machine(kinds, dict(files))
    if len(machines) == 1:
        return [(machines[0].id, files)]
    return [(machine.id, _sub_bundle(files, machine.files, first=index == 0))
            for index, machine in enumerate(machines)]


def _sub_bundle(files: dict[str, str], names: list[str], first: bool) -> dict[str, str]:
    if not isinstance(files, Bundle):
        return {name: files[name] for name in names}
    part = Bundle(origin=files.origin)
    for name in names:
        part[name] = files[name]
        for attribute in ("kinds", "line_numbers", "partial"):
            source = getattr(files, attribute)
            if name in source:
                getattr(part, attribute)[name] = source[name]
    if first:  # what the reader skipped or could not read belongs to no machine: said once
        part.not_read, part.errors = dict(files.not_read), list(files.errors)
    return part
