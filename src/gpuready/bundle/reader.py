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

from gpuready.bundle.archive import (DEFAULT_LIMITS, READ_ERRORS, InputLimits, MemberWalk, format_of, inflated_name,
                                     member_parts, open_compressed, open_tar, size_text, unsafe_reason)
from gpuready.bundle.layout import BUNDLE_FILES
from gpuready.bundle.sniff import SNIFF_CHARS, kind_of, why_not_text

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
    """The bundle as a whole cannot be read (missing, not a folder or an archive, several bundles in one archive)."""


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
        self.not_read: dict[str, str] = {}
        """Entry → its state for `facts.sources`: `skipped: …` (links, folders, special files: a warning),
        `ignored: …` (not a tool output), `rejected: …` and `unreadable: …` (input errors, in `errors` too)."""
        self.errors: list[tuple[str, str]] = []
        """(entry, one sentence): input errors (`bundle.unreadable`, exit code 2)."""
        self.partial: dict[str, str] = {}
        """Entry → what was read of it, where not all of it was (`bundle.truncated`)."""
        self.not_listed: Counter[str] = Counter()
        """State (`skipped`, `ignored`, `rejected`) → entries met after MAX_LISTED were listed: counted only."""
        self.held_bytes = 0
        self.files_read = 0

    def note(self, name: str, state: str) -> None:
        """`name` was not read, and why (`skipped: …`, `ignored: …`, `rejected: …`); past MAX_LISTED entries,
        counted by state instead (an archive of a million links is not a million-line report)."""
        if len(self.not_read) < MAX_LISTED or name in self.not_read:
            self.not_read[name] = state
        else:
            self.not_listed[state.split(":", 1)[0]] += 1

    def skip(self, name: str, reason: str) -> None:
        self.note(name, f"skipped: {reason}")

    def unreadable(self, name: str, sentence: str) -> None:
        self.not_read[name] = f"unreadable: {sentence}"  # always listed: an input error names what it is about
        self.errors.append((name, f"{name} {sentence}"))


def read_bundle(path: str | Path, limits: InputLimits = DEFAULT_LIMITS) -> Bundle:
    """Raises BundleError where nothing of the bundle can be read; anything less is recorded in the Bundle."""
    path = Path(path)
    try:
        info = path.stat()  # the path given is followed: the user named it
    except FileNotFoundError:
        raise BundleError(f"bundle {path} does not exist") from None
    except OSError as error:
        raise BundleError(f"bundle {path} cannot be read ({error.strerror or error})") from None
    bundle = Bundle(str(path), limits)
    if stat.S_ISDIR(info.st_mode):
        _read_folder(path, bundle)
        return bundle
    if not stat.S_ISREG(info.st_mode):
        raise BundleError(f"bundle {path} is neither a folder nor a file (a device, FIFO or socket)")
    try:
        file_format = format_of(path)
    except OSError as error:
        raise BundleError(f"{path} cannot be read ({error.strerror or error})") from None
    if file_format is None:
        if path.name.endswith(ARCHIVE_SUFFIXES):
            raise BundleError(f"{path} is named like an archive but is not one: its first bytes are neither a tar "
                              "header nor gzip, bzip2 or xz")
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
                        f"gpuready inflates at most {size_text(bundle.limits.max_archive_bytes)} of a compressed file")
    except READ_ERRORS as error:
        raise BundleError(f"{path} cannot be inflated ({compression}: {error})") from None
    if name not in bundle and not bundle.errors:
        raise BundleError(f"{path} holds no tool output gpuready recognises "
                          f"({bundle.not_read.get(name, 'nothing was read').split(': ', 1)[-1]})")


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
        raise BundleError(f"bundle {path} cannot be read ({error.strerror or error})") from None
    if uncounted:
        bundle.partial[f"{path.name} (the folder)"] = (
            f"it holds {len(entries) + uncounted} entries; {uncounted} beyond the first "
            f"{bundle.limits.max_members} were not "
            "looked at")
    for entry in sorted(entries, key=lambda entry: (entry.name not in BUNDLE_FILES, entry.name)):
        name = _shown(entry.name)
        if name.startswith("."):
            bundle.note(name, "ignored: a hidden file")
            continue
        try:
            if entry.is_symlink():
                bundle.skip(name, f"a symbolic link (to {_shown(os.readlink(entry.path))}), not followed")
                continue
            if entry.is_dir(follow_symlinks=False):
                if name in BUNDLE_FILES:
                    bundle.unreadable(name, f"is a folder, not the file `{_command(name)}` writes")
                else:
                    bundle.skip(name, "a folder (a bundle's files sit in one folder; its contents were not read)")
                continue
        except OSError as error:
            bundle.unreadable(name, f"cannot be read ({error.strerror or error})")
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
        bundle.unreadable(name, f"cannot be read ({error.strerror or error})")
        return
    with os.fdopen(descriptor, "rb", buffering=0) as raw:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            bundle.skip(name, "not a regular file (a device, FIFO or socket)")
            return
        _read_entry(bundle, name, raw, info.st_size)


