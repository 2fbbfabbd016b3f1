"""NCCL_DEBUG logs (facts.log_facts.NcclLogFacts): cause → evidence → fix from the lines people paste into tickets.

Rules and fixes follow NVIDIA's NCCL troubleshooting guide and maintainers' answers in NVIDIA/nccl issues (#199 and
#667 ACS, #286 interfaces, #290/#342/#525 /dev/shm, #451 IB in containers); see the `refs` of each finding.

Every message and fix is catalogue text (locale/<lang>/LC_MESSAGES/diagnose_nccl.po: `nccl.*` the findings,
`nccl_log.*` their parts), so a cause chosen here (which error, which transport, why an interface is unreachable) is a
nested id, and only names, numbers and what the log said are values.

The first failure in the log is the root cause: the errors after it (a socket closed, a peer gone) are its
consequences (`consequence_of`), and NCCL's own WARN lines name it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from gpuready.checks.log_evidence import NCCL_TROUBLESHOOTING, quote
from gpuready.checks.registry import CheckContext, log_check
from gpuready.checks.software import CHECK_OF_MISMATCH
from gpuready.checks.torch_logs import peer_connection_lost, rendezvous_unreachable
from gpuready.facts.log_facts import Line, LineGroup, NcclLogFacts
from gpuready.i18n import Said, finding_text, said
from gpuready.model import Finding, Status, Subject

DOCS_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
REF_IFNAME = "NVIDIA/nccl#286 (default NCCL_SOCKET_IFNAME=^lo,docker; lo cannot reach another node)"
REF_SHM = "NVIDIA/nccl#290, #342, #525 (/dev/shm is 64 MB in Docker by default)"
REF_ACS = "NVIDIA/nccl#199, #667 (P2P hangs: disable ACS / VT-d; NCCL_P2P_DISABLE=1 only works around)"
REF_IB = "NVIDIA/nccl#451 (IB device not reachable inside a container)"
REF_NO_INTERFACE = ("NCCL src/bootstrap.cc `Bootstrap : no socket interface found`, src/transport/net_socket.cc "
                    "`NET/Socket : no interface found`, src/misc/socket.cc `Socket creation failed`")
REF_IB_PLUGIN = "NCCL src/plugin/net.cc `NET/Plugin: Loaded net plugin %s`; Mellanox/nccl-rdma-sharp-plugins (IBext)"

REF_AICR = "NVIDIA/aicr#2689 (a 2-node run on TCP sockets: 3 GB/s busbw instead of 489 GB/s over InfiniBand)"
REF_GDR = ("NCCL src/transport/net_ib.cc `GPU Direct RDMA Disabled for HCA %d '%s' (no module)`, src/graph/paths.cc "
           "`GPU Direct RDMA Disabled for GPU %d / HCA %lx (distance %d > %d)`; NCCL_NET_GDR_LEVEL in " + DOCS_ENV)

WRONG_INTERFACE = "nccl.wrong_interface"
UNREACHABLE = "network.unreachable"
SHM_TOO_SMALL = "nccl.shm_too_small"
IB_MISSING = "nccl.ib_missing"
TRANSPORT = "nccl.transport"
PLUGIN_EXPECTS_IB = "nccl_log.ib_expected.plugin"
"""An IB net plugin loaded: the job ships for IB, yet a container image may load it on a machine without IB, so a
warning, not a failure."""
_RAISED_BY_TORCH = ("ResultError", "RemoteExited", "Timeout")
_NEVER = 1 << 62
"""The position of a line that never came."""


def _nccl(context: CheckContext) -> NcclLogFacts | None:
    return context.facts.logs.nccl


def _subject(context: CheckContext, nccl: NcclLogFacts, host: str | None, lines: list[Line] | None = None,
             nic: str | None = None) -> Subject:
    rank = nccl.rank_of(lines[0]) if lines else None
    return Subject(host=host or context.host, nic=nic, rank=rank)


def _multi_node(nccl: NcclLogFacts) -> bool:
    """More than one host in the log, or a NET transport (only used between nodes)."""
    return len(nccl.hosts) > 1 or any(kind.startswith("NET") for kind in nccl.transport_lines)


def _lines(count: int) -> Said:
    """`1 line` / `N lines`."""
    return said("nccl_log.lines.one") if count == 1 else said("nccl_log.lines.many", count=count)


def _comma(items: list[Said]) -> Said | None:
    """Catalogue parts as one comma list (`a, b, c`; in Chinese `a、b、c`): the list separator of the catalogue is
    `; `, which a list inside a sentence of `;`-separated parts would blur."""
    if len(items) <= 1:
        return items[0] if items else None
    return said("nccl_log.comma", head=items[0], tail=_comma(items[1:]))


def _first_seq(groups: list[LineGroup]) -> int:
    return min((group.first_seq for group in groups), default=_NEVER)


# ------------------------------------------------------------------------------------------- nccl.version_mismatch

@log_check("nccl.version_mismatch")
def nccl_version_mismatch(context: CheckContext) -> list[Finding]:
    """One NCCL version on every rank."""
    nccl = _nccl(context)
    by_version: dict[str, list[tuple]] = {}
    for key, (version, _line) in (nccl.versions.items() if nccl else ()):
        by_version.setdefault(version, []).append(key)
    if len(by_version) < 2:
        return []
    observed = {}
    for version, keys in sorted(by_version.items()):
        observed[version] = sorted({
            f"{host or '?'}" + (f" rank {','.join(map(str, ranks))}" if (ranks := nccl.ranks_of(host, pid)) else "")
            for host, pid in keys})
    lines = [nccl.versions[keys[0]][1] for _version, keys in sorted(by_version.items())]
    where = [said("nccl_log.version_on", version=version,
                  places=", ".join(places[:4]) + (" …" if len(places) > 4 else ""))
             for version, places in observed.items()]
    return [Finding(
        check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host),
        **finding_text(said("nccl.version_mismatch", where=where)),
        observed=observed, expected="one NCCL version on every rank",
        refs=[NCCL_TROUBLESHOOTING, "NVIDIA/nccl#286 (maintainer: the NCCL version needs to match)"],
        evidence=quote(lines))]


# ------------------------------------------------------------------------------------------- nccl.wrong_interface

@log_check(WRONG_INTERFACE)
def nccl_wrong_interface(context: CheckContext) -> list[Finding]:
    """NCCL's sockets on interfaces that reach the other nodes."""
    nccl = _nccl(context)
    return _no_interface(context, nccl) + _unroutable(context, nccl) + _addresses(context, nccl) if nccl else []


