"""The one evidence reader: whatever is given (a folder, an archive and the archives in it, a compressed file, one
pasted tool output) is walked once and each file read once, front to back, in chunks, within one set of limits
(evidence/limits.py). A file is what its content shows (evidence/sniff.py), whatever it is called: the tool outputs the
check parsers read whole are kept (a `Bundle`, evidence/bundle.py), and every line is offered to the log readers whose
markers it holds (evidence/markers.py), searched in the raw bytes at the speed of the regex engine.

Two shapes of input, one reader (evidence/budget.py `EvidenceReader` holds what they share):
- one machine's bundle (`check --bundle`, `plan`, `launch`): evidence/reader.py `BundleReader`; its files by their
  bundle names or their heads, the kernel log kept as the lines its parser uses;
- anything pasted into a ticket (`diagnose`): `Scanner` below, walking with evidence/walk.py; every text file streamed
  through the log readers, the tool outputs among them kept whole, the kernel-log lines kept for the checks.

What either keeps goes to the same parsers and the same checks (pipeline.py `check_files`): on a bundle's files,
`diagnose` reports what `check --bundle` does, and what its log readers add.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Sequence

from gpuready.evidence.budget import EvidenceReader, read_capped
from gpuready.evidence.bundle import Bundle
from gpuready.evidence.files import decode, read_up_to
from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.limits import DEFAULT_LIMITS, InputLimits, size_text
from gpuready.evidence.markers import KernelLines, MarkerScan
from gpuready.evidence.sniff import SNIFF_CHARS, kind_of, why_not_text
from gpuready.evidence.walk import InputWalk
from gpuready.facts.bad_input import Sentence, sentence
from gpuready.facts.log_lines import Reader


@dataclass(kw_only=True)
class InputFile:
    """One input `diagnose` met, as its report lists it (`facts.diagnose.inputs`)."""

    name: str
    """As the user named it (a folder's or archive's member: `folder/member`)."""
    kind: str | None = None
    """What the content is: a check input (`nvidia-smi-q.txt`, `dmesg.txt`, ...), `log`, `binary`, a flight recorder."""
    bytes_read: int = 0
    lines: int = 0
    fed: Counter = field(default_factory=Counter)
    """Lines offered to each reader."""
    note: Sentence | None = None
    """Why it was not read, or read only in part (catalogue text)."""


class Scanner(EvidenceReader):
    """Any inputs (`diagnose`): streams every file through the log readers; keeps what the check parsers need."""

    def __init__(self, readers: Sequence[Reader] = (), limits: InputLimits = DEFAULT_LIMITS, *,
                 whole_file_head: Callable[[bytes], bool] | None = None) -> None:
        """`whole_file_head`: whether a file with this head may be one a reader takes whole through its
        `offer_file(path, name)` (an NCCL flight-recorder dump); the others are streamed."""
        super().__init__(limits)
        self.readers = list(readers)
        self.markers = MarkerScan(self.readers)
        self.kernel = next((reader for reader in self.readers if isinstance(reader, KernelLines)), None)
        if self.kernel is not None:
            self.kernel.max_kept_bytes = limits.max_log_kept_bytes
        self.whole_file_head = whole_file_head
        self.over_budget: list[str] = []
        """Inputs not read, or not parsed, because a budget of the whole run was spent."""
        self.not_listed = 0
        """Inputs met after limits.max_files were listed: counted only."""
        self.unreadable: list[tuple[str, Sentence]] = []
        """(input, why): files under a bundle file's name that cannot be read (judged as `check` judges them)."""
        self.files: list[InputFile] = []
        self.check_inputs: dict[str, str] = {}
        self.check_kinds: dict[str, str] = {}
        """Check input → the bundle file name whose parser reads it."""

    def add_path(self, path: Path) -> None:
        """A file, a folder (walked) or an archive (its members); InputError where it cannot be read at all."""
        InputWalk(self, self.limits).add(Path(path))

    def note(self, name: str, note: Sentence, kind: str | None = None) -> None:
        """An input not read (or read in part), listed up to limits.max_files entries; beyond, counted."""
        if len(self.files) < self.limits.max_files:
            self.files.append(InputFile(name=name, kind=kind, note=note))
        else:
            self.not_listed += 1

    def note_last(self, note: Sentence) -> None:
        """What the walk learnt of the input read last once it was read (a compressed file inflated only in part)."""
        self.files[-1].note = note

    def add_stream(self, name: str, raw: BinaryIO, path: Path | None = None, *, base: str | None = None,
                   size: int | None = None) -> None:
        """`path`: the file on disk, where there is one (a reader may take it whole: a flight-recorder dump);
        `base`: the file name its content had (`dmesg.txt` for `dmesg.txt.gz`), where not the end of `name`."""
        if self.read_bytes >= self.limits.max_input_bytes:
            self.note(name, sentence("reader.note.over_input", size=size_text(self.limits.max_input_bytes)))
            self.over_budget.append(name)
            return
        entry = InputFile(name=name)
        self.files.append(entry)
        head = read_up_to(raw, SNIFF_CHARS)
        if path is not None and self.whole_file_head is not None and self.whole_file_head(head) and \
                self._taken_whole(entry, path, head):
            return
        text_head = head.decode("utf-8", errors="replace")
        reason = why_not_text(text_head)
        base = base or name.rsplit("/", 1)[-1]
        if reason:
            entry.kind, entry.note = "binary", sentence("reader.note.not_text", reason=reason)
            entry.bytes_read = len(head)
            self.read_bytes += len(head)
            if base in BUNDLE_FILES:  # a bundle's own file that is not text: an input error, as `check` says
                self.unreadable.append((name, reason))
            return
        kind = base if base in BUNDLE_FILES else kind_of(text_head)  # a bundle's own names, as `check` reads them
        entry.kind = kind or "log"
        if kind and kind != "dmesg.txt":  # a tool output the check parsers read whole: kept, and streamed too
            self._keep_whole(entry, kind, raw, head, size)
            return
        self._scan(entry, raw, head)

    def _keep_whole(self, entry: InputFile, kind: str, raw: BinaryIO, head: bytes, size: int | None) -> None:
        room = min(self.limits.max_file_bytes, self.limits.max_held_bytes - self.held_bytes)
        if room <= len(head):
            entry.note = sentence("reader.note.held_full", size=size_text(self.held_bytes))
            self.over_budget.append(entry.name)
            self._scan(entry, raw, head)
            return
        whole, more = read_capped(raw, head, room, size)
        if more:
            why = "reader.note.file_cap" if room == self.limits.max_file_bytes else "reader.note.held_cap"
            entry.note = sentence("reader.note.parsed_in_part", size=size_text(room), why=sentence(why))
        self.held_bytes += len(whole)
        self.check_inputs.setdefault(entry.name, decode(whole))
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

    def _scan(self, entry: InputFile, raw: BinaryIO, head: bytes) -> None:
        blocks = self.line_blocks(raw, head, max(len(head), self.input_left()))
        entry.lines = self.markers.scan(entry.name, blocks, entry.fed)
        entry.bytes_read += blocks.bytes_read
        self.charge(blocks)
        if blocks.stopped:
            entry.note = sentence("reader.note.input_spent", size=size_text(entry.bytes_read),
                                  most=size_text(self.limits.max_input_bytes))
            self.over_budget.append(entry.name)
        if blocks.long_lines:
            cut = sentence("reader.note.cut_lines", count=blocks.long_lines,
                           size=size_text(self.limits.max_line_bytes))
            entry.note = sentence("reader.partial.notes", notes=[entry.note, cut]) if entry.note else cut

    def check_files(self) -> Bundle | None:
        """What the inputs hold for the check parsers: the tool outputs, and each file's kernel-log lines as a kernel
        log of its own (a pasted nvidia-smi with dmesg lines below it is read as both); None where they hold neither."""
        kernel = self.kernel.lines if self.kernel is not None else {}
        if not self.check_inputs and not kernel and not self.unreadable:
            return None
        files = Bundle(origin="diagnose", limits=self.limits)
        files.update(self.check_inputs)
        files.kinds.update(self.check_kinds)
        for name, reason in self.unreadable:
            files.unreadable(name, reason)
        for name, lines in kernel.items():
            key = name if name not in files else f"{name} [kernel lines]"
            files[key] = "".join(text + "\n" for _file, _number, text in lines)
            files.kinds[key] = "dmesg.txt"
            files.line_numbers[key] = [number for _file, number, _text in lines]
        return files
