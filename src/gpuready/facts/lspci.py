"""`lspci -vv`: NVIDIA devices, bridges with ACS redirection, PCIe port types, bus ranges, and link
capability vs status; then the tree those bus ranges draw (the GPUs below each bridge, each switch port's
upstream port), as fields the checks read."""

from __future__ import annotations

import re

from gpuready.facts.marked_lines import marked_lines
from gpuready.facts.types import PciDevice
from gpuready.facts.units import bounded, first_number, normalize_bus_id, strip_ansi
from gpuready.i18n import said

_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.+)$")
_LINK = re.compile(r"Speed\s+([\d.]+)GT/s[^,]*,\s*Width\s+x(\d+)")
_BUS = re.compile(r"Bus: primary=([0-9a-f]{2}), secondary=([0-9a-f]{2}), subordinate=([0-9a-f]{2})")
# pciutils ls-caps.c cap_express(): "Express (v2) Root Port (Slot+), MSI 00" (newer: ", IntMsgNum 0").
_EXPRESS = re.compile(r"^Capabilities: \[[0-9a-f]+\] Express (?:\(v\d+\) )?(.+?)(?: \(Slot[+-]\))?, (?:MSI|IntMsgNum) ")
# The lines that can say anything: a device's (its bus id holds `:bb.f`) and the fields below it read
_MARKER = re.compile(r":[0-9a-fA-F]{2}\.[0-7]|LnkCap:|LnkSta:|ACSCtl:|Capabilities: \[|Bus: primary=")
# ACS controls that send peer-to-peer requests up to the root complex instead of across the switch.
P2P_REDIRECT_FLAGS = ("ReqRedir", "CmpltRedir", "EgressCtrl")


def parse_lspci(text: str) -> list[PciDevice]:
    """Only the lines with a marker are read (blank lines, foreign output: one C-speed search)."""
    devices: list[PciDevice] = []
    current: PciDevice | None = None
    for line in marked_lines(strip_ansi(text), _MARKER):
        header = _DEVICE.match(line)
        if header and not line.startswith((" ", "\t")):
            description = header.group(2)
            current = PciDevice(
                address=normalize_bus_id(header.group(1)) or header.group(1),
                description=description,
                is_nvidia_gpu="NVIDIA" in description and bool(
                    re.search(r"3D controller|VGA compatible controller|Display controller", description)),
                is_bridge="PCI bridge" in description,
                device_class=description.split(": ", 1)[0].strip())
            devices.append(current)
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("LnkCap:") and (link := _LINK.search(stripped)):
            current.link_cap = _link(link)
        elif stripped.startswith("LnkSta:") and (link := _LINK.search(stripped)):
            current.link_status = _link(link)
        elif stripped.startswith("ACSCtl:"):
            current.acs_enabled = [flag.rstrip("+") for flag in stripped.split()[1:]
                                   if flag.endswith("+") and flag.rstrip("+") in P2P_REDIRECT_FLAGS]
        elif express := _EXPRESS.match(stripped):
            current.port_type = express.group(1)
        elif bus := _BUS.search(stripped):
            current.secondary_bus = int(bus.group(2), 16)
            current.subordinate_bus = int(bus.group(3), 16)
    _link_gpus_below(devices)
    _link_switch_ports(devices)
    return devices


def _link_gpus_below(devices: list[PciDevice]) -> None:
    """Bridges × GPUs, each pair once: a machine has a few hundred bridges and a few dozen GPUs at most."""
    gpus = [device for device in devices if device.is_nvidia_gpu]
    for bridge in devices:
        if bridge.secondary_bus is not None:
            bridge.gpus_below = [gpu.address for gpu in gpus if holds(bridge, gpu)]


def _link_switch_ports(devices: list[PciDevice]) -> None:
    """A downstream port's bus is its switch's internal bus, which is the upstream port's secondary bus."""
    upstream_by_bus: dict[tuple[str, int], str] = {}
    for device in devices:
        if device.port_type == "Upstream Port" and device.secondary_bus is not None:
            upstream_by_bus.setdefault((_domain_bus(device.address)[0], device.secondary_bus), device.address)
    for port in devices:
        if port.port_type == "Downstream Port":
            port.switch_upstream = upstream_by_bus.get(_domain_bus(port.address))


def _link(match: re.Match[str]) -> tuple[float, int] | None:
    """(GT/s, width) of a LnkCap/LnkSta line; None where the speed is no number, ValueError for an absurd width."""
    speed = first_number(match.group(1))
    width = bounded(match.group(2), "pcie_width", said("parse.what.pcie_width_x", width=match.group(2)[:20]))
    return (speed, width) if speed is not None else None


def _domain_bus(address: str) -> tuple[str, int]:
    domain, bus = address.split(":")[:2]
    return domain, int(bus, 16)


def holds(bridge: PciDevice, device: PciDevice) -> bool:
    """Whether `device` sits in the bridge's downstream bus range (secondary..subordinate)."""
    if bridge.secondary_bus is None or bridge.subordinate_bus is None or bridge is device:
        return False
    bridge_domain, _ = _domain_bus(bridge.address)
    domain, bus = _domain_bus(device.address)
    return bridge_domain == domain and bridge.secondary_bus <= bus <= bridge.subordinate_bus


def bridges_above(device: PciDevice, devices: list[PciDevice]) -> list[PciDevice]:
    """Bridges whose bus range holds this device: its path to the root complex."""
    return [bridge for bridge in devices if bridge.is_bridge and holds(bridge, device)]
