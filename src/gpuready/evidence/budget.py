"""What every shape of input the evidence reader reads shares (evidence/stream.py `Scanner`, evidence/reader.py
`BundleReader`): one set of limits, what all inputs together have used of them, and the reading within them."""

from __future__ import annotations

from typing import BinaryIO, Callable

from gpuready.evidence.files import read_up_to
from gpuready.evidence.limits import DEFAULT_LIMITS, InputLimits
from gpuready.evidence.lines import LineBlocks
from gpuready.evidence.sniff import SNIFF_CHARS


class EvidenceReader:
    """What every shape of input shares: one set of limits, and what all inputs together have used of them."""

    def __init__(self, limits: InputLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.read_bytes = 0
        """Bytes read from all inputs, against limits.max_input_bytes."""
        self.held_bytes = 0
        """Bytes of the tool outputs kept whole for the checks, against limits.max_held_bytes."""
        self.files_read = 0
        """Files read (or begun), against limits.max_files."""

    def input_left(self) -> int:
        """Bytes left of limits.max_input_bytes."""
        return self.limits.max_input_bytes - self.read_bytes

    def line_blocks(self, raw: BinaryIO, head: bytes, max_bytes: int | None,
                    judge: Callable[[bytes], None] | None = None, chunk_bytes: int | None = None) -> LineBlocks:
        """The stream's lines, cut at limits.max_line_bytes; `judge` sees its first SNIFF_CHARS of text."""
        return LineBlocks(raw, head, max_line_bytes=self.limits.max_line_bytes, max_bytes=max_bytes,
                          sample_bytes=SNIFF_CHARS, judge=judge, chunk_bytes=chunk_bytes)

    def charge(self, blocks: LineBlocks) -> None:
        """Count what `blocks` read against limits.max_input_bytes (a sparse file's holes are not read)."""
        self.read_bytes += blocks.bytes_read - blocks.hole_bytes


def read_capped(raw: BinaryIO, head: bytes, cap: int, size: int | None = None) -> tuple[bytes, bool]:
    """The stream's first `cap` bytes (`head`: its start, read already), and whether it holds more (`size`: its size
    where known, else one byte more is read to tell)."""
    data = head[:cap] + read_up_to(raw, cap - len(head)) if cap > len(head) else head[:cap]
    if len(data) < cap:
        return data, False
    return data, (size > len(data) if size else bool(raw.read(1)))
