"""This host's network interfaces as NCCL and the kernel see them: the addresses (psutil's getifaddrs order), the
interface NCCL's socket transport would pick by its own rules (NCCL_SOCKET_IFNAME, NCCL_COMM_ID, then the first
non-loopback, non-docker one), the route towards a peer, names that mean loopback, and MTUs. Read-only: one UDP
`connect` (which sends no packet) per route asked for.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import psutil


LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


@dataclass(frozen=True)
class IfAddr:
    """One address of one interface, in getifaddrs() order (what NCCL iterates)."""
    name: str
    family: int
    """socket.AF_INET or socket.AF_INET6 (others are ignored, as NCCL does)."""
    address: str
    netmask: str | None = None


def _parse_if_list(text: str) -> list[str]:
    """NCCL's parseStringList: comma-separated `prefix[:port]` entries; empty ones dropped; the port is not a name."""
    return [entry.split(":", 1)[0] for entry in text.split(",") if entry.split(":", 1)[0]]


def _find_interfaces(entries: Iterable[IfAddr], prefix_list: str, family: int | None) -> list[str]:
    """NCCL's findInterfaces(prefixList, ...): interface names in address order, each once.

    A leading `^` excludes, then a leading `=` matches whole names instead of prefixes (so `^=docker0` excludes
    exactly docker0). An empty list matches every interface. Only IPv4/IPv6 addresses count; IPv6 loopback
    addresses are skipped; NCCL_SOCKET_FAMILY (`family`) keeps one family only.
    """
    exclude = prefix_list.startswith("^")
    if exclude:
        prefix_list = prefix_list[1:]
    exact = prefix_list.startswith("=")
    if exact:
        prefix_list = prefix_list[1:]
    wanted = _parse_if_list(prefix_list)
    found: list[str] = []
    for entry in entries:
        if entry.family not in (socket.AF_INET, socket.AF_INET6):
            continue
        if family is not None and entry.family != family:
            continue
        if entry.family == socket.AF_INET6 and is_loopback_ip(entry.address):
            continue
        matched = not wanted or any((entry.name == item) if exact else entry.name.startswith(item) for item in wanted)
        if matched == exclude:  # NCCL: `if (!(matchIfList(...) ^ searchNot)) continue;`
            continue
        if entry.name not in found:
            found.append(entry.name)
    return found


def _match_subnet(entries: Iterable[IfAddr], comm_id: str) -> list[str]:
    """NCCL's ncclFindInterfaceMatchSubnet: the first interface whose subnet holds NCCL_COMM_ID's address.

    Only an IP literal is handled here (NCCL also resolves a host name; this stays pure and does not)."""
    host = comm_id.rsplit(":", 1)[0].strip("[]").split("%", 1)[0] if ":" in comm_id else comm_id
    try:
        remote = ipaddress.ip_address(host)
    except ValueError:
        return []
    for entry in entries:
        if entry.family not in (socket.AF_INET, socket.AF_INET6) or not entry.netmask:
            continue
        try:
            network = ipaddress.ip_network(f"{entry.address.split('%', 1)[0]}/{entry.netmask}", strict=False)
        except ValueError:
            continue
        if remote.version == network.version and remote in network:
            return [entry.name]
    return []


