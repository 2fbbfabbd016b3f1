"""PyTorch-distributed error lines as people paste them into tickets: parsing only, no judgement.

Each `parse_*` function reads ONE line (rank prefixes such as `[rank3]:`, `[default0]:`, `stderr: ` allowed) and
returns a small frozen record, or None where the line is not of its kind. `read_flight_recorder_json` reads an NCCL
flight-recorder dump written as JSON into a bounded summary; a pickle dump is recognised by its first bytes and never
unpickled (a pickle from a ticket is code execution).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready.knowledge import load_table

# ------------------------------------------------------------------ rank prefixes

# `[rank3]:` (torch's own prefix since 2.2), `[default3]:` (torchrun --tee / --redirects), anywhere near the start
# (a pid, a timestamp or `stderr: ` may come first).
_RANK_PREFIX = re.compile(r"\[(?:rank|default)(\d{1,6})\]:\s?")
# `[Rank 3]`, `[PG 1 Rank 3]`, `[PG ID 0 PG GUID 0(default_pg) Rank 1]` inside ProcessGroupNCCL messages.
_RANK_IN_TEXT = re.compile(r"\[(?:PG [^\]]{0,80}?)?Rank (\d{1,6})\]")


def line_rank(text: str) -> int | None:
    """The rank a line speaks for: its `[rankN]:` / `[defaultN]:` prefix, else a `[Rank N]` in the message."""
    prefix = _RANK_PREFIX.search(text[:120])
    if prefix:
        return int(prefix.group(1))
    inner = _RANK_IN_TEXT.search(text)
    return int(inner.group(1)) if inner else None


def strip_rank_prefix(text: str) -> str:
    """The message without whatever precedes and includes a `[rankN]:` prefix."""
    prefix = _RANK_PREFIX.search(text[:120])
    return text[prefix.end():] if prefix else text


# ------------------------------------------------------------------ NCCL watchdog timeouts

_WATCHDOG = re.compile(
    r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\("
    r"SeqNum=(?P<seq>\d+), OpType=(?P<op>[A-Z_]+)"
    r"(?:, NumelIn=(?P<numel_in>-?\d+), NumelOut=(?P<numel_out>-?\d+))?"
    r"(?:, Timeout\(ms\)=(?P<timeout>\d+))?\) ran for (?P<ran>\d+) milliseconds before timing out")
_WORK_STATUS = re.compile(
    r"detected by watchdog at work: (?P<work>\d+), last enqueued NCCL work: (?P<enqueued>-?\d+), "
    r"last completed NCCL work: (?P<completed>-?\d+)")
_PG_ID = re.compile(r"\[PG (?:ID )?(\d+)")


@dataclass(frozen=True)
class WatchdogTimeout:
    rank: int
    seq: int
    """WorkNCCL SeqNum: the collective's number in its process group."""
    op: str
    """OpType: ALLREDUCE, _ALLGATHER_BASE, BROADCAST, …"""
    numel_in: int | None
    numel_out: int | None
    timeout_ms: int | None
    ran_ms: int


@dataclass(frozen=True)
class WorkStatus:
    rank: int | None
    pg: int | None
    work: int
    """The SeqNum the watchdog failed at."""
    last_enqueued: int
    last_completed: int


def parse_watchdog_timeout(text: str) -> WatchdogTimeout | None:
    match = _WATCHDOG.search(text)
    if not match:
        return None
    number = lambda name: int(match.group(name)) if match.group(name) is not None else None  # noqa: E731
    return WatchdogTimeout(rank=int(match.group("rank")), seq=int(match.group("seq")), op=match.group("op"),
                           numel_in=number("numel_in"), numel_out=number("numel_out"),
                           timeout_ms=number("timeout"), ran_ms=int(match.group("ran")))


