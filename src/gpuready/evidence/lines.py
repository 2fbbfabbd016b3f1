"""A stream's bytes as blocks of whole lines, in bounded memory whatever its size: the one line splitter of the evidence
reader, for the log readers' marker search and the kernel-log lines `check` keeps alike.

What a log holds that is no text of its own is taken out here, once: a byte-order mark, NUL bytes (a crash leaves runs
of them in syslog files; a sparse file is one, and its holes are skipped, never read), and the part of a line past
`max_line_bytes` (a minified JSON or a binary blob; the line keeps its start and its number).
"""

from __future__ import annotations

import errno
import io
import os
from typing import BinaryIO, Callable, Iterator

from gpuready.evidence.limits import MIB

CHUNK_BYTES = 4 * MIB
"""Read at a time: the marker search runs over a chunk at the speed of the regex engine."""
SPLIT_CHUNK_BYTES = MIB
"""Read at a time where every line is split out (`text_lines`): a chunk's lines are held as objects at once."""
BYTE_ORDER_MARKS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


class LineBlocks:
    """Iterates blocks of whole lines, each ending with a newline (a last line without one gets it), read in chunks.

    Afterwards: `bytes_read` (bytes of the stream gone through, skipped holes included), `hole_bytes` (of those, the
    holes skipped), `long_lines` (lines cut, each counted once), `stopped` (`max_bytes` ran out with more to read)."""

    def __init__(self, raw: BinaryIO, head: bytes = b"", *, max_line_bytes: int, max_bytes: int | None = None,
                 sample_bytes: int = 0, judge: Callable[[bytes], None] | None = None,
                 chunk_bytes: int | None = None) -> None:
        """`head`: what was already read of the stream (its start); `max_bytes`: the most bytes it is read for, `head`
        included (skipped holes are not read); `judge`: called once with the first `sample_bytes` of the text (NUL
        bytes and byte-order mark taken out), before any block is given, or at the end where the text is shorter (it
        raises to refuse the stream); `chunk_bytes`: read at a time (CHUNK_BYTES where not said)."""
        self.raw, self.head = raw, head
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.max_line_bytes, self.max_bytes = max_line_bytes, max_bytes
        self.sample_bytes, self.judge = sample_bytes, judge
        self.bytes_read = 0
        self.hole_bytes = 0
        self.long_lines = 0
        self.stopped = False

    def __iter__(self) -> Iterator[bytes]:
        sample = bytearray()
        pending = b""
        dropping = False  # inside a line already cut: its rest is dropped up to its newline
        for chunk in self._text_chunks():
            if self.judge is not None and len(sample) < self.sample_bytes:
                sample += chunk[:self.sample_bytes - len(sample)]
                if len(sample) >= self.sample_bytes:
                    self.judge(bytes(sample))
            if dropping:
                newline = chunk.find(b"\n")
                if newline < 0:
                    continue
                chunk, dropping = chunk[newline + 1:], False
            # Each name let go as soon as it is used: while the next chunk is read, none of this one is held.
            block, chunk = (pending + chunk if pending else chunk), b""
            end = block.rfind(b"\n")
            pending, lines = (block, b"") if end < 0 else (block[end + 1:], block[:end + 1])
            block = b""
            if lines:
                yield self._cut_long_lines(lines) if len(lines) > self.max_line_bytes else lines
                lines = b""
            if len(pending) > self.max_line_bytes:  # one endless line: its start is given now, its rest dropped
                self.long_lines += 1
                yield pending[:self.max_line_bytes] + b"\n"
                pending, dropping = b"", True
        if self.judge is not None and len(sample) < self.sample_bytes:
            self.judge(bytes(sample))
        if pending:
            yield pending + b"\n"

    def _cut_long_lines(self, block: bytes) -> bytes:
        """`block` (whole lines) with each line over `max_line_bytes` cut to it. A C-speed look per `max_line_bytes`
        of the block: the last newline within the next `max_line_bytes`, where every line before it is short."""
        limit = self.max_line_bytes
        parts: list[bytes] = []
        position = kept_from = 0
        while len(block) - position > limit:
            newline = block.rfind(b"\n", position, position + limit + 1)
            if newline >= 0:
                position = newline + 1
                continue
            end = block.find(b"\n", position + limit)  # the block ends with a newline: found
            parts.append(block[kept_from:position + limit])
            self.long_lines += 1
            kept_from, position = end, end + 1
        if not parts:
            return block
        parts.append(block[kept_from:])
        return b"".join(parts)

    def _text_chunks(self) -> Iterator[bytes]:
        """The stream's bytes in chunks, without byte-order mark and NUL bytes (a chunk of NULs only is not given,
        and where the file is sparse, the hole after it is skipped)."""
        chunk = self.head or self._read()
        first = True
        while chunk:
            self.bytes_read += len(chunk)
            if not chunk.strip(b"\0"):  # all NUL bytes (a text chunk is not copied: it has none at its ends)
                if isinstance(self.raw, io.FileIO):  # a file on disk, not an archive member
                    skipped = _skip_hole(self.raw)
                    self.bytes_read += skipped
                    self.hole_bytes += skipped
            else:
                if first:
                    first = False
                    for mark in BYTE_ORDER_MARKS:
                        chunk = chunk[len(mark):] if chunk.startswith(mark) else chunk
                text, chunk = (chunk.replace(b"\0", b"") if b"\0" in chunk else chunk), b""
                yield text
                text = b""
            chunk = self._read()

    def _read(self) -> bytes:
        want = self.chunk_bytes
        if self.max_bytes is not None:
            want = min(want, self.max_bytes - (self.bytes_read - self.hole_bytes))
            if want <= 0:
                self.stopped = self.stopped or bool(self.raw.read(1))
                return b""
        return self.raw.read(want)


def _skip_hole(raw: io.FileIO) -> int:
    """Where the file is sparse, move to its next data (a hole reads as NUL bytes, which are dropped anyway); the
    bytes skipped."""
    if not hasattr(os, "SEEK_DATA"):
        return 0
    try:
        descriptor = raw.fileno()
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


def text_lines(blocks: Iterator[bytes]) -> Iterator[str]:
    """Each line of the blocks, decoded, with its newline (blocks read SPLIT_CHUNK_BYTES at a time hold few lines)."""
    for block in blocks:
        for line in block.split(b"\n")[:-1]:
            yield line.decode("utf-8", errors="replace") + "\n"