def nccl_socket_interfaces(entries: list[IfAddr], socket_ifname: str | None = None, socket_family: str | None = None,
                           comm_id: str | None = None) -> list[str]:
    """The interfaces NCCL's socket code would use, in its order; the first is the bootstrap (OOB) interface.

    Rules, from NCCL's documentation (env.html, NCCL_SOCKET_IFNAME: "a list of prefixes ... separated by ,";
    "^" excludes; "=" matches an exact name; "By default, the loopback interface (lo) and docker interfaces
    (docker*) would not be selected unless there are no other interfaces available ... The default algorithm
    will also favor interfaces starting with ib over others") and its code (NVIDIA/nccl src/misc/socket.cc,
    ncclFindInterfaces and findInterfaces; src/misc/utils.cc matchIf; src/bootstrap.cc asks for one interface):

    1. NCCL_SOCKET_IFNAME set and longer than one character: exactly the interfaces it selects (none: NCCL fails).
    2. Else interfaces starting with `ib`;
    3. else, with NCCL_COMM_ID set, the interface in the same subnet as its address;
    4. else everything but `docker*` and `lo*` (`^docker,lo`);
    5. else `docker*`; 6. else `lo*`.
    Within a step the order is getifaddrs() order (not sorted); IPv6 loopback addresses never count;
    NCCL_SOCKET_FAMILY=AF_INET|AF_INET6 keeps one family.
    """
    family = {"AF_INET": socket.AF_INET, "AF_INET6": socket.AF_INET6}.get(socket_family or "")
    if socket_ifname and len(socket_ifname) > 1:
        return _find_interfaces(entries, socket_ifname, family)
    found = _find_interfaces(entries, "ib", family)
    if not found and comm_id and len(comm_id) > 1:
        found = _match_subnet(entries, comm_id)
    for step in ("^docker,lo", "docker", "lo"):
        if found:
            break
        found = _find_interfaces(entries, step, family)
    return found


def nccl_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """NCCL_SOCKET_IFNAME / _FAMILY / NCCL_COMM_ID as NCCL sees them: the environment first, then the config
    files, which never override it (src/misc/param.cc setEnvFile: `setenv(..., 0)`): ${NCCL_CONF_FILE} (NCCL
    2.23+) or ~/.nccl.conf, then /etc/nccl.conf. The value's `source` says where each came from."""
    environ = dict(os.environ if environ is None else environ)
    names = ("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_COMM_ID")
    settings = {name: environ[name] for name in names if name in environ}
    sources = {name: "environment" for name in settings}
    files = [Path(environ["NCCL_CONF_FILE"])] if environ.get("NCCL_CONF_FILE") else [Path.home() / ".nccl.conf"]
    for path in files + [Path("/etc/nccl.conf")]:
        try:
            lines = path.read_text(errors="replace").splitlines()[:1000]
        except OSError:
            continue
        for line in lines:
            key, sep, value = line.partition("=")
            if sep and key in names and key not in settings:
                settings[key], sources[key] = value, str(path)
    return {**settings, **{f"{name}.source": where for name, where in sources.items()}}


def local_interface_entries() -> list[IfAddr]:
    """This host's interface addresses in psutil's (getifaddrs) order."""
    entries = []
    for name, addresses in psutil.net_if_addrs().items():
        for address in addresses:
            if address.family in (socket.AF_INET, socket.AF_INET6):
                entries.append(IfAddr(name=name, family=int(address.family), address=address.address,
                                      netmask=address.netmask))
    return entries


def is_loopback_ip(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def is_loopback_name(name: str) -> bool:
    """A name that is meant to mean this host's loopback: a loopback IP literal, `localhost` (RFC 6761) and the
    usual /etc/hosts aliases. This host's own hostname is not one: it must resolve to an address peers reach."""
    lowered = name.lower().rstrip(".")
    return is_loopback_ip(lowered.strip("[]")) or lowered in LOOPBACK_NAMES or lowered.endswith(".localhost")


def resolve(name: str) -> list[str]:
    """The addresses `name` resolves to (getaddrinfo order, each once); socket.gaierror if it does not."""
    addresses: list[str] = []
    for *_, sockaddr in socket.getaddrinfo(name.strip("[]"), None, type=socket.SOCK_STREAM):
        if sockaddr[0] not in addresses:
            addresses.append(sockaddr[0])
    return addresses


def route_source(address: str, port: int) -> str | None:
    """The local address the kernel would send from to reach `address` (a UDP connect sends nothing)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((address, port))
            return probe.getsockname()[0]
    except OSError:
        return None


def interface_of(local_address: str | None, entries: list[IfAddr]) -> str | None:
    if not local_address:
        return None
    bare = local_address.split("%", 1)[0]
    for entry in entries:
        if entry.address.split("%", 1)[0] == bare:
            return entry.name
    return None


def mtu_of(names: Iterable[str]) -> dict[str, int | None]:
    try:
        stats = psutil.net_if_stats()
    except Exception:
        stats = {}
    return {name: (stats[name].mtu if name in stats else None) for name in names}
