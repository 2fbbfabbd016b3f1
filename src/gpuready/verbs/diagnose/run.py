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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable

try:
    import re2
except ImportError:  # a copy run from source where the dependency is not installed: Python's re, 4-10x slower
    re2 = None

from gpuready import __version__
from gpuready.evidence.archive import (DEFAULT_LIMITS, READ_ERRORS, CappedReader, InputLimits, MemberWalk, format_of,
                                     inflated_name, member_parts, open_compressed, open_tar, size_text)
from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.sniff import SNIFF_CHARS, kind_of, why_not_text
from gpuready.facts.kernel_log import MARKERS as KERNEL_MARKERS
from gpuready.facts.kernel_log import NumberedLine
from gpuready.i18n import Said, finding_text, said
from gpuready.model import Finding, Report, Status, Subject
from gpuready.checks.registry import CheckOptions
from gpuready.facts.dcgm_reader import DcgmDiagReader
from gpuready.facts.host_log_reader import HostLogReader
from gpuready.facts.k8s_reader import K8sNodeReader
from gpuready.facts.log_facts import log_facts
from gpuready.facts.log_lines import MAX_LINE_CHARS, Line, Reader, clean
from gpuready.facts.nccl_log_reader import NcclLogReader
from gpuready.facts.nccl_tests_reader import NcclTestsReader
from gpuready.facts.torch_log_reader import TorchErrorReader, may_be_flight_recorder
from gpuready.pipeline import check_files, log_findings

CHUNK_BYTES = 4 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024
"""A longer line is cut here (a minified JSON or a binary blob in a log)."""
MAX_KERNEL_LINES_BYTES = 16 * 1024 * 1024
"""Kernel-log lines kept for the checks (health.xid, health.sxid, nvlink.errors, pcie.aer, ...); past this, the rest
are counted, not kept."""
MAX_FILES = 10_000
MAX_DEPTH = 8
_STATUS_ORDER = {status: status.rank for status in Status}  # model.STATUS_ORDER


class InputError(Exception):
    """A path given on the command line cannot be read at all (exit 2, one sentence): a `Said` (`diagnose.input.*`),
    whose English `str()` gives."""

    def __init__(self, sentence: Said):
        super().__init__(sentence)
        self.sentence = sentence

    def __str__(self) -> str:
        return self.sentence.english()


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
    """Every reader diagnose knows: the kernel log's lines (judged with the machine's facts) and the log readers."""
    return [KernelLines(), NcclLogReader(), TorchErrorReader(), NcclTestsReader(), HostLogReader(), DcgmDiagReader(),
            K8sNodeReader()]


def marker_pattern(markers: str):
    """A reader's markers, compiled to search raw bytes with RE2: a DFA, 400-700 MB/s on these alternations against
    36-157 MB/s for Python's backtracking engine, which is fast only on a literal prefix (measured on this 2-core box).
    RE2 has no lookaround, so markers are written without (facts/nccl_log.py `_not_followed_by`)."""
    if re2 is None:
        return re.compile(markers.encode("ascii"), re.MULTILINE)
    options = re2.Options()
    options.log_errors = False  # RE2 would print a parse error on stderr, through the user's terminal
    return re2.compile(b"(?m)" + markers.encode("ascii"), options)


