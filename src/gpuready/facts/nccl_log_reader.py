"""The NCCL_DEBUG log reader: lines in, NcclLogFacts out (facts/nccl_log.py parses each line; checks/nccl_logs.py
judges).

State is bounded: counts, the first few lines of each kind, and small per-host / per-process tables (capped), so a
log of millions of INFO lines costs the same memory as a short one.
"""

from __future__ import annotations

import ipaddress
import re

from gpuready.facts import nccl_log as parse
from gpuready.facts.log_facts import CommTransports, LineGroup, NcclLogFacts, UnroutableInterfaces
from gpuready.facts.log_lines import Line, Reader

MAX_KEYS = 4096
"""Most hosts, processes, rank pairs kept in any one table (a log from a larger job is still counted)."""
MAX_WARN_KINDS = 64
"""Most distinct unexplained WARN messages kept."""

# Interfaces that cannot carry traffic between nodes: loopback, container and VM bridges (the catalogue's
# `nccl_log.iface.<why>` says which).
_BAD_NAMES = (("lo", "loopback"), ("docker", "docker_bridge"), ("virbr", "libvirt_bridge"),
              ("br-", "docker_network_bridge"), ("veth", "veth"))


def _put(table: dict, key, factory):
    """table[key], created by factory() while the table has room; None past MAX_KEYS."""
    if key not in table:
        if len(table) >= MAX_KEYS:
            return None
        table[key] = factory()
    return table[key]


def unroutable_because(iface: parse.Interface) -> str | None:
    """Why this interface cannot reach another node (a key of `nccl_log.iface.<why>`), or None."""
    for prefix, why in _BAD_NAMES:
        if iface.name == prefix or (prefix != "lo" and iface.name.startswith(prefix)):
            return why
    address = iface.address.split("%")[0]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link_local"
    return None


def _ipv4(address: str) -> ipaddress.IPv4Address | None:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return None
    return ip if isinstance(ip, ipaddress.IPv4Address) else None


_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|/dev/shm/nccl-\w+|\d+(?:\.\d+)*(?:<\d+>)?|\b[0-9a-f]{12,}\b")


def warn_kind(message: str) -> str:
    """One key per kind of WARN: numbers, addresses, pointers and segment names blanked."""
    return _VARIABLE.sub("#", message)[:200]


