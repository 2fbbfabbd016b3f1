"""The NCCL_DEBUG log reader of `gpuready diagnose`: cause → evidence → fix from the lines people paste into tickets.

Parsing is facts/nccl_log.py; this module only judges. State is bounded: counts, the first few lines of each kind,
and small per-host / per-process tables (capped), so a log of millions of INFO lines costs the same memory as a
short one.

Rules and fixes follow NVIDIA's NCCL troubleshooting guide and maintainers' answers in NVIDIA/nccl issues (#199 and
#667 ACS, #286 interfaces, #290/#342/#525 /dev/shm, #451 IB in containers); see the `refs` of each finding.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from gpuready.facts import nccl_log as parse
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose.evidence import MAX_EVIDENCE, DiagnoseContext, Line, Reader, quote

MAX_KEYS = 4096
"""Most hosts, processes, rank pairs kept in any one table (a log from a larger job is still counted)."""
MAX_WARN_KINDS = 64
"""Most distinct unexplained WARN messages kept."""

DOCS_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
DOCS_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
REF_IFNAME = "NVIDIA/nccl#286 (default NCCL_SOCKET_IFNAME=^lo,docker; lo cannot reach another node)"
REF_SHM = "NVIDIA/nccl#290, #342, #525 (/dev/shm is 64 MB in Docker by default)"
REF_ACS = "NVIDIA/nccl#199, #667 (P2P hangs: disable ACS / VT-d; NCCL_P2P_DISABLE=1 only works around)"
REF_IB = "NVIDIA/nccl#451 (IB device not reachable inside a container)"

# Interfaces that cannot carry traffic between nodes: loopback, container and VM bridges.
_BAD_NAMES = (("lo", "loopback"), ("docker", "Docker bridge"), ("virbr", "libvirt bridge"),
              ("br-", "Docker network bridge"), ("veth", "container veth pair"))
_SECONDARY = {"SocketError": "socket error", "RemoteExited": "remote process exited",
              "ResultError": "NCCL error code"}


@dataclass
class _Bucket:
    """A count and the first lines of one kind."""
    count: int = 0
    lines: list[Line] = field(default_factory=list)
    first_seq: int = -1

    def add(self, line: Line, seq: int) -> None:
        if self.count == 0:
            self.first_seq = seq
        self.count += 1
        if len(self.lines) < MAX_EVIDENCE and all(line is not kept for kept in self.lines):
            self.lines.append(line)


def _put(table: dict, key, factory):
    """table[key], created by factory() while the table has room; None past MAX_KEYS."""
    if key not in table:
        if len(table) >= MAX_KEYS:
            return None
        table[key] = factory()
    return table[key]


def _bad_interface(iface: parse.Interface) -> str | None:
    """Why this interface cannot reach another node, or None."""
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
        return "link-local address"
    return None


def _ipv4(address: str) -> ipaddress.IPv4Address | None:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return None
    return ip if isinstance(ip, ipaddress.IPv4Address) else None


class NcclLogReader(Reader):
    """NCCL_DEBUG=INFO/WARN logs, one rank's or many ranks' interleaved, from one host or many."""

    name = "nccl"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self._seq = 0
        self.versions: dict[tuple, tuple[str, Line]] = {}
        """(host, pid) → (NCCL version, the line that says it)."""
        self.proc_ranks: dict[tuple, set[int]] = {}
        """(host, pid) → global ranks it holds (from `comm … rank r nranks n` and launcher prefixes)."""
        self.rank_host: dict[int, str] = {}
        self.nranks = 0
        self.hosts: dict[str, None] = {}
        self.bad_interfaces: dict[str, dict] = {}
        """host → {"interfaces": {name: why}, "bucket": _Bucket}."""
        self.host_address: dict[str, tuple[str, Line]] = {}
        """host → its first usable IPv4 address for NCCL sockets and the line."""
        self.ib_hosts: dict[str, Line] = {}
        self.ib_missing: dict[str, dict[str, _Bucket]] = {}
        self.env: dict[str, tuple[str, Line]] = {}
        self.pairs: dict[tuple[int, int], dict[str, tuple[Line, str | None]]] = {}
        """(src rank, dst rank) → {transport kind: (first line, host of the line)}."""
        self.transport_lines: dict[str, _Bucket] = {}
        self.p2p_unavailable = _Bucket()
        self.proc_phase: dict[tuple, tuple[str, Line]] = {}
        """(host, pid, dev) → ("p2p", line) after a P2P channel set-up, ("done", line) after Init COMPLETE."""
        self.shm: dict[str | None, _Bucket] = {}
        self.shm_sizes: dict[str | None, set[int]] = {}
        self.shm_errors: dict[str | None, set[str]] = {}
        self.connect: dict[str | None, _Bucket] = {}
        self.connect_peers: dict[str | None, set[str]] = {}
        self.connect_errors: dict[str | None, set[str]] = {}
        self.connect_final: dict[str | None, bool] = {}
        self.secondary: dict[str, _Bucket] = {}
        self.result_codes: dict[str, None] = {}
        self.timeouts = _Bucket()
        self.warns: dict[str, _Bucket] = {}
        self.warns_dropped = 0
        self.lines_fed = 0

    # ------------------------------------------------------------------------------------------- feeding

    def feed(self, line: Line) -> None:
        self._seq += 1
        self.lines_fed += 1
        event = parse.parse_line(line.text)
        if event is None:
            return
        host, seq = event.host, self._seq
        if host is not None and len(self.hosts) < MAX_KEYS:
            self.hosts.setdefault(host, None)
        proc = (host, event.pid)
        if event.launcher_rank is not None and host is not None:
            self._rank(proc, event.launcher_rank, host)
        handler = getattr(self, "_on_" + type(event).__name__, None)
        if handler is not None:
            handler(event, line, seq)
        elif event.level == "WARN":
            self._warn(event, line, seq)

    def _rank(self, proc: tuple, rank: int, host: str | None) -> None:
        ranks = _put(self.proc_ranks, proc, set)
        if ranks is not None and len(ranks) < 8:
            ranks.add(rank)
        if host is not None and (rank in self.rank_host or len(self.rank_host) < MAX_KEYS):
            self.rank_host[rank] = host

    def _on_Version(self, event: parse.Version, line: Line, seq: int) -> None:
        key = (event.host, event.pid)
        if key not in self.versions and len(self.versions) < MAX_KEYS:
            self.versions[key] = (event.version, line)

    def _on_CommInit(self, event: parse.CommInit, line: Line, seq: int) -> None:
        self._rank((event.host, event.pid), event.rank, event.host)
        self.nranks = max(self.nranks, event.nranks)
        key = (event.host, event.pid, event.dev)
        if event.complete and (key in self.proc_phase or len(self.proc_phase) < MAX_KEYS):
            self.proc_phase[key] = ("done", line)

    def _on_RingsConnected(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        key = (event.host, event.pid, event.dev)
        if key in self.proc_phase or len(self.proc_phase) < MAX_KEYS:
            self.proc_phase[key] = ("done", line)

    def _on_Interfaces(self, event: parse.Interfaces, line: Line, seq: int) -> None:
        host = event.host or "?"
        used = event.interfaces[:1] if event.role == "bootstrap" else event.interfaces
        for iface in used:
            why = _bad_interface(iface)
            if why is not None:
                entry = _put(self.bad_interfaces, host, lambda: {"interfaces": {}, "bucket": _Bucket()})
                if entry is not None:
                    entry["interfaces"].setdefault(f"{iface.name}:{iface.address}", why)
                    entry["bucket"].add(line, seq)
            elif host not in self.host_address and _ipv4(iface.address) and len(self.host_address) < MAX_KEYS:
                self.host_address[host] = (iface.address, line)

    def _on_IbDevices(self, event: parse.IbDevices, line: Line, seq: int) -> None:
        if len(self.ib_hosts) < MAX_KEYS:
            self.ib_hosts.setdefault(event.host or "?", line)

    def _on_IbMissing(self, event: parse.IbMissing, line: Line, seq: int) -> None:
        reasons = _put(self.ib_missing, event.host, dict)
        if reasons is not None:
            reasons.setdefault(event.reason, _Bucket()).add(line, seq)

    def _on_EnvSet(self, event: parse.EnvSet, line: Line, seq: int) -> None:
        if event.name not in self.env and len(self.env) < 256:
            self.env[event.name] = (event.value, line)

    def _on_Transport(self, event: parse.Transport, line: Line, seq: int) -> None:
        kinds = _put(self.pairs, (event.src_rank, event.dst_rank), dict)
        if kinds is not None and event.kind not in kinds:
            kinds[event.kind] = (line, event.host)
        if event.direction == "send" or event.direction is None:
            if event.host is not None:
                self._rank((event.host, event.pid), event.src_rank, event.host)
        elif event.host is not None:
            self._rank((event.host, event.pid), event.dst_rank, event.host)
        bucket = self.transport_lines.setdefault(event.kind, _Bucket()) if len(self.transport_lines) < 64 else None
        if bucket is not None:
            bucket.add(line, seq)
        key = (event.host, event.pid, event.dev)
        if event.kind == "P2P" and (key in self.proc_phase or len(self.proc_phase) < MAX_KEYS):
            if self.proc_phase.get(key, ("",))[0] != "done":
                self.proc_phase[key] = ("p2p", line)

    def _on_P2pUnavailable(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.p2p_unavailable.add(line, seq)

    def _on_ShmError(self, event: parse.ShmError, line: Line, seq: int) -> None:
        bucket = _put(self.shm, event.host, _Bucket)
        if bucket is None:
            return
        bucket.add(line, seq)
        if event.size_bytes is not None and len(self.shm_sizes.setdefault(event.host, set())) < 8:
            self.shm_sizes[event.host].add(event.size_bytes)
        if event.error and len(self.shm_errors.setdefault(event.host, set())) < 4:
            self.shm_errors[event.host].add(event.error)

    def _on_ConnectError(self, event: parse.ConnectError, line: Line, seq: int) -> None:
        bucket = _put(self.connect, event.host, _Bucket)
        if bucket is None:
            return
        bucket.add(line, seq)
        if event.peer and len(self.connect_peers.setdefault(event.host, set())) < 16:
            self.connect_peers[event.host].add(event.peer)
        if len(self.connect_errors.setdefault(event.host, set())) < 4:
            self.connect_errors[event.host].add(event.error)
        if not event.retrying:
            self.connect_final[event.host] = True

    def _on_SocketError(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.secondary.setdefault("SocketError", _Bucket()).add(line, seq)

    def _on_RemoteExited(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.secondary.setdefault("RemoteExited", _Bucket()).add(line, seq)

    def _on_ResultError(self, event: parse.ResultError, line: Line, seq: int) -> None:
        self.secondary.setdefault("ResultError", _Bucket()).add(line, seq)
        if len(self.result_codes) < 8:
            self.result_codes.setdefault(event.code, None)

    def _on_Timeout(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        self.timeouts.add(line, seq)

    def _on_Other(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        if event.level == "WARN":
            self._warn(event, line, seq)

    def _warn(self, event: parse.NcclEvent, line: Line, seq: int) -> None:
        key = _normalise(event.message)
        if key not in self.warns and len(self.warns) >= MAX_WARN_KINDS:
            self.warns_dropped += 1
            return
        self.warns.setdefault(key, _Bucket()).add(line, seq)

    # ------------------------------------------------------------------------------------------- judging

    def findings(self, context: DiagnoseContext) -> list[Finding]:
        found: list[Finding] = []
        found += self._version_mismatch(context)
        wrong = self._wrong_interface(context)
        found += wrong
        ib = self._ib_missing(context)
        found += ib
        shm = self._shm(context)
        found += shm
        unreachable = self._unreachable(context, root="nccl.wrong_interface" if _failed(wrong) else None)
        found += unreachable
        found += self._transport(context)
        roots = [(f, seq) for group, seq in ((shm, _first_seq(self.shm)), (unreachable, _first_seq(self.connect)),
                                              (wrong, _first_seq(self.bad_interfaces, nested=True)),
                                              (ib, _first_seq_ib(self.ib_missing)))
                 for f in group[:1] if f.status == Status.FAIL and f.consequence_of is None]
        root, root_seq = (min(roots, key=lambda item: item[1])[0].check_id, min(s for _f, s in roots)) if roots \
            else (None, 0)
        if root is None:
            found += self._p2p_hang(context)
        found += self._warn_findings(context, root, root_seq)
        return found

    def _subject(self, context: DiagnoseContext, host: str | None, lines: list[Line] | None = None,
                 nic: str | None = None) -> Subject:
        rank = None
        if lines:
            event = parse.parse_line(lines[0].text)
            if event is not None:
                rank = event.launcher_rank
                ranks = self.proc_ranks.get((event.host, event.pid)) if rank is None else None
                if ranks and len(ranks) == 1:
                    rank = next(iter(ranks))
        return Subject(host=host or context.host, nic=nic, rank=rank)

    def _ranks_of(self, host: str | None, pid: int | None) -> list[int]:
        return sorted(self.proc_ranks.get((host, pid), ()))

    def _multi_node(self) -> bool:
        """More than one host in the log, or a NET transport (only used between nodes)."""
        return len(self.hosts) > 1 or any(kind.startswith("NET") for kind in self.transport_lines)

    def _version_mismatch(self, context: DiagnoseContext) -> list[Finding]:
        by_version: dict[str, list[tuple]] = {}
        for key, (version, _line) in self.versions.items():
            by_version.setdefault(version, []).append(key)
        if len(by_version) < 2:
            return []
        observed = {}
        for version, keys in sorted(by_version.items()):
            observed[version] = sorted({
                f"{host or '?'}" + (f" rank {','.join(map(str, ranks))}" if (ranks := self._ranks_of(host, pid)) else "")
                for host, pid in keys})
        lines = [self.versions[keys[0]][1] for _version, keys in sorted(by_version.items())]
        where = "; ".join(f"{version} on {', '.join(places[:4])}" + (" …" if len(places) > 4 else "")
                          for version, places in observed.items())
        return [Finding(
            check_id="nccl.version_mismatch", status=Status.FAIL, subject=Subject(host=context.host),
            message=f"Ranks run different NCCL versions: {where}. NCCL's wire protocol must match on every rank; "
                    "mixed versions hang or fail at init or in the first collectives.",
            observed=observed, expected="one NCCL version on every rank",
            fix="Use the same NCCL everywhere: the same container image or the same torch wheel on every node "
                "(`python -c 'import torch; print(torch.cuda.nccl.version())'` on each); check LD_LIBRARY_PATH / "
                "LD_PRELOAD for a second libnccl.so.2.",
            refs=[DOCS_TROUBLESHOOTING, "NVIDIA/nccl#286 (maintainer: the NCCL version needs to match)"],
            evidence=quote(lines))]

    def _wrong_interface(self, context: DiagnoseContext) -> list[Finding]:
        found = []
        serious = self._multi_node() or bool(self.connect) or self.nranks > len(self.rank_host or {}) > 0
        for host, entry in self.bad_interfaces.items():
            interfaces = entry["interfaces"]
            names = ", ".join(f"{name} ({why})" for name, why in interfaces.items())
            status = Status.FAIL if serious else Status.WARN
            first = next(iter(interfaces)).split(":")[0]
            found.append(Finding(
                check_id="nccl.wrong_interface", status=status,
                subject=self._subject(context, None if host == "?" else host, entry["bucket"].lines, nic=first),
                message=f"NCCL uses {names} for its sockets; "
                        + ("other nodes cannot reach it there." if serious else
                           "harmless on one node, but no other node can reach it there."),
                observed=sorted(interfaces), expected="an interface routable between the nodes (eth*, ens*, ib*, bond*)",
                fix="Set NCCL_SOCKET_IFNAME to the inter-node interface (e.g. `NCCL_SOCKET_IFNAME=eth0`, or exclude: "
                    "`NCCL_SOCKET_IFNAME=^lo,docker0,virbr0`); check with `ip -br addr` on every node. In Docker run with "
                    "`--network=host`.",
                refs=[DOCS_ENV, REF_IFNAME], evidence=quote(entry["bucket"].lines)))
        if len(self.host_address) > 1:
            by_address: dict[str, list[str]] = {}
            for host, (address, _line) in self.host_address.items():
                by_address.setdefault(address, []).append(host)
            shared = {address: hosts for address, hosts in by_address.items() if len(hosts) > 1}
            nets = {str(ipaddress.ip_network(f"{address}/16", strict=False))
                    for address, _line in self.host_address.values()}
            lines = [line for _address, line in self.host_address.values()]
            observed = {host: address for host, (address, _line) in sorted(self.host_address.items())}
            if shared:
                address, hosts = next(iter(shared.items()))
                found.append(Finding(
                    check_id="nccl.wrong_interface", status=Status.FAIL, subject=Subject(host=context.host),
                    message=f"Hosts {', '.join(hosts)} all use the address {address}: a container bridge network "
                            "(each container's private eth0), not an address the nodes can reach each other by.",
                    observed=observed, expected="a distinct routable address per node",
                    fix="Run the containers with `--network=host` (Kubernetes: hostNetwork: true, or a secondary "
                        "network), then set NCCL_SOCKET_IFNAME to the node's interface.",
                    refs=[DOCS_ENV, REF_IFNAME], evidence=quote(lines)))
            elif len(nets) > 1:
                found.append(Finding(
                    check_id="nccl.wrong_interface", status=Status.FAIL, subject=Subject(host=context.host),
                    message="The hosts' NCCL interfaces are on different subnets (" + ", ".join(
                        f"{host} {address}" for host, address in list(observed.items())[:6])
                            + "; compared at /16, the log has no netmask): NCCL picked a different network on "
                              "different nodes.",
                    observed=observed, expected="one network shared by all nodes",
                    fix="Set NCCL_SOCKET_IFNAME on every node to the interface of the shared network (names may "
                        "differ per node: `NCCL_SOCKET_IFNAME=eno1,eth0`, or per-node /etc/nccl.conf).",
                    refs=[DOCS_ENV, REF_IFNAME], evidence=quote(lines)))
        return found

    def _ib_expected(self, context: DiagnoseContext) -> str | None:
        """Why InfiniBand/RoCE was expected here, or None."""
        if self.ib_hosts:
            return f"{next(iter(self.ib_hosts))} uses NET/IB"
        if any("open_device" in reasons for reasons in self.ib_missing.values()):
            return "an IB device exists but could not be opened"
        if self.env.get("NCCL_IB_DISABLE", ("1",))[0].strip() == "0":
            return "NCCL_IB_DISABLE=0 is set"
        if "NCCL_IB_HCA" in self.env:
            return f"NCCL_IB_HCA={self.env['NCCL_IB_HCA'][0]} is set"
        if context.options.get("expect_ib"):
            return "IB is expected (--expect)"
        return None

    def _ib_missing(self, context: DiagnoseContext) -> list[Finding]:
        expected = self._ib_expected(context)
        if not self.ib_missing or (not expected and not self._multi_node()
                                   and not any("libibverbs" in r for r in self.ib_missing.values())):
            return []
        groups: dict[frozenset, list[str | None]] = {}
        for host, reasons in self.ib_missing.items():
            if host in self.ib_hosts and "no_active_port" not in reasons:
                continue
            groups.setdefault(frozenset(reasons), []).append(host)
        found = []
        for reason_set, hosts in groups.items():
            why, fix = [], []
            if "libibverbs" in reason_set:
                why.append("libibverbs is not installed where NCCL runs (a container image without rdma-core)")
                fix.append("install rdma-core in the image (`apt-get install libibverbs1 ibverbs-providers "
                           "librdmacm1`)")
            if "open_device" in reason_set:
                why.append("an IB device is listed but cannot be opened (/dev/infiniband/uverbs* not passed into "
                           "the container, or no permission)")
                fix.append("pass the devices: `docker run --device=/dev/infiniband --cap-add=IPC_LOCK "
                           "--ulimit memlock=-1`, or the Kubernetes RDMA device plugin (rdma/hca resource)")
            if "no_device" in reason_set:
                why.append("no IB/RoCE device is visible (none installed, its driver not loaded, or /dev/infiniband "
                           "not in the container)")
                fix.append("on the host check `ibstat` / `ibv_devinfo`; in a container add "
                           "`--device=/dev/infiniband` or the Kubernetes RDMA device plugin")
            if "no_active_port" in reason_set:
                why.append("the IB ports are not active")
                fix.append("check `ibstat` (State: Active, Physical state: LinkUp): cable, switch port, subnet "
                           "manager (`sminfo`)")
            lines = sorted((line for host in hosts for bucket in self.ib_missing[host].values()
                            for line in bucket.lines), key=lambda line: (line.source, line.number))
            status = Status.FAIL if expected else Status.WARN
            named = sorted(host or "?" for host in hosts)
            found.append(Finding(
                check_id="nccl.ib_missing", status=status,
                subject=self._subject(context, hosts[0], lines) if len(hosts) == 1 else Subject(host=context.host),
                message="NCCL cannot use InfiniBand/RoCE" + (f" on {len(hosts)} hosts" if len(hosts) > 1 else "")
                        + ": " + "; ".join(why) + ". It falls back to TCP sockets"
                        + (f" although {expected}." if expected else " (slow between nodes, if IB exists)."),
                observed={"reasons": sorted(reason_set), "hosts": named[:32]},
                expected="NET/IB : Using [0]mlx5_…" if expected else None,
                fix="; ".join(fix) + ". Then NCCL_DEBUG=INFO should print `NET/IB : Using [0]mlx5_0:1/IB`.",
                refs=[DOCS_TROUBLESHOOTING, REF_IB], evidence=quote(lines)))
        return found

    def _shm(self, context: DiagnoseContext) -> list[Finding]:
        found = []
        for host, bucket in self.shm.items():
            sizes = sorted(self.shm_sizes.get(host, ()))
            errors = sorted(self.shm_errors.get(host, ()))
            size_text = (" of " + ", ".join(f"{size:,} bytes ({size / 2**20:.1f} MiB)" for size in sizes[:3])
                         if sizes else "")
            found.append(Finding(
                check_id="nccl.shm_too_small", status=Status.FAIL, subject=self._subject(context, host, bucket.lines),
                message=f"NCCL could not create its shared-memory segments{size_text} in /dev/shm "
                        f"({bucket.count} line{'s' * (bucket.count > 1)}"
                        + (f"; {errors[0]}" if errors else "") + "): /dev/shm is too small or full. Docker gives "
                        "containers 64 MB by default; each pair of local ranks needs segments of this size.",
                observed={"size_bytes": sizes, "errors": errors, "lines": bucket.count},
                expected="/dev/shm large enough for every local rank pair (1 GiB or more)",
                fix="Docker: `--shm-size=1g` (or `--ipc=host`); Kubernetes: mount an emptyDir with `medium: Memory` "
                    "on /dev/shm; check `df -h /dev/shm` and remove stale /dev/shm/nccl-* files. NCCL_SHM_DISABLE=1 "
                    "only avoids SHM (slower).",
                refs=[DOCS_TROUBLESHOOTING, REF_SHM], evidence=quote(bucket.lines)))
        return found

    def _unreachable(self, context: DiagnoseContext, root: str | None) -> list[Finding]:
        found = []
        for host, bucket in self.connect.items():
            peers = sorted(self.connect_peers.get(host, ()))
            errors = sorted(self.connect_errors.get(host, ()))
            final = self.connect_final.get(host, False)
            found.append(Finding(
                check_id="network.unreachable", status=Status.FAIL if final else Status.WARN,
                subject=self._subject(context, host, bucket.lines),
                message=f"NCCL could not connect to its peer{'s' * (len(peers) > 1)}"
                        + (f" {', '.join(peers[:4])}" if peers else "") + f": {', '.join(errors)}"
                        + ("" if final else " (NCCL was retrying)") + f" ({bucket.count} line"
                        + "s" * (bucket.count > 1) + ").",
                observed={"peers": peers, "errors": errors, "lines": bucket.count},
                expected="TCP connections between all ranks",
                fix="Check the path from this host to the peer: `ping`, `nc -zv <peer> <port>`; open the firewall "
                    "for NCCL's ports (or pin them with /proc/sys/net/ipv4/ip_local_port_range); make sure "
                    "NCCL_SOCKET_IFNAME names an interface on the shared network and the peer process was alive.",
                refs=[DOCS_TROUBLESHOOTING], evidence=quote(bucket.lines), consequence_of=root))
        return found

    def _node_of(self, rank: int) -> str | None:
        return self.rank_host.get(rank)

    def _transport(self, context: DiagnoseContext) -> list[Finding]:
        if not self.pairs:
            return []
        inter: dict[str, list[tuple[int, int]]] = {}
        intra: dict[str, list[tuple[int, int]]] = {}
        first_line: dict[tuple[str, str], Line] = {}
        for (src, dst), kinds in self.pairs.items():
            for kind, (line, _host) in kinds.items():
                a, b = self._node_of(src), self._node_of(dst)
                between = (a != b) if (a is not None and b is not None) else kind.startswith("NET")
                table = inter if between else intra
                table.setdefault(kind, []).append((src, dst))
                first_line.setdefault(("inter" if between else "intra", kind), line)
        observed = {"intra_node": {k: len(v) for k, v in sorted(intra.items())},
                    "inter_node": {k: len(v) for k, v in sorted(inter.items())}}
        summary = "; ".join(
            f"{where}: " + ", ".join(f"{kind} ({len(pairs)} rank pair{'s' * (len(pairs) > 1)}, e.g. "
                                      f"{pairs[0][0]}→{pairs[0][1]})" for kind, pairs in sorted(table.items()))
            for where, table in (("within nodes", intra), ("between nodes", inter)) if table)
        found = []
        expected_ib = self._ib_expected(context)
        if "NET/Socket" in inter and expected_ib:
            found.append(Finding(
                check_id="nccl.transport", status=Status.WARN, subject=Subject(host=context.host),
                message=f"NCCL sends between nodes over TCP sockets (NET/Socket) although {expected_ib}: "
                        f"inter-node bandwidth is a fraction of IB's. {summary}.",
                observed=observed, expected={"inter_node": "NET/IB"},
                fix="See nccl.ib_missing; check `ibstat`, NCCL_IB_DISABLE / NCCL_NET / NCCL_IB_HCA in the "
                    "environment, and that every node sees /dev/infiniband.",
                refs=[DOCS_TROUBLESHOOTING, REF_IB], evidence=quote(self.transport_lines["NET/Socket"].lines)))
        if "SHM" in intra:
            cause = self._p2p_off_cause()
            lines = self.transport_lines["SHM"].lines + self.p2p_unavailable.lines
            env_lines = [self.env[name][1] for name in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") if name in self.env]
            found.append(Finding(
                check_id="nccl.transport", status=Status.WARN, subject=Subject(host=context.host),
                message=f"Ranks on the same node talk through host shared memory (SHM), not GPU peer-to-peer: "
                        f"{cause}. {summary}.",
                observed=observed, expected={"intra_node": "P2P (NVLink or PCIe)"},
                fix="Check `nvidia-smi topo -p2p r` and `nvidia-smi topo -m`; unset NCCL_P2P_DISABLE / "
                    "NCCL_P2P_LEVEL if set; `lspci -vvv | grep ACSCtl` (ACS on PCIe switches blocks P2P: disable ACS in "
                    "the BIOS or with setpci), and `iommu=pt` / VT-d off where the IOMMU translates P2P.",
                refs=[DOCS_TROUBLESHOOTING, REF_ACS], evidence=quote(env_lines + lines)))
        if not found:
            found.append(Finding(
                check_id="nccl.transport", status=Status.PASS, subject=Subject(host=context.host),
                message=f"NCCL transports: {summary}." + (
                    " TCP sockets between nodes: fine for Ethernet-only clusters, a bottleneck for large models."
                    if "NET/Socket" in inter else ""),
                observed=observed, refs=[DOCS_TROUBLESHOOTING],
                evidence=quote([line for bucket in self.transport_lines.values() for line in bucket.lines[:1]])))
        return found

    def _p2p_off_cause(self) -> str:
        if "NCCL_P2P_DISABLE" in self.env and self.env["NCCL_P2P_DISABLE"][0].strip() not in ("0", ""):
            return "P2P is disabled by NCCL_P2P_DISABLE=" + self.env["NCCL_P2P_DISABLE"][0]
        if "NCCL_P2P_LEVEL" in self.env:
            return ("P2P is limited by NCCL_P2P_LEVEL=" + self.env["NCCL_P2P_LEVEL"][0]
                    + " (set in the environment)")
        if self.p2p_unavailable.count:
            return ("NCCL could not enable P2P between the GPUs (ACS or the IOMMU blocking PCIe peer traffic, or GPUs "
                    "without P2P support)")
        return ("P2P was not chosen: disabled (NCCL_P2P_DISABLE/LEVEL in a config file), blocked by ACS/IOMMU, or "
                "the GPUs sit on different CPU sockets where NCCL prefers SHM")

    def _p2p_hang(self, context: DiagnoseContext) -> list[Finding]:
        stuck = [(key, line) for key, (phase, line) in self.proc_phase.items() if phase == "p2p"]
        if not stuck:
            return []
        timed_out = self.timeouts.count > 0
        host = stuck[0][0][0]
        lines = [line for _key, line in stuck] + self.timeouts.lines
        where = ", ".join(sorted({f"{k[0] or '?'} dev {k[2]}" for k, _line in stuck})[:6])
        return [Finding(
            check_id="nccl.p2p_hang", status=Status.FAIL if timed_out else Status.WARN,
            subject=self._subject(context, host, [stuck[0][1]]),
            message=f"The log stops after NCCL set up P2P channels ({where}) with no `Init COMPLETE` or "
                    "`Connected all rings` after them" + (", then a collective timed out" if timed_out else "")
                    + ": the classic P2P hang, where PCIe peer writes are dropped by ACS on a PCIe switch or by the "
                      "IOMMU.",
            observed={"stuck": len(stuck), "timeouts": self.timeouts.count},
            expected="Init COMPLETE after the P2P channel set-up",
            fix="`sudo lspci -vvv | grep ACSCtl` (any `SrcValid+` on a bridge above the GPUs blocks P2P): disable ACS "
                "in the BIOS or with `setpci -s <bridge> ECAP_ACS+0x6.w=0000`; boot with `iommu=pt` (or VT-d/AMD-Vi "
                "off); check `nvidia-smi topo -p2p r`. NCCL_P2P_DISABLE=1 confirms the diagnosis (it runs, slower) "
                "but is not a cure.",
            refs=[DOCS_TROUBLESHOOTING, REF_ACS], evidence=quote(lines))]

    def _warn_findings(self, context: DiagnoseContext, root: str | None, root_seq: int) -> list[Finding]:
        """Secondary errors (after the root cause's first line) link to it; the others stand alone."""
        found = []
        for kind, bucket in self.secondary.items():
            linked = root is not None and bucket.first_seq >= root_seq
            if not linked and kind in _RAISED_BY_TORCH and "torch" in context.readers \
                    and not any(_nccl_level(line) for line in bucket.lines):
                continue  # an error as PyTorch raised it, not a line of NCCL's log: the torch reader reports it
            what = _SECONDARY[kind]
            if kind == "ResultError":
                what = "NCCL error " + ", ".join(self.result_codes)
            host = _host_of(bucket.lines)
            found.append(Finding(
                check_id="nccl.warn", status=Status.WARN if linked else Status.FAIL,
                subject=self._subject(context, host, bucket.lines),
                message=(f"{what} ({bucket.count} line{'s' * (bucket.count > 1)}): "
                         + (f"a consequence of {root}, not a separate fault." if linked else
                            "no cause of it in this log; the first rank to fail is the one to look at "
                            "(rerun with NCCL_DEBUG=INFO and collect every rank's log).")),
                observed={"lines": bucket.count}, evidence=quote(bucket.lines),
                consequence_of=root if linked else None, refs=[DOCS_TROUBLESHOOTING]))
        for key, bucket in self.warns.items():
            linked = root is not None and bucket.first_seq >= root_seq
            cause = root
            if not linked and "torch" in context.readers and _nccl_arch(bucket.lines[0]):
                linked, cause = True, "software.nccl"  # the torch reader judges NCCL kernels missing for the GPU
            found.append(Finding(
                check_id="nccl.warn", status=Status.WARN, subject=self._subject(context, _host_of(bucket.lines),
                                                                                bucket.lines),
                message=f"NCCL WARN {_message_of(bucket.lines[0])} ({bucket.count}×)"
                        + (f": follows from {cause}." if linked else "."),
                observed={"lines": bucket.count, "pattern": key}, evidence=quote(bucket.lines),
                consequence_of=cause if linked else None, refs=[DOCS_TROUBLESHOOTING]))
        if self.warns_dropped:
            found.append(Finding(
                check_id="nccl.warn", status=Status.WARN, subject=Subject(host=context.host),
                message=f"{self.warns_dropped} more NCCL WARN lines of other kinds were counted but not kept.",
                observed={"lines": self.warns_dropped}))
        return found


_RAISED_BY_TORCH = ("ResultError", "RemoteExited", "Timeout")


def _nccl_arch(line: Line) -> bool:
    """NCCL's `Cuda failure 'invalid device function'`: its kernels lack the GPU (software.nccl, judged once)."""
    from gpuready.facts.torch_errors import parse_version_mismatch
    mismatch = parse_version_mismatch(line.text)
    return mismatch is not None and mismatch.kind == "nccl_arch"


def _nccl_level(line: Line) -> str | None:
    """INFO/WARN/TRACE where the line is one of NCCL's own log lines, else None."""
    event = parse.parse_line(line.text)
    return event.level if event is not None else None


def _failed(findings: list[Finding]) -> bool:
    return any(f.status == Status.FAIL for f in findings)


def _first_seq(table: dict, nested: bool = False) -> int:
    seqs = [(value["bucket"] if nested else value).first_seq for value in table.values()]
    return min(seqs) if seqs else 1 << 62


def _first_seq_ib(table: dict) -> int:
    seqs = [bucket.first_seq for reasons in table.values() for bucket in reasons.values()]
    return min(seqs) if seqs else 1 << 62


def _host_of(lines: list[Line]) -> str | None:
    event = parse.parse_line(lines[0].text) if lines else None
    return event.host if event is not None else None


def _message_of(line: Line) -> str:
    event = parse.parse_line(line.text)
    return event.message if event is not None and event.message else line.text


_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|/dev/shm/nccl-\w+|\d+(?:\.\d+)*(?:<\d+>)?|\b[0-9a-f]{12,}\b")


def _normalise(message: str) -> str:
    """One key per kind of WARN: numbers, addresses, pointers and segment names blanked."""
    return _VARIABLE.sub("#", message)[:200]