class Scanner:
    """Streams files through the readers; keeps what the check parsers need."""

    def __init__(self, readers: list[Reader], limits: InputLimits = DEFAULT_LIMITS):
        self.readers = readers
        self.limits = limits
        self.read_bytes = 0
        """Bytes read from all inputs, against limits.max_input_bytes."""
        self.held_bytes = 0
        """Bytes of the tool outputs kept whole for the checks, against limits.max_held_bytes."""
        self.over_budget: list[str] = []
        """Inputs not read, or not parsed, because a budget of the whole run was spent."""
        self.not_listed = 0
        """Inputs met after MAX_FILES were listed: counted only."""
        self.unreadable: list[tuple[str, str]] = []
        """(input, why): files under a bundle file's name that cannot be read (judged as `check` judges them)."""
        self.patterns = [(reader, marker_pattern(reader.markers)) for reader in readers]
        self.files: list[InputFile] = []
        self.check_inputs: dict[str, str] = {}
        self.check_kinds: dict[str, str] = {}
        """Check input → the bundle file name whose parser reads it."""
        self.kernel = next((reader for reader in readers if isinstance(reader, KernelLines)), None)

    # --- inputs ------------------------------------------------------------------------------------------------------

    def add_path(self, path: Path) -> None:
        """A file, a folder (walked) or an archive (its members); InputError where it cannot be read at all."""
        if path.is_dir():
            self._walk(path, path.name or str(path), depth=0)
        elif path.is_file():
            self._add_file(path, str(path), given=True)
        elif path.exists():
            self._note(str(path), "not a regular file or folder: not read")
        else:
            raise InputError(said("diagnose.input.missing", path=str(path)))

    def _note(self, name: str, note: str, kind: str | None = None) -> None:
        """An input not read (or read in part), listed up to MAX_FILES entries; beyond, counted."""
        if len(self.files) < MAX_FILES:
            self.files.append(InputFile(name, kind=kind, note=note))
        else:
            self.not_listed += 1

    def _walk(self, folder: Path, label: str, depth: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as error:
            self._note(label, f"cannot list it ({error.strerror or error})")
            return
        for entry in entries:
            name = f"{label}/{entry.name}"
            if len(self.files) >= MAX_FILES:
                self._note(name, f"not read: diagnose reads at most {MAX_FILES} files")
            elif entry.is_symlink():
                self._note(name, "a symbolic link: not followed")
            elif entry.is_dir(follow_symlinks=False):
                if depth + 1 >= MAX_DEPTH:
                    self._note(name, f"deeper than {MAX_DEPTH} folders: not read")
                else:
                    self._walk(Path(entry.path), name, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                self._add_file(Path(entry.path), name, given=False)

    def _add_file(self, path: Path, name: str, *, given: bool) -> None:
        """One file: an archive (its members), a compressed file (inflated as it is read) or a text file."""
        try:
            file_format = format_of(path)
            if file_format is not None and file_format.startswith("tar"):
                self._read_archive(path, name, file_format, given=given)
            elif file_format is not None:
                with CappedReader(open_compressed(path, file_format), self.limits.max_archive_bytes) as raw:
                    self.add_stream(name, raw, base=inflated_name(path))
                    if raw.capped:
                        self.files[-1].note = (f"read in part: diagnose inflates at most "
                                               f"{size_text(self.limits.max_archive_bytes)} of a compressed file")
            else:
                with open(path, "rb") as raw:
                    self.add_stream(name, raw, path)
        except READ_ERRORS as error:
            if given and not self.files:
                raise InputError(said("diagnose.input.unreadable", path=str(path),
                                      reason=str(getattr(error, "strerror", None) or error))) from None
            self._note(name, f"cannot be read ({getattr(error, 'strerror', None) or error})")

    def _read_archive(self, path: Path, name: str, tar_format: str, *, given: bool) -> None:
        """Every regular member, streamed; names that would leave the archive, links and devices are named, not
        read; what is inflated, and how many members are looked at, is bounded (InputLimits)."""
        with open_tar(path, tar_format) as archive:
            walk = MemberWalk(archive, self.limits)
            read_any = False
            for member in walk:
                member_name = f"{name}/{member.name}"
                if member.isdir():
                    continue
                if member_parts(member.name) is None:
                    self._note(member_name, "rejected: its name leaves the archive")
                elif not member.isreg():
                    self._note(member_name, "not a regular file (a link or device): not read")
                elif member.name in walk.budget_of or len(self.files) >= MAX_FILES:
                    # stop here: walking on would inflate what follows (a gzip bomb) just to skip it
                    self._note(member_name, f"not read, nor what follows: past the "
                                            f"{size_text(self.limits.max_archive_bytes)} or {MAX_FILES} files "
                                            "diagnose reads from one archive")
                    break
                else:
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        with extracted:
                            self.add_stream(member_name, extracted)
                        read_any = True
            if walk.stopped_at and not walk.budget_of:
                self._note(name, f"read in part: {walk.stopped_at}; those after {walk.last_name} were not read")
            if walk.damage:
                if given and not walk.count:
                    raise InputError(said("diagnose.input.damaged", path=str(path), damage=walk.damage))
                self._note(name, f"damaged: what follows was not read ({walk.damage})")
            elif given and not walk.count:
                raise InputError(said("diagnose.input.empty_archive", path=str(path)))
            if given and not read_any and not walk.damage:
                raise InputError(said("diagnose.input.nothing_readable" + (".first" if walk.stopped_at else ""),
                                      path=str(path), count=walk.count))

    def add_stream(self, name: str, raw: BinaryIO, path: Path | None = None, *, base: str | None = None) -> None:
        """`path`: the file on disk, where there is one (a reader may take it whole: a flight-recorder dump);
        `base`: the file name its content had (`dmesg.txt` for `dmesg.txt.gz`), where not the end of `name`."""
        if self.read_bytes >= self.limits.max_input_bytes:
            self._note(name, f"not read: the inputs before it passed the {size_text(self.limits.max_input_bytes)} "
                             "diagnose reads in one run")
            self.over_budget.append(name)
            return
        entry = InputFile(name)
        self.files.append(entry)
        head = raw.read(SNIFF_CHARS)
        if path is not None and may_be_flight_recorder(head) and self._taken_whole(entry, path, head):
            return
        text_head = head.decode("utf-8", errors="replace")
        reason = why_not_text(text_head)
        base = base or name.rsplit("/", 1)[-1]
        if reason:
            entry.kind, entry.note = "binary", f"not read: it {reason}"
            entry.bytes_read = len(head)
            self.read_bytes += len(head)
            if base in BUNDLE_FILES:  # a bundle's own file that is not text: an input error, as `check` says
                self.unreadable.append((name, reason))
            return
        kind = base if base in BUNDLE_FILES else kind_of(text_head)  # a bundle's own names, as `check` reads them
        entry.kind = kind or "log"
        if kind and kind != "dmesg.txt":  # a tool output the check parsers read whole: kept, and streamed too
            self._keep_whole(entry, kind, raw, head)
            return
        self._scan(entry, raw, head)

    def _keep_whole(self, entry: InputFile, kind: str, raw: BinaryIO, head: bytes) -> None:
        room = min(self.limits.max_file_bytes, self.limits.max_held_bytes - self.held_bytes)
        if room <= len(head):
            entry.note = (f"not parsed: the tool outputs before it hold {size_text(self.held_bytes)}, the most "
                          "diagnose keeps; its lines were still read")
            self.over_budget.append(entry.name)
            self._scan(entry, raw, head)
            return
        whole = head + raw.read(room - len(head) + 1)
        if len(whole) > room:
            why = ("the most diagnose parses of one file" if room == self.limits.max_file_bytes
                   else "what was left of what diagnose keeps of all files")
            entry.note = f"read in part: only its first {size_text(room)} are parsed ({why})"
            whole = whole[:room]
        self.held_bytes += len(whole)
        self.check_inputs.setdefault(entry.name, whole.decode("utf-8", errors="replace"))
        self.check_kinds.setdefault(entry.name, kind)
        self._scan(entry, io.BytesIO(whole), b"")

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
            self.read_bytes += len(chunk)
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
            left = self.limits.max_input_bytes - self.read_bytes
            chunk = raw.read(min(CHUNK_BYTES, left)) if left > 0 else b""
            if left <= 0 and raw.read(1):
                entry.note = (f"read in part: its first {size_text(entry.bytes_read)}; the inputs passed the "
                              f"{size_text(self.limits.max_input_bytes)} diagnose reads in one run")
                self.over_budget.append(entry.name)
        if pending:
            number = self._scan_block(entry, pending + b"\n", number)
        entry.lines = number
        if cut_lines:
            cut = f"{cut_lines} line(s) longer than {MAX_LINE_BYTES // 1024} KiB were cut"
            entry.note = f"{entry.note}; {cut}" if entry.note else cut

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
             readers: Callable[[], list[Reader]] = default_readers, limits: InputLimits = DEFAULT_LIMITS) -> Report:
    """The report for the given inputs; InputError where a path cannot be read at all.

    One judgement: the tool outputs and kernel-log lines among the inputs become facts, and the check registry judges
    them exactly as `check --bundle` would (same findings, same `not_enough_evidence`); the log readers' facts are
    judged by the same registry's checks of logs (NCCL, PyTorch, launcher, nccl-tests, DCGM, Kubernetes)."""
    scanner = Scanner(readers(), limits)
    for path in paths:
        scanner.add_path(Path(path))
    checked, facts = _check(scanner)
    host = checked.host if checked is not None else "inputs"
    findings = log_findings(log_facts(scanner.readers), host=host, facts=facts,
                            options=CheckOptions(expect_busbw_gb_per_s=expect_busbw_gb_per_s))
    if checked is not None:
        findings.extend(f for f in checked.findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN))
    if scanner.over_budget:
        findings.append(_over_budget(scanner, host))
    if not [f for f in findings if f.status != Status.SKIP]:
        findings.append(_nothing_found(scanner, host))
    report = Report(tool_version=__version__, host=host, findings=rank(findings),
                    not_enough_evidence=checked.not_enough_evidence if checked is not None else _LOGS_ONLY,
                    input_error=checked.input_error if checked is not None else False)
    report.facts["diagnose"] = {"inputs": [_describe(entry) for entry in scanner.files],
                                "readers": [reader.name for reader in scanner.readers]}
    if scanner.not_listed:
        report.facts["diagnose"]["inputs_not_listed"] = scanner.not_listed
    if scanner.kernel is not None and scanner.kernel.not_kept:
        report.facts["diagnose"]["kernel_lines_not_kept"] = scanner.kernel.not_kept
    if checked is not None:
        report.facts.update(checked.facts)
    return report


