"""RDMA and Ethernet: `ibv_devinfo`, `ibstat`, sysfs captures, `ip -o addr`."""

from __future__ import annotations

import re

from gpuready.facts.types import IbPort, NetInterface
from gpuready.facts.units import first_number, to_int

# Interfaces that are not physical NICs (never the path between nodes).
_VIRTUAL_PREFIXES = ("lo", "docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "tun", "tap",
                     "ifb", "kube", "vxlan", "weave", "tailscale", "zt", "wg")


IB_ERROR_COUNTERS = ("link_downed", "symbol_error", "port_rcv_errors", "link_error_recovery",
                     "excessive_buffer_overrun_errors")
"""The sysfs `counters/` that `collect` records (the port's error counters of the InfiniBand spec)."""
IB_HW_COUNTERS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err",
                  "rx_icrc_encapsulated", "req_cqe_error", "resp_cqe_error", "roce_slow_restart")
"""The mlx5 `hw_counters/` that mean trouble (NVIDIA, Understanding mlx5 Linux counters): retransmissions, timeouts,
RNR retries exhausted, corrupt RoCE packets, completions in error, RoCE slow restarts; recorded beside `counters/`."""

# Physical states as ibstat prints them; sysfs says `5: LinkUp`, ibv_devinfo -v `LINK_UP (5)`.
_PHYS_STATES = {word.lower(): word for word in ("Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp",
                                                "LinkErrorRecovery", "PhyTest")}


def _phys_state(text: str) -> str:
    word = re.sub(r"^\d+:\s*|\s*\(\d+\)$", "", text.strip())
    return _PHYS_STATES.get(word.replace("_", "").lower(), word)


def _new_port(device: str, port: int, hca_type: str | None = None) -> IbPort:
    return IbPort(device=device, port=port, state=None, rate_gbit_per_s=None, hca_type=hca_type)


def parse_ibv_devinfo(text: str) -> list[IbPort]:
    """`ibv_devinfo` (`-v` too) or `ibstat`: the two print the same ports in their own words."""
    if re.search(r"^CA '", text, re.MULTILINE):
        return parse_ibstat(text)
    ports: list[IbPort] = []
    device: str | None = None
    hca_type: str | None = None
    current: IbPort | None = None
    width = speed = None
    for line in text.splitlines():
        stripped = line.strip()
        if match := re.match(r"^hca_id:\s*(\S+)", stripped):
            device, hca_type, current = match.group(1), None, None
        elif device and (match := re.match(r"^vendor_part_id:\s*(\d+)", stripped)):
            hca_type = f"MT{match.group(1)}"
        elif (match := re.match(r"^port:\s*(\d+)", stripped)) and device:
            current, width, speed = _new_port(device, int(match.group(1)), hca_type), None, None
            ports.append(current)
        elif current is None:
            continue
        elif match := re.match(r"^state:\s*PORT_(\w+)", stripped):
            current.state = match.group(1)
        elif match := re.match(r"^phys_state:\s*(\w+)", stripped):
            current.phys_state = _phys_state(match.group(1))
        elif match := re.match(r"^link_layer:\s*(\w+)", stripped):
            current.link_layer = match.group(1)
        elif match := re.match(r"^active_width:\s*(\d+)X", stripped):
            width = int(match.group(1))
        elif match := re.match(r"^active_speed:\s*([\d.]+)\s*Gbps", stripped):
            speed = float(match.group(1))
        if current is not None and width and speed:
            current.rate_gbit_per_s = width * speed
    return ports


def parse_ibstat(text: str) -> list[IbPort]:
    """`ibstat`: `CA 'mlx5_0'`, `CA type: MT4129`, then per `Port 1:` its State, Physical state, Rate, Link layer."""
    ports: list[IbPort] = []
    device: str | None = None
    hca_type: str | None = None
    current: IbPort | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if match := re.match(r"^CA '([^']+)'", stripped):
            device, hca_type, current = match.group(1), None, None
        elif device and (match := re.match(r"^CA type:\s*(\S+)", stripped)):
            hca_type = match.group(1)
        elif device and (match := re.match(r"^Port (\d+):$", stripped)):
            current = _new_port(device, int(match.group(1)), hca_type)
            ports.append(current)
        elif current is None:
            continue
        elif match := re.match(r"^State:\s*(\w+)", stripped):
            current.state = match.group(1).upper()
        elif match := re.match(r"^Physical state:\s*(\w+)", stripped):
            current.phys_state = _phys_state(match.group(1))
        elif match := re.match(r"^Rate:\s*([\d.]+)", stripped):
            current.rate_gbit_per_s = float(match.group(1))
        elif match := re.match(r"^Link layer:\s*(\w+)", stripped):
            current.link_layer = match.group(1)
    return ports


_IB_SYSFS = re.compile(r"^/sys/class/infiniband/([^/]+)/(?:ports/(\d+)/(state|phys_state|rate|link_layer|"
                       r"(?:hw_)?counters/(\w+))|(hca_type))$")


def parse_ib_sysfs(sections: dict[str, str]) -> list[IbPort]:
    """/sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer,counters/*} and <dev>/hca_type captured
    by `collect`."""
    ports: dict[tuple[str, int], IbPort] = {}
    models: dict[str, str] = {}
    for path, content in sections.items():
        match = _IB_SYSFS.match(path)
        if not match:
            continue
        if match.group(5):
            models[match.group(1)] = content.strip()
            continue
        key = (match.group(1), int(match.group(2)))
        port = ports.setdefault(key, _new_port(*key))
        _set_sysfs_value(port, match.group(3), match.group(4), content.strip())
    numa_nodes = ib_numa_nodes(sections)
    for port in ports.values():
        port.hca_type = models.get(port.device)
        port.numa_node = numa_nodes.get(port.device)
    return sorted(ports.values(), key=lambda port: (port.device, port.port))


_IB_NUMA = re.compile(r"^/sys/class/infiniband/([^/]+)/device/numa_node$")


def ib_numa_nodes(sections: dict[str, str]) -> dict[str, int]:
    """/sys/class/infiniband/<dev>/device/numa_node → device → NUMA node; -1 (the platform does not say) and anything
    that is not a number are left out."""
    nodes = {}
    for path, content in sections.items():
        match = _IB_NUMA.match(path)
        if match and re.fullmatch(r"\d{1,4}", content.strip()):
            nodes[match.group(1)] = int(content.strip())
    return nodes


def _set_sysfs_value(port: IbPort, name: str, counter: str | None, content: str) -> None:
    if counter:
        if re.fullmatch(r"\d+", content):
            port.counters[counter] = int(content)
    elif name == "state":
        port.state = content.split(":")[-1].strip()  # "4: ACTIVE"
    elif name == "phys_state":
        port.phys_state = _phys_state(content)  # "5: LinkUp"
    elif name == "rate":
        rate = re.match(r"([\d.]+)\s*Gb/sec", content)
        port.rate_gbit_per_s = first_number(rate.group(1)) if rate else None
    else:
        port.link_layer = content


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
