"""Read a support bundle (a folder, a .tar / .tar.gz, or one pasted tool output) into a `Bundle`.

A `Bundle` is {file name: text} for the files that were read, plus, for everything else that was met, why it was not
read, so that nothing is dropped silently. The rules (README, "Support bundles"):

- Only regular files are read; nothing is followed. A symbolic link (in a folder or an archive) or a hard-link member is
  skipped and reported, a folder or a special file likewise; a folder under a bundle file's name is an unreadable file,
  as is a file that cannot be opened (permissions) or read.
- The kernel log (`dmesg.txt`, or any file whose head shows a kernel log) is read line by line to its end, whatever its
  size, keeping only the lines the kernel-log parser uses (facts/kernel_log.py `relevant_lines`).
- Any other file is parsed whole, so it is read up to `InputLimits.max_file_bytes` and never further: a longer one is
  read in part, and the bundle says so (`bundle.truncated`).
- A file whose name is not a bundle name is recognised by its head (bundle/sniff.py); only a recognised one is read on.
- An archive holds one bundle: the files of one folder (the one holding the bundle's files; or the top level). Members
  elsewhere (absolute paths, `..`, other folders) and second copies of a name are rejected by name, never merged; an
  archive holding several bundles is refused. An archive is known by its first bytes, and what is inflated is bounded
  (bundle/archive.py, `InputLimits`); one with no member that can be read is an input error, never a verdict.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from collections import Counter
import tarfile
from pathlib import Path
from typing import BinaryIO, Iterator

from gpuready.evidence.archive import (DEFAULT_LIMITS, READ_ERRORS, InputLimits, MemberWalk, format_of, inflated_name,
                                     member_parts, open_compressed, open_tar, size_text, unsafe_reason)
from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.sniff import SNIFF_CHARS, kind_of, why_not_text
from gpuready.facts.bad_input import Sentence, said_nested, sentence
from gpuready.i18n import Said, said

# The limits of what is read: InputLimits (bundle/archive.py, each with an option); these are fixed.
MAX_FILES = 256
"""Files read from one bundle (a bundle holds a few dozen; the bundle file names are read first)."""
MAX_LISTED = 1000
"""Entries not read that are listed by name (beyond, counted)."""
MAX_LOG_KEPT_BYTES = 16 * 1024 * 1024
"""The kernel-log lines kept (those that name NVIDIA, NVSwitch, PCIe AER, IOMMU or a GPU reset)."""
MAX_LINE_BYTES = 64 * 1024
"""A kernel-log line longer than this is cut to it (the kernel prints lines under 1 KiB)."""
HEAD_BYTES = SNIFF_CHARS
_CHUNK_BYTES = 1024 * 1024

# Read line by line to the end, keeping only what their parser uses; everything else is parsed whole.
STREAMED_KINDS = frozenset({"dmesg.txt"})


class BundleError(Exception):
    """The bundle as a whole cannot be read (missing, not a folder or an archive, several bundles in one archive).

    `.said`: the sentence by catalogue id (the command line says it in the user's language); str() is its English."""

    def __init__(self, msg_id: str, **values: object) -> None:
        self.said = said_nested(msg_id, **values)
        super().__init__(self.said.english())


def state(kind: str, reason: object) -> Sentence:
    """An entry's state in `facts.sources`: `kind` is `skipped`, `ignored`, `rejected` or `unreadable`
    (`reader.state.<kind>`), `reason` catalogue text (a `Said` or `Sentence`)."""
    return sentence(f"reader.state.{kind}", reason=reason)


def entry_error(name: str, what: object) -> Sentence:
    """An input error about one entry: `dmesg.txt is not text: …` (`what`: catalogue text that follows the name)."""
    return sentence("reader.error.entry", name=name, sentence=what)


class Bundle(dict):
    """{file name: text} of the files read, and what happened to everything else.

    For a streamed kernel log the text holds only the lines its parser uses (`relevant_lines`), which give the same
    events as the whole log.
    """

    def __init__(self, origin: str = "", limits: InputLimits = DEFAULT_LIMITS) -> None:
        super().__init__()
        self.origin = origin
        self.limits = limits
        self.line_numbers: dict[str, list[int]] = {}
        """Streamed kernel log → each kept line's number in the whole file (its events say where they were)."""
        self.kinds: dict[str, str] = {}
        """File name → the bundle file name whose parser reads it (its own name, or what its head shows)."""
        self.not_read: dict[str, Sentence] = {}
        """Entry → its state for `facts.sources` (`state`): `skipped: …` (links, folders, special files: a warning),
        `ignored: …` (not a tool output), `rejected: …` and `unreadable: …` (input errors, in `errors` too)."""
        self.errors: list[tuple[str, Sentence]] = []
        """(entry, one sentence): input errors (`bundle.unreadable`, exit code 2)."""
        self.partial: dict[str, Sentence] = {}
        """Entry → what was read of it, where not all of it was (`bundle.truncated`)."""
        self.not_listed: Counter[str] = Counter()
        """State (`skipped`, `ignored`, `rejected`) → entries met after MAX_LISTED were listed: counted only."""
        self.held_bytes = 0
        self.files_read = 0

    def note(self, name: str, kind: str, reason: Said | Sentence) -> None:
        """`name` was not read, and why (`kind`: `skipped`, `ignored`, `rejected`; see `state`); past MAX_LISTED
        entries, counted by kind instead (an archive of a million links is not a million-line report)."""
        if len(self.not_read) < MAX_LISTED or name in self.not_read:
            self.not_read[name] = state(kind, reason)
        else:
            self.not_listed[kind] += 1

    def skip(self, name: str, reason: Said) -> None:
        self.note(name, "skipped", reason)

    def unreadable(self, name: str, what: Said | Sentence) -> None:
        """`what` follows the entry's name: `is a folder, not …`, `cannot be read (…)`."""
        self.not_read[name] = state("unreadable", what)  # always listed: an input error names what it is about
        self.errors.append((name, entry_error(name, what)))


def read_bundle(path: str | Path, limits: InputLimits = DEFAULT_LIMITS) -> Bundle:
    """Raises BundleError where nothing of the bundle can be read; anything less is recorded in the Bundle."""
    path = Path(path)
    try:
        info = path.stat()  # the path given is followed: the user named it
    except FileNotFoundError:
        raise BundleError("reader.bundle.missing", path=str(path)) from None
    except OSError as error:
        raise BundleError("reader.bundle.cannot_read", path=str(path), error=error.strerror or str(error)) from None
    bundle = Bundle(str(path), limits)
    if stat.S_ISDIR(info.st_mode):
        _read_folder(path, bundle)
        return bundle
    if not stat.S_ISREG(info.st_mode):
        raise BundleError("reader.bundle.special", path=str(path))
    try:
        file_format = format_of(path)
    except OSError as error:
        raise BundleError("reader.file.cannot_read", path=str(path), error=error.strerror or str(error)) from None
    if file_format is None:
        if path.name.endswith(ARCHIVE_SUFFIXES):
            raise BundleError("reader.file.not_archive", path=str(path))
        # One tool output on its own (`topo.txt` pasted from a ticket): read by its content.
        _read_path(bundle, path.name, path, follow=True)
    elif file_format.startswith("tar"):
        _read_archive(path, file_format, bundle)
    else:
        _read_compressed(path, file_format, bundle)
    return bundle


ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def _read_compressed(path: Path, compression: str, bundle: Bundle) -> None:
    """One compressed tool output (`dmesg.txt.gz`, `kern.log.1.gz`): inflated as it is read."""
    name = inflated_name(path)
    if not _room_for_another(bundle, name):
        return
    try:
        with open_compressed(path, compression) as raw:  # read within the budget below, never further
            _read_entry(bundle, name, raw, None, bundle.limits.max_archive_bytes,
                        said("reader.cap.compressed", size=size_text(bundle.limits.max_archive_bytes)))
    except READ_ERRORS as error:
        raise BundleError("reader.file.cannot_inflate", path=str(path), compression=compression,
                          error=str(error)) from None
    if name not in bundle and not bundle.errors:
        noted = bundle.not_read.get(name)
        raise BundleError("reader.file.nothing_recognised", path=str(path),
                          reason=noted.said.values["reason"] if noted else said("reader.nothing_read"))


# --- folders --------------------------------------------------------------------------------------------------------

def _read_folder(path: Path, bundle: Bundle) -> None:
    entries: list[os.DirEntry] = []
    uncounted = 0
    try:
        with os.scandir(path) as listing:
            for entry in listing:
                if entry.name in BUNDLE_FILES or len(entries) < bundle.limits.max_members:
                    entries.append(entry)
                else:
                    uncounted += 1
    except OSError as error:
        raise BundleError("reader.bundle.cannot_read", path=str(path), error=error.strerror or str(error)) from None
    if uncounted:
        bundle.partial[sentence("reader.label.folder", name=path.name)] = sentence(
            "reader.partial.folder", count=len(entries) + uncounted, beyond=uncounted, first=bundle.limits.max_members)
    for entry in sorted(entries, key=lambda entry: (entry.name not in BUNDLE_FILES, entry.name)):
        name = _shown(entry.name)
        if name.startswith("."):
            bundle.note(name, "ignored", said("reader.ignored.hidden"))
            continue
        try:
            if entry.is_symlink():
                bundle.skip(name, said("reader.skip.link", target=_shown(os.readlink(entry.path))))
                continue
            if entry.is_dir(follow_symlinks=False):
                if name in BUNDLE_FILES:
                    bundle.unreadable(name, said("reader.unreadable.folder", command=_command(name)))
                else:
                    bundle.skip(name, said("reader.skip.folder"))
                continue
        except OSError as error:
            bundle.unreadable(name, _cannot_read(error))
            continue
        _read_path(bundle, name, Path(entry.path), follow=False)


def _read_path(bundle: Bundle, name: str, path: Path, *, follow: bool) -> None:
    if not _room_for_another(bundle, name):
        return
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)  # a link swapped in after the listing is not followed either
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        bundle.unreadable(name, _cannot_read(error))
        return
    with os.fdopen(descriptor, "rb", buffering=0) as raw:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            bundle.skip(name, said("reader.skip.special"))
            return
        _read_entry(bundle, name, raw, info.st_size)