# ProcessGroupNCCL's heartbeat monitor (torch >= 2.2, ProcessGroupNCCL.cpp heartbeatMonitor): errorMsg is
# `logPrefix() "Heartbeat monitor timed out! Process will be terminated after dumping debug info."
# " workMetaList_.size()=" N` and exitMsg `"ProcessGroupNCCL's watchdog got stuck for " heartbeatTimeoutInSec_
# " seconds without making progress in monitoring enqueued collectives."`: the watchdog thread itself hung (inside a
# NCCL/CUDA call), so no `Watchdog caught collective operation timeout` line may ever come.
_HEARTBEAT = re.compile(r"Heartbeat monitor timed out!")
_PENDING = re.compile(r"workMetaList_\.size\(\)\s*=\s*(\d+)")
_WATCHDOG_STUCK = re.compile(r"watchdog got stuck for (?P<seconds>\d+) seconds without making progress")


@dataclass(frozen=True)
class HeartbeatTimeout:
    rank: int | None
    seconds: int | None
    """TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC as the `got stuck for N seconds` line says (None on the first line)."""
    pending: int | None
    """workMetaList_.size(): collectives enqueued and not yet completed on that rank."""


def parse_heartbeat_timeout(text: str) -> HeartbeatTimeout | None:
    """The heartbeat monitor's `Heartbeat monitor timed out!` or `watchdog got stuck for N seconds` line."""
    beat = _HEARTBEAT.search(text)
    stuck = _WATCHDOG_STUCK.search(text)
    if beat is None and stuck is None:
        return None
    pending = _PENDING.search(text)
    return HeartbeatTimeout(rank=line_rank(text), seconds=int(stuck.group("seconds")) if stuck else None,
                            pending=int(pending.group(1)) if pending else None)


def parse_work_status(text: str) -> WorkStatus | None:
    match = _WORK_STATUS.search(text)
    if not match:
        return None
    pg = _PG_ID.search(text)
    return WorkStatus(rank=line_rank(text), pg=int(pg.group(1)) if pg else None, work=int(match.group("work")),
                      last_enqueued=int(match.group("enqueued")), last_completed=int(match.group("completed")))


# ------------------------------------------------------------------ NCCL errors raised by torch

# torch's ncclGetErrorWithVersion text → NCCL's result code name.
NCCL_ERROR_KINDS = {
    "unhandled system error": "ncclSystemError",
    "internal error": "ncclInternalError",
    "unhandled cuda error": "ncclUnhandledCudaError",
    "invalid usage": "ncclInvalidUsage",
    "invalid argument": "ncclInvalidArgument",
    "remote process exited or there was a network error": "ncclRemoteError",
}
_NCCL_ERROR = re.compile(
    r"NCCL error(?: in: (?P<where>\S+?))?[,:]\s*(?P<desc>unhandled system error|internal error|unhandled cuda error|"
    r"invalid usage|invalid argument|remote process exited or there was a network error)"
    r"(?:[^,]*?, NCCL version (?P<version>[\d.]+\w*))?")
_NCCL_KIND = re.compile(r"\b(ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclInvalidUsage|"
                        r"ncclInvalidArgument|ncclRemoteError)\b")
_LAST_ERROR = re.compile(r"Last error:\s*(?P<text>.*)$")


@dataclass(frozen=True)
class NcclError:
    kind: str | None
    """ncclSystemError, ncclRemoteError, … (None where only `Last error:` was on the line)."""
    where: str | None
    version: str | None
    last_error: str | None
    """The text after `Last error:` where it is on the same line (old torch prints all on one line)."""


def parse_nccl_error(text: str) -> NcclError | None:
    """A `NCCL error in: …, <description>, NCCL version X` line, or an `ncclXxxError: …` line."""
    match = _NCCL_ERROR.search(text)
    kind_match = _NCCL_KIND.search(text)
    if not match and not kind_match:
        return None
    kind = NCCL_ERROR_KINDS.get(match.group("desc")) if match else None
    if kind_match:
        kind = kind_match.group(1)
    last = _LAST_ERROR.search(text)
    return NcclError(kind=kind, where=match.group("where") if match else None,
                     version=match.group("version") if match else None,
                     last_error=(last.group("text").strip() or None) if last else None)


