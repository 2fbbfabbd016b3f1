"""The PyTorch-distributed error reader: lines (and NCCL flight-recorder dumps) in, TorchLogFacts out.

facts/torch_errors.py parses each line; checks/torch_logs.py and checks/software.py judge. Reads NCCL watchdog
timeouts, NCCL errors raised by torch (with the `Last error:` that completes them), the CUDA error a rank (or its
watchdog) stopped on, CUDA OOM, driver / NCCL version mismatches, rendezvous / TCPStore network errors, torchrun's ChildFailedError summary, and flight-recorder dumps (JSON
only: a pickle dump is noted, never unpickled).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from gpuready.facts import nccl_log as nccl_parse
from gpuready.facts import torch_errors as parse
from gpuready.facts.log_facts import NcclErrorRecord, RankFailure, TorchLogFacts
from gpuready.facts.log_lines import Line, Reader

MAX_RANKS = 4096
"""Ranks tracked per kind; beyond this a log is counted, not remembered line by line."""
MAX_ITEMS = 16
"""Lines kept per kind of event (network errors, NCCL errors, failures, flight-recorder dumps…)."""
FLIGHT_RECORDER_HEAD_BYTES = 64
_JSON_OBJECT_HEAD = re.compile(rb"[ \t\r\n]{0,32}\{[ \t\r\n]{0,32}(?:\"|\}|$)")


def may_be_flight_recorder(head: bytes) -> bool:
    """A pickle, or a JSON object (`{"version": …`, what torch's JSON dump writes): only these are parsed whole. A log
    whose lines start with `[` (dmesg's `[  12.3]`, torchrun's `[rank0]:`) is streamed like any other."""
    return parse.is_pickle(head) or bool(_JSON_OBJECT_HEAD.match(head[:FLIGHT_RECORDER_HEAD_BYTES]))


@dataclass
class _Pending:
    """A `Last error:` waiting for its text on the next line of the same rank."""
    index: int
    line: Line
    rank: int | None


class TorchErrorReader(Reader):
    """Reader name "torch". Besides `feed` (lines), the evidence reader may hand it files through `offer_file(path,
    source)`: a JSON flight-recorder dump is read (bounded summary), a pickle dump is noted and never unpickled."""

    name = "torch"
    markers = (r"Watchdog caught collective|detected by watchdog at work|Heartbeat monitor timed out|"
               r"watchdog got stuck for|NCCL error|nccl[A-Z]\w+Error|Last error|"
               r"peer access is not supported|cudaErrorPeerAccessUnsupported|CUDA out of memory|"
               r"driver on your system is too old|CUDA driver version is insufficient|undefined symbol: nccl|"
               r"cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER|forward compatibility was attempted|"
               r"cudaErrorCompatNotSupported|CUDA_ERROR_COMPAT_NOT_SUPPORTED|no kernel image is available|"
               r"cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU|supports CUDA capabilities|"
               r"invalid device function|NCCL version \d|"
               r"is not compatible with the current PyTorch|\+cu\d{3}\b|client socket|TCP client failed|"
               r"DistNetworkError|DistStoreError|RendezvousConnectionError|Socket Timeout|failed to bind|"
               r"NCCL INFO (?:Bootstrap|NET/Socket|NET/IB)\s*: Using|failed \(exitcode|closing signal|Root Cause|"
               r"Failures:|"
               r"collective_seq_id|Timed out waiting \d+ms for|"
               r"CUDA error: |Cuda failure|Triton Error \[CUDA\]|cudaError[A-Z]|CUDA_ERROR_[A-Z]")
    follow_lines = 8
    """Fed after each marked line: the text of a bare `Last error:` (within three lines, NVIDIA/nccl#1928) and the
    `[N]:` / `time :` / `host :` / `rank :` / `exitcode :` lines of torchrun's `Failures:` and `Root Cause` blocks.
    Markers for those lines themselves (anchored, no literal to search for) cost 40 s per GB."""

    def __init__(self) -> None:
        self._order = itertools.count()
        self.seen = TorchLogFacts()
        self._pending: list[_Pending] = []
        self._block: dict[str, tuple[bool, RankFailure | None]] = {}
        """File → (inside a `Root Cause` block, the failure entry whose fields come next)."""

    def facts(self) -> TorchLogFacts:
        return self.seen

    # ------------------------------------------------------------------ files

    def offer_file(self, path: str | Path, source: str | None = None) -> bool:
        """Read `path` if it is an NCCL flight-recorder dump; True where it was taken (the evidence reader then does
        not feed its lines). A pickle dump is recorded as not read; nothing is ever unpickled."""
        path = Path(path)
        source = source or str(path)
        try:
            with path.open("rb") as handle:
                head = handle.read(FLIGHT_RECORDER_HEAD_BYTES)
        except OSError:
            return False
        if not may_be_flight_recorder(head):
            return False
        if parse.is_pickle(head):
            if len(self.seen.pickles) < MAX_ITEMS:
                self.seen.pickles.append((source, None))
            return True
        try:
            dump = parse.read_flight_recorder_json(path, source)
        except OSError:
            return False
        if dump is None:
            return False
        self.add_flight_recorder(dump)
        return True

    def add_flight_recorder(self, dump: parse.FlightRecorderDump) -> None:
        """For an evidence reader that read the dump itself with `facts.torch_errors.read_flight_recorder_json`."""
        if len(self.seen.dumps) < MAX_RANKS:
            self.seen.dumps.append(dump)

    # ------------------------------------------------------------------ lines

    def feed(self, line: Line) -> None:
        order = next(self._order)
        text = line.text
        rank = parse.line_rank(text)
        if (mismatch := parse.parse_version_mismatch(text)) is not None:
            self._note_mismatch(mismatch, line)
            if mismatch.kind != "nccl_arch":  # `Cuda failure 'invalid device function'` is an NCCL error's text too
                return
        if (cuda := parse.parse_cuda_error(text)) is not None:
            self._note_cuda_error(cuda, line, order)  # and read on: the line may be an NCCL error's `Last error:` text
        if self._last_error_text(line, rank):
            if parse.is_p2p_unsupported(text):  # NCCL's `Last error:` can be CUDA's 217: the pair has no peer access
                self._note_p2p(line, rank)
            return
        for step in (self._watchdog, self._gloo_oom_p2p, self._nccl_error, self._network, self._launcher):
            if step(line, text, rank, order):
                return
        self._elastic_block(line)

    def _watchdog(self, line: Line, text: str, rank: int | None, order: int) -> bool:
        seen = self.seen
        if (timeout := parse.parse_watchdog_timeout(text)) is not None:
            self._note_rank(timeout.rank)
            known = seen.timeouts.get(timeout.rank)
            if known is None and len(seen.timeouts) < MAX_RANKS or known is not None and timeout.seq < known[0].seq:
                seen.timeouts[timeout.rank] = (timeout, line, order)
            if len(seen.timeout_lines) < MAX_ITEMS:
                seen.timeout_lines.append(line)
            return True
        if (beat := parse.parse_heartbeat_timeout(text)) is not None:
            self._note_rank(beat.rank)
            if len(seen.heartbeats) < MAX_ITEMS:
                seen.heartbeats.append((beat, line))
            return True
        if (status := parse.parse_work_status(text)) is not None:
            if status.rank is not None:
                self._note_rank(status.rank)
                if status.rank not in seen.status and len(seen.status) < MAX_RANKS:
                    seen.status[status.rank] = (status, line)
            return True
        return False

    def _gloo_oom_p2p(self, line: Line, text: str, rank: int | None, order: int) -> bool:
        seen = self.seen
        if (gloo := parse.parse_gloo_timeout(text)) is not None:
            self._note_rank(rank)
            if len(seen.gloo_timeouts) < MAX_ITEMS:
                seen.gloo_timeouts.append((rank, gloo, line))
            return True
        if (oom := parse.parse_cuda_oom(text)) is not None:
            self._note_rank(rank)
            if len(seen.ooms) < MAX_ITEMS:
                seen.ooms.append((rank, oom, line, order))
            return True
        if parse.is_p2p_unsupported(text):
            self._note_p2p(line, rank)
            return True
        return False

    def _note_p2p(self, line: Line, rank: int | None) -> None:
        self._note_rank(rank)
        if len(self.seen.p2p) < MAX_ITEMS:
            self.seen.p2p.append(line)

    def _nccl_error(self, line: Line, text: str, rank: int | None, order: int) -> bool:
        if (error := parse.parse_nccl_error(text)) is not None:
            self._note_rank(rank)
            self._add_nccl_error(line, rank, error, order)
            return True
        if (last := parse.parse_last_error(text)) is not None:
            self._attach_last_error(line, rank, last)
            return True
        return False

    def _network(self, line: Line, text: str, rank: int | None, order: int) -> bool:
        seen = self.seen
        if (network := parse.parse_network_error(text)) is not None:
            if len(seen.network) < MAX_ITEMS:
                seen.network.append((network, line))
            return True
        if (host := parse.answering_host(text)) is not None:
            if host not in seen.answering and len(seen.answering) < MAX_RANKS:
                seen.answering[host] = line
            return True
        return False

    def _launcher(self, line: Line, text: str, rank: int | None, order: int) -> bool:
        seen = self.seen
        if (cuda := parse.parse_torch_build_cuda(text)) is not None:
            if seen.torch_cuda is None:
                seen.torch_cuda = (cuda, line)
            return True
        if (failed := parse.parse_elastic_failed(text)) is not None:
            if len(seen.elastic_failed) < MAX_ITEMS:
                seen.elastic_failed.append((failed, line, order))
            return True
        if parse.parse_closing_signal(text) is not None:
            if len(seen.closing) < MAX_ITEMS:
                seen.closing.append(line)
            return True
        if "NCCL version" in text:
            event = nccl_parse.parse_line(text.strip("*` "))  # a banner pasted in Markdown bold still counts
            if isinstance(event, nccl_parse.Version) and len(seen.nccl_versions) < 8:
                seen.nccl_versions.setdefault(event.version + (f"+cuda{event.cuda}" if event.cuda else ""), line)
                return True
        return False

    def _note_mismatch(self, mismatch: parse.VersionMismatch, line: Line) -> None:
        """The capability warning's next line (`The current PyTorch install supports …`) completes it."""
        versions = self.seen.versions
        if mismatch.kind == "arch_supported":
            for index in range(len(versions) - 1, -1, -1):
                known, known_line = versions[index]
                if known.kind == "arch" and known_line.source == line.source and \
                        0 < line.number - known_line.number <= 3 and not known.supported:
                    versions[index] = (dataclasses.replace(known, supported=mismatch.supported), known_line)
                    break
            return
        if len(versions) < MAX_ITEMS:
            versions.append((mismatch, line))

    def _note_cuda_error(self, error: parse.CudaError, line: Line, order: int) -> None:
        """One record per (error, rank, host): torch prints the watchdog's error, then again as the exception's
        `what():`, and every rank of a job may print it."""
        self._note_rank(error.rank)
        errors = self.seen.cuda_errors
        for index, (known, lines, first) in enumerate(errors):
            if (known.code, known.rank, known.host) == (error.code, error.rank, error.host):
                if len(lines) < MAX_ITEMS:
                    lines.append(line)
                if error.watchdog and not known.watchdog:
                    errors[index] = (error, lines, first)
                return
        if len(errors) < MAX_ITEMS:
            errors.append((error, [line], order))

    def _note_rank(self, rank: int | None) -> None:
        if rank is not None and len(self.seen.ranks_seen) < MAX_RANKS:
            self.seen.ranks_seen.add(rank)

    def _add_nccl_error(self, line: Line, rank: int | None, error: parse.NcclError, order: int) -> None:
        errors = self.seen.nccl_errors
        # `ncclRemoteError: A call failed …` on the line after `NCCL error in: …`: the same error, more precise.
        for record in reversed(errors[-4:]):
            if record.line.source == line.source and record.rank == rank and \
                    0 < line.number - record.last_number <= 3 and (record.kind is None or error.where is None):
                record.kind = error.kind or record.kind
                record.lines.append(line)
                record.last_number = line.number
                if error.last_error:
                    record.last_error = error.last_error
                return
        if len(errors) >= MAX_ITEMS:
            return
        errors.append(NcclErrorRecord(line=line, lines=[line], rank=rank, kind=error.kind, where=error.where,
                                      version=error.version, last_error=error.last_error, order=order,
                                      last_number=line.number))

    def _attach_last_error(self, line: Line, rank: int | None, text: str) -> None:
        errors = self.seen.nccl_errors
        for index in range(len(errors) - 1, -1, -1):
            record = errors[index]
            if record.line.source == line.source and record.rank == rank and 0 < line.number - record.last_number <= 3:
                record.lines.append(line)
                record.last_number = line.number
                if text:
                    record.last_error = text
                    return
                self._pending = [p for p in self._pending if p.index != index][-MAX_ITEMS:]
                self._pending.append(_Pending(index=index, line=line, rank=rank))
                return

    def _last_error_text(self, line: Line, rank: int | None) -> bool:
        for pending in self._pending:
            if pending.line.source == line.source and pending.rank == rank and \
                    0 < line.number - pending.line.number <= 3:
                record = self.seen.nccl_errors[pending.index]
                record.last_error = parse.strip_rank_prefix(line.text).strip()
                record.lines.append(line)
                self._pending.remove(pending)
                return True
        return False

    def _elastic_block(self, line: Line) -> None:
        parsed = parse.parse_elastic_block_line(line.text)
        if parsed is None:
            return
        in_root, current = self._block.get(line.source, (False, None))
        if parsed.kind in ("root_cause", "failures"):
            self._block[line.source] = (parsed.kind == "root_cause", None)
            return
        if parsed.kind == "index":
            if line.source not in self._block or len(self.seen.failures) >= MAX_ITEMS:
                return
            failure = RankFailure(index=parsed.value, root=in_root, lines=[line])
            self.seen.failures.append(failure)
            self._block[line.source] = (in_root, failure)
            return
        if current is None or parsed.key is None or parsed.value is None:
            return
        if len(current.lines) < 8:
            current.lines.append(line)
        self._field(current, parsed.key, parsed.value)

    def _field(self, current: RankFailure, key: str, value: str) -> None:
        if key == "host":
            current.host = value[:200]
        elif key == "time":
            current.time = value[:40]
        elif key == "rank" and (ranks := parse.parse_elastic_rank(value)):
            current.rank, current.local_rank = ranks
            self._note_rank(current.rank)
        elif key == "exitcode" and (code := parse.parse_elastic_exitcode(value)):
            current.exitcode, current.pid = code
        elif key == "traceback":
            current.traceback = value[:300]