def _room_for_another(bundle: Bundle, name: str) -> bool:
    if bundle.files_read >= MAX_FILES:
        bundle.skip(name, said("reader.skip.max_files", count=MAX_FILES))
        return False
    bundle.files_read += 1
    return True


# --- one file -------------------------------------------------------------------------------------------------------

def _read_entry(bundle: Bundle, name: str, raw: BinaryIO, size: int | None, budget: int | None = None,
                budget_reason: Said | None = None) -> None:
    """Read one file from its start; `budget`: the most bytes it may be read for (an archive's remaining budget)."""
    try:
        head = _read_up_to(raw, HEAD_BYTES if budget is None else min(HEAD_BYTES, budget))
        kind = name if name in BUNDLE_FILES else kind_of(_decode(head).replace("\0", ""))
        if kind is None:
            bundle.note(name, "ignored", said("reader.ignored.not_text") if why_not_text(_decode(head))
                        else said("reader.ignored.unrecognised"))
            return
        bundle.kinds[name] = kind
        if kind in STREAMED_KINDS:
            _read_log(bundle, name, raw, head, size, budget, budget_reason)
        else:
            _read_whole(bundle, name, raw, head, size, budget, budget_reason)
    except READ_ERRORS as error:
        bundle.kinds.pop(name, None)
        bundle.pop(name, None)
        bundle.unreadable(name, _cannot_read(error))