# NCCL src/misc/socket.cc: `socketProgressOpt: Call to recv from %s failed : %s`, `Call to send to %s failed`,
# `Connection closed by remote peer %s`, `Net : Connection closed by remote peer`: a socket between ranks broke after
# set-up; the address carries NCCL's `<port>` (`10.0.0.2<33759>`, blanked parts kept as pasted).
_PEER_SOCKET = re.compile(r"(?:Call to (?:recv from|send to)|closed by remote peer|Connect(?:ion)? to) "
                          r"(?P<peer>[^\s<>]{1,80}<\d{1,5}>)?.{0,40}?(?P<error>Connection reset by peer|"
                          r"Connection closed|Connection refused|Connection timed out|No route to host|"
                          r"Network is unreachable|Broken pipe|failed)", re.IGNORECASE)


def parse_peer_socket(text: str) -> tuple[str | None, str] | None:
    """(peer address or None, error) where an NCCL error's text is a socket to another rank that broke."""
    match = _PEER_SOCKET.search(text)
    return (match.group("peer"), match.group("error")) if match else None


def parse_last_error(text: str) -> str | None:
    """'' for a bare `Last error:` line (the text is on the next line), the text after it, or None."""
    match = _LAST_ERROR.search(text)
    return match.group("text").strip() if match else None


_P2P = re.compile(r"peer access is not supported between these two devices|cudaErrorPeerAccessUnsupported")


def is_p2p_unsupported(text: str) -> bool:
    return bool(_P2P.search(text))


# ------------------------------------------------------------------ CUDA errors (a rank stopped on one)

# What prints a CUDA error and how (knowledge/cuda_errors.toml names each source): c10's `CUDA error: <string>`
# (c10/cuda/CUDAException.cpp, also inside ProcessGroupNCCL's `watchdog thread terminated with exception: `), NCCL's
# `Cuda failure [N] '<string>'` (src/include/checks.h), nccl-tests' `Test CUDA failure file:line '<string>'`, Triton's
# `Triton Error [CUDA]: <string>`; and the enum's names where a program prints those (`cudaErrorIllegalAddress`,
# `CUDA_ERROR_ILLEGAL_ADDRESS`, torch >= 2.6's `Search for `cudaErrorLaunchFailure' in …`).
_CUDA_ERROR_TEXT = re.compile(r"(?:CUDA error|Triton Error \[CUDA\]): (?P<text>[^\n]{1,120})|"
                              r"Cuda failure(?: [\w./-]{1,80}:\d{1,6})?(?: (?P<code>\d{1,4}))? '(?P<quoted>[^'\n]{1,120})",
                              re.IGNORECASE)
_CUDA_ERROR_NAME = re.compile(r"\b(?:cudaError[A-Z]\w{2,40}|CUDA_ERROR_[A-Z_]{3,40})\b")
# the wrapped form `… Process group watchdog\n  thread terminated with exception: CUDA error: …` keeps the second half
_WATCHDOG_EXCEPTION = re.compile(r"thread terminated with exception: CUDA error", re.IGNORECASE)
_RAY_HOST = re.compile(r"^\s{0,8}\([\w.-]{1,60} pid=\d{1,9}, ip=(?P<ip>[\d.]{7,15}|[\w.-]{1,80})\)")
_MIN_WRAPPED = 12
"""Characters of a message cut by a line wrap (`an illegal memory access` at the end of a line) that still name it."""


@dataclass(frozen=True)
class CudaError:
    """A CUDA error a process stopped on: the enum row of knowledge/cuda_errors.toml it is."""
    code: int
    name: str
    """`cudaErrorIllegalAddress`."""
    message: str
    """cudaGetErrorString's text."""
    watchdog: bool
    """Raised by ProcessGroupNCCL's watchdog (`… watchdog thread terminated with exception: CUDA error: …`): the
    error surfaced while a collective of that rank was in flight."""
    rank: int | None
    host: str | None
    """The host the line names (a Ray worker's `ip=`), where it does."""


@functools.cache
def _cuda_error_rows() -> tuple[dict[str, Any], ...]:
    return tuple(load_table("cuda_errors")["error"])


