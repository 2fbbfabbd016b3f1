"""What every diagnose reader works with: input lines, the reader interface, and the shared context.

The framework (verbs/diagnose/run.py) streams every input file in bounded memory and offers each reader only
the lines its `markers` pattern matches (searched per line), in file order, file after file. A reader keeps
bounded state (counts, the first and last few lines of a kind, never the whole log) and at the end turns it
into findings, each with its evidence: the quoted lines with file and line number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuready.model import Evidence, Finding

MAX_EVIDENCE = 5
"""Quoted lines per finding: enough to see the pattern, few enough to read."""
MAX_LINE_CHARS = 400
"""A quoted line is cut here (a binary blob or a 10 MB JSON line must not flood a report)."""


@dataclass(frozen=True)
class Line:
    source: str
    """The file as the user named it (a member of a bundle: `bundle/member`)."""
    number: int
    """1-based line number in that file."""
    text: str
    """The line without its newline, trailing CR, ANSI colour codes and NUL bytes; cut at MAX_LINE_CHARS * 4."""

    def evidence(self) -> Evidence:
        text = self.text if len(self.text) <= MAX_LINE_CHARS else self.text[:MAX_LINE_CHARS] + " …"
        return Evidence(file=self.source, line=self.number, text=text)


def quote(lines: list[Line], limit: int = MAX_EVIDENCE) -> list[Evidence]:
    """Evidence for a finding: the first `limit` lines (in input order), each once."""
    seen, quoted = set(), []
    for line in lines:
        key = (line.source, line.number)
        if key not in seen:
            seen.add(key)
            quoted.append(line.evidence())
        if len(quoted) == limit:
            break
    return quoted


class Reader:
    """One kind of evidence (kernel log, NCCL log, PyTorch errors, nccl-tests output, …).

    Subclasses set `name` and `markers` (a regex source; lines where it is found are fed) and implement `feed`
    and `findings`. `feed` is called per matching line and must keep bounded state."""

    name: str = "reader"
    markers: str = r"(?!)"
    """ASCII only: the framework searches the raw bytes of each chunk with it, before anything is decoded."""
    follow_lines: int = 0
    """Lines after each fed line that are fed too, marked or not (an error whose text is on the next line)."""

    def feed(self, line: Line) -> None:
        raise NotImplementedError

    def findings(self, context: "DiagnoseContext") -> list[Finding]:
        raise NotImplementedError

    def compiled_markers(self) -> re.Pattern[str]:
        return re.compile(self.markers)


@dataclass
class DiagnoseContext:
    host: str
    """The report's host: the one the inputs name most, else `inputs`."""
    facts: Any = None
    """facts.types.Facts built from the nvidia-smi / topo / lspci / … files among the inputs (None: none given)."""
    readers: dict[str, Reader] = field(default_factory=dict)
    """Every reader of this run by name, so one can look at what another found (the NCCL reader at the kernel
    reader's Xids, say)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Verb options a reader may use (`expect_busbw_gb_per_s` from --expect)."""


def clean(raw: str) -> str:
    """A raw input line as readers see it: no newline, CRs, ANSI colour codes or NUL bytes (the common clean line
    costs three `in` tests: this runs once per line offered)."""
    line = raw.rstrip("\r\n")
    if "\x1b" in line or "\r" in line:
        from gpuready.facts.units import strip_ansi
        line = strip_ansi(line)
    return line.replace("\x00", "") if "\x00" in line else line


def feed_text(reader: Reader, source: str, text: str) -> Reader:
    """Feed a whole text to one reader as the framework would (tests and small inputs); returns the reader."""
    markers = reader.compiled_markers()
    follow_until = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = clean(raw)
        if markers.search(line) or number <= follow_until:
            reader.feed(Line(source=source, number=number, text=line[:MAX_LINE_CHARS * 4]))
            if markers.search(line):
                follow_until = number + reader.follow_lines
    return reader
