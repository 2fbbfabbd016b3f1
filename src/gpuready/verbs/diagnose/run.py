"""`gpuready diagnose PATH...`: read what people paste into tickets and say what went wrong, with evidence and a fix.

Inputs are files, folders and bundles (a folder or a .tar.gz), any number, recognised by their content. Every text
file is streamed once, in chunks, in bounded memory: each reader's markers are searched in the raw bytes of a chunk
at the speed of the regex engine, and only the lines they are on are decoded and fed to those readers. Files that the `check` parsers read (nvidia-smi, topo -m, lspci, ...) also become facts,
and the static checks run on them. Findings are ranked: root causes first, each followed by its consequences.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable

from gpuready import __version__
from gpuready.bundle.layout import BUNDLE_FILES
from gpuready.bundle.sniff import SNIFF_CHARS, kind_of, why_not_text
from gpuready.facts.kernel_log import MARKERS as KERNEL_MARKERS
from gpuready.facts.kernel_log import NumberedLine
from gpuready.model import Finding, Report, Status, Subject
from gpuready.verbs.diagnose.evidence import MAX_LINE_CHARS, DiagnoseContext, Line, Reader, clean

CHUNK_BYTES = 4 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024
"""A longer line is cut here (a minified JSON or a binary blob in a log)."""
MAX_WHOLE_FILE_BYTES = 64 * 1024 * 1024
"""A file the check parsers read (nvidia-smi -q, lspci -vv, ...) is read whole up to this; logs are streamed."""
MAX_KERNEL_LINES_BYTES = 16 * 1024 * 1024
"""Kernel-log lines kept for the checks (health.xid, health.sxid, nvlink.errors, pcie.aer, ...); past this, the rest
are counted, not kept."""
MAX_FILES = 10_000
MAX_DEPTH = 8
_STATUS_ORDER = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2, Status.PASS: 3, Status.SKIP: 4}


class InputError(Exception):
    """A path given on the command line cannot be read at all (exit 2, one sentence)."""


@dataclass
class InputFile:
    name: str
    """As the user named it (a folder's or archive's member: `folder/member`)."""
    kind: str | None = None
    """What the content is: a check input (`nvidia-smi-q.txt`, `dmesg.txt`, ...) or `log`."""
    bytes_read: int = 0
    lines: int = 0
    fed: Counter = field(default_factory=Counter)
    """Lines offered to each reader."""
    note: str | None = None
    """Why it was not read, or read only in part."""


class KernelLines(Reader):
    """Keeps the kernel-log lines (Xid, SXid, AER, driver loads, ...) with their file and line number, for the
    checks: diagnose judges them with the check registry, as `check` does, never with rules of its own."""

    name = "kernel"
    markers = "|".join(re.escape(marker) for marker in (*KERNEL_MARKERS, "fallen off the bus"))

    def __init__(self) -> None:
        self.lines: dict[str, list[NumberedLine]] = {}
        """File → its kernel lines, in order."""
        self.kept_bytes = 0
        self.not_kept = 0

    def feed(self, line: Line) -> None:
        if self.kept_bytes >= MAX_KERNEL_LINES_BYTES:
            self.not_kept += 1
            return
        self.lines.setdefault(line.source, []).append((line.source, line.number, line.text))
        self.kept_bytes += len(line.text) + 1

    def findings(self, context: DiagnoseContext) -> list[Finding]:
        return []


def default_readers() -> list[Reader]:
    """Every reader diagnose knows, in a fixed order (findings keep it within a rank)."""
    from gpuready.verbs.diagnose.nccl_log import NcclLogReader
    from gpuready.verbs.diagnose.nccl_tests import NcclTestsReader
    from gpuready.verbs.diagnose.torch_errors import TorchErrorReader
    from gpuready.verbs.diagnose.dcgm import DcgmDiagReader
    from gpuready.verbs.diagnose.host import HostLogReader
    from gpuready.verbs.diagnose.k8s import K8sNodeReader
    return [KernelLines(), NcclLogReader(), TorchErrorReader(), NcclTestsReader(), HostLogReader(), DcgmDiagReader(),
            K8sNodeReader()]


class Scanner:
    """Streams files through the readers; keeps what the check parsers need."""

    def __init__(self, readers: list[Reader]):
        self.readers = readers
        # Each reader's markers run on their own over the raw bytes: the regex engine finds a pattern's literal
        # prefix fast, and one alternation of every reader's markers loses that (77 s per GB against 16, measured).
        self.patterns = [(reader, re.compile(reader.markers.encode("ascii"), re.MULTILINE)) for reader in readers]
        self.files: list[InputFile] = []
        self.check_inputs: dict[str, str] = {}
        self.check_kinds: dict[str, str] = {}
        """Check input → the bundle file name whose parser reads it."""
        self.kernel = next((reader for reader in readers if isinstance(reader, KernelLines)), None)

    # --- inputs ------------------------------------------------------------------------------------------------------

    def add_path(self, path: Path) -> None:
        """A file, a folder (walked) or a .tar / .tar.gz archive (its members)."""
        if path.is_dir():
            self._walk(path, path.name or str(path), depth=0)
        elif path.is_file():
            if self._is_archive(path):
                self._read_archive(path)
            else:
                with open(path, "rb") as raw:
                    self.add_stream(str(path), raw, path)
        elif path.exists():
            self.files.append(InputFile(str(path), note="not a regular file or folder: not read"))
        else:
            raise InputError(f"{path}: no such file or folder")

    def _walk(self, folder: Path, label: str, depth: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as error:
            self.files.append(InputFile(label, note=f"cannot list it ({error.strerror or error})"))
            return
        for entry in entries:
            name = f"{label}/{entry.name}"
            if len(self.files) >= MAX_FILES:
                self.files.append(InputFile(name, note=f"not read: diagnose reads at most {MAX_FILES} files"))
                return
            if entry.is_symlink():
                self.files.append(InputFile(name, note="a symbolic link: not followed"))
            elif entry.is_dir(follow_symlinks=False):
                if depth + 1 >= MAX_DEPTH:
                    self.files.append(InputFile(name, note=f"deeper than {MAX_DEPTH} folders: not read"))
                else:
                    self._walk(Path(entry.path), name, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                try:
                    with open(entry.path, "rb") as raw:
                        self.add_stream(name, raw, Path(entry.path))
                except OSError as error:
                    self.files.append(InputFile(name, note=f"cannot be read ({error.strerror or error})"))

    @staticmethod
    def _is_archive(path: Path) -> bool:
        try:
            return tarfile.is_tarfile(path)
        except (OSError, tarfile.TarError):
            return False

    def _read_archive(self, path: Path) -> None:
        """Every regular member, streamed; names that would leave the archive, links and devices are named, not
        read; what is inflated is bounded (the bundle reader's header and size limits)."""
        from gpuready.bundle.reader import MAX_ARCHIVE_BYTES, BoundedTarInfo, member_parts
        try:
            archive = tarfile.open(path, "r:*", tarinfo=BoundedTarInfo)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
            self.files.append(InputFile(str(path), note=f"not a readable archive ({error})"))
            return
        inflated = 0
        with archive:
            try:
                for member in archive:
                    name = f"{path}/{member.name}"
                    if member.isdir():
                        continue
                    if member_parts(member.name) is None:
                        self.files.append(InputFile(name, note="rejected: its name leaves the archive"))
                    elif not member.isreg():
                        self.files.append(InputFile(name, note="not a regular file (a link or device): not read"))
                    elif inflated + member.size > MAX_ARCHIVE_BYTES or len(self.files) >= MAX_FILES:
                        # stop here: walking on would inflate what follows (a gzip bomb) just to skip it
                        self.files.append(InputFile(name, note=f"not read, nor what follows: past the "
                                                               f"{MAX_ARCHIVE_BYTES // 2**20} MiB or {MAX_FILES} "
                                                               "files diagnose reads from one archive"))
                        break
                    else:
                        inflated += member.size
                        extracted = archive.extractfile(member)
                        if extracted is not None:
                            with extracted:
                                self.add_stream(name, extracted)
            except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
                self.files.append(InputFile(str(path), note=f"damaged: what follows was not read ({error})"))

    def add_stream(self, name: str, raw: BinaryIO, path: Path | None = None) -> None:
        """`path`: the file on disk, where there is one (a reader may take it whole: a flight-recorder dump)."""
        entry = InputFile(name)
        self.files.append(entry)
        head = raw.read(SNIFF_CHARS)
        if path is not None and head[:1] in (b"\x80", b"{", b"[") and self._taken_whole(entry, path, head):
            return
        text_head = head.decode("utf-8", errors="replace")
        reason = why_not_text(text_head)
        if reason:
            entry.kind, entry.note = "binary", f"not read: it {reason}"
            entry.bytes_read = len(head)
            return
        base = name.rsplit("/", 1)[-1]
        kind = base if base in BUNDLE_FILES else kind_of(text_head)  # a bundle's own names, as `check` reads them
        entry.kind = kind or "log"
        if kind and kind != "dmesg.txt":  # a tool output the check parsers read whole: kept, and streamed too
            rest = raw.read(MAX_WHOLE_FILE_BYTES - len(head) + 1)
            whole = head + rest
            if len(whole) > MAX_WHOLE_FILE_BYTES:
                entry.note = f"read in part: only its first {MAX_WHOLE_FILE_BYTES // 2**20} MiB are parsed"
                whole = whole[:MAX_WHOLE_FILE_BYTES]
            self.check_inputs.setdefault(name, whole.decode("utf-8", errors="replace"))
            self.check_kinds.setdefault(name, kind)
            self._scan(entry, io.BytesIO(whole), b"")
            return
        self._scan(entry, raw, head)

    def _taken_whole(self, entry: InputFile, path: Path, head: bytes) -> bool:
        """A pickle or JSON file a reader reads whole (NCCL flight-recorder dumps); True where one took it."""
        for reader in self.readers:
            offer = getattr(reader, "offer_file", None)
            if offer is not None and offer(path, entry.name):
                entry.kind = "flight recorder (pickle, not read)" if head[:1] == b"\x80" else "flight recorder"
                entry.bytes_read = len(head)
                entry.fed[reader.name] += 1
                return True
        return False

    # --- streaming ---------------------------------------------------------------------------------------------------

    def _scan(self, entry: InputFile, raw: BinaryIO, head: bytes) -> None:
        self._fed_up_to: dict[str, int] = {}  # per reader, the last line number of this file it was fed
        pending = b""
        number = 0  # lines before the current block
        cut_lines = 0
        chunk = head or raw.read(CHUNK_BYTES)
        first = True
        while chunk:
            entry.bytes_read += len(chunk)
            if first:
                first = False
                for bom in (b"\xef\xbb\xbf",):
                    chunk = chunk[len(bom):] if chunk.startswith(bom) else chunk
            if b"\0" in chunk:
                chunk = chunk.replace(b"\0", b"")
            block = pending + chunk
            end = block.rfind(b"\n")
            if end < 0:
                pending = block
                if len(pending) > MAX_LINE_BYTES:  # one endless line: keep its start, count it once
                    pending, cut_lines = pending[:MAX_LINE_BYTES], cut_lines + 1
            else:
                pending = block[end + 1:]
                number = self._scan_block(entry, block[:end + 1], number)
            chunk = raw.read(CHUNK_BYTES)
        if pending:
            number = self._scan_block(entry, pending + b"\n", number)
        entry.lines = number
        if cut_lines:
            entry.note = f"{cut_lines} line(s) longer than {MAX_LINE_BYTES // 1024} KiB were cut"

    def _scan_block(self, entry: InputFile, block: bytes, number: int) -> int:
        """Offer the block's marked lines (the block ends with a newline); returns the line count so far."""
        wanted: dict[int, list[Reader]] = {}  # line start → the readers whose markers are on that line
        for reader, pattern in self.patterns:
            last, searched_to = -1, 0
            for match in pattern.finditer(block):
                # the line start: look back only to the previous match (a line with many matches is scanned once)
                newline = block.rfind(b"\n", searched_to, match.start())
                start = newline + 1 if newline >= 0 else (last if last >= 0 else 0)
                searched_to = match.start()
                if start != last:
                    last = start
                    wanted.setdefault(start, []).append(reader)
        counted_to = 0
        for start in sorted(wanted):
            stop = block.find(b"\n", start)
            number += block.count(b"\n", counted_to, start)
            counted_to = start
            line = self._line(entry, block[start:stop], number + 1)
            taken = [reader for reader in wanted[start] if self._fed_up_to.get(reader.name, 0) < line.number]
            for reader in taken:
                self._feed(entry, reader, line)
            follow = max((reader.follow_lines for reader in taken), default=0)
            for offset in range(1, follow + 1):  # the next lines, to the readers that asked for them
                if stop + 1 >= len(block):
                    break
                start, stop = stop + 1, block.find(b"\n", stop + 1)
                line = self._line(entry, block[start:stop], number + 1 + offset)
                for reader in taken:
                    if offset <= reader.follow_lines and self._fed_up_to.get(reader.name, 0) < line.number:
                        self._feed(entry, reader, line)
        return number + block.count(b"\n", counted_to)

    def _line(self, entry: InputFile, raw_line: bytes, number: int) -> Line:
        text = clean(raw_line[:MAX_LINE_BYTES].decode("utf-8", errors="replace"))
        return Line(source=entry.name, number=number, text=text[:MAX_LINE_CHARS * 4])

    def _feed(self, entry: InputFile, reader: Reader, line: Line) -> None:
        reader.feed(line)
        entry.fed[reader.name] += 1
        self._fed_up_to[reader.name] = line.number


def diagnose(paths: Iterable[Path], *, expect_busbw_gb_per_s: float | None = None,
             readers: Callable[[], list[Reader]] = default_readers) -> Report:
    """The report for the given inputs; InputError where a path cannot be read at all.

    One judgement: the tool outputs and kernel-log lines among the inputs become facts, and the check registry judges
    them exactly as `check --bundle` would (same findings, same `not_enough_evidence`); the log readers add what only
    logs show (NCCL, PyTorch, launcher, nccl-tests)."""
    scanner = Scanner(readers())
    for path in paths:
        scanner.add_path(Path(path))
    checked, facts = _check(scanner)
    host = checked.host if checked is not None else "inputs"
    context = DiagnoseContext(host=host, facts=facts, readers={reader.name: reader for reader in scanner.readers},
                              options={"expect_busbw_gb_per_s": expect_busbw_gb_per_s})
    findings: list[Finding] = []
    for reader in scanner.readers:
        findings.extend(reader.findings(context))
    if checked is not None:
        findings.extend(f for f in checked.findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN))
    if not [f for f in findings if f.status != Status.SKIP]:
        findings.append(_nothing_found(scanner, host))
    report = Report(tool_version=__version__, host=host, findings=rank(findings),
                    not_enough_evidence=checked.not_enough_evidence if checked is not None else _LOGS_ONLY,
                    input_error=checked.input_error if checked is not None else False)
    report.facts["diagnose"] = {"inputs": [_describe(entry) for entry in scanner.files],
                                "readers": [reader.name for reader in scanner.readers]}
    if scanner.kernel is not None and scanner.kernel.not_kept:
        report.facts["diagnose"]["kernel_lines_not_kept"] = scanner.kernel.not_kept
    if checked is not None:
        report.facts.update(checked.facts)
    return report