def cuda_error_row(text: str) -> dict[str, Any] | None:
    """The table row whose cudaGetErrorString text (or enum name) `text` is: the whole message, or its start where a
    paste wrapped the line."""
    said = text.strip().strip("'\".").lower()
    for row in _cuda_error_rows():
        message = row["message"].lower()
        if said.startswith(message) or len(said) >= _MIN_WRAPPED and message.startswith(said):
            return row
        if said in (row["name"].lower(), row["driver_name"].lower()):
            return row
    return None


def parse_cuda_error(text: str) -> CudaError | None:
    """A line that says a CUDA error of the table stopped the process, in any of the forms above, or None."""
    row = None
    if match := _CUDA_ERROR_TEXT.search(text):
        row = cuda_error_row(match.group("text") or match.group("quoted"))
    if row is None and (name := _CUDA_ERROR_NAME.search(text)):
        row = cuda_error_row(name.group(0))
    if row is None:
        return None
    host = _RAY_HOST.search(text)
    # ProcessGroupNCCL's own `[PG … Rank N]` is the global rank; a torchrun `[defaultN]:` prefix before it is local
    inner = _RANK_IN_TEXT.search(text)
    return CudaError(code=row["code"], name=row["name"], message=row["message"],
                     watchdog=bool(_WATCHDOG_EXCEPTION.search(text)),
                     rank=int(inner.group(1)) if inner else line_rank(text),
                     host=host.group("ip") if host else None)


# ------------------------------------------------------------------ CUDA out of memory

_GLOO_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>recv|send) operation to complete")


@dataclass(frozen=True)
class GlooTimeout:
    """gloo's `Timed out waiting 10000ms for recv operation to complete`: a peer never joined the collective."""
    timeout_ms: int
    operation: str


def parse_gloo_timeout(text: str) -> GlooTimeout | None:
    match = _GLOO_TIMEOUT.search(text)
    return GlooTimeout(timeout_ms=int(match.group("ms")), operation=match.group("op")) if match else None


_OOM = re.compile(r"CUDA out of memory\. Tried to allocate (?P<tried>[\d.]+ [KMGTE]?i?B)")
_OOM_NEW = re.compile(r"GPU (?P<gpu>\d+) has a total capacity of (?P<total>[\d.]+ [KMGTE]?i?B) of which "
                      r"(?P<free>[\d.]+ [KMGTE]?i?B) is free")
_OOM_OLD = re.compile(r"\(GPU (?P<gpu>\d+); (?P<total>[\d.]+ [KMGTE]?i?B) total capacity;.*?"
                      r"(?P<free>[\d.]+ [KMGTE]?i?B) free")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "EiB": 2**60,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def size_bytes(text: str | None) -> int | None:
    """`4.35 GiB` → bytes (torch prints binary units)."""
    if not text:
        return None
    number, _, unit = text.partition(" ")
    try:
        return int(float(number) * _UNITS[unit])
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True)
class CudaOom:
    cuda_device: int | None
    """`GPU 3` in torch's message: the CUDA index inside the process (after CUDA_VISIBLE_DEVICES)."""
    tried_bytes: int | None
    free_bytes: int | None
    total_bytes: int | None


def parse_cuda_oom(text: str) -> CudaOom | None:
    match = _OOM.search(text)
    if not match:
        return None
    detail = _OOM_NEW.search(text) or _OOM_OLD.search(text)
    return CudaOom(cuda_device=int(detail.group("gpu")) if detail else None, tried_bytes=size_bytes(match.group("tried")),
                   free_bytes=size_bytes(detail.group("free")) if detail else None,
                   total_bytes=size_bytes(detail.group("total")) if detail else None)


# ------------------------------------------------------------------ version mismatches

# The one parser of software-stack mismatches as logs show them (diagnose judges them as software.driver_cuda,
# software.torch_arch and software.nccl, the ids `check` uses for the same facts).
_DRIVER_TOO_OLD = re.compile(r"The NVIDIA driver on your system is too old \(found version (\d{1,9})\)")
_DRIVER_INSUFFICIENT = re.compile(r"CUDA driver version is insufficient for CUDA runtime version|"
                                  r"cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER")
_FORWARD_COMPAT = re.compile(r"forward compatibility was attempted on non supported HW|"
                             r"cudaErrorCompatNotSupportedOnDevice|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE")
