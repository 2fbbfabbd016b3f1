"""The kernel log (`dmesg`, `journalctl -k`): Xid, SXid, fallen-off-the-bus and PCIe AER lines."""

from __future__ import annotations

import re

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
_TIMESTAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")
_IOMMU_DOMAIN = re.compile(r"iommu: Default domain type: (\w+)")
_INFOROM = re.compile(r"infoROM is corrupted", re.IGNORECASE)


def parse_kernel_log(text: str) -> list[KernelEvent]:
    events: list[KernelEvent] = []
    last_named_gpu: str | None = None
    for line in strip_ansi(text).splitlines():
        if not any(marker in line for marker in ("NVRM", "nvswitch", "AER", "PCIe Bus Error", "iommu:")):
            continue
        stamp = _TIMESTAMP.search(line)
        timestamp_s = float(stamp.group(1)) if stamp else None
        if match := _XID.search(line):
            events.append(KernelEvent(kind="xid", line=line.strip(), bus_id=normalize_bus_id(match.group(1)),
                                      code=int(match.group(2)), detail=match.group(3).strip(),
                                      timestamp_s=timestamp_s))
        elif match := _SXID.search(line):
            events.append(KernelEvent(kind="sxid", line=line.strip(), bus_id=normalize_bus_id(match.group(2)),
                                      code=int(match.group(3)), detail=match.group(4).strip(),
                                      timestamp_s=timestamp_s))
        elif match := _FALLEN.search(line):
            events.append(KernelEvent(kind="fallen_off_bus", line=line.strip(),
                                      bus_id=normalize_bus_id(match.group(1)), timestamp_s=timestamp_s))
        elif _FALLEN_GENERIC.search(line):
            events.append(KernelEvent(kind="fallen_off_bus", line=line.strip(), bus_id=last_named_gpu,
                                      timestamp_s=timestamp_s))
        elif match := _GPU_NAMED.search(line):
            last_named_gpu = normalize_bus_id(match.group(1))
        elif match := _AER.search(line):
            events.append(KernelEvent(kind="aer", line=line.strip(), bus_id=normalize_bus_id(match.group(1)),
                                      detail=match.group(2).strip(), timestamp_s=timestamp_s))
        elif match := _IOMMU_DOMAIN.search(line):
            events.append(KernelEvent(kind="iommu", line=line.strip(), detail=match.group(0),
                                      timestamp_s=timestamp_s))
        elif _INFOROM.search(line):
            events.append(KernelEvent(kind="inforom", line=line.strip(), timestamp_s=timestamp_s))
    return events