def _no_interface(context: CheckContext, nccl: NcclLogFacts) -> list[Finding]:
    """NCCL found no IP interface for its sockets (NCCL_SOCKET_IFNAME matches none, or a container without a
    network): bootstrap.cc, net_socket.cc, net_ib.cc and socket.cc WARN lines."""
    found = []
    for host, reasons in nccl.no_interface.items():
        kinds = [reason for reason in ("bootstrap", "socket", "ib_oob", "family") if reason in reasons]
        lines = sorted((line for group in reasons.values() for line in group.lines),
                       key=lambda line: (line.source, line.number))
        setting = nccl.env.get("NCCL_SOCKET_IFNAME")
        found.append(Finding(
            check_id=WRONG_INTERFACE, status=Status.FAIL, subject=_subject(context, nccl, host, lines),
            **finding_text(said("nccl.wrong_interface.none", why=_comma([
                said(f"nccl_log.no_interface.{kind}") for kind in kinds]),
                setting=said("nccl_log.ifname_set", value=setting[0]) if setting else "")),
            observed={"reasons": kinds, "NCCL_SOCKET_IFNAME": setting[0] if setting else None},
            expected="an IP interface NCCL_SOCKET_IFNAME matches, up on every node",
            refs=[DOCS_ENV, REF_IFNAME, REF_NO_INTERFACE], evidence=quote(lines + ([setting[1]] if setting else []))))
    return found


def _unroutable(context: CheckContext, nccl: NcclLogFacts) -> list[Finding]:
    found = []
    serious = _multi_node(nccl) or bool(nccl.connect) or nccl.nranks > len(nccl.rank_host or {}) > 0
    for host, entry in nccl.unroutable.items():
        interfaces = entry.interfaces
        names = _comma([said(f"nccl_log.iface.{why}", iface=name) for name, why in interfaces.items()])
        first = next(iter(interfaces)).split(":")[0]
        reach = said("nccl_log.unreachable_there" + ("" if serious else ".one_node"))
        found.append(Finding(
            check_id=WRONG_INTERFACE, status=Status.FAIL if serious else Status.WARN,
            subject=_subject(context, nccl, None if host == "?" else host, entry.lines.lines, nic=first),
            **finding_text(said("nccl.wrong_interface.log", interfaces=names, reach=reach)),
            observed=sorted(interfaces), expected="an interface routable between the nodes (eth*, ens*, ib*, bond*)",
            refs=[DOCS_ENV, REF_IFNAME], evidence=quote(entry.lines.lines)))
    return found