# Literal-led, then the text before the literal is read from a bounded slice: a search that starts with a character
# class would try it at every position of a long line.
_UNDEFINED_NCCL = re.compile(r": undefined symbol: (?P<symbol>nccl\w{1,80})")
_LIBRARY_BEFORE = re.compile(r"(?P<lib>[^\s:]{0,200}lib\w{1,40}\.so[\d.]{0,20})$")
_ARCH = re.compile(r" with CUDA capability (?P<sm>sm_\d{2,3}) is not compatible with the current PyTorch installation")
_NAME_BEFORE = re.compile(r"(?P<name>[^\n\"':]{1,80})$")
_ARCH_SUPPORTED = re.compile(r"The current PyTorch install supports CUDA capabilities (?P<list>[a-z_0-9 ]{1,400})")
_NO_KERNEL_IMAGE = re.compile(r"no kernel image is available for execution on the device|"
                              r"cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU")
_INVALID_DEVICE_FUNCTION = re.compile(r"invalid device function|cudaErrorInvalidDeviceFunction")
_NCCL_CUDA_FAILURE = re.compile(r"NCCL WARN|Cuda failure|NCCL error|nccl\w{0,20}Error")
_ARCH_TOKEN = re.compile(r"(?:sm|compute)_\d{2,3}[af]?")
_TORCH_BUILD = re.compile(r"\btorch[ =:]=?\s*(?P<version>\d+\.\d+(?:\.\d+)?\w*)\+cu(?P<cuda>\d{3})\b")


@dataclass(frozen=True)
class VersionMismatch:
    kind: str
    """`driver_too_old` (the driver is older than the CUDA runtime: `found version 11040`, `CUDA driver version is
    insufficient`, error 35), `forward_compat` (error 804: CUDA's forward-compatibility libraries on a GPU or driver
    that cannot use them), `arch` (torch has no kernels for the GPU: the capability warning, `no kernel image is
    available`), `arch_supported` (the warning's next line: the architectures torch has), `nccl_symbol` (the libnccl
    loaded lacks a symbol torch needs), `nccl_arch` (NCCL's own kernels missing for the GPU: `Cuda failure 'invalid
    device function'` in an NCCL error)."""
    driver_cuda: str | None = None
    """The CUDA version the installed driver supports (`found version 11040` → `11.4`)."""
    driver_api: int | None = None
    """The integer torch printed (`11040`): cudaDriverGetVersion's value."""
    cuda_error: int | None = None
    """The CUDA error code where the line names it (35 insufficient driver, 804 forward compatibility)."""
    symbol: str | None = None
    library: str | None = None
    arch: str | None = None
    """`sm_120`."""
    gpu_name: str | None = None
    """`NVIDIA GeForce RTX 5090`, from the capability warning."""
    supported: tuple[str, ...] = ()
    """The architectures the torch build has (`sm_50`, …, `compute_37`)."""


