"""The log readers' markers, searched in the raw bytes of each block of lines: only the lines they are on are decoded
and offered to those readers (facts/log_lines.py `Reader`: `name`, `markers`, `follow_lines`, `feed(line)`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

try:
    import re2
except ImportError:  # a copy run from source where the dependency is not installed: Python's re, 4-10x slower
    re2 = None

from gpuready.evidence.limits import DEFAULT_LIMITS
from gpuready.facts.kernel_log import MARKERS as KERNEL_MARKERS
from gpuready.facts.kernel_log import NumberedLine
from gpuready.facts.log_lines import MAX_LINE_CHARS, Line, Reader, clean


def marker_pattern(markers: str):
    """A reader's markers, compiled to search raw bytes with RE2: a DFA, 400-700 MB/s on these alternations against
    36-157 MB/s for Python's backtracking engine, which is fast only on a literal prefix (measured on a 2-core box).
    RE2 has no lookaround, so markers are written without (facts/nccl_log.py `_not_followed_by`)."""
    if re2 is None:
        return re.compile(markers.encode("ascii"), re.MULTILINE)
    options = re2.Options()
    options.log_errors = False  # RE2 would print a parse error on stderr, through the user's terminal
    return re2.compile(b"(?m)" + markers.encode("ascii"), options)


class MarkerScan:
    """Offers each reader the lines of a file its markers are on, and the lines after them it asks for
    (`follow_lines`), in file order; counts the lines."""

    def __init__(self, readers: Sequence[Reader]) -> None:
        self.readers = list(readers)
        self.patterns = [(reader, marker_pattern(reader.markers)) for reader in self.readers]

    def scan(self, source: str, blocks: Iterable[bytes], fed: Counter) -> int:
        """Every block (whole lines, each with its newline) of the file `source`; `fed` counts the lines offered to
        each reader. Returns the file's line count."""
        scanned = _FileScan(source, fed)
        number = 0
        for block in blocks:
            number = self._scan_block(scanned, block, number) if self.patterns else number + block.count(b"\n")
            block = b""  # not held while the next one is read
        return number

    def _scan_block(self, scanned: "_FileScan", block: bytes, number: int) -> int:
        """Offer the block's marked lines; returns the line count so far."""
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
            line = scanned.line(block[start:stop], number + 1)
            taken = [reader for reader in wanted[start] if scanned.fed_up_to.get(reader.name, 0) < line.number]
            for reader in taken:
                scanned.feed(reader, line)
            follow = max((reader.follow_lines for reader in taken), default=0)
            for offset in range(1, follow + 1):  # the next lines, to the readers that asked for them
                if stop + 1 >= len(block):
                    break
                start, stop = stop + 1, block.find(b"\n", stop + 1)
                line = scanned.line(block[start:stop], number + 1 + offset)
                for reader in taken:
                    if offset <= reader.follow_lines and scanned.fed_up_to.get(reader.name, 0) < line.number:
                        scanned.feed(reader, line)
        return number + block.count(b"\n", counted_to)


class _FileScan:
    """One file's scan: its name, and per reader the last line fed (a line is offered to a reader once)."""

    def __init__(self, source: str, fed: Counter) -> None:
        self.source, self.fed = source, fed
        self.fed_up_to: dict[str, int] = {}

    def line(self, raw_line: bytes, number: int) -> Line:
        text = clean(raw_line.decode("utf-8", errors="replace"))
        return Line(source=self.source, number=number, text=text[:MAX_LINE_CHARS * 4])

    def feed(self, reader: Reader, line: Line) -> None:
        reader.feed(line)
        self.fed[reader.name] += 1
        self.fed_up_to[reader.name] = line.number


class KernelLines(Reader):
    """Keeps the kernel-log lines (Xid, SXid, AER, driver loads, ...) with their file and line number, for the
    checks: diagnose judges them with the check registry, as `check` does, never with rules of its own."""

    name = "kernel"
    markers = "|".join(re.escape(marker) for marker in (*KERNEL_MARKERS, "fallen off the bus"))

    def __init__(self, max_kept_bytes: int = DEFAULT_LIMITS.max_log_kept_bytes) -> None:
        self.max_kept_bytes = max_kept_bytes
        """Past this, lines are counted, not kept (the evidence reader sets its limits' `max_log_kept_bytes`)."""
        self.lines: dict[str, list[NumberedLine]] = {}
        """File → its kernel lines, in order."""
        self.kept_bytes = 0
        self.not_kept = 0

    def feed(self, line: Line) -> None:
        if self.kept_bytes >= self.max_kept_bytes:
            self.not_kept += 1
            return
        self.lines.setdefault(line.source, []).append((line.source, line.number, line.text))
        self.kept_bytes += len(line.text) + 1
