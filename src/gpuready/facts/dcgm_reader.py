"""The `dcgmi diag` reader: table lines in, DcgmDiagFacts out (facts/dcgm_diag.py parses the rows and folds them into
tests; checks/dcgm_diag.py judges)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.facts import dcgm_diag as parse
from gpuready.facts.log_facts import DcgmDiagFacts, DcgmRun
from gpuready.facts.log_lines import Line, Reader

MAX_RUNS = 64
MAX_ROWS = 4096
"""Rows kept per run (dcgmi prints some 10 per test and GPU: a 4096-row table is already extreme)."""


@dataclass
class _Rows:
    """One table's rows as they come, folded into a DcgmRun at the end."""
    source: str
    lines: list[parse.DiagLine] = field(default_factory=list)
    refs: list[Line] = field(default_factory=list)


class DcgmDiagReader(Reader):
    """Reader name "dcgm": the tables `dcgmi diag` prints (DCGM 2.x/3.x summary rows, DCGM 4.x per-GPU rows)."""

    name = "dcgm"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self.tables: list[_Rows] = []
        self.current: _Rows | None = None
        self.runs_dropped = 0

    def facts(self) -> DcgmDiagFacts:
        return DcgmDiagFacts(runs=[DcgmRun(source=rows.source, diag=parse.fold(rows.lines), refs=rows.refs)
                                   for rows in self.tables], runs_dropped=self.runs_dropped)

    def feed(self, line: Line) -> None:
        parsed = parse.parse_line(line.text)
        if parsed is None:
            return
        run = self.current if self.current is not None and self.current.source == line.source else None
        if parsed.kind in ("start", "failed_to_run") or (parsed.kind == "header" and run is not None and run.lines):
            run = self._new_run(line.source)
        elif run is None:
            if parsed.kind == "row" and not (parsed.name and parse.is_result(parsed.info)) \
                    and not parsed.name.startswith(("Warning", "Error")):
                return  # a stray table row, not a dcgmi table
            run = self._new_run(line.source)
        if run is None or parsed.kind in ("start", "header"):
            return
        if len(run.lines) < MAX_ROWS:
            run.lines.append(parsed)
            run.refs.append(line)

    def _new_run(self, source: str) -> _Rows | None:
        if len(self.tables) >= MAX_RUNS:
            self.runs_dropped += 1
            self.current = None
            return None
        self.current = _Rows(source=source)
        self.tables.append(self.current)
        return self.current
