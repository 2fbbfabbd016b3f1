"""The NCCL_DEBUG log reader of `gpuready diagnose`: cause → evidence → fix from the lines people paste into tickets.

Parsing is facts/nccl_log.py; this module only judges. State is bounded: counts, the first few lines of each kind,
and small per-host / per-process tables (capped), so a log of millions of INFO lines costs the same memory as a
short one.

Rules and fixes follow NVIDIA's NCCL troubleshooting guide and maintainers' answers in NVIDIA/nccl issues (#199 and
#667 ACS, #286 interfaces, #290/#342/#525 /dev/shm, #451 IB in containers); see the `refs` of each finding.

Every message and fix is catalogue text (locale/<lang>/LC_MESSAGES/diagnose_nccl.po: `nccl.*` the findings,
`nccl_log.*` their parts), so a cause chosen here (which error, which transport, why an interface is unreachable) is a
nested id, and only names, numbers and what the log said are values.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from gpuready.facts import nccl_log as parse
from gpuready.i18n import Said, finding_text, said
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

# Interfaces that cannot carry traffic between nodes: loopback, container and VM bridges (the catalogue's
# `nccl_log.iface.<why>` says which).
_BAD_NAMES = (("lo", "loopback"), ("docker", "docker_bridge"), ("virbr", "libvirt_bridge"),
              ("br-", "docker_network_bridge"), ("veth", "veth"))


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
        where = [said("nccl_log.version_on", version=version,
                      places=", ".join(places[:4]) + (" …" if len(places) > 4 else ""))
                 for version, places in observed.items()]
        return [Finding(
            check_id="nccl.version_mismatch", status=Status.FAIL, subject=Subject(host=context.host),
            **finding_text(said("nccl.version_mismatch", where=where)),
            observed=observed, expected="one NCCL version on every rank",
            refs=[DOCS_TROUBLESHOOTING, "NVIDIA/nccl#286 (maintainer: the NCCL version needs to match)"],
            evidence=quote(lines))]

    def _wrong_interface(self, context: DiagnoseContext) -> list[Finding]:
        found = []
        serious = self._multi_node() or bool(self.connect) or self.nranks > len(self.rank_host or {}) > 0
        for host, entry in self.bad_interfaces.items():
            interfaces = entry["interfaces"]
            names = _comma([said(f"nccl_log.iface.{why}", iface=name) for name, why in interfaces.items()])
            status = Status.FAIL if serious else Status.WARN
            first = next(iter(interfaces)).split(":")[0]
            reach = said("nccl_log.unreachable_there" + ("" if serious else ".one_node"))
            found.append(Finding(
                check_id="nccl.wrong_interface", status=status,
                subject=self._subject(context, None if host == "?" else host, entry["bucket"].lines, nic=first),
                **finding_text(said("nccl.wrong_interface.log", interfaces=names, reach=reach)),
                observed=sorted(interfaces), expected="an interface routable between the nodes (eth*, ens*, ib*, bond*)",
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
                    **finding_text(said("nccl.wrong_interface.shared_address", hosts=", ".join(hosts),
                                        address=address)),
                    observed=observed, expected="a distinct routable address per node",
                    refs=[DOCS_ENV, REF_IFNAME], evidence=quote(lines)))
            elif len(nets) > 1:
                places = ", ".join(f"{host} {address}" for host, address in list(observed.items())[:6])
                found.append(Finding(
                    check_id="nccl.wrong_interface", status=Status.FAIL, subject=Subject(host=context.host),
                    **finding_text(said("nccl.wrong_interface.subnets", places=places)),
                    observed=observed, expected="one network shared by all nodes",
                    refs=[DOCS_ENV, REF_IFNAME], evidence=quote(lines)))
        return found

    def _ib_expected(self, context: DiagnoseContext) -> Said | None:
        """Why InfiniBand/RoCE was expected here, or None."""
        if self.ib_hosts:
            return said("nccl_log.ib_expected.uses_ib", host=next(iter(self.ib_hosts)))
        if any("open_device" in reasons for reasons in self.ib_missing.values()):
            return said("nccl_log.ib_expected.open_device")
        if self.env.get("NCCL_IB_DISABLE", ("1",))[0].strip() == "0":
            return said("nccl_log.ib_expected.ib_disable_0")
        if "NCCL_IB_HCA" in self.env:
            return said("nccl_log.ib_expected.ib_hca", hca=self.env["NCCL_IB_HCA"][0])
        if context.options.get("expect_ib"):
            return said("nccl_log.ib_expected.option")
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
            # each reason NCCL's log gives, and its remedy, in this order
            reasons = [reason for reason in ("libibverbs", "open_device", "no_device", "no_active_port")
                       if reason in reason_set]
            why = [said(f"nccl_log.ib_why.{reason}") for reason in reasons]
            remedies = [said(f"nccl_log.ib_remedy.{reason}") for reason in reasons]
            fallback = (said("nccl_log.ib_fallback.expected", expected=expected) if expected
                        else said("nccl_log.ib_fallback.slow"))
            text = (said("nccl.ib_missing.hosts", hosts=len(hosts), why=why, fallback=fallback, remedies=remedies)
                    if len(hosts) > 1 else said("nccl.ib_missing", why=why, fallback=fallback, remedies=remedies))
            lines = sorted((line for host in hosts for bucket in self.ib_missing[host].values()
                            for line in bucket.lines), key=lambda line: (line.source, line.number))
            status = Status.FAIL if expected else Status.WARN
            named = sorted(host or "?" for host in hosts)
            found.append(Finding(
                check_id="nccl.ib_missing", status=status,
                subject=self._subject(context, hosts[0], lines) if len(hosts) == 1 else Subject(host=context.host),
                **finding_text(text),
                observed={"reasons": sorted(reason_set), "hosts": named[:32]},
                expected="NET/IB : Using [0]mlx5_…" if expected else None,
                refs=[DOCS_TROUBLESHOOTING, REF_IB], evidence=quote(lines)))
        return found

    def _shm(self, context: DiagnoseContext) -> list[Finding]:
        found = []
        for host, bucket in self.shm.items():
            sizes = sorted(self.shm_sizes.get(host, ()))
            errors = sorted(self.shm_errors.get(host, ()))
            detail = (said("nccl_log.lines_error", lines=_lines(bucket.count), error=errors[0]) if errors
                      else _lines(bucket.count))
            text = (said("nccl.shm_too_small.sizes", detail=detail, sizes=_comma([
                        said("nccl_log.bytes", bytes=size, mib=size / 2**20) for size in sizes[:3]]))
                    if sizes else said("nccl.shm_too_small", detail=detail))
            found.append(Finding(
                check_id="nccl.shm_too_small", status=Status.FAIL, subject=self._subject(context, host, bucket.lines),
                **finding_text(text),
                observed={"size_bytes": sizes, "errors": errors, "lines": bucket.count},
                expected="/dev/shm large enough for every local rank pair (1 GiB or more)",
                refs=[DOCS_TROUBLESHOOTING, REF_SHM], evidence=quote(bucket.lines)))
        return found

    def _unreachable(self, context: DiagnoseContext, root: str | None) -> list[Finding]:
        found = []
        for host, bucket in self.connect.items():
            peers = sorted(self.connect_peers.get(host, ()))
            errors = sorted(self.connect_errors.get(host, ()))
            final = self.connect_final.get(host, False)
            who = said("nccl_log.peer." + ("many" if len(peers) > 1 else "one" if peers else "unnamed"),
                       peers=", ".join(peers[:4]))
            found.append(Finding(
                check_id="network.unreachable", status=Status.FAIL if final else Status.WARN,
                subject=self._subject(context, host, bucket.lines),
                **finding_text(said("nccl.unreachable" + ("" if final else ".retrying"), who=who,
                                    errors=", ".join(errors), lines=_lines(bucket.count))),
                observed={"peers": peers, "errors": errors, "lines": bucket.count},
                expected="TCP connections between all ranks",
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
        summary = [said(f"nccl_log.transport.{where}", kinds=_comma([
                       said("nccl_log.transport_kind." + ("many" if len(pairs) > 1 else "one"), kind=kind,
                            pairs=len(pairs), src=pairs[0][0], dst=pairs[0][1])
                       for kind, pairs in sorted(table.items())]))
                   for where, table in (("within", intra), ("between", inter)) if table]
        found = []
        expected_ib = self._ib_expected(context)
        if "NET/Socket" in inter and expected_ib:
            found.append(Finding(
                check_id="nccl.transport", status=Status.WARN, subject=Subject(host=context.host),
                **finding_text(said("nccl.transport.socket", expected=expected_ib, summary=summary)),
                observed=observed, expected={"inter_node": "NET/IB"},
                refs=[DOCS_TROUBLESHOOTING, REF_IB], evidence=quote(self.transport_lines["NET/Socket"].lines)))
        if "SHM" in intra:
            cause = self._p2p_off_cause()
            lines = self.transport_lines["SHM"].lines + self.p2p_unavailable.lines
            env_lines = [self.env[name][1] for name in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") if name in self.env]
            found.append(Finding(
                check_id="nccl.transport", status=Status.WARN, subject=Subject(host=context.host),
                **finding_text(said("nccl.transport.shm", cause=cause, summary=summary)),
                observed=observed, expected={"intra_node": "P2P (NVLink or PCIe)"},
                refs=[DOCS_TROUBLESHOOTING, REF_ACS], evidence=quote(env_lines + lines)))
        if not found:
            found.append(Finding(
                check_id="nccl.transport", status=Status.PASS, subject=Subject(host=context.host),
                **finding_text(said("nccl.transport.pass" + (".socket" if "NET/Socket" in inter else ""),
                                    summary=summary)),
                observed=observed, refs=[DOCS_TROUBLESHOOTING],
                evidence=quote([line for bucket in self.transport_lines.values() for line in bucket.lines[:1]])))
        return found

    def _p2p_off_cause(self) -> Said:
        if "NCCL_P2P_DISABLE" in self.env and self.env["NCCL_P2P_DISABLE"][0].strip() not in ("0", ""):
            return said("nccl_log.p2p_off.disabled", value=self.env["NCCL_P2P_DISABLE"][0])
        if "NCCL_P2P_LEVEL" in self.env:
            return said("nccl_log.p2p_off.level", value=self.env["NCCL_P2P_LEVEL"][0])
        if self.p2p_unavailable.count:
            return said("nccl_log.p2p_off.unavailable")
        return said("nccl_log.p2p_off.not_chosen")

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
            **finding_text(said("nccl.p2p_hang" + (".timed_out" if timed_out else ""), where=where)),
            observed={"stuck": len(stuck), "timeouts": self.timeouts.count},
            expected="Init COMPLETE after the P2P channel set-up",
            refs=[DOCS_TROUBLESHOOTING, REF_ACS], evidence=quote(lines))]

    def _warn_findings(self, context: DiagnoseContext, root: str | None, root_seq: int) -> list[Finding]:
        """Secondary errors (after the root cause's first line) link to it; the others stand alone."""
        found = []
        for kind, bucket in self.secondary.items():
            linked = root is not None and bucket.first_seq >= root_seq
            if not linked and kind in _RAISED_BY_TORCH and "torch" in context.readers \
                    and not any(_nccl_level(line) for line in bucket.lines):
                continue  # an error as PyTorch raised it, not a line of NCCL's log: the torch reader reports it
            what = said(f"nccl_log.secondary.{kind}", codes=", ".join(self.result_codes))
            host = _host_of(bucket.lines)
            found.append(Finding(
                check_id="nccl.warn", status=Status.WARN if linked else Status.FAIL,
                subject=self._subject(context, host, bucket.lines),
                **finding_text(said("nccl.warn.consequence" if linked else "nccl.warn.uncaused", what=what,
                                    lines=_lines(bucket.count), root=root)),
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
                **finding_text(said("nccl.warn.line" + (".follows" if linked else ""),
                                    warn=_message_of(bucket.lines[0]), count=bucket.count, cause=cause)),
                observed={"lines": bucket.count, "pattern": key}, evidence=quote(bucket.lines),
                consequence_of=cause if linked else None, refs=[DOCS_TROUBLESHOOTING]))
        if self.warns_dropped:
            found.append(Finding(
                check_id="nccl.warn", status=Status.WARN, subject=Subject(host=context.host),
                **finding_text(said("nccl.warn.dropped", count=self.warns_dropped)),
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


def _lines(count: int) -> Said:
    """`1 line` / `N lines`."""
    return said("nccl_log.lines.one") if count == 1 else said("nccl_log.lines.many", count=count)


def _comma(items: list[Said]) -> Said | None:
    """Catalogue parts as one comma list (`a, b, c`; in Chinese `a、b、c`): the list separator of the catalogue is
    `; `, which a list inside a sentence of `;`-separated parts would blur."""
    if len(items) <= 1:
        return items[0] if items else None
    return said("nccl_log.comma", head=items[0], tail=_comma(items[1:]))


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