def _check(scanner: Scanner) -> tuple[Report | None, object | None]:
    """(the check report, the first machine's facts) over what the inputs hold: tool outputs, and each file's
    kernel-log lines as a kernel log of its own; (None, None) where the inputs hold neither."""
    from gpuready.evidence.reader import Bundle
    kernel = scanner.kernel.lines if scanner.kernel is not None else {}
    if not scanner.check_inputs and not kernel and not scanner.unreadable:
        return None, None
    files = Bundle(origin="diagnose")
    files.update(scanner.check_inputs)
    files.kinds.update(scanner.check_kinds)
    for name, reason in scanner.unreadable:
        files.unreadable(name, reason)
    for name, lines in kernel.items():  # a pasted nvidia-smi with dmesg lines below it is read as both
        key = name if name not in files else f"{name} [kernel lines]"
        files[key] = "".join(text + "\n" for _file, _number, text in lines)
        files.kinds[key] = "dmesg.txt"
        files.line_numbers[key] = [number for _file, number, _text in lines]
    report, machines = check_files(files, CheckOptions())
    return report, machines[0]


_LOGS_ONLY = said("evidence.logs_only")


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


_KIND_WORDS = {"unreadable": "diagnose.inputs.unreadable", "log": "diagnose.inputs.log",
               "binary": "diagnose.inputs.binary", "flight recorder": "diagnose.inputs.flight_recorder",
               "flight recorder (pickle, not read)": "diagnose.inputs.flight_recorder_pickle"}
