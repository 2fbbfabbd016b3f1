"""Read a support bundle (a folder, a .tar / .tar.gz, or one pasted tool output) into a `Bundle`: the evidence reader
(evidence/stream.py, evidence/budget.py) in the shape of one machine's bundle.

A `Bundle` is {file name: text} for the files that were read, plus, for everything else that was met, why it was not
read, so that nothing is dropped silently. The rules (README, "Support bundles"):

- Only regular files are read; nothing is followed. A symbolic link (in a folder or an archive) or a hard-link member is
  skipped and reported, a folder or a special file likewise; a folder under a bundle file's name is an unreadable file,
  as is a file that cannot be opened (permissions) or read.
- The kernel log (`dmesg.txt`, or any file whose head shows a kernel log) is read line by line to its end, whatever its
  size, keeping only the lines the kernel-log parser uses (facts/kernel_log.py `relevant_lines`).
- Any other file is parsed whole, so it is read up to `InputLimits.max_file_bytes` and never further: a longer one is
  read in part, and the bundle says so (`bundle.truncated`).
- A file whose name is not a bundle name is recognised by its head (evidence/sniff.py); a recognised one is read on.
  Any other text file is streamed through the log readers the caller gives (`check --bundle`: NCCL, PyTorch,
  nccl-tests, DCGM, container and Kubernetes logs, as `diagnose` reads them), keeping only their facts.
- An archive holds one bundle: the files of one folder (the one holding the bundle's files; or the top level). Members
  elsewhere (absolute paths, `..`, other folders) and second copies of a name are rejected by name, never merged; an
  archive holding several bundles is refused. An archive is known by its first bytes, and what is inflated is bounded
  (evidence/archive.py, `InputLimits`); one with no member that can be read is an input error, never a verdict.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections import Counter
from pathlib import Path
from typing import BinaryIO, Sequence

from gpuready.evidence.archive import (READ_ERRORS, MemberWalk, format_of, inflated_name, member_parts, open_compressed,
                                       open_tar, unsafe_reason)
from gpuready.evidence.budget import EvidenceReader, read_capped
from gpuready.evidence.bundle import MAX_LISTED, Bundle, BundleError, entry_error, state
from gpuready.evidence.files import NotRegular, cannot_read, decode, open_regular, read_up_to, shown
from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.limits import DEFAULT_LIMITS, InputLimits, size_text
from gpuready.evidence.lines import SPLIT_CHUNK_BYTES, text_lines
from gpuready.evidence.sniff import SNIFF_CHARS, kind_of, why_not_text
from gpuready.facts.bad_input import Sentence, sentence
from gpuready.evidence.markers import MarkerScan
from gpuready.facts.kernel_log import relevant_lines
from gpuready.facts.log_facts import log_facts
from gpuready.facts.log_lines import Reader
from gpuready.i18n import Said, said

__all__ = ["ARCHIVE_SUFFIXES", "MAX_LISTED", "Bundle", "BundleError", "BundleReader", "entry_error", "read_bundle",
           "state"]
"""`Bundle`, `BundleError`, `entry_error` and `state` are evidence/bundle.py's, named here for the modules that read a
bundle through this one."""

HEAD_BYTES = SNIFF_CHARS
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
STREAMED_KINDS = frozenset({"dmesg.txt"})
"""Read line by line to the end, keeping only what their parser uses; everything else is parsed whole."""


def read_bundle(path: str | Path, limits: InputLimits = DEFAULT_LIMITS, log_readers: Sequence[Reader] = ()) -> Bundle:
    """Raises BundleError where nothing of the bundle can be read; anything less is recorded in the Bundle.
    `log_readers`: what reads the text files that are no tool output (their facts: `Bundle.logs`)."""
    path = Path(path)
    try:
        info = path.stat()  # the path given is followed: the user named it
    except FileNotFoundError:
        raise BundleError("reader.bundle.missing", path=str(path)) from None
    except OSError as error:
        raise BundleError("reader.bundle.cannot_read", path=str(path), error=error.strerror or str(error)) from None
    reader = BundleReader(str(path), limits, log_readers)
    if stat.S_ISDIR(info.st_mode):
        reader.read_folder(path)
        return reader.finished()
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
        reader.read_path(path.name, path, follow=True)
    elif file_format.startswith("tar"):
        reader.read_archive(path, file_format)
    else:
        reader.read_compressed(path, file_format)
    return reader.finished()


class BundleReader(EvidenceReader):
    """One machine's bundle into a `Bundle` (`bundle`): a folder's files, an archive's bundle folder, one compressed
    or pasted file."""

    def __init__(self, origin: str = "", limits: InputLimits = DEFAULT_LIMITS,
                 log_readers: Sequence[Reader] = ()) -> None:
        super().__init__(limits)
        self.bundle = Bundle(origin, limits)
        self.log_readers = list(log_readers)
        self.markers = MarkerScan(self.log_readers) if self.log_readers else None

    def finished(self) -> Bundle:
        """The bundle, with the log readers' facts where any of its files fed them."""
        if self.bundle.logs_read:
            self.bundle.logs = log_facts(self.log_readers)
        return self.bundle

    def read_compressed(self, path: Path, compression: str) -> None:
        """One compressed tool output (`dmesg.txt.gz`, `kern.log.1.gz`): inflated as it is read."""
        name = inflated_name(path)
        if not self._room_for_another(name):
            return
        try:
            with open_compressed(path, compression) as raw:  # read within the budget below, never further
                self.read_entry(name, raw, None, self.limits.max_archive_bytes,
                                said("reader.cap.compressed", size=size_text(self.limits.max_archive_bytes)))
        except READ_ERRORS as error:
            raise BundleError("reader.file.cannot_inflate", path=str(path), compression=compression,
                              error=str(error)) from None
        if name not in self.bundle and name not in self.bundle.logs_read and not self.bundle.errors:
            noted = self.bundle.not_read.get(name)
            raise BundleError("reader.file.nothing_recognised", path=str(path),
                              reason=noted.said.values["reason"] if noted else said("reader.nothing_read"))

    # --- folders ----------------------------------------------------------------------------------------------------

    def read_folder(self, path: Path) -> None:
        """The folder's own files (a bundle's files sit in one folder: its subfolders are named, not read)."""
        entries: list[os.DirEntry] = []
        uncounted = 0
        try:
            with os.scandir(path) as listing:
                for entry in listing:
                    if entry.name in BUNDLE_FILES or len(entries) < self.limits.max_members:
                        entries.append(entry)
                    else:
                        uncounted += 1
        except OSError as error:
            raise BundleError("reader.bundle.cannot_read", path=str(path), error=error.strerror or str(error)) from None
        if uncounted:
            self.bundle.partial[sentence("reader.label.folder", name=path.name)] = sentence(
                "reader.partial.folder", count=len(entries) + uncounted, beyond=uncounted,
                first=self.limits.max_members)
        for entry in sorted(entries, key=lambda entry: (entry.name not in BUNDLE_FILES, entry.name)):
            self._folder_entry(entry)

    def _folder_entry(self, entry: os.DirEntry) -> None:
        name = shown(entry.name)
        if name.startswith("."):
            self.bundle.note(name, "ignored", said("reader.ignored.hidden"))
            return
        try:
            if entry.is_symlink():
                self.bundle.skip(name, said("reader.skip.link", target=shown(os.readlink(entry.path))))
                return
            if entry.is_dir(follow_symlinks=False):
                if name in BUNDLE_FILES:
                    self.bundle.unreadable(name, said("reader.unreadable.folder", command=_command(name)))
                else:
                    self.bundle.skip(name, said("reader.skip.folder"))
                return
        except OSError as error:
            self.bundle.unreadable(name, cannot_read(error))
            return
        self.read_path(name, Path(entry.path), follow=False)

    def read_path(self, name: str, path: Path, *, follow: bool) -> None:
        """One file on disk; `follow`: the user named it (a link is followed), else a link is not."""
        if not self._room_for_another(name):
            return
        try:
            raw, size = open_regular(path, follow=follow)
        except NotRegular:
            self.bundle.skip(name, said("reader.skip.special"))
            return
        except OSError as error:
            self.bundle.unreadable(name, cannot_read(error))
            return
        with raw:
            self.read_entry(name, raw, size)

    def _room_for_another(self, name: str) -> bool:
        if self.files_read >= self.limits.max_files:
            self.bundle.skip(name, said("reader.skip.max_files", count=self.limits.max_files))
            return False
        if self.input_left() <= 0:
            self.bundle.skip(name, said("reader.skip.input_spent", size=size_text(self.limits.max_input_bytes)))
            return False
        self.files_read += 1
        return True

    # --- one file ---------------------------------------------------------------------------------------------------

    def read_entry(self, name: str, raw: BinaryIO, size: int | None, budget: int | None = None,
                   budget_reason: Said | None = None) -> None:
        """Read one file from its start; `budget`: the most bytes it may be read for (an archive's remaining budget),
        `budget_reason` why. What is left of limits.max_input_bytes bounds it too."""
        if budget is None or self.input_left() < budget:
            budget, budget_reason = self.input_left(), said("reader.cap.input",
                                                            size=size_text(self.limits.max_input_bytes))
        try:
            head = read_up_to(raw, HEAD_BYTES if budget is None else min(HEAD_BYTES, budget))
            kind = name if name in BUNDLE_FILES else kind_of(decode(head).replace("\0", ""))
            if kind is None:
                not_text = why_not_text(decode(head))
                if self.markers is not None and not not_text:
                    self._scan_log(name, raw, head, budget, budget_reason)
                    return
                self.read_bytes += len(head)
                self.bundle.note(name, "ignored", said("reader.ignored.not_text") if not_text
                                 else said("reader.ignored.unrecognised"))
                return
            self.bundle.kinds[name] = kind
            if kind in STREAMED_KINDS:
                self._read_log(name, raw, head, size, budget, budget_reason)
            else:
                self._read_whole(name, raw, head, size, budget, budget_reason)
        except READ_ERRORS as error:
            self.bundle.kinds.pop(name, None)
            self.bundle.pop(name, None)
            self.bundle.unreadable(name, cannot_read(error))

    def _read_whole(self, name: str, raw: BinaryIO, head: bytes, size: int | None, budget: int | None,
                    budget_reason: Said | None) -> None:
        limits, bundle = self.limits, self.bundle
        room = limits.max_held_bytes - self.held_bytes
        if room <= 0:
            bundle.kinds.pop(name, None)
            bundle.skip(name, said("reader.skip.held", size=size_text(limits.max_held_bytes)))
            return
        if not_text := why_not_text(decode(head)):  # refused on its head: the rest is not read
            bundle.kinds.pop(name, None)
            bundle.unreadable(name, not_text)
            return
        cap, why = limits.max_file_bytes, said("reader.cap.file", size=size_text(limits.max_file_bytes))
        if room < cap:
            cap, why = room, said("reader.cap.held", held=size_text(self.held_bytes),
                                  size=size_text(limits.max_held_bytes))
        if budget is not None and budget < cap:
            cap, why = budget, budget_reason
        data, more = read_capped(raw, head, cap, size)
        if more:
            bundle.partial[name] = sentence("reader.partial.file", why=why,
                                            read=_read_of(len(data), size, "reader.read_of_more"))
        self.held_bytes += len(data)
        self.read_bytes += len(data)
        bundle[name] = decode(data)

    def _read_log(self, name: str, raw: BinaryIO, head: bytes, size: int | None, budget: int | None,
                  budget_reason: Said | None) -> None:
        blocks = self.line_blocks(raw, head, budget, judge=_judge_text, chunk_bytes=SPLIT_CHUNK_BYTES)
        kept: list[str] = []
        numbers: list[int] = []
        kept_bytes = 0
        full = False
        try:
            for _file, number, line in relevant_lines(text_lines(iter(blocks)), numbered=True):
                kept_bytes += len(line) + 1
                if kept_bytes > self.limits.max_log_kept_bytes:
                    full = True
                    break
                kept.append(line + "\n")
                numbers.append(number)
        except _NotText as error:
            self.bundle.kinds.pop(name, None)
            self.bundle.unreadable(name, error.reason)
            return
        finally:
            self.charge(blocks)
        self.bundle[name] = "".join(kept)
        self.bundle.line_numbers[name] = numbers
        notes: list[Said] = []
        if full:
            notes.append(said("reader.partial.log_full", kept=size_text(self.limits.max_log_kept_bytes),
                              read=_read_of(blocks.bytes_read, size)))
        elif blocks.stopped:
            notes.append(said("reader.partial.log_stopped", read=_read_of(blocks.bytes_read, size), why=budget_reason))
        if blocks.long_lines:
            notes.append(said("reader.partial.long_lines", count=blocks.long_lines,
                              size=size_text(self.limits.max_line_bytes)))
        if notes:
            self.bundle.partial[name] = sentence("reader.partial.notes", notes=notes)

    def _scan_log(self, name: str, raw: BinaryIO, head: bytes, budget: int | None,
                  budget_reason: Said | None) -> None:
        """A text file that is no tool output: its lines offered to the log readers whose markers they hold."""
        blocks = self.line_blocks(raw, head, budget)
        fed: Counter = Counter()
        try:
            self.markers.scan(name, blocks, fed)
        finally:
            self.charge(blocks)
        if not fed:
            self.bundle.note(name, "ignored", said("reader.ignored.unrecognised"))
            return
        self.bundle.logs_read[name] = sorted(fed)
        self.bundle.note(name, "log", said("reader.log.fed", readers=", ".join(sorted(fed))))
        if blocks.stopped:
            self.bundle.partial[name] = sentence("reader.partial.log_stopped", read=_read_of(blocks.bytes_read, None),
                                                 why=budget_reason)

    # --- archives ---------------------------------------------------------------------------------------------------

    def read_archive(self, path: Path, tar_format: str) -> None:
        """Two passes over the members, neither holding them: the first finds the bundle's folder from their names,
        the second reads its files (a .tar.gz is inflated twice, within the same budget)."""
        label = sentence("reader.label.archive", name=path.name)
        root = self._root_of_archive(path, tar_format, label)
        members = _BundleMembers(self.bundle, root)
        with _opened(path, tar_format) as archive:
            walk = MemberWalk(archive, self.limits)
            last: tarfile.TarInfo | None = None
            for member in walk:
                last = member
                name = members.accepted(member)
                if name is not None and self._room_for_another(name):
                    self._read_member(archive, member, name, walk.budget_of.get(member.name))
            members.report(path, label)
            if walk.budget_of and last is not None:
                self.bundle.partial[label] = sentence("reader.partial.archive_budget", member=shown(last.name),
                                                      size=size_text(last.size), why=walk.stopped_at)
            elif walk.stopped_at and last is not None:
                self.bundle.partial[label] = sentence("reader.partial.archive_stopped", why=walk.stopped_at,
                                                      member=shown(last.name))
            if self.bundle.not_listed:
                counted = _comma_list([said(f"reader.counted.{kind}", count=count)
                                       for kind, count in sorted(self.bundle.not_listed.items())])
                self.bundle.partial[sentence("reader.label.entries", label=label)] = sentence(
                    "reader.partial.counted", counted=counted, first=MAX_LISTED)

    def _root_of_archive(self, path: Path, tar_format: str, label: Sentence) -> tuple[str, ...]:
        """The bundle's folder in the archive (see `_BundleFolders`), from a first pass over the member names."""
        with _opened(path, tar_format) as archive:
            walk = MemberWalk(archive, self.limits)
            folders = _BundleFolders()
            for member in walk:
                if not member.isdir() and (parts := member_parts(member.name)):
                    folders.add(parts)
            if not walk.count:
                raise BundleError("reader.file.no_member", path=str(path),
                                  why=walk.damage or said("reader.empty_archive"))
            if walk.damage:
                self.bundle.unreadable(label, said("reader.unreadable.damaged", member=shown(walk.last_name or ""),
                                                   damage=walk.damage))
        return folders.root(path)

    def _read_member(self, archive: tarfile.TarFile, member: tarfile.TarInfo, name: str, budget: int | None) -> None:
        try:
            extracted = archive.extractfile(member)
        except READ_ERRORS as error:
            self.bundle.unreadable(name, said("reader.unreadable.member", error=str(error)))
            return
        if extracted is None:
            self.bundle.skip(name, said("reader.skip.archive_not_regular"))
            return
        with extracted:
            self.read_entry(name, extracted, member.size, budget,
                            said("reader.cap.archive", size=size_text(self.limits.max_archive_bytes)))