def _addresses(context: CheckContext, nccl: NcclLogFacts) -> list[Finding]:
    """Two nodes with one address, or nodes on different networks: NCCL's sockets cannot meet."""
    if len(nccl.host_address) < 2:
        return []
    by_address: dict[str, list[str]] = {}
    for host, (address, _line) in nccl.host_address.items():
        by_address.setdefault(address, []).append(host)
    shared = {address: hosts for address, hosts in by_address.items() if len(hosts) > 1}
    nets = {str(ipaddress.ip_network(f"{address}/16", strict=False)) for address, _line in nccl.host_address.values()}
    lines = [line for _address, line in nccl.host_address.values()]
    observed = {host: address for host, (address, _line) in sorted(nccl.host_address.items())}
    if shared:
        address, hosts = next(iter(shared.items()))
        return [Finding(
            check_id=WRONG_INTERFACE, status=Status.FAIL, subject=Subject(host=context.host),
            **finding_text(said("nccl.wrong_interface.shared_address", hosts=", ".join(hosts), address=address)),
            observed=observed, expected="a distinct routable address per node",
            refs=[DOCS_ENV, REF_IFNAME], evidence=quote(lines))]
    if len(nets) > 1:
        places = ", ".join(f"{host} {address}" for host, address in list(observed.items())[:6])
        return [Finding(
            check_id=WRONG_INTERFACE, status=Status.FAIL, subject=Subject(host=context.host),
            **finding_text(said("nccl.wrong_interface.subnets", places=places)),
            observed=observed, expected="one network shared by all nodes",
            refs=[DOCS_ENV, REF_IFNAME], evidence=quote(lines))]
    return []


def _wrong_interface_fails(context: CheckContext, nccl: NcclLogFacts) -> bool:
    return bool(nccl.no_interface) or any(
        f.status == Status.FAIL for f in _unroutable(context, nccl) + _addresses(context, nccl))


# ------------------------------------------------------------------------------------------- nccl.ib_missing

def _ib_expected(context: CheckContext, nccl: NcclLogFacts) -> Said | None:
    """Why InfiniBand/RoCE was expected here, or None."""
    if nccl.ib_hosts:
        return said("nccl_log.ib_expected.uses_ib", host=next(iter(nccl.ib_hosts)))
    if nccl.ipoib:
        iface, _line = next(iter(nccl.ipoib.values()))
        return said("nccl_log.ib_expected.ipoib", iface=iface)
    if any("open_device" in reasons for reasons in nccl.ib_missing.values()):
        return said("nccl_log.ib_expected.open_device")
    if nccl.env.get("NCCL_IB_DISABLE", ("1",))[0].strip() == "0":
        return said("nccl_log.ib_expected.ib_disable_0")
    if "NCCL_IB_HCA" in nccl.env:
        return said("nccl_log.ib_expected.ib_hca", hca=nccl.env["NCCL_IB_HCA"][0])
    if nccl.ib_plugin:
        return said(PLUGIN_EXPECTS_IB, host=next(iter(nccl.ib_plugin)))
    return None


@log_check(IB_MISSING)
def nccl_ib_missing(context: CheckContext) -> list[Finding]:
    """InfiniBand/RoCE where the job expects it."""
    nccl = _nccl(context)
    return _ib_missing(context, nccl) if nccl else []


def _ib_missing(context: CheckContext, nccl: NcclLogFacts) -> list[Finding]:
    expected = _ib_expected(context, nccl)
    if not nccl.ib_missing or (not expected and not _multi_node(nccl)):
        return []  # one node, nothing asking for IB: NCCL tries IB first and warns on any machine without it
    firm = expected is not None and expected.msg_id != PLUGIN_EXPECTS_IB
    groups: dict[frozenset, list[str | None]] = {}
    for host, reasons in nccl.ib_missing.items():
        if host in nccl.ib_hosts and "no_active_port" not in reasons:
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
        lines = sorted((line for host in hosts for group in nccl.ib_missing[host].values() for line in group.lines),
                       key=lambda line: (line.source, line.number))
        named = sorted(host or "?" for host in hosts)
        found.append(Finding(
            check_id=IB_MISSING, status=Status.FAIL if firm else Status.WARN,
            subject=_subject(context, nccl, hosts[0], lines) if len(hosts) == 1 else Subject(host=context.host),
            **finding_text(text),
            observed={"reasons": sorted(reason_set), "hosts": named[:32]},
            expected="NET/IB : Using [0]mlx5_…" if expected else None,
            refs=[NCCL_TROUBLESHOOTING, REF_IB] + ([] if firm or expected is None else [REF_IB_PLUGIN]),
            evidence=quote(lines)))
    return found