def _cannot_read(error: BaseException) -> Said:
    """`cannot be read (Permission denied)`: the system's own words in the parentheses."""
    return said("reader.unreadable.error", error=getattr(error, "strerror", None) or str(error))


def _read_whole(bundle: Bundle, name: str, raw: BinaryIO, head: bytes, size: int | None, budget: int | None,
                budget_reason: Said | None) -> None:
    limits = bundle.limits
    room = limits.max_held_bytes - bundle.held_bytes
    if room <= 0:
        bundle.kinds.pop(name, None)
        bundle.skip(name, said("reader.skip.held", size=size_text(limits.max_held_bytes)))
        return
    if not_text := why_not_text(_decode(head)):  # refused on its head: the rest is not read
        bundle.kinds.pop(name, None)
        bundle.unreadable(name, not_text)
        return
    cap, why = limits.max_file_bytes, said("reader.cap.file", size=size_text(limits.max_file_bytes))
    if room < cap:
        cap, why = room, said("reader.cap.held", held=size_text(bundle.held_bytes),
                              size=size_text(limits.max_held_bytes))
    if budget is not None and budget < cap:
        cap, why = budget, budget_reason
    data = head[:cap] + _read_up_to(raw, cap - len(head)) if cap > len(head) else head[:cap]
    if len(data) >= cap and (size > len(data) if size else bool(raw.read(1))):
        bundle.partial[name] = sentence("reader.partial.file", read=_read_of(len(data), size, "reader.read_of_more"),
                                        why=why)
    bundle.held_bytes += len(data)
    bundle[name] = _decode(data)