class _BundleMembers:
    """Which members of an archive are its bundle's files: the regular files of its bundle folder, each name once.
    Every other member is named with why it was not read; those outside the folder are rejected (an input error)."""

    def __init__(self, bundle: Bundle, root: tuple[str, ...]) -> None:
        self.bundle, self.root = bundle, root
        self.where: str | Said = "/".join(root) + "/" if root else said("reader.archive_top_level")
        self.rejected: list[str] = []  # the first 20 named, the rest counted
        self.rejected_count = 0
        self.seen: dict[str, int] = {}

    def accepted(self, member: tarfile.TarInfo) -> str | None:
        """The member's name in the bundle where it is to be read, else None (and why it is not, noted)."""
        parts = member_parts(member.name)
        member_name, root = shown(member.name), self.root
        if parts is None:
            return self._reject(member_name, unsafe_reason(member.name))
        if not parts or (member.isdir() and (len(parts) != len(root) + 1 or parts[:len(root)] != root)):
            return None  # the folders that lead to the bundle; other folders show through their members
        if parts[:len(root)] != root:
            return self._reject(member_name, said("reader.reject.outside", where=self.where))
        if len(parts) > len(root) + 1:
            self.bundle.skip(member_name, said("reader.skip.subfolder"))
            return None
        name = shown(parts[-1])
        if name in self.seen:
            self.seen[name] += 1
            return self._reject(sentence("reader.label.copy", name=member_name, number=self.seen[name]),
                                said("reader.reject.copy"))
        self.seen[name] = 1
        return name if self._is_regular_file(member, name) else None

    def _is_regular_file(self, member: tarfile.TarInfo, name: str) -> bool:
        if name.startswith("."):
            self.bundle.note(name, "ignored", said("reader.ignored.hidden"))
        elif member.isdir():
            if name in BUNDLE_FILES:
                self.bundle.unreadable(name, said("reader.unreadable.folder", command=_command(name)))
        elif member.issym():
            self.bundle.skip(name, said("reader.skip.archive_link", target=shown(member.linkname)))
        elif member.islnk():
            self.bundle.skip(name, said("reader.skip.archive_hard_link", target=shown(member.linkname)))
        elif not member.isreg():
            self.bundle.skip(name, said("reader.skip.archive_special"))
        else:
            return True
        return False

    def _reject(self, key: str, why: Said | Sentence) -> None:
        self.bundle.note(key, "rejected", why)
        self.rejected_count += 1
        self.rejected.extend([key] if len(self.rejected) < 20 else [])
        return None

    def report(self, path: Path, label: Sentence) -> None:
        """The rejected members as one input error about the archive."""
        if self.rejected:
            self.bundle.errors.append((label, sentence(
                "reader.error.rejected_more" if self.rejected_count > 20 else "reader.error.rejected",
                archive=path.name, where=self.where, names=", ".join(self.rejected), more=self.rejected_count - 20)))