def _room_for_another(bundle: Bundle, name: str) -> bool:
    if bundle.files_read >= MAX_FILES:
        bundle.skip(name, f"gpuready reads at most {MAX_FILES} files from one bundle")
        return False
    bundle.files_read += 1
    return True


# --- one file -------------------------------------------------------------------------------------------------------

def _read_entry(bundle: Bundle, name: str, raw: BinaryIO, size: int | None, budget: int | None = None,
                budget_reason: str = "") -> None:
    """Read one file from its start; `budget`: the most bytes it may be read for (an archive's remaining budget)."""
    try:
        head = _read_up_to(raw, HEAD_BYTES if budget is None else min(HEAD_BYTES, budget))
        kind = name if name in BUNDLE_FILES else kind_of(_decode(head).replace("\0", ""))
        if kind is None:
            bundle.note(name, "ignored: not text" if why_not_text(_decode(head))
                        else "ignored: not a tool output gpuready recognises")
            return
        bundle.kinds[name] = kind
        if kind in STREAMED_KINDS:
            _read_log(bundle, name, raw, head, size, budget, budget_reason)
        else:
            _read_whole(bundle, name, raw, head, size, budget, budget_reason)
    except READ_ERRORS as error:
        bundle.kinds.pop(name, None)
        bundle.pop(name, None)
        bundle.unreadable(name, f"cannot be read ({getattr(error, 'strerror', None) or error})")


def _read_whole(bundle: Bundle, name: str, raw: BinaryIO, head: bytes, size: int | None, budget: int | None,
                budget_reason: str) -> None:
    limits = bundle.limits
    room = limits.max_held_bytes - bundle.held_bytes
    if room <= 0:
        bundle.kinds.pop(name, None)
        bundle.skip(name, f"the files read before it already hold {size_text(limits.max_held_bytes)}, the most "
                          "gpuready reads from one bundle")
        return
    if not_text := why_not_text(_decode(head)):  # refused on its head: the rest is not read
        bundle.kinds.pop(name, None)
        bundle.unreadable(name, not_text)
        return
    cap, why = limits.max_file_bytes, \
        f"the most gpuready reads of a file it parses whole is {size_text(limits.max_file_bytes)}"
    if room < cap:
        cap, why = room, f"the files read before it already hold {size_text(bundle.held_bytes)} of the " \
                         f"{size_text(limits.max_held_bytes)} gpuready reads from one bundle"
    if budget is not None and budget < cap:
        cap, why = budget, budget_reason
    data = head[:cap] + _read_up_to(raw, cap - len(head)) if cap > len(head) else head[:cap]
    if len(data) >= cap and (size > len(data) if size else bool(raw.read(1))):
        bundle.partial[name] = f"only its first {size_text(len(data))} of {size_text(size) if size else 'more'} were " \
                               f"read ({why}); the rest was not parsed"
    bundle.held_bytes += len(data)
    bundle[name] = _decode(data)


def _read_log(bundle: Bundle, name: str, raw: BinaryIO, head: bytes, size: int | None, budget: int | None,
              budget_reason: str) -> None:
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
        bundle.unreadable(name, str(error))
        return
    bundle[name] = "".join(kept)
    bundle.line_numbers[name] = numbers
    notes = []
    if full:
        notes.append(f"its lines about NVIDIA, NVSwitch, PCIe and IOMMU passed the {size_text(MAX_LOG_KEPT_BYTES)} "
                     f"gpuready keeps after {size_text(lines.bytes_read)}"
                     f"{f' of {size_text(size)}' if size else ''}; the rest was not read")
    elif lines.stopped:
        notes.append(f"only its first {size_text(lines.bytes_read)}{f' of {size_text(size)}' if size else ''} were read "
                     f"({budget_reason})")
    if lines.long_lines:
        notes.append(f"{lines.long_lines} line(s) longer than {size_text(MAX_LINE_BYTES)} were cut to their first "
                     f"{size_text(MAX_LINE_BYTES)}")
    if notes:
        bundle.partial[name] = "; ".join(notes)


