"""The step-time reader: training-log lines in, StepTimeFacts (per-rank step times, series by series) out.

facts/step_times.py parses each line; checks/job_logs.py judges (`job.straggler`). State is bounded: per series and
rank a count, a sum and two lines; at most MAX_SERIES series and MAX_RANKS ranks each.
"""

from __future__ import annotations

from gpuready.facts import step_times as parse
from gpuready.facts.log_lines import Line, Reader
from gpuready.facts.step_times import RankSeries, Series, StepTimeFacts

MAX_SERIES = 64
"""Series kept (a program's lines in one file, a report's section); later ones are not read."""
MAX_RANKS = 4096
"""Ranks kept per series."""
MAX_LINES = 8
"""Lines kept of a kind (rankless step lines, Megatron min/max reports)."""
MAX_MISSING = 256
"""Stalled collectives kept (fr_trace mismatches, Horovod stalled operations)."""


class StepTimeReader(Reader):
    """Reader name "steps": per-rank step times (facts/step_times.py) for checks/job_logs.py."""

    name = "steps"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self.seen = StepTimeFacts()
        self._open: dict[tuple, Series] = {}
        """(file, kind, phase) → its series."""
        self._phase: dict[str, tuple[str, str | None]] = {}
        """File → the table being read (`flagscale` / `nvrx`, its section)."""
        self._world: dict[str, int] = {}
        """File → the world size of the NVRx table being read, where it lists only some ranks."""
        self._collective: dict[str, tuple[int, str | None]] = {}
        """File → the sequence number and collective of the fr_trace mismatch being read."""

    def facts(self) -> StepTimeFacts:
        return self.seen

    def feed(self, line: Line) -> None:
        text = line.text
        if (step := parse.parse_step(text)) is not None:
            if step.rank is None:
                self._unranked(line)
                return
            series = self._series(line.source, step.kind, None, unit=step.unit, local=step.local)
            self._add(series, step.rank, step.seconds, None, line)
            return
        if (name := parse.section_name(text)) is not None:
            self._phase[line.source] = ("flagscale", name)
        elif (header := parse.nvrx_header(text)) is not None:
            self._phase[line.source] = ("nvrx", header)
            self._world.pop(line.source, None)
        elif (world := parse.nvrx_subset(text)) is not None:
            self._world[line.source] = world
        elif (row := parse.parse_row(text)) is not None:
            kind, phase = self._phase.get(line.source, (row.kind, None))
            series = self._series(line.source, row.kind, phase if kind == row.kind else None,
                                  unit="ms" if row.kind == "flagscale" else "1/score", aggregated=True)
            if series is not None and row.kind == "nvrx":
                series.world = self._world.get(line.source)
            self._add(series, row.rank, row.value, row.host, line)
        elif (minmax := parse.parse_minmax(text)) is not None:
            if len(self.seen.minmax) < MAX_LINES:
                self.seen.minmax.append((minmax, line))
        elif (seq := parse.fr_header(text)) is not None:
            self._collective[line.source] = (seq, None)
        elif (op := parse.fr_op(text)) is not None and line.source in self._collective:
            self._collective[line.source] = (self._collective[line.source][0], op)
        elif (missing := parse.parse_missing(text, *self._collective.get(line.source, (None, None)))) is not None:
            if len(self.seen.missing) < MAX_MISSING:
                self.seen.missing.append((missing, line))
        elif parse.is_loss_line(text):
            self.seen.loss_lines += 1
            if self.seen.loss_first is None:
                self.seen.loss_first = line

    def _unranked(self, line: Line) -> None:
        self.seen.unranked += 1
        if len(self.seen.unranked_lines) < MAX_LINES:
            self.seen.unranked_lines.append(line)

    def _series(self, source: str, kind: str, phase: str | None, **shape) -> Series | None:
        key = (source, kind, phase)
        series = self._open.get(key)
        if series is None and len(self._open) < MAX_SERIES:
            series = self._open[key] = Series(source=source, kind=kind, phase=phase, **shape)
            self.seen.series.append(series)
        return series

    @staticmethod
    def _add(series: Series | None, rank: int, value: float, host: str | None, line: Line) -> None:
        if series is None:
            return
        entry = series.ranks.get(rank)
        if entry is None:
            if len(series.ranks) >= MAX_RANKS:
                return
            entry = series.ranks[rank] = RankSeries(host=host)
        entry.count += 1
        entry.total += value
        if len(entry.lines) < 2:
            entry.lines.append(line)
        else:
            entry.lines[1] = line