# ------------------------------------------------------------------------------------------- nccl.shm_too_small

@log_check(SHM_TOO_SMALL)
def nccl_shm_too_small(context: CheckContext) -> list[Finding]:
    """NCCL's shared-memory segments fit in /dev/shm."""
    nccl = _nccl(context)
    found = []
    for host, group in (nccl.shm.items() if nccl else ()):
        sizes = sorted(nccl.shm_sizes.get(host, ()))
        errors = sorted(nccl.shm_errors.get(host, ()))
        detail = (said("nccl_log.lines_error", lines=_lines(group.count), error=errors[0]) if errors
                  else _lines(group.count))
        text = (said("nccl.shm_too_small.sizes", detail=detail, sizes=_comma([
                    said("nccl_log.bytes", bytes=size, mib=size / 2**20) for size in sizes[:3]]))
                if sizes else said("nccl.shm_too_small", detail=detail))
        found.append(Finding(
            check_id=SHM_TOO_SMALL, status=Status.FAIL, subject=_subject(context, nccl, host, group.lines),
            **finding_text(text),
            observed={"size_bytes": sizes, "errors": errors, "lines": group.count},
            expected="/dev/shm large enough for every local rank pair (1 GiB or more)",
            refs=[NCCL_TROUBLESHOOTING, REF_SHM], evidence=quote(group.lines)))
    return found or _system_error_on_one_node(context, nccl)


def _system_error_on_one_node(context: CheckContext, nccl: NcclLogFacts | None) -> list[Finding]:
    """ncclSystemError (a system call inside NCCL failed) on one node, with no NCCL_DEBUG line saying which: there the
    calls NCCL makes are /dev/shm segments and local sockets, and the troubleshooting guide's cause for containers is
    /dev/shm. A warning naming it and the rerun that settles it, never a failure."""
    group = nccl.secondary.get("ResultError") if nccl else None
    if group is None or "ncclSystemError" not in nccl.result_codes or nccl.warns or nccl.connect \
            or nccl.no_interface or _multi_node(nccl) or _root(context, nccl)[0] is not None:
        return []
    torch = context.facts.logs.torch
    if torch is not None and any(record.last_error for record in torch.nccl_errors):
        return []  # torch quoted NCCL's `Last error:`: it names the failed call, nccl.error reports it
    return [Finding(
        check_id=SHM_TOO_SMALL, status=Status.WARN, subject=_subject(context, nccl, _host_of(nccl, group.lines),
                                                                     group.lines),
        **finding_text(said("nccl.shm_too_small.system_error", lines=_lines(group.count))),
        observed={"result": "ncclSystemError", "nccl_debug_lines": False, "lines": group.count},
        expected="NCCL_DEBUG=WARN output naming the failed call",
        refs=[NCCL_TROUBLESHOOTING + " (Docker: shared memory)", REF_SHM], evidence=quote(group.lines))]


# ------------------------------------------------------------------------------------------- network.unreachable

@log_check(UNREACHABLE)
def network_unreachable(context: CheckContext) -> list[Finding]:
    """Every rank reaches the others: NCCL's socket connections, then the rendezvous (TCPStore) PyTorch waits on."""
    nccl = _nccl(context)
    found = []
    if nccl is not None:
        root = WRONG_INTERFACE if _wrong_interface_fails(context, nccl) else None
        for host, group in nccl.connect.items():
            peers = sorted(nccl.connect_peers.get(host, ()))
            errors = sorted(nccl.connect_errors.get(host, ()))
            final = nccl.connect_final.get(host, False)
            who = said("nccl_log.peer." + ("many" if len(peers) > 1 else "one" if peers else "unnamed"),
                       peers=", ".join(peers[:4]))
            found.append(Finding(
                check_id=UNREACHABLE, status=Status.FAIL if final else Status.WARN,
                subject=_subject(context, nccl, host, group.lines),
                **finding_text(said("nccl.unreachable" + ("" if final else ".retrying"), who=who,
                                    errors=", ".join(errors), lines=_lines(group.count))),
                observed={"peers": peers, "errors": errors, "lines": group.count},
                expected="TCP connections between all ranks",
                refs=[NCCL_TROUBLESHOOTING], evidence=quote(group.lines), consequence_of=root))
    return found + rendezvous_unreachable(context) + (peer_connection_lost(context) if not found else [])