class _NotText(ValueError):
    pass


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
    label = f"{path.name} (the archive)"
    root = _root_of_archive(path, tar_format, bundle, label)
    where = "/".join(root) + "/" if root else "the archive's top level"
    rejected: list[str] = []  # the first 20 named, the rest counted
    rejected_count = 0

    def reject(key: str, why: str) -> None:
        nonlocal rejected_count
        bundle.note(key, f"rejected: {why}")
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
                reject(shown, f"outside the bundle's folder ({where})")
                continue
            if len(parts) > len(root) + 1:
                bundle.skip(shown, "in a subfolder of the bundle (a bundle's files sit in one folder)")
                continue
            name = _shown(parts[-1])
            if name in seen:
                seen[name] += 1
                key = f"{shown} (copy {seen[name]})"
                reject(key, "a second member of the same name (the first was read)")
                continue
            seen[name] = 1
            if name.startswith("."):
                bundle.note(name, "ignored: a hidden file")
            elif member.isdir():
                if name in BUNDLE_FILES:
                    bundle.unreadable(name, f"is a folder, not the file `{_command(name)}` writes")
            elif member.issym():
                bundle.skip(name, f"a symbolic link (to {_shown(member.linkname)}) in the archive, not followed")
            elif member.islnk():
                bundle.skip(name, f"a hard link (to {_shown(member.linkname)}) in the archive, not followed")
            elif not member.isreg():
                bundle.skip(name, "not a regular file (a device or FIFO entry in the archive)")
            elif _room_for_another(bundle, name):
                _read_member(archive, member, name, bundle, walk.budget_of.get(member.name))
        if rejected:
            shown = ", ".join(rejected) + (f" and {rejected_count - 20} more" if rejected_count > 20 else "")
            bundle.errors.append((label, f"{path.name} holds members that are not files of its bundle ({where}), "
                                         f"rejected unread: {shown}"))
        if walk.budget_of and last is not None:
            bundle.partial[label] = (f"reading it stopped at {_shown(last.name)} (of {size_text(last.size)}): "
                                     f"{walk.stopped_at}; any members after it were not read")
        elif walk.stopped_at and last is not None:
            bundle.partial[label] = f"{walk.stopped_at}; those after {_shown(last.name)} were not read"
        if bundle.not_listed:
            counted = ", ".join(f"{count} {state}" for state, count in sorted(bundle.not_listed.items()))
            bundle.partial[f"{label} (entries)"] = (f"{counted} more members were not read and are counted, not "
                                                   f"listed (the first {MAX_LISTED} are)")


def _opened(path: Path, tar_format: str) -> tarfile.TarFile:
    try:
        return open_tar(path, tar_format)
    except READ_ERRORS as error:
        raise BundleError(f"{path} is neither a bundle folder nor a readable .tar.gz ({error})") from None


def _root_of_archive(path: Path, tar_format: str, bundle: Bundle, label: str) -> tuple[str, ...]:
    """The bundle's folder in the archive (see `_BundleFolders`), from a first pass over the member names."""
    with _opened(path, tar_format) as archive:
        walk = MemberWalk(archive, bundle.limits)
        folders = _BundleFolders()
        for member in walk:
            if not member.isdir() and (parts := member_parts(member.name)):
                folders.add(parts)
        if not walk.count:
            raise BundleError(f"{path} holds no member that could be read"
                              f"{f' ({walk.damage})' if walk.damage else ' (an empty archive)'}")
        if walk.damage:
            bundle.unreadable(label, f"is damaged in or after member {_shown(walk.last_name or '')} "
                                     f"({walk.damage}); what follows was not read")
    return folders.root(path)


def _read_member(archive: tarfile.TarFile, member: tarfile.TarInfo, name: str, bundle: Bundle,
                 budget: int | None) -> None:
    try:
        extracted = archive.extractfile(member)
    except READ_ERRORS as error:
        bundle.unreadable(name, f"cannot be read from the archive ({error})")
        return
    if extracted is None:
        bundle.skip(name, "not a regular file in the archive")
        return
    with extracted:
        _read_entry(bundle, name, extracted, member.size, budget,
                    f"the archive's members pass the {size_text(bundle.limits.max_archive_bytes)} gpuready inflates "
                    "from one archive here; members after it were not read")


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
            names = ", ".join(("/".join(folder) + "/") if folder else "the top level" for folder in holders[:10])
            raise BundleError(f"{path} holds {len(holders)}{'+' if len(holders) > 10 else ''} bundles ({names}"
                              f"{' …' if len(holders) > 10 else ''}); check reads one machine's bundle: check each "
                              "folder on its own, or compare the machines with `gpuready fleet` (a later release)")
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