def cuda_from_driver_api(value: int) -> str:
    """cudaDriverGetVersion's integer as `major.minor`: 11040 → `11.4`, 12020 → `12.2`, 11000 → `11.0`."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def parse_version_mismatch(text: str) -> VersionMismatch | None:
    """One line: a driver / CUDA / torch-arch / NCCL mismatch of any of the kinds above, or None."""
    if match := _DRIVER_TOO_OLD.search(text):
        value = int(match.group(1))
        return VersionMismatch(kind="driver_too_old", driver_cuda=cuda_from_driver_api(value), driver_api=value)
    if _DRIVER_INSUFFICIENT.search(text):
        return VersionMismatch(kind="driver_too_old", cuda_error=35)
    if _FORWARD_COMPAT.search(text):
        return VersionMismatch(kind="forward_compat", cuda_error=804)
    if match := _UNDEFINED_NCCL.search(text):
        library = _LIBRARY_BEFORE.search(text[max(0, match.start() - 260):match.start()])
        return VersionMismatch(kind="nccl_symbol", symbol=match.group("symbol"),
                               library=library.group("lib") if library else None)
    if match := _ARCH.search(text):
        before = _NAME_BEFORE.search(text[max(0, match.start() - 80):match.start()])
        name = (before.group("name").strip().strip("`").strip() or None) if before else None
        supported = _ARCH_SUPPORTED.search(text, match.end())
        return VersionMismatch(kind="arch", arch=match.group("sm"), gpu_name=name,
                               supported=_arch_list(supported.group("list")) if supported else ())
    if match := _ARCH_SUPPORTED.search(text):
        return VersionMismatch(kind="arch_supported", supported=_arch_list(match.group("list")))
    nccl = _NCCL_CUDA_FAILURE.search(text)
    if nccl and (_INVALID_DEVICE_FUNCTION.search(text) or _NO_KERNEL_IMAGE.search(text)):
        return VersionMismatch(kind="nccl_arch")
    if _NO_KERNEL_IMAGE.search(text):
        return VersionMismatch(kind="arch")
    return None


def _arch_list(text: str) -> tuple[str, ...]:
    return tuple(match.group(0) for match in _ARCH_TOKEN.finditer(text))[:64]


def parse_torch_build_cuda(text: str) -> str | None:
    """`torch==2.1.0+cu121` / `torch 2.1.0+cu121` → `12.1` (the CUDA the torch wheel was built for)."""
    match = _TORCH_BUILD.search(text)
    if not match:
        return None
    digits = match.group("cuda")
    return f"{digits[:2]}.{digits[2:]}"


# ------------------------------------------------------------------ rendezvous / TCPStore network errors

_HOST_PORT_TUPLE = r"\((?P<host>[^,()\s]+), (?P<port>\d{1,5})\)"
_HOST_PORT_BRACKET = r"\[(?P<host>[^\]\s]+)\]:(?P<port>\d{1,5})"
_NETWORK_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("timeout", re.compile(r"The client socket has timed out after (?P<after>\d+\w*) while trying to connect to "
                           + _HOST_PORT_TUPLE)),
    ("from_errno", re.compile(r"The client socket has failed to connect to " + _HOST_PORT_BRACKET
                              + r" \(errno: (?P<errno>\d+) - (?P<reason>[^)]+)\)")),
    ("from_errno", re.compile(r"The client socket has failed to connect to any network address of "
                              + _HOST_PORT_TUPLE + r"(?:.*?\(errno: (?P<errno>\d+) - (?P<reason>[^)]+)\))?")),
    ("from_reason", re.compile(r"TCP client failed to connect/validate to host (?P<host>[^\s:]+|\[[^\]]+\]):"
                               r"(?P<port>\d{1,5}).*?: (?P<reason>Connection (?:reset by peer|refused)|"
                               r"Connection timed out|[A-Z][\w ]+)$")),
]
_STORE_GENERIC = re.compile(r"(?:DistNetworkError|DistStoreError|RendezvousConnectionError)[:\s]+(?P<reason>.*)$")
_SOCKET_TIMEOUT = re.compile(r"\bSocket Timeout\b")
_ADDRESS_IN_USE = re.compile(r"failed to bind to (?P<addr>\S+?) \(errno: 98 - Address already in use\)")
_ANSWERS = re.compile(r"NCCL INFO (?:Bootstrap|NET/Socket|NET/IB)\s*: Using \S*?(?P<ip>\d{1,3}(?:\.\d{1,3}){3})<")


@dataclass(frozen=True)
class NetworkError:
    kind: str
    """`refused`, `timeout`, `reset`, `unreachable` (no route), `store_timeout` (a DistStoreError wait), `in_use`,
    `other`."""
    host: str | None
    port: int | None
    reason: str


def _kind_of(reason: str) -> str:
    lowered = reason.lower()
    if "refused" in lowered:
        return "refused"
    if "reset" in lowered or "closed by" in lowered:
        return "reset"
    if "no route" in lowered or "unreachable" in lowered:
        return "unreachable"
    if "timed out" in lowered or "timeout" in lowered:
        return "timeout"
    return "other"


def parse_network_error(text: str) -> NetworkError | None:
    for style, pattern in _NETWORK_PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        host = match.group("host").strip("[]")
        if host.startswith("::ffff:"):
            host = host[len("::ffff:"):]
        port = int(match.group("port"))
        if style == "timeout":
            return NetworkError(kind="timeout", host=host, port=port,
                                reason=f"connect timed out after {match.group('after')}")
        reason = (match.groupdict().get("reason") or "connection failed").strip()
        return NetworkError(kind=_kind_of(reason), host=host, port=port, reason=reason)
    if match := _ADDRESS_IN_USE.search(text):
        address = match.group("addr")
        host, _, port = address.rpartition(":")
        return NetworkError(kind="in_use", host=host.strip("[]") or None,
                            port=int(port) if port.isdigit() else None, reason="Address already in use")
    if match := _STORE_GENERIC.search(text):
        reason = match.group("reason").strip()
        if "Timed out after" in reason and "waiting for clients" in reason:
            return NetworkError(kind="store_timeout", host=None, port=None, reason=reason[:200])
        return NetworkError(kind=_kind_of(reason), host=None, port=None, reason=reason[:200])
    if _SOCKET_TIMEOUT.search(text):
        return NetworkError(kind="timeout", host=None, port=None, reason="Socket Timeout")
    return None


def answering_host(text: str) -> str | None:
    """An address an NCCL INFO line shows in use (`Bootstrap : Using eth0:10.0.0.1<0>`): that host is up."""
    match = _ANSWERS.search(text)
    return match.group("ip") if match else None


# ------------------------------------------------------------------ torchrun / elastic agent

_ELASTIC_FAILED = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: (?P<pid>\d+)\)")
_CLOSING = re.compile(r"Sending process (?P<pid>\d+) closing signal (?P<signal>SIG[A-Z]+)")
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):")
_FAILURES = re.compile(r"^\s*Failures:\s*$")
_FAILURE_INDEX = re.compile(r"^\s*\[(\d+)\]:\s*$")
_FIELD = re.compile(r"^\s{0,8}(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s(?P<value>.*)$")
_FIELD_RANK = re.compile(r"(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
_FIELD_EXIT = re.compile(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")

SIGNALS = {-9: "SIGKILL", -6: "SIGABRT", -11: "SIGSEGV", -7: "SIGBUS", -15: "SIGTERM", -2: "SIGINT", -1: "SIGHUP",
           -4: "SIGILL", -8: "SIGFPE"}


@dataclass(frozen=True)
class ElasticFailed:
    exitcode: int
    local_rank: int
    pid: int


@dataclass(frozen=True)
class ElasticLine:
    kind: str
    """`root_cause` (the header), `failures` (the header), `index` (`[0]:`), `field`."""
    key: str | None = None
    value: str | None = None


def parse_elastic_failed(text: str) -> ElasticFailed | None:
    match = _ELASTIC_FAILED.search(text)
    if not match:
        return None
    return ElasticFailed(exitcode=int(match.group("code")), local_rank=int(match.group("local")),
                         pid=int(match.group("pid")))


def parse_closing_signal(text: str) -> tuple[int, str] | None:
    match = _CLOSING.search(text)
    return (int(match.group("pid")), match.group("signal")) if match else None


def parse_elastic_block_line(text: str) -> ElasticLine | None:
    """One line of ChildFailedError's summary block."""
    if _ROOT_CAUSE.search(text):
        return ElasticLine(kind="root_cause")
    if _FAILURES.search(text):
        return ElasticLine(kind="failures")
    if match := _FAILURE_INDEX.match(text):
        return ElasticLine(kind="index", value=match.group(1))
    if match := _FIELD.match(text):
        return ElasticLine(kind="field", key=match.group("key"), value=match.group("value").strip())
    return None


