"""`lspci -vv`: NVIDIA devices, bridges with ACS redirection, and link capability vs status."""

from __future__ import annotations

import re

from gpuready.facts.types import PciDevice
from gpuready.facts.units import normalize_bus_id, strip_ansi

_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.+)$")
_LINK = re.compile(r"Speed\s+([\d.]+)GT/s[^,]*,\s*Width\s+x(\d+)")
_BUS = re.compile(r"Bus: primary=([0-9a-f]{2}), secondary=([0-9a-f]{2}), subordinate=([0-9a-f]{2})")
# ACS controls that send peer-to-peer requests up to the root complex instead of across the switch.
P2P_REDIRECT_FLAGS = ("ReqRedir", "CmpltRedir", "EgressCtrl")


def parse_lspci(text: str) -> list[PciDevice]:
    devices: list[PciDevice] = []
    current: PciDevice | None = None
    for line in strip_ansi(text).splitlines():
        header = _DEVICE.match(line)
        if header and not line.startswith((" ", "\t")):
            description = header.group(2)
            current = PciDevice(
                address=normalize_bus_id(header.group(1)) or header.group(1),
                description=description,
                is_nvidia_gpu="NVIDIA" in description and bool(
                    re.search(r"3D controller|VGA compatible controller|Display controller", description)),
                is_bridge="PCI bridge" in description)
            devices.append(current)
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("LnkCap:") and (link := _LINK.search(stripped)):
            current.link_cap = (float(link.group(1)), int(link.group(2)))
        elif stripped.startswith("LnkSta:") and (link := _LINK.search(stripped)):
            current.link_status = (float(link.group(1)), int(link.group(2)))
        elif stripped.startswith("ACSCtl:"):
            current.acs_enabled = [flag.rstrip("+") for flag in stripped.split()[1:]
                                   if flag.endswith("+") and flag.rstrip("+") in P2P_REDIRECT_FLAGS]
        elif bus := _BUS.search(stripped):
            current.secondary_bus = int(bus.group(2), 16)
            current.subordinate_bus = int(bus.group(3), 16)
    return devices


def bridges_above(device: PciDevice, devices: list[PciDevice]) -> list[PciDevice]:
    """Bridges whose bus range holds this device: its path to the root complex."""
    domain, bus = device.address.split(":")[0], int(device.address.split(":")[1], 16)
    return [bridge for bridge in devices
            if bridge.is_bridge and bridge.address.split(":")[0] == domain
            and bridge.secondary_bus is not None and bridge.subordinate_bus is not None
            and bridge.secondary_bus <= bus <= bridge.subordinate_bus]
