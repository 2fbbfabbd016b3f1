"""Opening and reading the files strangers hand over: regular files only, links never followed where the user did not
name them, bounded reads, and names shown as the report can print them."""

from __future__ import annotations

import os
import re
import stat
from typing import BinaryIO

from gpuready.evidence.lines import CHUNK_BYTES
from gpuready.i18n import Said, said


class NotRegular(OSError):
    """The path is a device, FIFO or socket: never read (a FIFO would block, a device never end)."""


def open_regular(path: str | os.PathLike[str], *, follow: bool) -> tuple[BinaryIO, int]:
    """(the file opened unbuffered for reading, its size); `follow`: the user named this path (a link is followed),
    else a link swapped in after the listing is not. Raises NotRegular for anything but a regular file, OSError where it
    cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags)
    raw = os.fdopen(descriptor, "rb", buffering=0)
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        raw.close()
        raise NotRegular(str(path))
    return raw, info.st_size


def read_up_to(raw: BinaryIO, count: int) -> bytes:
    """Up to `count` bytes (fewer only at the end of the stream)."""
    if count <= 0:
        return b""
    parts: list[bytes] = []
    while count > 0:
        part = raw.read(min(count, 16 * CHUNK_BYTES))
        if not part:
            break
        parts.append(part)
        count -= len(part)
    return b"".join(parts)


def decode(data: bytes) -> str:
    """A tool output's text: files pasted from Windows editors may carry a byte-order mark or be UTF-16."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def cannot_read(error: BaseException) -> Said:
    """`cannot be read (Permission denied)`: the system's own words in the parentheses."""
    return said("reader.unreadable.error", error=getattr(error, "strerror", None) or str(error))


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(name: str, limit: int = 200) -> str:
    """A name from a bundle as the report shows it: control characters (a terminal escape in a member name) written
    out, and at most `limit` characters."""
    name = _UNPRINTABLE.sub(lambda match: f"\\x{ord(match.group()):02x}" if ord(match.group()) < 0x100
                            else f"\\u{ord(match.group()):04x}", name)
    return name if len(name) <= limit else name[:limit - 1] + "…"