def parse_elastic_rank(value: str) -> tuple[int, int] | None:
    match = _FIELD_RANK.search(value)
    return (int(match.group("rank")), int(match.group("local"))) if match else None


def parse_elastic_exitcode(value: str) -> tuple[int, int] | None:
    match = _FIELD_EXIT.search(value)
    return (int(match.group("code")), int(match.group("pid"))) if match else None


# ------------------------------------------------------------------ flight recorder dumps

FLIGHT_RECORDER_KEYS = ("record_id", "collective_seq_id", "profiling_name", "state")
MAX_FLIGHT_RECORDER_BYTES = 32 * 2**20
"""A dump holds TORCH_NCCL_TRACE_BUFFER_SIZE entries (2000 recommended) with stack frames: a few MB; parsed whole, JSON
takes several times its size in memory, so a bigger file is not parsed (diagnose stays under 500 MB on any input)."""
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d{1,6})(?!.*\d)")


@dataclass
class PgProgress:
    """What one rank's dump says about one process group."""
    pg: str
    last_enqueued: int | None = None
    """Highest collective_seq_id recorded at all (scheduled, started or completed)."""
    last_started: int | None = None
    last_completed: int | None = None
    last_op: str | None = None
    """profiling_name of the highest-numbered entry (`nccl:all_reduce`)."""
    stuck_op: str | None = None
    """profiling_name of the lowest entry not completed, where one is."""
    stuck_seq: int | None = None