class NcclLogReader(Reader):
    """NCCL_DEBUG=INFO/WARN logs, one rank's or many ranks' interleaved, from one host or many."""

    name = "nccl"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self._seq = 0
        self.seen = NcclLogFacts()
        self._open: dict[tuple, str] = {}
        """(host, pid, dev) → the communicator its last Init line named: the channel lines after it are that one's."""

    def facts(self) -> NcclLogFacts:
        return self.seen

    def feed(self, line: Line) -> None:
        self._seq += 1
        self.seen.lines_fed += 1
        event = parse.parse_line(line.text)
        if event is None:
            return
        host, seq = event.host, self._seq
        if host is not None and len(self.seen.hosts) < MAX_KEYS:
            self.seen.hosts.setdefault(host, None)
        proc = (host, event.pid)
        if event.launcher_rank is not None and host is not None:
            self._rank(proc, event.launcher_rank, host)
        handler = getattr(self, "_on_" + type(event).__name__, None)
        if handler is not None:
            handler(event, line, seq)
        elif event.level == "WARN":
            self._warn(event, line, seq)

    def _rank(self, proc: tuple, rank: int, host: str | None) -> None:
        ranks = _put(self.seen.proc_ranks, proc, set)
        if ranks is not None and len(ranks) < 8:
            ranks.add(rank)
        if host is not None and (rank in self.seen.rank_host or len(self.seen.rank_host) < MAX_KEYS):
            self.seen.rank_host[rank] = host

    def _phase(self, key: tuple, phase: str, line: Line) -> None:
        if key in self.seen.proc_phase or len(self.seen.proc_phase) < MAX_KEYS:
            self.seen.proc_phase[key] = (phase, line)

    def _on_Version(self, event: parse.Version, line: Line, seq: int) -> None:
        key = (event.host, event.pid)
        if key not in self.seen.versions and len(self.seen.versions) < MAX_KEYS:
            self.seen.versions[key] = (event.version, line)

    def _on_CommInit(self, event: parse.CommInit, line: Line, seq: int) -> None:
        self._rank((event.host, event.pid), event.rank, event.host)
        self.seen.nranks = max(self.seen.nranks, event.nranks)
        if event.complete:
            self._phase((event.host, event.pid, event.dev), "done", line)
        key = event.comm_id or f"nranks={event.nranks}"
        comm = _put(self.seen.comms, key, CommTransports)
        if comm is None or len(self._open) >= MAX_KEYS:
            return
        self._open[(event.host, event.pid, event.dev)] = key
        comm.nranks = event.nranks
        if event.host is not None and len(comm.hosts) < MAX_KEYS:
            comm.hosts.setdefault(event.host, None)

    def _on_GdrState(self, event: parse.GdrState, line: Line, seq: int) -> None:
        if event.message.startswith("NET/Socket"):
            return  # the socket transport prints it for every interface: GPUDirect RDMA never applies to it
        if not event.enabled and len(self.seen.gdr_off) < MAX_KEYS:
            self.seen.gdr_off.setdefault(event.host or "?", (event.why, line))

    def _on_RingsConnected(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self._phase((event.host, event.pid, event.dev), "done", line)

    def _on_Interfaces(self, event: parse.Interfaces, line: Line, seq: int) -> None:
        host = event.host or "?"
        used = event.interfaces[:1] if event.role == "bootstrap" else event.interfaces
        if event.ipoib and host not in self.seen.ipoib and len(self.seen.ipoib) < MAX_KEYS:
            self.seen.ipoib[host] = (event.ipoib[0], line)
        for iface in used:
            why = unroutable_because(iface)
            if why is not None:
                entry = _put(self.seen.unroutable, host, UnroutableInterfaces)
                if entry is not None:
                    entry.interfaces.setdefault(f"{iface.name}:{iface.address}", why)
                    entry.lines.add(line, seq)
            elif host not in self.seen.host_address and _ipv4(iface.address) \
                    and len(self.seen.host_address) < MAX_KEYS:
                self.seen.host_address[host] = (iface.address, line)

    def _on_IbDevices(self, event: parse.IbDevices, line: Line, seq: int) -> None:
        if len(self.seen.ib_hosts) < MAX_KEYS:
            self.seen.ib_hosts.setdefault(event.host or "?", line)
        for device in event.devices:
            layer = device.split("/")[1] if "/" in device else "IB"
            if layer in ("IB", "RoCE"):
                self.seen.link_layers.setdefault(layer, line)

    def _on_IbMissing(self, event: parse.IbMissing, line: Line, seq: int) -> None:
        reasons = _put(self.seen.ib_missing, event.host, dict)
        if reasons is not None:
            reasons.setdefault(event.reason, LineGroup()).add(line, seq)

    def _on_IbCompletionError(self, event: parse.IbCompletionError, line: Line, seq: int) -> None:
        group = _put(self.seen.ib_completion, event.status, LineGroup)
        if group is not None:
            group.add(line, seq)
        self._warn(event, line, seq)

    def _on_NetPlugin(self, event: parse.NetPlugin, line: Line, seq: int) -> None:
        if event.rdma and len(self.seen.ib_plugin) < MAX_KEYS:
            self.seen.ib_plugin.setdefault(event.host or "?", line)

    def _on_OfiProvider(self, event: parse.OfiProvider, line: Line, seq: int) -> None:
        if len(self.seen.ofi_provider) < MAX_KEYS:
            self.seen.ofi_provider.setdefault(event.host or "?", (event.provider, line))

    def _on_NoInterface(self, event: parse.NoInterface, line: Line, seq: int) -> None:
        reasons = _put(self.seen.no_interface, event.host, dict)
        if reasons is not None:
            reasons.setdefault(event.reason, LineGroup()).add(line, seq)

    def _on_EnvSet(self, event: parse.EnvSet, line: Line, seq: int) -> None:
        if event.name not in self.seen.env and len(self.seen.env) < 256:
            self.seen.env[event.name] = (event.value, line)

    def _on_Transport(self, event: parse.Transport, line: Line, seq: int) -> None:
        kinds = _put(self.seen.pairs, (event.src_rank, event.dst_rank), dict)
        if kinds is not None and event.kind not in kinds:
            kinds[event.kind] = (line, event.host)
        if event.direction == "send" or event.direction is None:
            if event.host is not None:
                self._rank((event.host, event.pid), event.src_rank, event.host)
        elif event.host is not None:
            self._rank((event.host, event.pid), event.dst_rank, event.host)
        transports = self.seen.transport_lines
        group = transports.setdefault(event.kind, LineGroup()) if len(transports) < 64 else None
        if group is not None:
            group.add(line, seq)
        key = (event.host, event.pid, event.dev)
        if event.kind == "P2P" and self.seen.proc_phase.get(key, ("",))[0] != "done":
            self._phase(key, "p2p", line)
        comm = _put(self.seen.comms, self._open.get(key, "?"), CommTransports)
        if comm is not None and len(comm.kinds) < 64:
            comm.kinds.setdefault(event.kind, line)
            if event.kind.startswith("NET/") and event.kind != "NET/Socket":  # GPUDirect RDMA is the NICs' only
                comm.gdr.setdefault(event.via.endswith("/GDRDMA"), line)

    def _on_P2pUnavailable(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.seen.p2p_unavailable.add(line, seq)

    def _on_ShmError(self, event: parse.ShmError, line: Line, seq: int) -> None:
        group = _put(self.seen.shm, event.host, LineGroup)
        if group is None:
            return
        group.add(line, seq)
        if event.size_bytes is not None and len(self.seen.shm_sizes.setdefault(event.host, set())) < 8:
            self.seen.shm_sizes[event.host].add(event.size_bytes)
        if event.error and len(self.seen.shm_errors.setdefault(event.host, set())) < 4:
            self.seen.shm_errors[event.host].add(event.error)

    def _on_ConnectError(self, event: parse.ConnectError, line: Line, seq: int) -> None:
        group = _put(self.seen.connect, event.host, LineGroup)
        if group is None:
            return
        group.add(line, seq)
        if event.peer and len(self.seen.connect_peers.setdefault(event.host, set())) < 16:
            self.seen.connect_peers[event.host].add(event.peer)
        if len(self.seen.connect_errors.setdefault(event.host, set())) < 4:
            self.seen.connect_errors[event.host].add(event.error)
        if not event.retrying:
            self.seen.connect_final[event.host] = True

    def _on_SocketError(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.seen.secondary.setdefault("SocketError", LineGroup()).add(line, seq)

    def _on_RemoteExited(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.seen.secondary.setdefault("RemoteExited", LineGroup()).add(line, seq)

    def _on_ResultError(self, event: parse.ResultError, line: Line, seq: int) -> None:
        self.seen.secondary.setdefault("ResultError", LineGroup()).add(line, seq)
        if len(self.seen.result_codes) < 8:
            self.seen.result_codes.setdefault(event.code, None)

    def _on_Timeout(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.seen.timeouts.add(line, seq)

    def _on_Other(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        if event.level == "WARN":
            self._warn(event, line, seq)

    def _warn(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        key = warn_kind(event.message)
        if key not in self.seen.warns and len(self.seen.warns) >= MAX_WARN_KINDS:
            self.seen.warns_dropped += 1
            return
        self.seen.warns.setdefault(key, LineGroup()).add(line, seq)
