"""PyTorch-distributed errors pasted into tickets: cause → evidence → fix.

Reads NCCL watchdog timeouts (which rank never reached the SeqNum the others wait on), NCCL errors raised by torch,
CUDA OOM, driver / NCCL version mismatches, rendezvous / TCPStore network errors, torchrun's ChildFailedError summary,
and NCCL flight-recorder dumps (JSON only: a pickle dump is reported, never unpickled).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpuready.facts import nccl_log as nccl_parse
from gpuready.facts import torch_errors as parse
from gpuready.i18n import Said, finding_text, said
from gpuready.knowledge import driver_requirement, load_table
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose.evidence import DiagnoseContext, Line, Reader, quote

MAX_RANKS = 4096
"""Ranks tracked per kind; beyond this a log is counted, not remembered line by line."""
MAX_ITEMS = 16
"""Lines kept per kind of event (network errors, NCCL errors, failures, flight-recorder dumps…)."""

REFS_TIMEOUT = ["torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (watchdog messages)",
                "pytorch/tutorials flight_recorder_tutorial.rst"]
EXPLAINED_SIGNALS = ("SIGKILL", "SIGABRT", "SIGSEGV", "SIGBUS", "SIGTERM")
"""Exits by these signals are explained: what each means (`torch.rank_failed.exit.sigkill` … in the catalogue) and
what to do about it (`torch.rank_failed.exit.sigkill.advice` …)."""


@dataclass
class _Pending:
    """A `Last error:` waiting for its text on the next line of the same rank."""
    index: int
    line: Line
    rank: int | None


@dataclass
class _Failure:
    index: str | None
    root: bool
    lines: list[Line] = field(default_factory=list)
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    pid: int | None = None
    traceback: str | None = None
    time: str | None = None


FLIGHT_RECORDER_HEAD_BYTES = 64
_JSON_OBJECT_HEAD = re.compile(rb"[ \t\r\n]{0,32}\{[ \t\r\n]{0,32}(?:\"|\}|$)")


def may_be_flight_recorder(head: bytes) -> bool:
    """A pickle, or a JSON object (`{"version": …`, what torch's JSON dump writes): only these are parsed whole. A log
    whose lines start with `[` (dmesg's `[  12.3]`, torchrun's `[rank0]:`) is streamed like any other."""
    return parse.is_pickle(head) or bool(_JSON_OBJECT_HEAD.match(head[:FLIGHT_RECORDER_HEAD_BYTES]))


class TorchErrorReader(Reader):
    """Reader name "torch". Besides `feed` (lines), the framework may hand it files through `offer_file(path,
    source)`: a JSON flight-recorder dump is read (bounded summary), a pickle dump is reported and never unpickled."""

    name = "torch"
    markers = (r"Watchdog caught collective|detected by watchdog at work|NCCL error|nccl[A-Z]\w+Error|Last error|"
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
               r"collective_seq_id|Timed out waiting \d+ms for")
    follow_lines = 8
    """Fed after each marked line: the text of a bare `Last error:` (within three lines, NVIDIA/nccl#1928) and the
    `[N]:` / `time :` / `host :` / `rank :` / `exitcode :` lines of torchrun's `Failures:` and `Root Cause` blocks.
    Markers for those lines themselves (anchored, no literal to search for) cost 40 s per GB."""

    def __init__(self) -> None:
        self._order = itertools.count()
        # watchdog
        self.timeouts: dict[int, tuple[parse.WatchdogTimeout, Line, int]] = {}
        """rank → its lowest timed-out SeqNum (the first collective it was stuck in), the line, input order."""
        self.timeout_lines: list[Line] = []
        self.status: dict[int, tuple[parse.WorkStatus, Line]] = {}
        self.ranks_seen: set[int] = set()
        # nccl errors
        self.nccl_errors: list[dict] = []
        self.pending: list[_Pending] = []
        self.p2p: list[Line] = []
        # oom
        self.ooms: list[tuple[int | None, parse.CudaOom, Line, int]] = []
        self.gloo_timeouts: list[tuple[int | None, parse.GlooTimeout, Line]] = []
        # versions
        self.versions: list[tuple[parse.VersionMismatch, Line]] = []
        self.torch_cuda: tuple[str, Line] | None = None
        self.nccl_versions: dict[str, Line] = {}
        """NCCL_DEBUG banners (`NCCL version 2.4.8+cuda10.2`): the NCCL a software.nccl finding names."""
        # network
        self.network: list[tuple[parse.NetworkError, Line]] = []
        self.answering: dict[str, Line] = {}
        # elastic
        self.failures: list[_Failure] = []
        self.elastic_failed: list[tuple[parse.ElasticFailed, Line, int]] = []
        self.closing: list[Line] = []
        self._block: dict[str, tuple[bool, _Failure | None]] = {}
        # flight recorder
        self.dumps: list[parse.FlightRecorderDump] = []
        self.pickles: list[tuple[str, Line | None]] = []

    # ------------------------------------------------------------------ input

    def offer_file(self, path: str | Path, source: str | None = None) -> bool:
        """Read `path` if it is an NCCL flight-recorder dump; True where it was taken (the framework then does not
        feed its lines). A pickle dump is recorded as not read; nothing is ever unpickled."""
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
            if len(self.pickles) < MAX_ITEMS:
                self.pickles.append((source, None))
            return True
        try:
            dump = parse.read_flight_recorder_json(path, source)
        except OSError:
            return False
        if dump is None:
            return False
        if len(self.dumps) < MAX_RANKS:
            self.dumps.append(dump)
        return True

    def add_flight_recorder(self, dump: parse.FlightRecorderDump) -> None:
        """For a framework that read the dump itself with `facts.torch_errors.read_flight_recorder_json`."""
        if len(self.dumps) < MAX_RANKS:
            self.dumps.append(dump)

    def feed(self, line: Line) -> None:
        order = next(self._order)
        text = line.text
        rank = parse.line_rank(text)
        if (mismatch := parse.parse_version_mismatch(text)) is not None:
            self._note_mismatch(mismatch, line)
            if mismatch.kind != "nccl_arch":  # `Cuda failure 'invalid device function'` is an NCCL error's text too
                return
        if self._last_error_text(line, rank):
            return
        if (timeout := parse.parse_watchdog_timeout(text)) is not None:
            self._note_rank(timeout.rank)
            known = self.timeouts.get(timeout.rank)
            if known is None and len(self.timeouts) < MAX_RANKS or known is not None and timeout.seq < known[0].seq:
                self.timeouts[timeout.rank] = (timeout, line, order)
            if len(self.timeout_lines) < MAX_ITEMS:
                self.timeout_lines.append(line)
            return
        if (status := parse.parse_work_status(text)) is not None:
            if status.rank is not None:
                self._note_rank(status.rank)
                if status.rank not in self.status and len(self.status) < MAX_RANKS:
                    self.status[status.rank] = (status, line)
            return
        if (gloo := parse.parse_gloo_timeout(text)) is not None:
            self._note_rank(rank)
            if len(self.gloo_timeouts) < MAX_ITEMS:
                self.gloo_timeouts.append((rank, gloo, line))
            return
        if (oom := parse.parse_cuda_oom(text)) is not None:
            self._note_rank(rank)
            if len(self.ooms) < MAX_ITEMS:
                self.ooms.append((rank, oom, line, order))
            return
        if parse.is_p2p_unsupported(text):
            self._note_rank(rank)
            if len(self.p2p) < MAX_ITEMS:
                self.p2p.append(line)
            return
        if (error := parse.parse_nccl_error(text)) is not None:
            self._nccl_error(line, rank, error, order)
            return
        if (last := parse.parse_last_error(text)) is not None:
            self._attach_last_error(line, rank, last)
            return
        if (network := parse.parse_network_error(text)) is not None:
            if len(self.network) < MAX_ITEMS:
                self.network.append((network, line))
            return
        if (host := parse.answering_host(text)) is not None:
            if host not in self.answering and len(self.answering) < MAX_RANKS:
                self.answering[host] = line
            return
        if (cuda := parse.parse_torch_build_cuda(text)) is not None:
            if self.torch_cuda is None:
                self.torch_cuda = (cuda, line)
            return
        if (failed := parse.parse_elastic_failed(text)) is not None:
            if len(self.elastic_failed) < MAX_ITEMS:
                self.elastic_failed.append((failed, line, order))
            return
        if parse.parse_closing_signal(text) is not None:
            if len(self.closing) < MAX_ITEMS:
                self.closing.append(line)
            return
        if "NCCL version" in text:
            event = nccl_parse.parse_line(text.strip("*` "))  # a banner pasted in Markdown bold still counts
            if isinstance(event, nccl_parse.Version) and len(self.nccl_versions) < 8:
                self.nccl_versions.setdefault(event.version + (f"+cuda{event.cuda}" if event.cuda else ""), line)
                return
        self._elastic_block(line)

    def _note_mismatch(self, mismatch: parse.VersionMismatch, line: Line) -> None:
        """The capability warning's next line (`The current PyTorch install supports …`) completes it."""
        if mismatch.kind == "arch_supported":
            for index in range(len(self.versions) - 1, -1, -1):
                known, known_line = self.versions[index]
                if known.kind == "arch" and known_line.source == line.source and \
                        0 < line.number - known_line.number <= 3 and not known.supported:
                    self.versions[index] = (dataclasses.replace(known, supported=mismatch.supported), known_line)
                    break
            return
        if len(self.versions) < MAX_ITEMS:
            self.versions.append((mismatch, line))

    def _note_rank(self, rank: int | None) -> None:
        if rank is not None and len(self.ranks_seen) < MAX_RANKS:
            self.ranks_seen.add(rank)

    def _nccl_error(self, line: Line, rank: int | None, error: parse.NcclError, order: int) -> None:
        self._note_rank(rank)
        # `ncclRemoteError: A call failed …` on the line after `NCCL error in: …`: the same error, more precise.
        for record in reversed(self.nccl_errors[-4:]):
            if record["line"].source == line.source and record["rank"] == rank and \
                    0 < line.number - record["last_number"] <= 3 and (record["kind"] is None or error.where is None):
                record["kind"] = error.kind or record["kind"]
                record["lines"].append(line)
                record["last_number"] = line.number
                if error.last_error:
                    record["last_error"] = error.last_error
                return
        if len(self.nccl_errors) >= MAX_ITEMS:
            return
        self.nccl_errors.append({"line": line, "lines": [line], "rank": rank, "kind": error.kind, "where": error.where,
                                 "version": error.version, "last_error": error.last_error, "order": order,
                                 "last_number": line.number})

    def _attach_last_error(self, line: Line, rank: int | None, text: str) -> None:
        for index in range(len(self.nccl_errors) - 1, -1, -1):
            record = self.nccl_errors[index]
            if record["line"].source == line.source and record["rank"] == rank and \
                    0 < line.number - record["last_number"] <= 3:
                record["lines"].append(line)
                record["last_number"] = line.number
                if text:
                    record["last_error"] = text
                    return
                self.pending = [p for p in self.pending if p.index != index][-MAX_ITEMS:]
                self.pending.append(_Pending(index=index, line=line, rank=rank))
                return

    def _last_error_text(self, line: Line, rank: int | None) -> bool:
        for pending in self.pending:
            if pending.line.source == line.source and pending.rank == rank and \
                    0 < line.number - pending.line.number <= 3:
                record = self.nccl_errors[pending.index]
                record["last_error"] = parse.strip_rank_prefix(line.text).strip()
                record["lines"].append(line)
                self.pending.remove(pending)
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
            if line.source not in self._block or len(self.failures) >= MAX_ITEMS:
                return
            failure = _Failure(index=parsed.value, root=in_root, lines=[line])
            self.failures.append(failure)
            self._block[line.source] = (in_root, failure)
            return
        if current is None or parsed.key is None or parsed.value is None:
            return
        if len(current.lines) < 8:
            current.lines.append(line)
        value = parsed.value
        if parsed.key == "host":
            current.host = value[:200]
        elif parsed.key == "time":
            current.time = value[:40]
        elif parsed.key == "rank" and (ranks := parse.parse_elastic_rank(value)):
            current.rank, current.local_rank = ranks
            self._note_rank(current.rank)
        elif parsed.key == "exitcode" and (code := parse.parse_elastic_exitcode(value)):
            current.exitcode, current.pid = code
        elif parsed.key == "traceback":
            current.traceback = value[:300]

    # ------------------------------------------------------------------ output

    def findings(self, context: DiagnoseContext) -> list[Finding]:
        host = context.host
        found: list[Finding] = []
        oom = self._oom_finding(host)
        versions = self._version_findings(host)
        p2p = self._p2p_finding(host)
        failed = self._rank_failed_findings(host)
        timeout = self._timeout_finding(host, oom)
        errors = self._nccl_error_findings(host, oom, versions, p2p, failed)
        gloo = self._gloo_timeout_finding(host)
        for finding in [oom, *versions, p2p, *errors, timeout, gloo, *failed, *self._network_findings(host),
                        *self._flight_recorder_findings(host)]:
            if finding is not None:
                found.append(finding)
        # the rank torchrun calls the first failure is the one that waited: its exit follows from the timeout
        waited = {rank for rank, *_ in self.gloo_timeouts}
        for finding in found:
            if gloo is not None and finding.check_id == "torch.rank_failed" and finding.subject.rank in waited \
                    and finding.observed.get("exitcode") == 1 and finding.consequence_of is None:
                finding.consequence_of = "gloo.timeout"
        # a rank killed by SIGKILL where the kernel's OOM killer shows in the inputs follows from host.oom
        host_reader = context.readers.get("host")
        if getattr(host_reader, "oom_killed", False):
            for finding in found:
                if finding.check_id == "torch.rank_failed" and finding.observed.get("exitcode") == -9 and \
                        finding.consequence_of is None:
                    finding.consequence_of = "host.oom"
        # a rank killed by the watchdog's abort (-6) after its own timeout follows from the timeout
        for finding in found:
            if finding.check_id == "torch.rank_failed" and finding.observed.get("exitcode") == -6 and \
                    timeout is not None and finding.consequence_of is None:
                finding.consequence_of = "nccl.timeout"
        return found

    def _gloo_timeout_finding(self, host: str) -> Finding | None:
        if not self.gloo_timeouts:
            return None
        rank, timeout, line = self.gloo_timeouts[0]
        waited = sorted({r for r, *_ in self.gloo_timeouts if r is not None})
        others = sorted(self.ranks_seen - set(waited))
        suspects = (said("gloo.timeout.suspects.ranks", ranks=", ".join(map(str, others))) if others else
                    said("gloo.timeout.suspects.unseen"))
        who = said("gloo.timeout.who.ranks", ranks=", ".join(map(str, waited))) if waited else \
            said("gloo.timeout.who.unknown")
        text = said("gloo.timeout.peer_missing", who=who, seconds=timeout.timeout_ms / 1000,
                    operation=timeout.operation, suspects=suspects)
        return Finding(
            check_id="gloo.timeout", status=Status.FAIL, subject=Subject(host=host, rank=rank), **finding_text(text),
            observed={"timeout_ms": timeout.timeout_ms, "operation": timeout.operation, "timed_out_ranks": waited,
                      "other_ranks_seen": others},
            expected="every rank joins each collective within the timeout",
            evidence=quote([item[2] for item in self.gloo_timeouts]))

    def _oom_finding(self, host: str) -> Finding | None:
        if not self.ooms:
            return None
        rank, oom, line, _ = self.ooms[0]
        ranks = sorted({r for r, *_ in self.ooms if r is not None})
        gib = lambda value: f"{value / 2**30:.2f} GiB" if value is not None else "?"  # noqa: E731
        where = said("torch.oom.where." + ("rank" if rank is not None else "process")
                     + ("_device" if oom.cuda_device is not None else ""), rank=rank, device=oom.cuda_device)
        known = oom.free_bytes is not None or oom.total_bytes is not None  # an older torch names the allocation only
        text = said("torch.oom.cuda" if known else "torch.oom.cuda.tried", where=where, tried=gib(oom.tried_bytes),
                    free=gib(oom.free_bytes), total=gib(oom.total_bytes))
        return Finding(
            check_id="torch.oom", status=Status.FAIL, subject=Subject(host=host, rank=rank), **finding_text(text),
            observed={"rank": rank, "ranks": ranks, "cuda_device": oom.cuda_device, "tried_bytes": oom.tried_bytes,
                      "free_bytes": oom.free_bytes, "total_bytes": oom.total_bytes},
            refs=["https://pytorch.org/docs/stable/notes/cuda.html#environment-variables"],
            evidence=quote([entry[2] for entry in self.ooms]))

    def _version_findings(self, host: str) -> list[Finding]:
        """One finding per kind of software-stack mismatch, under the ids `check` gives the same facts."""
        found: list[Finding] = []
        done: set[str] = set()
        build = self.torch_cuda[0] if self.torch_cuda else None
        for mismatch, line in self.versions:
            if mismatch.kind in done:
                continue
            done.add(mismatch.kind)
            same = [item for item in self.versions if item[0].kind == mismatch.kind]
            lines = [item[1] for item in same]
            rank = parse.line_rank(line.text)
            if mismatch.kind in ("driver_too_old", "forward_compat"):
                found.append(self._driver_finding(host, rank, mismatch, same, build))
            elif mismatch.kind == "arch":
                found.append(_arch_finding(host, rank, same, build, self.torch_cuda))
            elif mismatch.kind == "nccl_symbol":
                found.append(Finding(
                    check_id="software.nccl", status=Status.FAIL, subject=Subject(host=host, rank=rank),
                    **finding_text(said("software.nccl.log.undefined_symbol", symbol=mismatch.symbol)),
                    observed={"kind": mismatch.kind, "symbol": mismatch.symbol, "library": mismatch.library},
                    refs=[NCCL_TROUBLESHOOTING], evidence=quote(lines)))
            elif mismatch.kind == "nccl_arch":
                banners = list(self.nccl_versions.items())
                versions = [version for version, _line in banners]
                found.append(Finding(
                    check_id="software.nccl", status=Status.FAIL, subject=Subject(host=host, rank=rank),
                    **finding_text(said("software.nccl.log.no_kernels", versions=said(
                        "software.nccl.log.no_kernels.versions", versions=", ".join(versions)) if versions else "")),
                    observed={"kind": mismatch.kind, "nccl_versions": versions, "torch_cuda": build},
                    expected="an NCCL built for this GPU's architecture",
                    refs=[NCCL_TROUBLESHOOTING,
                          "https://docs.nvidia.com/deeplearning/nccl/release-notes/rel_2-7-3.html (2.7.3: 'Added "
                          "support for A100 GPU': an NCCL release adds each GPU generation)"],
                    evidence=quote(lines + [line for _version, line in banners[:2]])))
        return found

    def _driver_finding(self, host: str, rank: int | None, mismatch: parse.VersionMismatch,
                        same: list[tuple[parse.VersionMismatch, Line]], build: str | None) -> Finding:
        lines = [item[1] for item in same] + ([self.torch_cuda[1]] if self.torch_cuda else [])
        driver_cuda = next((m.driver_cuda for m, _ in same if m.driver_cuda), None)
        driver_api = next((m.driver_api for m, _ in same if m.driver_api is not None), None)
        observed: dict = {"kind": mismatch.kind, "driver_supports_cuda": driver_cuda, "driver_api": driver_api,
                          "cuda_error": mismatch.cuda_error, "torch_cuda": build}
        requirement = driver_requirement(build) if build else None
        if requirement:
            need = said("software.driver_cuda.log.need.full" if requirement.full_feature else
                        "software.driver_cuda.log.need.minimum", minimum=requirement.minimum,
                        full_feature=requirement.full_feature, build=build)
            refs = [requirement.minimum_source] + ([requirement.full_feature_source]
                                                   if requirement.full_feature_source else [])
            observed["required_driver"] = requirement.minimum
        else:
            need = said("software.driver_cuda.log.need.floors", floors=_driver_floors())
            refs = ["src/gpuready/knowledge/cuda_driver.toml"]
        built = said("software.driver_cuda.log.built", build=build) if build else ""
        if mismatch.kind == "forward_compat":
            text = said("software.driver_cuda.log.forward_compat", built=built, need=need)
            refs = refs + ["https://docs.nvidia.com/deploy/cuda-compatibility/ (forward compatibility: data-centre "
                           "GPUs only)"]
        else:
            supports = said("software.driver_cuda.log.supports", driver_cuda=driver_cuda,
                            driver_api=driver_api) if driver_cuda else ""
            alt = said("software.driver_cuda.log.older_wheel", driver_cuda=driver_cuda,
                       index="cu" + driver_cuda.replace(".", "")) if driver_cuda else ""
            text = said("software.driver_cuda.log.too_old", supports=supports, built=built, need=need, alt=alt)
        return Finding(check_id="software.driver_cuda", status=Status.FAIL, subject=Subject(host=host, rank=rank),
                       **finding_text(text), observed=observed,
                       expected=f">= {requirement.minimum}" if requirement else None, refs=refs,
                       evidence=quote(lines))

    def _p2p_finding(self, host: str) -> Finding | None:
        if not self.p2p:
            return None
        return Finding(
            check_id="nccl.p2p_unsupported", status=Status.FAIL,
            subject=Subject(host=host, rank=parse.line_rank(self.p2p[0].text)),
            **finding_text(said("nccl.p2p_unsupported.cuda")), observed={"lines": len(self.p2p)},
            refs=["shared/reference/anchors-planning-diagnosis.md §5 (ACS / IOMMU / P2P)"],
            evidence=quote(self.p2p))

    def _rank_failed_findings(self, host: str) -> list[Finding]:
        root = next((f for f in self.failures if f.root), None)
        if root is None and self.failures:
            root = self.failures[0]
        if root is None and not self.elastic_failed:
            return []
        if root is not None:
            exitcode, rank, local, fhost = root.exitcode, root.rank, root.local_rank, root.host
            lines = root.lines + [l for _, l, _ in self.elastic_failed[:1]]
        else:
            first, line, _ = self.elastic_failed[0]
            exitcode, rank, local, fhost = first.exitcode, None, first.local_rank, None
            lines = [line]
        name = parse.SIGNALS.get(exitcode) if exitcode is not None else None
        if name in EXPLAINED_SIGNALS:
            cause = f"torch.rank_failed.exit.{name.lower()}"
        elif exitcode is not None and exitcode > 0:
            cause = "torch.rank_failed.exit.exception"
        else:
            cause = "torch.rank_failed.exit.other"
        rank_part = "torch.rank_failed.who." + ("rank" if rank is not None else "local_rank" if local is not None
                                                 else "process")
        who = said(rank_part + ("_on_host" if fhost else ""), rank=rank, local_rank=local, host=fhost)
        consequence = "torch.oom" if self.ooms and (rank is None or rank in {r for r, *_ in self.ooms}) else None
        found = [Finding(
            check_id="torch.rank_failed", status=Status.FAIL, subject=Subject(host=fhost or host, rank=rank),
            **finding_text(said("torch.rank_failed.first", who=who, meaning=said(cause, code=exitcode),
                                advice=said(f"{cause}.advice"))),
            observed={"rank": rank, "local_rank": local, "exitcode": exitcode, "signal": name,
                      "host": fhost, "pid": root.pid if root else None,
                      "traceback": root.traceback if root else None,
                      "other_failures": max(0, len(self.failures) - 1)},
            consequence_of=consequence,
            refs=["torch/distributed/elastic/multiprocessing/errors/__init__.py (ChildFailedError)"],
            evidence=quote(lines))]
        if self.closing:
            text = said("torch.ranks_terminated.sigterm", processes=len(self.closing),
                        who=said(rank_part, rank=rank, local_rank=local))
            found.append(Finding(
                check_id="torch.ranks_terminated", status=Status.WARN, subject=Subject(host=fhost or host),
                **finding_text(text), observed={"processes": len(self.closing)}, consequence_of="torch.rank_failed",
                evidence=quote(self.closing)))
        return found

    def _timeout_finding(self, host: str, oom: Finding | None) -> Finding | None:
        if not self.timeouts and not self.status:
            return None
        # The SeqNum the group waited on: the highest any rank timed out at (a rank stuck lower is behind).
        seqs = {rank: item[0].seq for rank, item in self.timeouts.items()}
        for rank, (status, _) in self.status.items():
            seqs.setdefault(rank, status.work)
        target = max(seqs.values())
        example = next((item[0] for item in self.timeouts.values() if item[0].seq == target), None) or \
            next(iter(self.timeouts.values()), (None,))[0]
        at_target = sorted(rank for rank, seq in seqs.items() if seq == target)
        behind = {rank for rank, seq in seqs.items() if seq < target}
        behind |= {rank for rank, (status, _) in self.status.items() if status.last_enqueued < target}
        seen = self.ranks_seen | set(seqs)
        absent = sorted(set(range(max(seen) + 1)) - seen) if len(seen) > 1 else []
        failed = {f.rank for f in self.failures if f.rank is not None} | {r for r, *_ in self.ooms if r is not None}
        suspects = sorted(behind) or sorted(r for r in failed if r not in at_target) or absent
        op = example.op if example else "?"
        timeout_ms = example.timeout_ms if example else None
        ranks = ", ".join(map(str, at_target))
        if suspects:
            reason = "behind" if behind else "failed" if set(suspects) <= failed else "absent"
            msg_id = "nccl.timeout.watchdog"
        else:
            reason, msg_id = None, "nccl.timeout.watchdog.all"
        lines = [self.timeouts[r][1] for r in sorted(self.timeouts, key=lambda r: self.timeouts[r][2])]
        lines += [line for _, line in self.status.values()]
        lines.sort(key=lambda line: (line.source, line.number))
        consequence = None
        if oom is not None and self.ooms and self.timeouts and \
                self.ooms[0][3] < min(item[2] for item in self.timeouts.values()):
            consequence = "torch.oom"
        target_rank = suspects[0] if len(suspects) == 1 else None
        look = said("nccl.timeout.watchdog.look.rank", rank=suspects[0]) if len(suspects) == 1 else \
            said("nccl.timeout.watchdog.look.ranks", ranks=", ".join(map(str, suspects))) if suspects else \
            said("nccl.timeout.watchdog.look.every")
        text = said(msg_id, op=op, seq=target, ranks=ranks, suspects=", ".join(map(str, suspects)),
                    after=said("nccl.timeout.watchdog.after", ms=timeout_ms) if timeout_ms else "",
                    reason=said(f"nccl.timeout.watchdog.reason.{reason}") if reason else "", look=look)
        return Finding(
            check_id="nccl.timeout", status=Status.FAIL, subject=Subject(host=host, rank=target_rank),
            **finding_text(text),
            observed={"collective": op, "seq": target, "numel_in": example.numel_in if example else None,
                      "numel_out": example.numel_out if example else None, "timeout_ms": timeout_ms,
                      "timed_out": {r: s for r, s in sorted(seqs.items())}, "ranks_at_seq": at_target,
                      "suspects": suspects, "ranks_absent": absent,
                      "last_enqueued": {r: s.last_enqueued for r, (s, _) in sorted(self.status.items())},
                      "last_completed": {r: s.last_completed for r, (s, _) in sorted(self.status.items())}},
            expected=f"every rank enqueues SeqNum {target}",
            refs=REFS_TIMEOUT, consequence_of=consequence, evidence=quote(lines))

    def _nccl_error_findings(self, host: str, oom, versions, p2p, failed) -> list[Finding]:
        found: list[Finding] = []
        roots = [f for f in (oom, *versions, p2p) if f is not None]
        roots += [f for f in failed if f.check_id == "torch.rank_failed" and f.observed.get("exitcode") not in (-6,)]
        primary = [r for r in self.nccl_errors if r["kind"] != "ncclRemoteError"]
        seen_kinds: set[tuple] = set()
        for record in self.nccl_errors:
            key = (record["kind"], record["last_error"])
            if key in seen_kinds:
                continue
            seen_kinds.add(key)
            kind = record["kind"] or "NCCL error"
            remote = kind == "ncclRemoteError"
            consequence = None
            if remote:
                other = [f for f in roots if f.subject.rank != record["rank"] or f.subject.rank is None]
                if other:
                    consequence = other[0].check_id
                elif any(p["rank"] != record["rank"] for p in primary):
                    consequence = "nccl.error"
            last = record["last_error"]
            if consequence is None and last and any(f.check_id == "software.nccl" for f in versions):
                cause = parse.parse_version_mismatch(last)
                consequence = "software.nccl" if cause is not None and cause.kind == "nccl_arch" else None
            same = [r["line"] for r in self.nccl_errors if (r["kind"], r["last_error"]) == key]
            ranks = sorted({r["rank"] for r in self.nccl_errors if (r["kind"], r["last_error"]) == key
                            and r["rank"] is not None})
            found.append(Finding(
                check_id="nccl.error", status=Status.FAIL, subject=Subject(host=host, rank=record["rank"]),
                **finding_text(said("nccl.error.torch" + (".last" if last else ""),
                                    kind=record["kind"] or said("nccl.error.torch.unnamed"),
                                    on_ranks=said("nccl.error.torch.on_ranks", ranks=", ".join(map(str, ranks)))
                                    if ranks else "", last=last, advice=_nccl_advice(kind, last))),
                observed={"kind": kind, "last_error": last, "where": record["where"],
                          "nccl_version": record["version"], "ranks": ranks},
                consequence_of=consequence,
                refs=["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"],
                evidence=quote(record["lines"] + same)))
        return found

    def _network_findings(self, host: str) -> list[Finding]:
        found: list[Finding] = []
        by_target: dict[tuple, list[tuple[parse.NetworkError, Line]]] = {}
        for error, line in self.network:
            by_target.setdefault((error.host, error.port, error.kind), []).append((error, line))
        answering = set(self.answering) | {e.host for e, _ in self.network if e.kind in ("refused", "reset")}
        for (target_host, port, kind), items in by_target.items():
            error, line = items[0]
            lines = [l for _, l in items]
            target = f"{target_host}:{port}" if target_host else said("network.rendezvous.store")
            if kind == "in_use":
                found.append(Finding(
                    check_id="network.port_in_use", status=Status.FAIL, subject=Subject(host=host),
                    **finding_text(said("network.port_in_use.rendezvous", target=target, port=port)),
                    observed={"host": target_host, "port": port}, evidence=quote(lines)))
                continue
            filtered = kind == "timeout" and target_host is not None and target_host in answering
            consequence = None
            if filtered:
                consequence = "network.firewall"
                proof = self.answering.get(target_host) or next(
                    (l for e, l in self.network if e.host == target_host and e.kind in ("refused", "reset")), None)
                found.append(Finding(
                    check_id="network.firewall", status=Status.WARN, subject=Subject(host=host),
                    **finding_text(said("network.firewall.rendezvous", target=target, host=target_host, port=port)),
                    observed={"host": target_host, "port": port},
                    refs=["shared/reference/anchors-planning-diagnosis.md §5 (Ports)"],
                    evidence=quote(lines + ([proof] if proof else []))))
            advice = kind if kind in ("refused", "reset", "timeout", "store_timeout") else "other"
            # the sentence starts with the target where the connection was reset: the store's name, capitalised
            subject_target = target if target_host or advice != "reset" else said("network.rendezvous.store.first")
            text = said("network.unreachable.rendezvous", target=target, reason=_network_reason(error.reason),
                        advice=said(f"network.unreachable.rendezvous.{advice}", target=subject_target,
                                    nc_host=target_host or "$MASTER_ADDR", nc_port=port or "$MASTER_PORT"),
                        peer=target_host or "HOST", port_option=f" --port {port}" if port else "")
            found.append(Finding(
                check_id="network.unreachable", status=Status.FAIL, subject=Subject(host=host),
                **finding_text(text),
                observed={"host": target_host, "port": port, "kind": kind, "reason": error.reason,
                          "attempts": len(items)},
                consequence_of=consequence, evidence=quote(lines),
                refs=["https://pytorch.org/docs/stable/distributed.html#environment-variable-initialization"]))
        return found

    def _flight_recorder_findings(self, host: str) -> list[Finding]:
        found: list[Finding] = []
        for source, line in self.pickles:
            found.append(Finding(
                check_id="nccl.flight_recorder_unread", status=Status.WARN, subject=Subject(host=host),
                **finding_text(said("nccl.flight_recorder_unread.pickle", source=source)),
                observed={"file": source, "format": "pickle"},
                evidence=quote([line]) if line else []))
        if not self.dumps:
            return found
        groups: dict[str, dict[int | None, parse.PgProgress]] = {}
        for dump in self.dumps:
            for name, progress in dump.groups.items():
                groups.setdefault(name, {})[dump.rank] = progress
        for name, per_rank in sorted(groups.items()):
            known = {r: p for r, p in per_rank.items() if p.last_enqueued is not None}
            if not known:
                continue
            top = max(p.last_enqueued for p in known.values())
            behind = sorted((r for r, p in known.items() if p.last_enqueued < top), key=lambda r: (r is None, r))
            table = {str(r): {"last_enqueued": p.last_enqueued, "last_started": p.last_started,
                              "last_completed": p.last_completed, "last_op": p.last_op}
                     for r, p in sorted(known.items(), key=lambda item: (item[0] is None, item[0]))}
            sources = [d.source for d in self.dumps]
            if behind:
                lagging = behind[0]
                progress = known[lagging]
                found.append(Finding(
                    check_id="nccl.rank_behind", status=Status.FAIL, subject=Subject(host=host, rank=lagging),
                    **finding_text(said(
                        "nccl.rank_behind.flight_recorder", group=name, behind=", ".join(map(str, behind)),
                        next=progress.last_enqueued + 1, top=top, rank=lagging, last=progress.last_enqueued,
                        next_op=known[max(known, key=lambda r: known[r].last_enqueued)].last_op,
                        last_op=progress.last_op)),
                    observed={"process_group": name, "ranks": table, "behind": behind, "files": sources},
                    expected=f"every rank at collective {top}",
                    refs=REFS_TIMEOUT))
            else:
                stuck = sorted((r for r, p in known.items() if p.stuck_seq is not None),
                               key=lambda r: (r is None, r))
                status = Status.FAIL if stuck else Status.PASS
                found.append(Finding(
                    check_id="nccl.flight_recorder", status=status, subject=Subject(host=host),
                    **finding_text(said("nccl.flight_recorder." + ("stuck" if stuck else "completed"), group=name,
                                        top=top, stuck=", ".join(map(str, stuck)))),
                    observed={"process_group": name, "ranks": table, "stuck": stuck, "files": sources},
                    refs=REFS_TIMEOUT))
        return found


def _nccl_advice(kind: str, last: str | None) -> Said:
    """What to do about an NCCL error torch raised, by its kind (`nccl.error.torch.advice.*` in the catalogue)."""
    text = (last or "").lower()
    if kind == "ncclRemoteError":
        return said("nccl.error.torch.advice.remote")
    if kind == "ncclUnhandledCudaError":
        return said("nccl.error.torch.advice.cuda")
    if kind == "ncclInvalidUsage":
        return said("nccl.error.torch.advice.usage")
    if "connection" in text or "socket" in text or "net" in text or "peer" in text:
        return said("nccl.error.torch.advice.network")
    return said("nccl.error.torch.advice.other")


def _network_reason(reason: str) -> str | Said:
    """The reason a rendezvous connection failed: quoted from the log, except the two that facts/torch_errors.py
    words itself (a timeout's duration, no reason given), which come from the catalogue."""
    if reason.startswith("connect timed out after "):
        return said("network.unreachable.rendezvous.reason.timed_out", after=reason[len("connect timed out after "):])
    if reason == "connection failed":
        return said("network.unreachable.rendezvous.reason.failed")
    return reason.rstrip(".")  # the sentence ends with its own full stop


NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
TORCH_INDEX = "https://download.pytorch.org/whl/"


def _driver_floors() -> list[Said]:
    """`11.x needs >= 450.80.02`, `12.x needs >= 525.60.13`, … from knowledge/cuda_driver.toml."""
    rows = sorted(load_table("cuda_driver").get("minor_compat", []), key=lambda row: int(row["cuda_major"]))
    return [said("software.driver_cuda.log.floor", major=row["cuda_major"], driver=row["min_driver_linux"])
            for row in rows]


def _sm(arch: str | None) -> tuple[int, int] | None:
    """`sm_120` → (12, 0), `sm_86` → (8, 6)."""
    digits = arch.split("_", 1)[1].rstrip("af") if arch and "_" in arch else ""
    return (int(digits[:-1]), int(digits[-1])) if len(digits) >= 2 and digits.isdigit() else None


def wheel_for(arch: str | None) -> dict | None:
    """The oldest PyTorch CUDA wheel index (knowledge/torch_wheels.toml) with kernels for `arch`, by PyTorch's rule
    (SASS of the same major at or below the minor, or PTX at or below the capability)."""
    device = _sm(arch)
    if device is None:
        return None
    for row in load_table("torch_wheels")["wheel"]:
        for built in row["archs"]:
            have = _sm(built)
            if have is None:
                continue
            if built.startswith("sm_") and have[0] == device[0] and have[1] <= device[1]:
                return row
            if built.startswith("compute_") and have <= device:
                return row
    return None


def _arch_finding(host: str, rank: int | None, same: list, build: str | None, torch_cuda) -> Finding:
    warning = next((m for m, _ in same if m.arch), same[0][0])
    lines = [line for _, line in same]
    arch, name, supported = warning.arch, warning.gpu_name, list(warning.supported)
    wheel = wheel_for(arch)
    observed = {"kind": "arch", "arch": arch, "gpu_name": name, "supported": supported, "torch_cuda": build,
                "wheel_index": wheel["index"] if wheel else None}
    refs = ["torch/cuda/__init__.py (_check_capability: the capability warning)"]
    values: dict[str, object] = {"arch": arch}
    if arch:
        values["gpu"] = said("software.torch_arch.log.gpu." + ("named" if name else "unnamed"), name=name, arch=arch)
        values["supports"] = said("software.torch_arch.log.supports", archs=" ".join(supported)) if supported else ""
    if wheel:
        requirement = driver_requirement(wheel["cuda"])
        msg_id = "software.torch_arch.log.wheel"
        values.update(index_url=f"{TORCH_INDEX}{wheel['index']}", cuda=wheel["cuda"], driver=said(
            "software.torch_arch.log.wheel_driver" + ("_full" if requirement.full_feature else ""),
            minimum=requirement.minimum, full_feature=requirement.full_feature, cuda=wheel["cuda"])
            if requirement else "")
        refs.append(wheel["source"])
        if requirement:
            refs.append(requirement.minimum_source)
    elif arch:
        msg_id = "software.torch_arch.log.no_wheel"
        refs.append("src/gpuready/knowledge/torch_wheels.toml")
    else:
        msg_id = "software.torch_arch.log.no_kernel_image"
        values["indexes"] = "; ".join(f"{row['index']}: {' '.join(row['archs'])}"
                                      for row in load_table("torch_wheels")["wheel"])
        refs.append("src/gpuready/knowledge/torch_wheels.toml")
    if torch_cuda:
        lines = lines + [torch_cuda[1]]
    return Finding(check_id="software.torch_arch", status=Status.FAIL, subject=Subject(host=host, rank=rank),
                   **finding_text(said(msg_id, **values)), observed=observed,
                   expected=f"{arch} in torch.cuda.get_arch_list()" if arch else None,
                   refs=refs, evidence=quote(lines))