@dataclass
class FlightRecorderDump:
    source: str
    rank: int | None
    version: str | None
    entries: int
    groups: dict[str, PgProgress] = field(default_factory=dict)


def is_pickle(head: bytes) -> bool:
    """A pickle stream starts with the PROTO opcode 0x80 (protocol 2+), which no text or JSON file does."""
    return head[:1] == b"\x80"


def looks_like_flight_recorder(document: Any) -> bool:
    if not isinstance(document, dict):
        return False
    entries = document.get("entries")
    return isinstance(entries, list) and any(
        isinstance(entry, dict) and all(key in entry for key in FLIGHT_RECORDER_KEYS) for entry in entries[:50])


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
        return int(value)
    return None


def _pg_name(entry: dict[str, Any]) -> str:
    group = entry.get("process_group")
    if isinstance(group, (list, tuple)) and group:
        return "/".join(str(part) for part in group[:2])
    return str(entry.get("pg_id", "0"))


def parse_flight_recorder(document: Any, source: str) -> FlightRecorderDump | None:
    """A bounded summary of one rank's JSON dump: per process group, the last enqueued / started / completed
    collective; None where the document is not a flight-recorder dump."""
    if not looks_like_flight_recorder(document):
        return None
    rank = _int(document.get("rank"))
    if rank is None:
        named = _RANK_IN_NAME.search(Path(source).name)
        rank = int(named.group(1)) if named else None
    dump = FlightRecorderDump(source=source, rank=rank, version=str(document.get("version")) if "version" in document
                              else None, entries=len(document["entries"]))
    for entry in document["entries"]:
        if not isinstance(entry, dict) or entry.get("is_p2p"):
            continue
        seq = _int(entry.get("collective_seq_id"))
        if seq is None:
            continue
        name = _pg_name(entry)
        progress = dump.groups.setdefault(name, PgProgress(pg=name))
        state = str(entry.get("state", ""))
        op = str(entry.get("profiling_name", ""))[:80]
        if progress.last_enqueued is None or seq >= progress.last_enqueued:
            progress.last_enqueued, progress.last_op = seq, op
        if state in ("started", "completed") and (progress.last_started is None or seq > progress.last_started):
            progress.last_started = seq
        if state == "completed" and (progress.last_completed is None or seq > progress.last_completed):
            progress.last_completed = seq
        if state != "completed" and (progress.stuck_seq is None or seq < progress.stuck_seq):
            progress.stuck_seq, progress.stuck_op = seq, op
    return dump


def read_flight_recorder_json(path: str | Path, source: str | None = None) -> FlightRecorderDump | None:
    """Read one dump file: its summary where it is a JSON flight-recorder dump, else None.

    Never unpickles: a file whose first byte is a pickle opcode is left alone (None; see `is_pickle`). A file over
    MAX_FLIGHT_RECORDER_BYTES, or not JSON, is None as well."""
    path = Path(path)
    with path.open("rb") as handle:
        head = handle.read(1)
        if not head or is_pickle(head) or path.stat().st_size > MAX_FLIGHT_RECORDER_BYTES:
            return None
        handle.seek(0)
        raw = handle.read(MAX_FLIGHT_RECORDER_BYTES + 1)
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return parse_flight_recorder(document, source or str(path))