"""The kinds of input diagnose names in words (the catalogue's); the others are the bundle file names whose parser
read them (`nvidia-smi-q.txt`), said as they are."""


def _nothing_found(scanner: Scanner, host: str) -> Finding:
    read = [entry for entry in scanner.files if entry.note is None or entry.lines]
    kinds = Counter(entry.kind or "unreadable" for entry in scanner.files)
    counted = [said(_KIND_WORDS[kind], count=count) if kind in _KIND_WORDS else
               said("diagnose.inputs.file", count=count, kind=kind) for kind, count in sorted(kinds.items())]
    return Finding(check_id="diagnose.nothing_found", status=Status.PASS, subject=Subject(host=host),
                   **finding_text(said("diagnose.nothing_found", read=len(read), kinds=counted)),
                   observed={"files": len(scanner.files)})


def _over_budget(scanner: Scanner, host: str) -> Finding:
    names = scanner.over_budget
    limits = scanner.limits
    text = said("diagnose.inputs_skipped" + (".more" if len(names) > 20 else ""), count=len(names),
                inputs=", ".join(names[:20]), more=len(names) - 20, max_input=size_text(limits.max_input_bytes),
                max_held=size_text(limits.max_held_bytes))
    return Finding(check_id="diagnose.inputs_skipped", status=Status.WARN, subject=Subject(host=host),
                   **finding_text(text),
                   observed={"inputs": names[:100], "read_bytes": scanner.read_bytes, "held_bytes": scanner.held_bytes},
                   expected={"max_input_bytes": limits.max_input_bytes, "max_held_bytes": limits.max_held_bytes})


def _describe(entry: InputFile) -> dict:
    data = {"file": entry.name, "kind": entry.kind, "bytes_read": entry.bytes_read, "lines": entry.lines,
            "fed": dict(entry.fed)}
    if entry.note:
        data["note"] = entry.note
    return data
