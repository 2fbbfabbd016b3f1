"""NCCL_DEBUG logs (`NCCL_DEBUG=INFO|WARN|TRACE`): one line in, one typed event out. Parsing only, never judging.

A line looks like `host:pid:tid [dev] NCCL INFO message` or `host:pid:tid [dev] file.cc:123 NCCL WARN message`
(`dev` is the process's CUDA device, not its global rank). Pasted logs carry more in front: torchrun's `[rank3]:`
or `[default0]:`, mpirun's `[1,3]<stdout>:`, a timestamp, a left-over colour code (`[0m `); tickets also strip
the `host:pid:tid` part (`[3] NCCL INFO ...`, or bare `NCCL INFO ...`). NCCL before 2.3 wrote `INFO`/`WARN`
without the word NCCL. The line formats below are quoted from NCCL's own logs as pasted in NVIDIA/nccl issues
(see tests/fixtures/diagnose/nccl/README.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------------- events


@dataclass(frozen=True, kw_only=True)
class NcclEvent:
    """What every event carries: where the line came from, as its prefix says."""
    host: str | None = None
    """From `host:pid:tid`; None where the paste dropped it."""
    pid: int | None = None
    dev: int | None = None
    """The CUDA device in `[dev]` (local to the process, not the global rank)."""
    launcher_rank: int | None = None
    """The global rank a launcher put in front (`[rank3]:`, `[default3]:` is torchrun's local rank, `[1,3]<stdout>:`)."""
    level: str | None = None
    """`INFO`, `WARN`, `TRACE`, or None (a line NCCL printed without a level, or an error quoted by PyTorch)."""
    message: str = ""
    """The text after the level (the whole line after the prefix where there is no level)."""


@dataclass(frozen=True, kw_only=True)
class Version(NcclEvent):
    version: str
    """`2.21.5`."""
    cuda: str | None = None
    """The CUDA the library was built for, `12.4`."""


@dataclass(frozen=True)
class Interface:
    name: str
    address: str
    """IPv4 or IPv6 address as printed (`10.0.0.1`, `fe80::1%eth1`)."""


@dataclass(frozen=True, kw_only=True)
class Interfaces(NcclEvent):
    role: str
    """`socket` (NET/Socket, the data path without IB), `bootstrap` (out-of-band set-up), `ib_oob` (the IB
    transport's out-of-band interface), `legacy` (NCCL ≤2.3 `NET : Using interface` lines, one per line)."""
    interfaces: tuple[Interface, ...]
    ipoib: tuple[str, ...] = ()
    """IPoIB interfaces among them (`ib0`, `ibp12s0`: the kernel's names for IP over InfiniBand), read even where the
    paste blanked the address (`[0]ib0.<ip>`): an InfiniBand port exists on that host."""


@dataclass(frozen=True, kw_only=True)
class IbDevices(NcclEvent):
    devices: tuple[str, ...]
    """`mlx5_0:1/IB`, `mlx5_bond_0:1/RoCE`, as printed."""


@dataclass(frozen=True, kw_only=True)
class IbMissing(NcclEvent):
    reason: str
    """`no_device` (NET/IB : No device found), `libibverbs` (Failed to open libibverbs.so), `open_device`
    (ibv_open_device failed / Unable to open device), `no_active_port`."""


@dataclass(frozen=True, kw_only=True)
class NoInterface(NcclEvent):
    """NCCL found no IP interface for its sockets (bootstrap.cc `Bootstrap : no socket interface found`, net_socket.cc
    `NET/Socket : no interface found`, net_ib.cc `NET/IB : No IP interface found`), or made a socket for an address of
    no family (socket.cc `Socket creation failed : Address family not supported by protocol`, `connecting to address
    … with family 0 is neither AF_INET nor AF_INET6`): the address it was to use was never filled in."""
    reason: str
    """`bootstrap`, `socket`, `ib_oob`, `family`."""


@dataclass(frozen=True, kw_only=True)
class IbCompletionError(NcclEvent):
    """net_ib.cc `NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d (%s)` (2.19+:
    `with status=%d opcode=%d len=%d vendor err %d (%s)`): a verbs work request that failed, by ibv_wc_status."""
    status: int
    """ibv_wc_status: 4 IBV_WC_LOC_PROT_ERR (the NIC could not access the registered memory), 12
    IBV_WC_RETRY_EXC_ERR (the peer never acknowledged: the link), 5 IBV_WC_WR_FLUSH_ERR (flushed after another)."""
    peer: str | None = None
    vendor_err: int | None = None


@dataclass(frozen=True, kw_only=True)
class NetPlugin(NcclEvent):
    """`NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v5)` (NCCL's net plugin loader), `P2P plugin IBext` (the
    nccl-rdma-sharp-plugins' own line)."""
    name: str
    rdma: bool
    """An InfiniBand/RoCE (verbs) plugin: the job means to use IB."""


@dataclass(frozen=True, kw_only=True)
class OfiProvider(NcclEvent):
    """aws-ofi-nccl's `NET/OFI Selected Provider is efa (found 4 nics)` (newer: `Selected provider is efa, fabric is
    efa-direct`): the libfabric provider its NET plugin runs over."""
    provider: str
    """`efa`, `cxi` (HPE Slingshot), `verbs`, `tcp`, `sockets`."""


@dataclass(frozen=True, kw_only=True)
class NetworkChosen(NcclEvent):
    network: str
    """`IB`, `Socket`, a plugin's name."""


@dataclass(frozen=True, kw_only=True)
class EnvSet(NcclEvent):
    name: str
    value: str


@dataclass(frozen=True, kw_only=True)
class Transport(NcclEvent):
    channel: int
    src_rank: int
    dst_rank: int
    direction: str | None
    """`send`, `receive`, or None (intra-node lines)."""
    via: str
    """As printed: `P2P/IPC/read`, `SHM/direct/direct`, `NET/IB/0/GDRDMA`, `direct shared memory`, …"""
    kind: str
    """`P2P`, `SHM`, `NET/IB`, `NET/Socket`, `NET/<plugin>`, `COLLNET`, or `other`."""


@dataclass(frozen=True, kw_only=True)
class P2pUnavailable(NcclEvent):
    """`Could not enable P2P between dev 0(=41000) and dev 1(=81000)`."""


@dataclass(frozen=True, kw_only=True)
class CommInit(NcclEvent):
    rank: int
    nranks: int
    cuda_dev: int | None = None
    bus_id: str | None = None
    complete: bool = False
    """`Init COMPLETE` (else `Init START` or the pre-2.8 `comm 0x… rank r nranks n` line)."""
    comm_id: str | None = None
    """init.cc's `commId 0x…` (2.19+): the same on every rank of one communicator."""


@dataclass(frozen=True, kw_only=True)
class GdrState(NcclEvent):
    """GPUDirect RDMA for one NIC: net_ib.cc `NET/IB : GPU Direct RDMA Enabled for HCA %d '%s'` (`Disabled … (no
    module)` where nvidia-peermem / DMA-BUF is missing), graph/paths.cc `GPU Direct RDMA Enabled|Disabled for GPU %d /
    HCA %lx (distance %d <= %d)` (older `GPU %lx`)."""
    enabled: bool
    hca: str
    """`0`, `'mlx5_0'` as printed."""
    why: str | None = None
    """What NCCL put in brackets: `no module`, `distance 8 > 5`."""


@dataclass(frozen=True, kw_only=True)
class RingsConnected(NcclEvent):
    """`Connected all rings` / `Connected all trees`: the transports were set up."""


@dataclass(frozen=True, kw_only=True)
class ShmError(NcclEvent):
    path: str | None = None
    """`/dev/shm/nccl-UbzKZ9`, or the old `nccl-shm-recv-…` name."""
    size_bytes: int | None = None
    error: str | None = None
    """`No space left on device (28)`, `Cuda failure 'invalid argument'`, …"""


@dataclass(frozen=True, kw_only=True)
class ConnectError(NcclEvent):
    peer: str | None = None
    """`10.38.10.112<21724>` where the line names it."""
    error: str
    """`Connection refused`, `Connection timed out`, `No route to host`, `Network is unreachable`."""
    retrying: bool = False


@dataclass(frozen=True, kw_only=True)
class SocketError(NcclEvent):
    """A socket failing after set-up: `Socket recv failed`, `Connection closed by remote peer`, `Net : Connection
    closed by remote peer`, `Connection reset by peer`."""
    error: str


@dataclass(frozen=True, kw_only=True)
class ResultError(NcclEvent):
    code: str
    """`ncclSystemError`, `ncclInternalError`, `ncclUnhandledCudaError`, `ncclRemoteError`, `ncclInvalidUsage`."""


@dataclass(frozen=True, kw_only=True)
class RemoteExited(NcclEvent):
    """`remote process exited or there was a network error`."""


@dataclass(frozen=True, kw_only=True)
class Timeout(NcclEvent):
    """A collective that never finished: PyTorch's `Watchdog caught collective operation timeout`, NCCL's
    `NCCL WARN ... timeout`."""


@dataclass(frozen=True, kw_only=True)
class Other(NcclEvent):
    """A NCCL line of no kind above (most INFO lines; any WARN not classified)."""


# ---------------------------------------------------------------------------------------------------- patterns

def _not_followed_by(literal: str) -> str:
    """A regex for "not followed by `literal`" without a lookahead (the marker search runs on RE2, which has none):
    the end of the line, or a character that differs from `literal` where it does."""
    first = literal[0] if literal[0].isalnum() or literal[0] == " " else "\\" + literal[0]
    rest = f"|{first}{_not_followed_by(literal[1:])}" if literal[1:] else ""
    return f"(?:$|[^{first}]{rest})"


_NOT_A_COLLECTIVE = r"(?:$|\W|\w+(?:$|[^\w:]|:" + _not_followed_by(" opCount ") + "))"
"""What follows `NCCL INFO ` on any line but the one per collective (`AllReduce: opCount …`)."""

MARKERS = (r"NCCL WARN|NCCL INFO " + _NOT_A_COLLECTIVE + r"|NCCL version|ncclSystemError|ncclInternalError"
           r"|ncclUnhandledCudaError|ncclRemoteError|remote process exited|Error while creating shared memory"
           r"|no socket interface found|Socket creation failed|is neither AF_INET|NCCL Error \d|NCCL failure "
           r"|Watchdog caught collective operation timeout|:\d+:\d+ \[\d+\] (?:[\w/.]+:\d+ )?(?:INFO|WARN) ")
"""Where to look (searched per line); lines without any of these are not NCCL's. Not TRACE, nor the line per
collective that NCCL_DEBUG_SUBSYS=COLL prints (`AllReduce: opCount …`): they make NCCL logs gigabytes long and say
nothing about why a job failed."""

# host:pid:tid [dev] — anywhere after launcher prefixes, timestamps or colour remnants.
_PREFIX = re.compile(r"(?:^|(?<=[\s\]>:]))(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
# What a stripped ANSI colour code leaves when the paste lost its ESC byte: `[0m `.
_COLOUR_REMNANT = re.compile(r"^\s*(?:\[[0-9;]*m\s*)+")
_DEV_ONLY = re.compile(r"^\s*\[(?P<dev>\d+)\] ")
_LAUNCHER = re.compile(r"^\s*(?:\[(?:rank|default)(?P<rank>\d+)\]:|\[\d+,(?P<mpi>\d+)\]<std(?:out|err)>:)")
# `file.cc:123 NCCL WARN msg`, `NCCL INFO msg`, old `include/socket.h:360 WARN msg`.
_LEVEL = re.compile(r"^(?:\S+:\d+ )?(?:NCCL )?(?P<level>INFO|WARN|TRACE)\b ?(?P<msg>.*)$")
_LEVEL_ANYWHERE = re.compile(r"\bNCCL (?P<level>INFO|WARN|TRACE)\b ?(?P<msg>.*)$")

_VERSION = re.compile(r"^NCCL version (?P<v>\d+\.\d+\.\d+)(?:[-.]\d+)?(?:\+cuda(?P<cuda>\d+\.\d+))?")
_IFACE = re.compile(r"(?:\[\d+\])?(?P<name>[\w.\-@]+):(?P<addr>[0-9A-Fa-f.:%\w\-]+?)<\d+>")
_SOCKET_USING = re.compile(r"^NET/Socket ?: Using (?P<list>.+)$")
_BOOTSTRAP_USING = re.compile(r"^Bootstrap ?: Using (?P<list>.+)$")
_LEGACY_USING = re.compile(r"^NET ?: Using interface (?P<list>\S+)")
_IB_USING = re.compile(r"^NET/IB ?: Using (?P<list>.+?)(?: ?; OOB (?P<oob>.+))?$")
_IPOIB = re.compile(r"\[\d+\](ib[a-z]?\d\w*)")
_IB_DEVICE = re.compile(r"\[\d+\](\S+)")
_NO_INTERFACE = (
    ("bootstrap", re.compile(r"Bootstrap ?: no socket interface found", re.IGNORECASE)),
    ("socket", re.compile(r"NET/Socket ?: no interface found", re.IGNORECASE)),
    ("ib_oob", re.compile(r"NET/IB ?: No IP interface found", re.IGNORECASE)),
    ("family", re.compile(r"Socket creation failed ?: Address family not supported"
                          r"|with family 0 is neither AF_INET", re.IGNORECASE)),
)
_IB_COMPLETION = re.compile(r"Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?P<status>\d+)"
                            r"(?:.*?vendor err (?P<vendor>\d+))?")
_NET_PLUGIN = re.compile(r"^(?:NET/Plugin ?: ?Loaded net plugin (?P<name>.+?) \(v\d+\)|P2P plugin (?P<p2p>\w+))")
_RDMA_PLUGIN = re.compile(r"RDMA|\bIB|IBext|\bibverbs|\bmlx5", re.IGNORECASE)
_OFI_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is (?P<provider>[\w\-]+)")
_NETWORK = re.compile(r"^Using network (?P<net>.+?)\s*$")
_ENV = re.compile(r"^(?P<name>NCCL_\w+) set by environment to (?P<value>.*?)\.?\s*$")
_TRANSPORT = re.compile(
    r"(?:Channel|Ring) (?P<ch>\d+)(?:/\d+)? ?: (?P<src>\d+)(?:\[[0-9a-fA-Fx]+\])? -> (?P<dst>\d+)(?:\[[0-9a-fA-Fx]+\])?"
    r" (?:\[(?P<dir>send|receive)\] )?via (?P<via>.+?)\s*$")
_COMM = re.compile(r"\bcomm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) nranks (?P<nranks>\d+)"
                   r"(?: cudaDev (?P<dev>\d+))?(?:.*?busId (?P<bus>[0-9a-fA-F]+))?")
_COMM_ID = re.compile(r"\bcommId (0x[0-9a-fA-F]+)")
_GDR = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for (?:GPU \S+ / )?HCA (?P<hca>\S+(?: '[^']*')?)"
                  r"(?: \((?P<why>[^)]*)\))?")
_OLD_RANK = re.compile(r"^rank (?P<rank>\d+) nranks (?P<nranks>\d+)\s*$")
_SHM_CREATE = re.compile(r"Error while (?:creating|attaching to) shared memory segment (?P<path>\S+)"
                         r"(?: \(size (?P<size>\d+)\))?(?:, error: (?P<err>.+))?")
_SHM_EXTEND = re.compile(r"failed to extend (?P<path>\S+) to (?P<size>\d+) bytes(?:, error: (?P<err>.+))?")
_FALLOCATE = re.compile(r"Call to posix_fallocate failed ?: (?P<err>.+)")
_CONNECT = (
    re.compile(r"Call to connect (?:returned|timeout|failed) ?: ?(?P<err>[A-Za-z ]+?)(?P<retry>, retrying)?\s*$"),
    re.compile(r"Connect to (?P<peer>\S+) failed ?: (?P<err>[A-Za-z ]+?)\s*$"),
    re.compile(r"Connect to (?P<peer>\S+) returned \d+\((?P<err>[A-Za-z ]+)\)"),
    re.compile(r"Call to connect returned (?P<err>[A-Za-z ]+?)(?P<retry>, retrying)?\s*$"),
)
_CONNECT_WORDS = ("refused", "timed out", "No route to host", "unreachable", "timeout")
_SOCKET_ERROR = re.compile(r"(Socket recv failed|Connection closed by remote peer|Connection reset by peer"
                           r"|Socket send failed|Net : Connection closed)")
_RESULT = re.compile(r"\b(ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclRemoteError|ncclInvalidUsage)\b")
# ncclGetErrorString's texts as other programs print a result: nccl-tests' common.h `Test NCCL failure %s:%d '%s'`
# (older: `NCCL failure common.cu:777 'unhandled system error'`), torch 1.x's nccl.cpp `NCCL Error %d: %s`.
_RESULT_TEXT = re.compile(r"NCCL (?:Error \d+|failure [\w/.\-]+:\d+)\W{0,3}(?P<text>unhandled system error|internal error"
                          r"|unhandled cuda error|invalid usage|invalid argument|remote process exited)")
_RESULT_OF_TEXT = {"unhandled system error": "ncclSystemError", "internal error": "ncclInternalError",
                   "unhandled cuda error": "ncclUnhandledCudaError", "invalid usage": "ncclInvalidUsage",
                   "invalid argument": "ncclInvalidArgument", "remote process exited": "ncclRemoteError"}
_REMOTE = re.compile(r"remote process exited or there was a network error", re.IGNORECASE)
_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout")


def _interfaces(text: str) -> tuple[Interface, ...]:
    return tuple(Interface(name=m.group("name"), address=m.group("addr")) for m in _IFACE.finditer(text))


def split_prefix(text: str) -> tuple[dict, str]:
    """The prefix fields (host, pid, dev, launcher_rank) and the rest of the line after them."""
    fields: dict = {}
    launcher = _LAUNCHER.match(text)
    if launcher:
        fields["launcher_rank"] = int(launcher.group("rank") or launcher.group("mpi"))
    prefix = _PREFIX.search(text)
    if prefix:
        fields.update(host=prefix.group("host"), pid=int(prefix.group("pid")), dev=int(prefix.group("dev")))
        return fields, text[prefix.end():]
    rest = _COLOUR_REMNANT.sub("", text[launcher.end():] if launcher else text)
    dev = _DEV_ONLY.match(rest)
    if dev:
        fields["dev"] = int(dev.group("dev"))
        rest = rest[dev.end():]
    return fields, rest.strip()


def parse_line(text: str) -> NcclEvent | None:
    """The event a cleaned log line holds, or None where the line is not NCCL's."""
    fields, rest = split_prefix(text)
    level_match = _LEVEL.match(rest) if "host" in fields or "dev" in fields else _LEVEL_ANYWHERE.search(rest)
    if level_match is None and "host" not in fields:
        level_match = _LEVEL_ANYWHERE.search(rest)
    if level_match:
        fields["level"] = level_match.group("level")
        message = level_match.group("msg").strip()
    else:
        message = rest.strip()
    fields["message"] = message
    event = _classify(message, fields)
    if event is None and (fields.get("level") or "host" in fields):
        return Other(**fields)
    return event


def _classify(message: str, fields: dict) -> NcclEvent | None:  # noqa: C901 (one table of line kinds)
    if match := _VERSION.match(message):
        return Version(version=match.group("v"), cuda=match.group("cuda"), **fields)
    if match := _SOCKET_USING.match(message):
        return Interfaces(role="socket", interfaces=_interfaces(match.group("list")),
                          ipoib=tuple(_IPOIB.findall(match.group("list"))), **fields)
    if match := _BOOTSTRAP_USING.match(message):
        return Interfaces(role="bootstrap", interfaces=_interfaces(match.group("list")),
                          ipoib=tuple(_IPOIB.findall(match.group("list"))), **fields)
    if match := _LEGACY_USING.match(message):
        return Interfaces(role="legacy", interfaces=_interfaces(match.group("list") + "<0>"), **fields)
    if message.startswith("NET/IB") and "No device found" in message:
        return IbMissing(reason="no_device", **fields)
    if "call to devices() returned 0 devices" in message:
        return IbMissing(reason="no_device", **fields)
    if "Failed to open libibverbs" in message:
        return IbMissing(reason="libibverbs", **fields)
    if "ibv_open_device failed" in message or "NET/IB : Unable to open device" in message:
        return IbMissing(reason="open_device", **fields)
    if "No active port" in message or "no active port" in message or "No active ports" in message:
        return IbMissing(reason="no_active_port", **fields)
    if match := _IB_COMPLETION.search(message):
        return IbCompletionError(status=int(match.group("status")), peer=match.group("peer"),
                                 vendor_err=int(match.group("vendor")) if match.group("vendor") else None, **fields)
    for reason, pattern in _NO_INTERFACE:
        if pattern.search(message):
            return NoInterface(reason=reason, **fields)
    if event := _net_setup(message, fields):
        return event
    if match := _ENV.match(message):
        return EnvSet(name=match.group("name"), value=match.group("value"), **fields)
    if match := _TRANSPORT.search(message):
        via = match.group("via")
        return Transport(channel=int(match.group("ch")), src_rank=int(match.group("src")),
                         dst_rank=int(match.group("dst")), direction=match.group("dir"), via=via,
                         kind=_transport_kind(via), **fields)
    if "Could not enable P2P between" in message:
        return P2pUnavailable(**fields)
    if match := _COMM.search(message):
        return CommInit(rank=int(match.group("rank")), nranks=int(match.group("nranks")),
                        cuda_dev=int(match.group("dev")) if match.group("dev") else None,
                        bus_id=match.group("bus"), complete="Init COMPLETE" in message,
                        comm_id=(comm_id.group(1) if (comm_id := _COMM_ID.search(message)) else None), **fields)
    if match := _OLD_RANK.match(message):
        return CommInit(rank=int(match.group("rank")), nranks=int(match.group("nranks")), **fields)
    if message.startswith("Connected all rings") or message.startswith("Connected all trees"):
        return RingsConnected(**fields)
    if match := (_SHM_CREATE.search(message) or _SHM_EXTEND.search(message)):
        size = match.group("size")
        return ShmError(path=match.group("path"), size_bytes=int(size) if size else None,
                        error=(match.group("err") or "").strip() or None, **fields)
    if match := _FALLOCATE.search(message):
        return ShmError(error=match.group("err").strip(), **fields)
    if "Call to connect" in message or "Connect to" in message:
        for pattern in _CONNECT:
            if (match := pattern.search(message)) and any(w in match.group("err") for w in _CONNECT_WORDS):
                groups = match.groupdict()
                return ConnectError(peer=groups.get("peer"), error=match.group("err").strip(),
                                    retrying=bool(groups.get("retry")), **fields)
    if _REMOTE.search(message):
        return RemoteExited(**fields)
    if match := _RESULT.search(message):
        return ResultError(code=match.group(1), **fields)
    if match := _RESULT_TEXT.search(message):
        return ResultError(code=_RESULT_OF_TEXT[match.group("text")], **fields)
    if _TIMEOUT.search(message) or (fields.get("level") == "WARN" and re.search(r"\btimeout\b", message)):
        return Timeout(**fields)
    if match := _SOCKET_ERROR.search(message):
        return SocketError(error=match.group(1), **fields)
    return None


def _net_setup(message: str, fields: dict) -> NcclEvent | None:
    """The lines that say which network NCCL set up: a net plugin, the IB devices, the OFI provider, the network
    chosen, GPUDirect RDMA per NIC."""
    if match := _NET_PLUGIN.match(message):
        name = (match.group("name") or match.group("p2p")).strip()
        return NetPlugin(name=name, rdma=bool(_RDMA_PLUGIN.search(name)), **fields)
    if match := _IB_USING.match(message):
        devices = tuple(_IB_DEVICE.findall(match.group("list")))
        if devices:
            return IbDevices(devices=devices, **fields)
    if match := _OFI_PROVIDER.match(message):
        return OfiProvider(provider=match.group("provider"), **fields)
    if match := _NETWORK.match(message):
        return NetworkChosen(network=match.group("net"), **fields)
    if match := _GDR.search(message):
        return GdrState(enabled=match.group("state") == "Enabled", hca=match.group("hca"), why=match.group("why"),
                        **fields)
    return None


def _transport_kind(via: str) -> str:
    if via.startswith("P2P") or via.startswith("direct pointer") or via.startswith("P2P/direct"):
        return "P2P"
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM"
    if via.startswith("NET/"):
        parts = via.split("/")
        return "NET/" + parts[1] if len(parts) > 1 else "NET"
    if via.startswith("COLLNET") or via.startswith("CollNet"):
        return "COLLNET"
    return "other"