def _read_log(bundle: Bundle, name: str, raw: BinaryIO, head: bytes, size: int | None, budget: int | None,
              budget_reason: Said | None) -> None:
    from gpuready.facts.kernel_log import relevant_lines

    lines = _LogLines(raw, head, budget)
    kept: list[str] = []
    numbers: list[int] = []
    kept_bytes = 0
    full = False
    try:
        for _file, number, line in relevant_lines(lines, numbered=True):
            kept_bytes += len(line) + 1
            if kept_bytes > MAX_LOG_KEPT_BYTES:
                full = True
                break
            kept.append(line + "\n")
            numbers.append(number)
    except _NotText as error:
        bundle.kinds.pop(name, None)
        bundle.unreadable(name, error.reason)
        return
    bundle[name] = "".join(kept)
    bundle.line_numbers[name] = numbers
    notes = []
    if full:
        notes.append(said("reader.partial.log_full", kept=size_text(MAX_LOG_KEPT_BYTES),
                          read=_read_of(lines.bytes_read, size)))
    elif lines.stopped:
        notes.append(said("reader.partial.log_stopped", read=_read_of(lines.bytes_read, size), why=budget_reason))
    if lines.long_lines:
        notes.append(said("reader.partial.long_lines", count=lines.long_lines, size=size_text(MAX_LINE_BYTES)))
    if notes:
        bundle.partial[name] = sentence("reader.partial.notes", notes=notes)


def _read_of(count: int, size: int | None, unknown: str | None = None) -> Said | str:
    """`16 MiB of 20 MiB`; where the size is not known beforehand (a stream), `16 MiB`, or the text of `unknown`."""
    if size:
        return said("reader.read_of", read=size_text(count), size=size_text(size))
    return said(unknown, read=size_text(count)) if unknown else size_text(count)


class _NotText(ValueError):
    def __init__(self, reason: Sentence) -> None:
        super().__init__(reason)
        self.reason = reason