# ------------------------------------------------------------------------------------------- nccl.transport

@log_check(TRANSPORT)
def nccl_transport(context: CheckContext) -> list[Finding]:
    """The transports NCCL chose: P2P within a node, InfiniBand/RoCE between nodes where the job or the machine has
    RDMA NICs (sockets there fail, with the reason NCCL printed), GPUDirect RDMA on where NCCL could turn it on."""
    nccl = _nccl(context)
    if nccl is None or not nccl.pairs:
        return []
    inter, intra = _pairs_by_place(nccl)
    observed = {"intra_node": {k: len(v) for k, v in sorted(intra.items())},
                "inter_node": {k: len(v) for k, v in sorted(inter.items())},
                "communicators": _comm_table(nccl)}
    summary = [said(f"nccl_log.transport.{where}", kinds=_comma([
                   said("nccl_log.transport_kind." + ("many" if len(pairs) > 1 else "one"), kind=kind,
                        pairs=len(pairs), src=pairs[0][0], dst=pairs[0][1])
                   for kind, pairs in sorted(table.items())]))
               for where, table in (("within", intra), ("between", inter)) if table] + _comm_summary(observed)
    found = []
    expected_ib = _ib_expected(context, nccl) or _rdma_ports(context) or _rdma_provider(nccl)
    if "NET/Socket" in inter and expected_ib:
        why, why_lines = _socket_why(nccl)
        fallback = context.fail(
            said("nccl.transport.socket" + (".why" if why else ""), expected=expected_ib, why=why, summary=summary),
            observed=observed, expected={"inter_node": "NET/IB"}, refs=[NCCL_TROUBLESHOOTING, REF_IB, REF_AICR],
            evidence=quote(why_lines + nccl.transport_lines["NET/Socket"].lines))
        ib_failed = any(f.status == Status.FAIL for f in _ib_missing(context, nccl))
        found.append(replace(fallback, consequence_of=IB_MISSING) if ib_failed else fallback)
    if "SHM" in intra:
        lines = nccl.transport_lines["SHM"].lines + nccl.p2p_unavailable.lines
        env_lines = [nccl.env[name][1] for name in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") if name in nccl.env]
        found.append(context.warn(said("nccl.transport.shm", cause=_p2p_off_cause(nccl), summary=summary),
                                  observed=observed, expected={"intra_node": "P2P (NVLink or PCIe)"},
                                  refs=[NCCL_TROUBLESHOOTING, REF_ACS], evidence=quote(env_lines + lines)))
    found += _gdr_off(context, nccl, inter)
    return found or [context.passed(
        said("nccl.transport.pass" + (".socket" if "NET/Socket" in inter else ""), summary=summary),
        observed=observed, refs=[NCCL_TROUBLESHOOTING],
        evidence=quote([line for group in nccl.transport_lines.values() for line in group.lines[:1]]))]


def _pairs_by_place(nccl: NcclLogFacts) -> tuple[dict[str, list[tuple[int, int]]], dict[str, list[tuple[int, int]]]]:
    """(between nodes, within a node): transport → the rank pairs that used it."""
    inter: dict[str, list[tuple[int, int]]] = {}
    intra: dict[str, list[tuple[int, int]]] = {}
    for (src, dst), kinds in nccl.pairs.items():
        for kind in kinds:
            a, b = nccl.rank_host.get(src), nccl.rank_host.get(dst)
            between = (a != b) if (a is not None and b is not None) else kind.startswith("NET")
            (inter if between else intra).setdefault(kind, []).append((src, dst))
    return inter, intra


def _comm_table(nccl: NcclLogFacts) -> dict[str, dict]:
    """Communicator → its ranks, hosts, transports (`NET/IB` as NCCL_DEBUG names it; `RoCE` where the IB devices NCCL
    listed run over Ethernet) and whether its NET channels used GPUDirect RDMA (None: no NET channel)."""
    table = {}
    roce = "RoCE" in nccl.link_layers and "IB" not in nccl.link_layers
    for key, comm in nccl.comms.items():
        if key == "?" or not comm.kinds:
            continue  # channel lines with no Init line before them: no communicator to name
        kinds = [kind + ("/RoCE" if kind == "NET/IB" and roce else "") for kind in comm.kinds]
        table[key] = {"nranks": comm.nranks, "hosts": list(comm.hosts), "transports": kinds,
                      "gdr": (True in comm.gdr) if comm.gdr else None}
    return table


def _comm_summary(observed: dict) -> list[Said]:
    comms = observed["communicators"]
    if not comms:
        return []
    return [said("nccl_log.comms", comms=_comma([
        said("nccl_log.comm" + {True: ".gdr_on", False: ".gdr_off", None: ""}[entry["gdr"]], comm=key,
             nranks=entry["nranks"], kinds=" + ".join(entry["transports"]))
        for key, entry in list(comms.items())[:8]]))]


def _rdma_ports(context: CheckContext) -> Said | None:
    """The machine's own facts (sysfs, ibstat): its active InfiniBand/RoCE ports, or None."""
    active = [f"{port.device}:{port.port}" for port in context.facts.ib_ports or ()
              if (port.state or "").upper().endswith("ACTIVE")]
    return said("nccl_log.ib_expected.ports", ports=", ".join(active[:4]), count=len(active)) if active else None


RDMA_PROVIDERS = ("efa", "cxi", "verbs")
"""libfabric providers that move data by RDMA (AWS EFA, HPE Slingshot, verbs); `tcp` and `sockets` do not."""


def _rdma_provider(nccl: NcclLogFacts) -> Said | None:
    """An RDMA fabric the OFI net plugin found (`NET/OFI Selected Provider is efa`), or None."""
    for host, (provider, _line) in nccl.ofi_provider.items():
        if provider.lower() in RDMA_PROVIDERS:
            return said("nccl_log.ib_expected.ofi", host=host, provider=provider)
    return None


def _socket_why(nccl: NcclLogFacts) -> tuple[Said | None, list[Line]]:
    """Why NCCL fell back to sockets, as its log says: a setting, or the IB transport's own failure."""
    why, lines = [], []
    for name, off in (("NCCL_IB_DISABLE", lambda v: v not in ("0", "")), ("NCCL_NET", lambda v: v.lower() == "socket")):
        if name in nccl.env and off(nccl.env[name][0].strip()):
            why.append(said("nccl_log.socket_why.setting", name=name, value=nccl.env[name][0].strip()))
            lines.append(nccl.env[name][1])
    for reason in ("libibverbs", "open_device", "no_device", "no_active_port"):
        groups = [reasons[reason] for reasons in nccl.ib_missing.values() if reason in reasons]
        if groups:
            why.append(said(f"nccl_log.ib_why.{reason}"))
            lines += groups[0].lines[:1]
    return _comma(why), lines


def _gdr_off(context: CheckContext, nccl: NcclLogFacts, inter: dict) -> list[Finding]:
    """GPUDirect RDMA off where NCCL said why: no peer-memory module, or NCCL_NET_GDR_LEVEL set below the path."""
    if not any(kind.startswith("NET/") and kind != "NET/Socket" for kind in inter) and not nccl.ib_hosts:
        return []
    level = nccl.env.get("NCCL_NET_GDR_LEVEL")
    found = []
    for host, (why, line) in nccl.gdr_off.items():
        cause = "no_module" if why and why.startswith("no module") else "level" if level else None
        if cause is None:
            continue  # NCCL's own distance rule: the NIC is across a host bridge, GDR would not help
        found.append(Finding(
            check_id=context.check_id, status=Status.WARN,
            subject=_subject(context, nccl, None if host == "?" else host, [line]),
            **finding_text(said(f"nccl.transport.gdr_off.{cause}", host=host, why=why or "",
                                value=level[0] if level else "")),
            observed={"gdr": False, "why": why, "NCCL_NET_GDR_LEVEL": level[0] if level else None},
            expected="GPU Direct RDMA Enabled for each HCA NCCL uses",
            refs=[NCCL_TROUBLESHOOTING, REF_GDR], evidence=quote([line] + ([level[1]] if level else []))))
    return found


def _p2p_off_cause(nccl: NcclLogFacts) -> Said:
    if "NCCL_P2P_DISABLE" in nccl.env and nccl.env["NCCL_P2P_DISABLE"][0].strip() not in ("0", ""):
        return said("nccl_log.p2p_off.disabled", value=nccl.env["NCCL_P2P_DISABLE"][0])
    if "NCCL_P2P_LEVEL" in nccl.env:
        return said("nccl_log.p2p_off.level", value=nccl.env["NCCL_P2P_LEVEL"][0])
    if nccl.p2p_unavailable.count:
        return said("nccl_log.p2p_off.unavailable")
    return said("nccl_log.p2p_off.not_chosen")


# ------------------------------------------------------------------------------------------- the root cause

def _root(context: CheckContext, nccl: NcclLogFacts) -> tuple[str | None, int]:
    """(check id, position of its first line) of the earliest failure that follows from nothing else in the log:
    /dev/shm too small, a peer unreachable, an interface that reaches no other node, InfiniBand missing."""
    wrong = _unroutable(context, nccl) + _addresses(context, nccl)
    wrong_fails = any(f.status == Status.FAIL for f in wrong)
    connect = next(iter(nccl.connect), _NEVER)
    ib = _ib_missing(context, nccl)
    roots = [(check_id, seq) for check_id, seq, failed in (
        (SHM_TOO_SMALL, _first_seq(list(nccl.shm.values())), bool(nccl.shm)),
        (UNREACHABLE, _first_seq(list(nccl.connect.values())),
         connect is not _NEVER and nccl.connect_final.get(connect, False) and not wrong_fails),
        (WRONG_INTERFACE, _first_seq([entry.lines for entry in nccl.unroutable.values()]
                                     + [group for reasons in nccl.no_interface.values() for group in reasons.values()]),
         bool(nccl.no_interface) or bool(wrong) and wrong[0].status == Status.FAIL),
        (IB_MISSING, _first_seq([group for reasons in nccl.ib_missing.values() for group in reasons.values()]),
         bool(ib) and ib[0].status == Status.FAIL)) if failed]
    if not roots:
        return None, 0
    return min(roots, key=lambda root: root[1])[0], min(seq for _id, seq in roots)


# ------------------------------------------------------------------------------------------- pcie.acs_iommu (logs)

IBV_WC_LOC_PROT_ERR = 4
"""ibv_wc_status (rdma-core verbs.h): the NIC could not access the memory a work request names."""
REF_GDR_ACS = ("NCCL troubleshooting, PCI Access Control Services (ACS): "
               "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs")


def acs_in_nccl_logs(context: CheckContext) -> list[Finding]:
    """pcie.acs_iommu from NCCL's log: an InfiniBand send or receive whose completion says IBV_WC_LOC_PROT_ERR. With
    GPUDirect RDMA the memory is the GPU's, reached by the NIC over PCIe; ACS redirecting that traffic up to the root
    complex (or an IOMMU translating it) makes the access fail, where the host's memory path works
    (NCCL_NET_GDR_LEVEL=0 hides it)."""
    nccl = _nccl(context)
    group = nccl.ib_completion.get(IBV_WC_LOC_PROT_ERR) if nccl else None
    if group is None:
        return []
    return [Finding(
        check_id=context.check_id, status=Status.WARN,
        subject=_subject(context, nccl, _host_of(nccl, group.lines), group.lines),
        **finding_text(said("pcie.acs_iommu.ib_local_protection", lines=_lines(group.count))),
        observed={"ibv_wc_status": IBV_WC_LOC_PROT_ERR, "lines": group.count},
        expected="GPUDirect RDMA completions without error (ACS off on the NIC-GPU path, IOMMU off or passthrough)",
        refs=[REF_GDR_ACS, "rdma-core libibverbs/verbs.h ibv_wc_status (4 = IBV_WC_LOC_PROT_ERR)"],
        evidence=quote(group.lines))]


# ------------------------------------------------------------------------------------------- nccl.p2p_hang

@log_check("nccl.p2p_hang")
def nccl_p2p_hang(context: CheckContext) -> list[Finding]:
    """A rank that set up P2P channels and never completed Init, where no other failure explains it (ACS / IOMMU)."""
    nccl = _nccl(context)
    if nccl is None or _root(context, nccl)[0] is not None:
        return []
    stuck = [(key, line) for key, (phase, line) in nccl.proc_phase.items() if phase == "p2p"]
    if not stuck:
        return []
    timed_out = nccl.timeouts.count > 0
    host = stuck[0][0][0]
    lines = [line for _key, line in stuck] + nccl.timeouts.lines
    where = ", ".join(sorted({f"{k[0] or '?'} dev {k[2]}" for k, _line in stuck})[:6])
    return [Finding(
        check_id=context.check_id, status=Status.FAIL if timed_out else Status.WARN,
        subject=_subject(context, nccl, host, [stuck[0][1]]),
        **finding_text(said("nccl.p2p_hang" + (".timed_out" if timed_out else ""), where=where)),
        observed={"stuck": len(stuck), "timeouts": nccl.timeouts.count},
        expected="Init COMPLETE after the P2P channel set-up",
        refs=[NCCL_TROUBLESHOOTING, REF_ACS], evidence=quote(lines))]


# ------------------------------------------------------------------------------------------- nccl.warn

@log_check("nccl.warn")
def nccl_warn(context: CheckContext) -> list[Finding]:
    """NCCL's errors and WARN lines: after the root cause's first line they follow from it; the others stand alone."""
    nccl = _nccl(context)
    if nccl is None:
        return []
    root, root_seq = _root(context, nccl)
    torch_read = context.facts.logs.torch is not None  # the PyTorch reader ran: it reports torch's own errors
    found = []
    for kind, group in nccl.secondary.items():
        linked = root is not None and group.first_seq >= root_seq
        if not linked and kind in _RAISED_BY_TORCH and torch_read \
                and not any(nccl.level_of(line) for line in group.lines):
            continue  # an error as PyTorch raised it, not a line of NCCL's log: the torch checks report it
        what = said(f"nccl_log.secondary.{kind}", codes=", ".join(nccl.result_codes))
        found.append(Finding(
            check_id=context.check_id, status=Status.WARN if linked else Status.FAIL,
            subject=_subject(context, nccl, _host_of(nccl, group.lines), group.lines),
            **finding_text(said("nccl.warn.consequence" if linked else "nccl.warn.uncaused", what=what,
                                lines=_lines(group.count), root=root)),
            observed={"lines": group.count}, evidence=quote(group.lines),
            consequence_of=root if linked else None, refs=[NCCL_TROUBLESHOOTING]))
    for key, group in nccl.warns.items():
        linked, cause = root is not None and group.first_seq >= root_seq, root
        if not linked and torch_read and nccl.lacks_kernels(group.lines[0]):
            linked, cause = True, CHECK_OF_MISMATCH["nccl_arch"]  # software.nccl judges NCCL kernels missing
        found.append(Finding(
            check_id=context.check_id, status=Status.WARN,
            subject=_subject(context, nccl, _host_of(nccl, group.lines), group.lines),
            **finding_text(said("nccl.warn.line" + (".follows" if linked else ""),
                                warn=nccl.message_of(group.lines[0]), count=group.count, cause=cause)),
            observed={"lines": group.count, "pattern": key}, evidence=quote(group.lines),
            consequence_of=cause if linked else None, refs=[NCCL_TROUBLESHOOTING]))
    if nccl.warns_dropped:
        found.append(context.warn(said("nccl.warn.dropped", count=nccl.warns_dropped),
                                  observed={"lines": nccl.warns_dropped}))
    return found


def _host_of(nccl: NcclLogFacts, lines: list[Line]) -> str | None:
    return nccl.host_of(lines[0]) if lines else None


def judge_nccl_interface(peer: str, address: str, route_nic: str | None, picks: list[str], setting: Said, *,
                         this_host: bool) -> tuple[Status, Said, str | None, str | None]:
    """`diagnose net`'s live probe, judged as the logs are: is the interface NCCL's socket transport picks (its own
    rules: NCCL_SOCKET_IFNAME, NCCL_COMM_ID, then the first non-loopback, non-docker one) the one the kernel routes
    the peer through? (status, sentence, the interface it concerns, the one expected)."""
    if this_host:
        return Status.SKIP, said("net.nccl_interface.this_host", peer=peer, address=address), None, None
    if not picks:
        return (Status.FAIL, said("net.nccl_interface.none" + (".route" if route_nic else ""), setting=setting,
                                  route_nic=route_nic), None, route_nic)
    if route_nic is None:
        return Status.SKIP, said("net.nccl_interface.no_route", address=address, pick=picks[0]), None, None
    if picks[0] != route_nic:
        return (Status.FAIL, said("net.nccl_interface.mismatch", pick=picks[0], setting=setting, peer=peer,
                                  route_nic=route_nic), picks[0], route_nic)
    others = [name for name in picks[1:] if name != route_nic]
    return (Status.PASS, said("net.nccl_interface.pass" + (".others" if others else ""), route_nic=route_nic,
                              setting=setting, peer=peer, others=", ".join(others)), route_nic, None)