def _opened(path: Path, tar_format: str) -> tarfile.TarFile:
    try:
        return open_tar(path, tar_format)
    except READ_ERRORS as error:
        raise BundleError("reader.file.not_tar", path=str(path), error=str(error)) from None


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

class _NotText(ValueError):
    def __init__(self, reason: Sentence) -> None:
        super().__init__(reason)
        self.reason = reason


def _judge_text(sample: bytes) -> None:
    """A kernel log's first SNIFF_CHARS (NUL bytes taken out) must be text: raises _NotText where they are not."""
    reason = why_not_text(sample.decode("utf-8", errors="replace"))
    if reason:
        raise _NotText(reason)


def _read_of(count: int, size: int | None, unknown: str | None = None) -> Said | str:
    """`16 MiB of 20 MiB`; where the size is not known beforehand (a stream), `16 MiB`, or the text of `unknown`."""
    if size:
        return said("reader.read_of", read=size_text(count), size=size_text(size))
    return said(unknown, read=size_text(count)) if unknown else size_text(count)


def _command(name: str) -> str:
    return BUNDLE_FILES[name].split(" (")[0]


def _comma_list(items: list[object]) -> object:
    """`a, b, c` in the reader's language (list.separator is `; `): names and catalogue text alike."""
    joined = items[0]
    for item in items[1:]:
        joined = said("reader.comma", first=joined, then=item)
    return joined