class _LogLines:
    """The lines of a log read in chunks (each with its newline), in bounded memory whatever the file's size.

    NUL bytes are dropped (a crash leaves runs of them in syslog files; a sparse file is one); lines over
    MAX_LINE_BYTES are cut. Raises _NotText when the first SNIFF_CHARS of what remains are binary.
    """

    def __init__(self, raw: BinaryIO, head: bytes, budget: int | None) -> None:
        self.raw, self.head, self.budget = raw, head, budget
        self.bytes_read = 0
        self.long_lines = 0
        self.stopped = False

    def _chunks(self) -> Iterator[bytes]:
        """The file's bytes in chunks; stretches of NUL bytes are not yielded (and holes of a sparse file skipped)."""
        zeros = bytes(_CHUNK_BYTES)
        chunk = self.head
        while chunk:
            self.bytes_read += len(chunk)
            if chunk != zeros[:len(chunk)]:
                yield chunk
            elif isinstance(self.raw, io.FileIO):  # a file on disk, not an archive member
                self.bytes_read += self._skip_hole()
            want = _CHUNK_BYTES
            if self.budget is not None:
                want = min(want, self.budget - self.bytes_read)
                if want <= 0:
                    self.stopped = bool(self.raw.read(1))
                    return
            chunk = self.raw.read(want)

    def _skip_hole(self) -> int:
        """Where the file is sparse, move to its next data (a hole reads as NUL bytes, which are dropped anyway)."""
        if not hasattr(os, "SEEK_DATA"):
            return 0
        try:
            descriptor = self.raw.fileno()
            here = os.lseek(descriptor, 0, os.SEEK_CUR)
            try:
                there = os.lseek(descriptor, here, os.SEEK_DATA)
            except OSError as error:
                if error.errno != errno.ENXIO:  # ENXIO: only a hole is left
                    return 0
                there = os.lseek(descriptor, 0, os.SEEK_END)
            return there - here
        except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
            return 0

    def __iter__(self) -> Iterator[str]:
        sample = bytearray()
        judged = False
        pending = b""
        dropping = False  # inside a line already cut
        first = True
        for chunk in self._chunks():
            if first:
                first = False
                for bom in (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"):
                    chunk = chunk[len(bom):] if chunk.startswith(bom) else chunk
            if b"\0" in chunk:
                chunk = chunk.replace(b"\0", b"")
            if not judged:
                sample += chunk[:SNIFF_CHARS - len(sample)]
                if len(sample) >= SNIFF_CHARS:
                    self._judge(sample)
                    judged = True
            *complete, last = chunk.split(b"\n")
            for part in complete:
                if dropping:
                    dropping = False
                    continue
                line, pending = pending + part, b""
                if len(line) > MAX_LINE_BYTES:
                    self.long_lines += 1
                    line = line[:MAX_LINE_BYTES]
                yield line.decode("utf-8", errors="replace") + "\n"
            if not dropping:
                pending += last
                if len(pending) > MAX_LINE_BYTES:
                    self.long_lines += 1
                    yield pending[:MAX_LINE_BYTES].decode("utf-8", errors="replace") + "\n"
                    pending, dropping = b"", True
        if not judged:
            self._judge(sample)
        if pending and not dropping:
            yield pending.decode("utf-8", errors="replace")

    @staticmethod
    def _judge(sample: bytearray) -> None:
        reason = why_not_text(bytes(sample).decode("utf-8", errors="replace"))
        if reason:
            raise _NotText(reason)


# --- archives -------------------------------------------------------------------------------------------------------

def _read_archive(path: Path, tar_format: str, bundle: Bundle) -> None:
    """Two passes over the members, neither holding them: the first finds the bundle's folder from their names, the
    second reads its files (a .tar.gz is inflated twice, within the same budget)."""
    label = sentence("reader.label.archive", name=path.name)
    root = _root_of_archive(path, tar_format, bundle, label)
    where = "/".join(root) + "/" if root else said("reader.archive_top_level")
    rejected: list[str] = []  # the first 20 named, the rest counted
    rejected_count = 0

    def reject(key: str, why: Said) -> None:
        nonlocal rejected_count
        bundle.note(key, "rejected", why)
        rejected_count += 1
        rejected.extend([key] if len(rejected) < 20 else [])

    with _opened(path, tar_format) as archive:
        walk = MemberWalk(archive, bundle.limits)
        last: tarfile.TarInfo | None = None
        seen: dict[str, int] = {}
        for member in walk:
            last = member
            parts = member_parts(member.name)
            shown = _shown(member.name)
            if parts is None:
                reject(shown, unsafe_reason(member.name))
                continue
            if not parts or (member.isdir() and (len(parts) != len(root) + 1 or parts[:len(root)] != root)):
                continue  # the folders that lead to the bundle; other folders show through their members
            if parts[:len(root)] != root:
                reject(shown, said("reader.reject.outside", where=where))
                continue
            if len(parts) > len(root) + 1:
                bundle.skip(shown, said("reader.skip.subfolder"))
                continue
            name = _shown(parts[-1])
            if name in seen:
                seen[name] += 1
                key = sentence("reader.label.copy", name=shown, number=seen[name])
                reject(key, said("reader.reject.copy"))
                continue
            seen[name] = 1
            if name.startswith("."):
                bundle.note(name, "ignored", said("reader.ignored.hidden"))
            elif member.isdir():
                if name in BUNDLE_FILES:
                    bundle.unreadable(name, said("reader.unreadable.folder", command=_command(name)))
            elif member.issym():
                bundle.skip(name, said("reader.skip.archive_link", target=_shown(member.linkname)))
            elif member.islnk():
                bundle.skip(name, said("reader.skip.archive_hard_link", target=_shown(member.linkname)))
            elif not member.isreg():
                bundle.skip(name, said("reader.skip.archive_special"))
            elif _room_for_another(bundle, name):
                _read_member(archive, member, name, bundle, walk.budget_of.get(member.name))
        if rejected:
            bundle.errors.append((label, sentence(
                "reader.error.rejected_more" if rejected_count > 20 else "reader.error.rejected", archive=path.name,
                where=where, names=", ".join(rejected), more=rejected_count - 20)))
        if walk.budget_of and last is not None:
            bundle.partial[label] = sentence("reader.partial.archive_budget", member=_shown(last.name),
                                             size=size_text(last.size), why=walk.stopped_at)
        elif walk.stopped_at and last is not None:
            bundle.partial[label] = sentence("reader.partial.archive_stopped", why=walk.stopped_at,
                                             member=_shown(last.name))
        if bundle.not_listed:
            counted = _comma_list([said(f"reader.counted.{kind}", count=count)
                                   for kind, count in sorted(bundle.not_listed.items())])
            bundle.partial[sentence("reader.label.entries", label=label)] = sentence(
                "reader.partial.counted", counted=counted, first=MAX_LISTED)


def _opened(path: Path, tar_format: str) -> tarfile.TarFile:
    try:
        return open_tar(path, tar_format)
    except READ_ERRORS as error:
        raise BundleError("reader.file.not_tar", path=str(path), error=str(error)) from None


def _root_of_archive(path: Path, tar_format: str, bundle: Bundle, label: Sentence) -> tuple[str, ...]:
    """The bundle's folder in the archive (see `_BundleFolders`), from a first pass over the member names."""
    with _opened(path, tar_format) as archive:
        walk = MemberWalk(archive, bundle.limits)
        folders = _BundleFolders()
        for member in walk:
            if not member.isdir() and (parts := member_parts(member.name)):
                folders.add(parts)
        if not walk.count:
            raise BundleError("reader.file.no_member", path=str(path),
                              why=walk.damage or said("reader.empty_archive"))
        if walk.damage:
            bundle.unreadable(label, said("reader.unreadable.damaged", member=_shown(walk.last_name or ""),
                                          damage=walk.damage))
    return folders.root(path)


def _read_member(archive: tarfile.TarFile, member: tarfile.TarInfo, name: str, bundle: Bundle,
                 budget: int | None) -> None:
    try:
        extracted = archive.extractfile(member)
    except READ_ERRORS as error:
        bundle.unreadable(name, said("reader.unreadable.member", error=str(error)))
        return
    if extracted is None:
        bundle.skip(name, said("reader.skip.archive_not_regular"))
        return
    with extracted:
        _read_entry(bundle, name, extracted, member.size, budget,
                    said("reader.cap.archive", size=size_text(bundle.limits.max_archive_bytes)))


class _BundleFolders:
    """The bundle's folder in an archive, from its file paths met one at a time: the one folder that holds bundle
    files (by name), else the deepest folder common to all files. Several folders holding bundle files are several
    bundles: refused."""

    def __init__(self) -> None:
        self.holders: set[tuple[str, ...]] = set()
        self.common: tuple[str, ...] | None = None

    def add(self, parts: tuple[str, ...]) -> None:
        folder = parts[:-1]
        if parts[-1] in BUNDLE_FILES and len(self.holders) <= 10:
            self.holders.add(folder)
        if self.common is None:
            self.common = folder
        else:
            depth = 0
            while depth < min(len(self.common), len(folder)) and self.common[depth] == folder[depth]:
                depth += 1
            self.common = self.common[:depth]

    def root(self, path: Path) -> tuple[str, ...]:
        holders = sorted(self.holders)
        if len(holders) > 1:
            names = _comma_list([("/".join(folder) + "/") if folder else said("reader.top_level")
                                 for folder in holders[:10]])
            raise BundleError("reader.file.several_bundles", path=str(path),
                              count=f"{len(holders)}{'+' if len(holders) > 10 else ''}", names=names,
                              more=" …" if len(holders) > 10 else "")
        return holders[0] if holders else (self.common or ())


# --- helpers --------------------------------------------------------------------------------------------------------

def _read_up_to(raw: BinaryIO, count: int) -> bytes:
    """Up to `count` bytes (fewer only at the end of the file)."""
    if count <= 0:
        return b""
    parts: list[bytes] = []
    while count > 0:
        part = raw.read(min(count, 16 * _CHUNK_BYTES))
        if not part:
            break
        parts.append(part)
        count -= len(part)
    return b"".join(parts)


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(name: str, limit: int = 200) -> str:
    """A name from the bundle as the report shows it: control characters (a terminal escape in a member name)
    written out, and at most `limit` characters."""
    name = _UNPRINTABLE.sub(lambda match: f"\\x{ord(match.group()):02x}" if ord(match.group()) < 0x100
                            else f"\\u{ord(match.group()):04x}", name)
    return name if len(name) <= limit else name[:limit - 1] + "…"


def _decode(data: bytes) -> str:
    # Files pasted from Windows editors may carry a BOM or UTF-16.
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def _command(name: str) -> str:
    return BUNDLE_FILES[name].split(" (")[0]


def _comma_list(items: list[object]) -> object:
    """`a, b, c` in the reader's language (list.separator is `; `): names and catalogue text alike."""
    joined = items[0]
    for item in items[1:]:
        joined = said("reader.comma", first=joined, then=item)
    return joined
