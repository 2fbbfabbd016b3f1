"""The nccl-tests reader: all_reduce_perf and friends' output in, NcclTestsFacts out (facts/nccl_tests.py parses each
line; checks/nccl_tests.py judges).

A run is the lines from a header (`# nThread`, `# Collective test starting`) to its footer (`# Avg bus bandwidth`);
per run the reader keeps the best row and the largest rows at sizes worth judging, never every row.
"""

from __future__ import annotations

from gpuready.facts import nccl_tests as parse
from gpuready.facts.log_facts import MAX_EVIDENCE, MAX_NCCL_TESTS_RUNS, NcclTestsFacts, NcclTestsRun
from gpuready.facts.log_lines import Line, Reader
from gpuready.knowledge import thresholds

MAX_RANK_LINES = 1024
"""`# Rank` lines kept per run (a 4096-rank run lists 4096)."""
MAX_HOSTS = 256
LARGEST_KEPT = 3
"""Rows at the largest sizes kept per run (quoted with the best row)."""


class NcclTestsReader(Reader):
    name = "nccl_tests"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self.seen = NcclTestsFacts()
        self._current: NcclTestsRun | None = None
        self._spill = NcclTestsRun(source="")  # where lines of runs past MAX_NCCL_TESTS_RUNS go (counted, not kept)

    def facts(self) -> NcclTestsFacts:
        return self.seen

    def _new_run(self, line: Line) -> NcclTestsRun:
        if len(self.seen.runs) >= MAX_NCCL_TESTS_RUNS:
            self.seen.runs_dropped += 1
            self._spill = NcclTestsRun(source=line.source)
            self._current = self._spill
            return self._current
        run = NcclTestsRun(source=line.source)
        self.seen.runs.append(run)
        self._current = run
        return run

    def _run_for_header(self, line: Line) -> NcclTestsRun:
        """A header line (`# nThread`, `# Collective test starting`) opens a run unless the current one has
        printed no rows yet (its own earlier header lines)."""
        run = self._current
        if run is None or run.source != line.source or run.rows or run.closed or run.avg:
            return self._new_run(line)
        return run

    def _run_for_row(self, line: Line) -> NcclTestsRun:
        run = self._current
        if run is None or run.source != line.source or run.closed:
            return self._new_run(line)
        return run

    def feed(self, line: Line) -> None:
        text = parse.strip_prefix(line.text)
        if (test := parse.parse_test(text)) is not None:
            what, collective = test
            if what == "starting":
                self._run_for_header(line).test = collective
            elif self._current is not None:
                self._current.closed = True
            return
        if (header := parse.parse_header(text)) is not None:
            self._run_for_header(line).header = header
            return
        if (rank := parse.parse_rank(text)) is not None:
            self._rank(line, rank)
            return
        if (columns := parse.parse_columns(text)) is not None:
            self._run_for_header(line).columns = columns
            return
        if (oob := parse.parse_out_of_bounds(text)) is not None:
            self._out_of_bounds(line, *oob)
            return
        if (avg := parse.parse_avg_busbw(text)) is not None:
            current = self._current
            run = current if current is not None and current.source == line.source and current.avg is None \
                else self._new_run(line)
            run.avg = (avg, line)
            run.closed = True
            return
        self._feed_row(line, text)

    def _rank(self, line: Line, rank: parse.RankLine) -> None:
        run = self._run_for_header(line)
        run.rank_lines += 1
        if len(run.ranks) < MAX_RANK_LINES:
            run.ranks.setdefault(rank.rank, rank)
        if len(run.hosts) < MAX_HOSTS:
            run.hosts.add(rank.host)
        if len(run.models) < 16 or rank.name in run.models:
            run.models[rank.name] += 1

    def _out_of_bounds(self, line: Line, value: int, ok: bool) -> None:
        seen = self.seen
        if value > 0 or not ok:
            seen.out_of_bounds_bad_count += 1
            if len(seen.out_of_bounds_bad) < MAX_EVIDENCE:
                seen.out_of_bounds_bad.append((value, line))
        elif seen.out_of_bounds_ok is None:
            seen.out_of_bounds_ok = line

    def _feed_row(self, line: Line, text: str) -> None:
        run = self._run_for_row(line)
        row = parse.parse_row(text, run.columns)
        if row is None:
            run.skipped += 1
            if len(run.skipped_lines) < 3:
                run.skipped_lines.append(line)
            return
        seen = self.seen
        run.rows += 1
        if row.checked():
            seen.rows_checked += 1
        else:
            seen.rows_unchecked += 1
        if row.wrong() > 0:
            seen.wrong_count += 1
            if len(seen.wrong) < MAX_EVIDENCE:
                seen.wrong.append((row, line))
        algbw = max(row.out_of_place.algbw_gb_per_s, row.in_place.algbw_gb_per_s)
        if algbw > run.shape_algbw:
            run.shape_algbw, run.shape = algbw, (row.redop, row.root, row.ratio())
        run.max_size = max(run.max_size, row.size_bytes)
        if row.size_bytes < thresholds("nccl")["min_judged_bytes"]:
            return
        if run.best is None or row.best()[0] > run.best[0].best()[0]:
            run.best = (row, line)
        run.largest.append((row, line))
        run.largest.sort(key=lambda item: item[0].size_bytes, reverse=True)
        del run.largest[LARGEST_KEPT:]
