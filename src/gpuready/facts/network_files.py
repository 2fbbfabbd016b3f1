"""RDMA and Ethernet: `ibv_devinfo`, sysfs captures, `ip -o addr`."""

from __future__ import annotations

import re

from gpuready.facts.types import IbPort, NetInterface
from gpuready.facts.units import first_number, to_int

# Interfaces that are not physical NICs (never the path between nodes).
_VIRTUAL_PREFIXES = ("lo", "docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "tun", "tap",
                     "ifb", "kube", "vxlan", "weave", "tailscale", "zt", "wg")


def parse_ibv_devinfo(text: str) -> list[IbPort]:
    ports: list[IbPort] = []
    device: str | None = None
    current: IbPort | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if match := re.match(r"^hca_id:\s*(\S+)", stripped):
            device, current = match.group(1), None
        elif (match := re.match(r"^port:\s*(\d+)", stripped)) and device:
            current = IbPort(device=device, port=int(match.group(1)), state=None, rate_gbit_per_s=None)
            ports.append(current)
        elif current is not None and (match := re.match(r"^state:\s*PORT_(\w+)", stripped)):
            current.state = match.group(1)
        elif current is not None and (match := re.match(r"^link_layer:\s*(\w+)", stripped)):
            current.link_layer = match.group(1)
    return ports


def parse_ib_sysfs(sections: dict[str, str]) -> list[IbPort]:
    """/sys/class/infiniband/<dev>/ports/<n>/{state,rate,link_layer} captured by `collect`."""
    ports: dict[tuple[str, int], IbPort] = {}
    for path, content in sections.items():
        match = re.match(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(state|rate|link_layer)$", path)
        if not match:
            continue
        key = (match.group(1), int(match.group(2)))
        port = ports.setdefault(key, IbPort(device=key[0], port=key[1], state=None, rate_gbit_per_s=None))
        if match.group(3) == "state":
            port.state = content.split(":")[-1].strip()  # "4: ACTIVE"
        elif match.group(3) == "rate":
            rate = re.match(r"([\d.]+)\s*Gb/sec", content)
            port.rate_gbit_per_s = first_number(rate.group(1)) if rate else None
        else:
            port.link_layer = content.strip()
    return sorted(ports.values(), key=lambda port: (port.device, port.port))


def parse_net_sysfs(sections: dict[str, str]) -> list[NetInterface]:
    interfaces: dict[str, NetInterface] = {}
    for path, content in sections.items():
        match = re.match(r"^/sys/class/net/([^/]+)/(speed|operstate)$", path)
        if not match:
            continue
        name = match.group(1)
        interface = interfaces.setdefault(name, NetInterface(name=name, speed_mbit_per_s=None, operstate=None,
                                                             is_virtual=name.startswith(_VIRTUAL_PREFIXES)))
        if match.group(2) == "speed":
            value = content.strip()
            # -1 or an error: the driver does not report a speed (virtio, down links).
            interface.speed_mbit_per_s = to_int(value) if re.fullmatch(r"\d+", value) else None
        else:
            interface.operstate = content.strip()
    return sorted(interfaces.values(), key=lambda interface: interface.name)


def parse_ip_addr(text: str) -> dict[str, list[str]]:
    """`ip -o addr` or `ip addr` → interface → addresses."""
    addresses: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if match := re.match(r"^\d+:\s+([^:@\s]+)[@:]?\s", line):
            current = match.group(1)
            addresses.setdefault(current, [])
        if current and (match := re.search(r"\binet6?\s+([0-9a-fA-F:.]+/\d+)", line)):
            addresses[current].append(match.group(1))
    return addresses


def is_virtual_interface(name: str) -> bool:
    return name.startswith(_VIRTUAL_PREFIXES)