def _check(scanner: Scanner) -> tuple[Report | None, object | None]:
    """(the check report, the first machine's facts) over what the inputs hold: tool outputs, and each file's
    kernel-log lines as a kernel log of its own; (None, None) where the inputs hold neither."""
    from gpuready.bundle.reader import Bundle
    from gpuready.checks.registry import CheckOptions
    from gpuready.verbs.check import check_files
    kernel = scanner.kernel.lines if scanner.kernel is not None else {}
    if not scanner.check_inputs and not kernel:
        return None, None
    files = Bundle(origin="diagnose")
    files.update(scanner.check_inputs)
    files.kinds.update(scanner.check_kinds)
    for name, lines in kernel.items():  # a pasted nvidia-smi with dmesg lines below it is read as both
        key = name if name not in files else f"{name} [kernel lines]"
        files[key] = "".join(text + "\n" for _file, _number, text in lines)
        files.kinds[key] = "dmesg.txt"
        files.line_numbers[key] = [number for _file, number, _text in lines]
    report, machines = check_files(files, CheckOptions())
    return report, machines[0]


_LOGS_ONLY = ("Not enough evidence: the inputs hold no tool output that shows the GPUs (nvidia-smi, nvidia-smi -q, a "
              "gpuready bundle) and no kernel-log line, so the machine's readiness cannot be judged; the findings "
              "are about the job the logs show.")


