"""Archives as strangers send them: recognised by their first bytes, read one member at a time, within limits.

`tarfile.is_tarfile` is not a test of what a file is: it tries every decompressor, and xz takes NUL bytes for stream
padding, so a gigabyte of NULs (a sparse file, a disk image) was inflated for minutes and called an empty archive.
Here a file is an archive when its first bytes say so: a compression magic number (gzip, bzip2, xz) followed, once
inflated, by a tar header whose checksum holds, or a plain tar header. A compressed file that holds no tar
(`kern.log.1.gz`) is one compressed file, read as a stream.

tarfile keeps every member header it has met (`TarFile.members`); `members` below drops them as it goes, so an
archive of any number of members is walked in constant memory, and stops at `InputLimits`' member count and bytes.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import tarfile
import zlib
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from gpuready.evidence.limits import MIB, InputLimits, size_text
from gpuready.facts.bad_input import Sentence, sentence

_COMPRESSIONS = ((b"\x1f\x8b", "gz"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))
_OPENERS: dict[str, Callable[[Path | BinaryIO], BinaryIO]] = {
    "gz": lambda path: gzip.open(path, "rb"), "bz2": lambda path: bz2.open(path, "rb"),
    "xz": lambda path: lzma.open(path, "rb")}
READ_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError)
"""What reading a damaged archive or compressed file raises (gzip's BadGzipFile is an OSError)."""


def compression_of(head: bytes) -> str | None:
    """`gz`, `bz2` or `xz` where the first bytes are that format's magic number."""
    return next((name for magic, name in _COMPRESSIONS if head.startswith(magic)), None)


def is_tar_header(block: bytes) -> bool:
    """A 512-byte tar header whose checksum holds (an all-NUL block is the end marker, not a header)."""
    if len(block) < tarfile.BLOCKSIZE:
        return False
    try:
        tarfile.TarInfo.frombuf(block[:tarfile.BLOCKSIZE], "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True


def format_of(path: Path) -> str | None:
    """`tar`, `tar.gz`, `tar.bz2`, `tar.xz` (an archive), `gz`, `bz2`, `xz` (one compressed file), or None (neither).

    Reads at most one header block, inflated: never more than a few KiB of the file."""
    with open(path, "rb") as raw:
        head = raw.read(tarfile.BLOCKSIZE)
    compression = compression_of(head)
    if compression is None:
        return "tar" if is_tar_header(head) else None
    try:
        with _OPENERS[compression](path) as inflated:
            first = inflated.read(tarfile.BLOCKSIZE)
    except READ_ERRORS:
        return compression  # damaged from its start: the caller's read says how
    return f"tar.{compression}" if is_tar_header(first) else compression


def open_tar(path: Path, tar_format: str) -> tarfile.TarFile:
    """The archive, read as a stream of the one compression its magic number named (never guessed)."""
    mode = "r:" if tar_format == "tar" else f"r:{tar_format.split('.')[1]}"
    return tarfile.open(path, mode, tarinfo=BoundedTarInfo)


def open_tar_stream(raw: BinaryIO) -> tarfile.TarFile:
    """An archive inside an archive, read front to back as its outer member is (tarfile's stream mode)."""
    return tarfile.open(fileobj=raw, mode="r|", tarinfo=BoundedTarInfo)


def nested_format(raw: BinaryIO) -> tuple[str | None, BinaryIO]:
    """What an archive member holds, by its first bytes as `format_of` says it of a file (`tar`, `tar.gz` …, `gz` …,
    or None), and the stream that reads it from its start, inflated where it is compressed. READ_ERRORS where it is
    damaged from its start."""
    head = raw.read(tarfile.BLOCKSIZE)
    compression = compression_of(head)
    if compression is None:
        return ("tar" if is_tar_header(head) else None), Prefixed(head, raw)
    inflated = _OPENERS[compression](Prefixed(head, raw))
    first = inflated.read(tarfile.BLOCKSIZE)
    return (f"tar.{compression}" if is_tar_header(first) else compression), Prefixed(first, inflated)


class Prefixed:
    """A stream whose first bytes were read to see what it is: they are given again, then the rest."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head, self.rest = head, rest

    def read(self, count: int = -1) -> bytes:
        if not self.head:
            return self.rest.read(count)
        if count is None or count < 0:
            data, self.head = self.head + self.rest.read(), b""
            return data
        data, self.head = self.head[:count], self.head[count:]
        return data

    def close(self) -> None:
        self.rest.close()


def open_compressed(path: Path, compression: str) -> BinaryIO:
    """One compressed file, inflated as it is read (the caller bounds how much: `CappedReader` or a budget)."""
    return _OPENERS[compression](path)


class CappedReader:
    """A binary stream that ends after `max_bytes` (`capped` says whether there was more)."""

    def __init__(self, raw: BinaryIO, max_bytes: int) -> None:
        self.raw, self.left = raw, max_bytes
        self.capped = False

    def read(self, count: int = -1) -> bytes:
        want = self.left if count < 0 else min(count, self.left)
        if want <= 0:
            self.capped = self.capped or bool(self.raw.read(1))
            return b""
        data = self.raw.read(want)
        self.left -= len(data)
        return data

    def __enter__(self) -> "CappedReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.close()


class MemberWalk:
    """The members of an open archive, one at a time, within `limits`; afterwards, why the walk stopped early.

    `stopped_at`: a sentence where the member count or the inflated bytes ran out (`budget_of` then gives the member
    at which the bytes ran out what is left for it); `damage`: where the archive broke, where it did (tarfile's
    words, or a `Sentence` of ours)."""

    def __init__(self, archive: tarfile.TarFile, limits: InputLimits) -> None:
        self.archive, self.limits = archive, limits
        self.count = 0
        self.inflated = 0
        self.last_name: str | None = None
        self.stopped_at: Sentence | None = None
        self.damage: str | None = None
        self.budget_of: dict[str, int] = {}

    def __iter__(self) -> Iterator[tarfile.TarInfo]:
        while True:
            if self.count >= self.limits.max_members:
                self.stopped_at = sentence("archive.stopped.members", count=self.limits.max_members)
                return
            try:
                member = self.archive.next()  # inflates (to skip) the data of the member before
            except READ_ERRORS as error:
                self.damage = error.args[0] if error.args and isinstance(error.args[0], Sentence) else str(error)
                return
            self.archive.members.clear()  # tarfile keeps every header it met: not here
            damage = getattr(self.archive, "gpuready_damage", None)
            if member is None:
                self.damage = self.damage or (damage if self.count else None)
                return
            self.count += 1
            self.last_name = member.name
            if self.inflated + member.size > self.limits.max_archive_bytes:
                self.budget_of[member.name] = self.limits.max_archive_bytes - self.inflated
                self.stopped_at = sentence("archive.stopped.bytes", size=size_text(self.limits.max_archive_bytes))
                yield member
                return
            self.inflated += member.size
            yield member


class BoundedTarInfo(tarfile.TarInfo):
    """tarfile reads long-name and pax headers whole: a huge one is refused. A damaged header, which tarfile takes
    for the end of the archive, is remembered so that the end is not silent."""

    def _proc_member(self, archive):
        if self.type in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                         tarfile.SOLARIS_XHDTYPE) and self.size > MAX_HEADER_BYTES:
            raise tarfile.ReadError(sentence("archive.damage.header", size=size_text(self.size),
                                             most=size_text(MAX_HEADER_BYTES)))
        return super()._proc_member(archive)

    @classmethod
    def fromtarfile(cls, archive):
        try:
            return super().fromtarfile(archive)
        except (tarfile.InvalidHeaderError, tarfile.TruncatedHeaderError) as error:
            if archive.offset:
                archive.gpuready_damage = str(error)
            raise


MAX_HEADER_BYTES = MIB
"""A long-name or pax header of an archive member (these are read whole by tarfile)."""


def member_parts(name: str) -> tuple[str, ...] | None:
    """The path of a member as parts; None where it is absolute or climbs out (`..`)."""
    if name.startswith(("/", "\\")) or name[1:3] in (":\\", ":/"):
        return None
    parts = tuple(part for part in name.replace("\\", "/").split("/") if part not in ("", "."))
    return None if ".." in parts else parts


def unsafe_reason(name: str) -> Sentence:
    climbs = ".." in name.replace("\\", "/").split("/")
    return sentence("archive.unsafe.climbs" if climbs else "archive.unsafe.absolute")


def inflated_name(path: Path) -> str:
    """`kern.log.1.gz` → `kern.log.1`: the name of what a compressed file holds."""
    for suffix in (".gz", ".bz2", ".xz"):
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[:-len(suffix)]
    return path.name

