"""What every log reader works with: an input line with its file and number, and the reader interface.

The evidence reader streams every input file in bounded memory and offers each log reader only the lines its
`markers` pattern matches (searched per line), in file order, file after file. A reader keeps bounded state (counts,
the first and last few lines of a kind, never the whole log) and at the end hands over its facts, each fact with the
lines it rests on (file, line number, text). Readers never judge: checks/ turns their facts into findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuready.facts.units import strip_ansi

MAX_LINE_CHARS = 400
"""A quoted line is cut here (a binary blob or a 10 MB JSON line must not flood a report)."""


@dataclass(frozen=True, kw_only=True)
class Line:
    source: str
    """The file as the user named it (a member of a bundle: `bundle/member`)."""
    number: int
    """1-based line number in that file."""
    text: str
    """The line without its newline, trailing CR, ANSI colour codes and NUL bytes; cut at MAX_LINE_CHARS * 4."""

    def quoted(self) -> tuple[str, int, str]:
        """(file, line, text) as a finding quotes it: the text cut at MAX_LINE_CHARS."""
        text = self.text if len(self.text) <= MAX_LINE_CHARS else self.text[:MAX_LINE_CHARS] + " …"
        return self.source, self.number, text


class Reader:
    """One kind of evidence (kernel log, NCCL log, PyTorch errors, nccl-tests output, …).

    Subclasses set `name` and `markers` (a regex source; lines where it is found are fed) and implement `feed` and
    `facts`. `feed` is called per matching line and must keep bounded state."""

    name: str = "reader"
    """The reader's name, and the field of facts.log_facts.LogFacts its facts fill (`nccl`, `torch`, …)."""
    markers: str = r"(?!)"
    """ASCII only: the evidence reader searches the raw bytes of each chunk with it, before anything is decoded."""
    follow_lines: int = 0
    """Lines after each fed line that are fed too, marked or not (an error whose text is on the next line)."""

    def feed(self, line: Line) -> None:
        raise NotImplementedError

    def facts(self) -> Any:
        """What the lines fed so far show (None: a reader whose lines go elsewhere, as the kernel log's do)."""
        return None

    def compiled_markers(self) -> re.Pattern[str]:
        return re.compile(self.markers)


def clean(raw: str) -> str:
    """A raw input line as readers see it: no newline, CRs, ANSI colour codes or NUL bytes (the common clean line
    costs three `in` tests: this runs once per line offered)."""
    line = raw.rstrip("\r\n")
    if "\x1b" in line or "\r" in line:
        line = strip_ansi(line)
    return line.replace("\x00", "") if "\x00" in line else line


def feed_text(reader: Reader, source: str, text: str) -> Reader:
    """Feed a whole text to one reader as the evidence reader would (tests and small inputs); returns the reader."""
    markers = reader.compiled_markers()
    follow_until = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = clean(raw)
        if markers.search(line) or number <= follow_until:
            reader.feed(Line(source=source, number=number, text=line[:MAX_LINE_CHARS * 4]))
            if markers.search(line):
                follow_until = number + reader.follow_lines
    return reader