def rank(findings: list[Finding]) -> list[Finding]:
    """Root causes first (fail, error, warn, pass, skip), each followed by the findings that are its consequences."""
    ids = {finding.check_id for finding in findings}
    roots = [f for f in findings if not f.consequence_of or f.consequence_of not in ids]
    roots.sort(key=lambda finding: _STATUS_ORDER.get(finding.status, 5))  # stable: readers' order within a status
    by_cause: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.consequence_of and finding.consequence_of in ids:
            by_cause.setdefault(finding.consequence_of, []).append(finding)
    ordered: list[Finding] = []
    placed: set[int] = set()

    def place(finding: Finding) -> None:
        if id(finding) in placed:
            return
        placed.add(id(finding))
        ordered.append(finding)
        for consequence in by_cause.pop(finding.check_id, []):
            place(consequence)
    for finding in roots:
        place(finding)
    for rest in by_cause.values():  # a cycle of consequences: kept, after the rest
        for finding in rest:
            place(finding)
    return ordered


def _nothing_found(scanner: Scanner, host: str) -> Finding:
    read = [entry for entry in scanner.files if entry.note is None or entry.lines]
    kinds = Counter(entry.kind or "unreadable" for entry in scanner.files)
    return Finding(check_id="diagnose.nothing_found", status=Status.PASS, subject=Subject(host=host),
                   message=(f"Nothing wrong found in {len(read)} file(s) read "
                            f"({', '.join(f'{count} {kind}' for kind, count in sorted(kinds.items()))}): "
                            "no Xid, NCCL error, PyTorch distributed error or nccl-tests failure in them."),
                   observed={"files": len(scanner.files)},
                   fix="Give the failing rank's full log (NCCL_DEBUG=INFO), `dmesg -T` from its node, and "
                       "`gpuready collect` bundles of the nodes involved.")


def _describe(entry: InputFile) -> dict:
    data = {"file": entry.name, "kind": entry.kind, "bytes_read": entry.bytes_read, "lines": entry.lines,
            "fed": dict(entry.fed)}
    if entry.note:
        data["note"] = entry.note
    return data
