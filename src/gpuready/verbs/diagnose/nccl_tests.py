"""nccl-tests output (all_reduce_perf and friends) in the inputs: bandwidth at large sizes, data checks.

Findings:
- `nccl_tests.busbw_low`: per run, the best busbw of out-of-place/in-place at sizes >= [nccl] min_judged_bytes
  (64 MiB) against what the topology among the inputs allows (verbs/validate/expect.py) or `--expect`, at
  validate's ratios ([validate] in knowledge/thresholds.toml); skip where neither is known. The footer's
  `# Avg bus bandwidth` averages every size (small ones drag it down) and is never judged by itself.
- `nccl_tests.wrong`: a row with #wrong > 0 is corrupted data (fail, the rows quoted).
- `nccl_tests.out_of_bounds`: `# Out of bounds values : N FAILED` with N > 0 (fail).

Messages and fixes: the catalogue's `nccl_tests.*` (locale/<lang>/LC_MESSAGES/diagnose_nccl_tests.po).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpuready.facts import nccl_tests as parse
from gpuready.facts.types import Facts, GpuFacts
from gpuready.i18n import Said, finding_text, said
from gpuready.knowledge import thresholds
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose.evidence import MAX_EVIDENCE, DiagnoseContext, Line, Reader, quote
from gpuready.estimate import expect

MAX_RUNS = 32
"""Runs judged per input set; rows of later runs still count for #wrong and out-of-bounds."""
MAX_RANK_LINES = 1024
"""`# Rank` lines kept per run (a 4096-rank run lists 4096)."""
MAX_HOSTS = 256
LARGEST_KEPT = 3
"""Rows at the largest sizes kept per run (quoted with the best row)."""


@dataclass
class _Run:
    source: str
    test: str | None = None
    header: parse.Header | None = None
    ranks: dict[int, parse.RankLine] = field(default_factory=dict)
    rank_lines: int = 0
    hosts: set[str] = field(default_factory=set)
    models: Counter = field(default_factory=Counter)
    columns: tuple[str, ...] | None = None
    rows: int = 0
    best: tuple[parse.Row, Line] | None = None
    largest: list[tuple[parse.Row, Line]] = field(default_factory=list)
    max_size: int = 0
    shape: tuple[str | None, int | None, float | None] | None = None
    """(redop, root, busbw/algbw) of the row with the highest algbw, to name the collective."""
    shape_algbw: float = -1.0
    checked: int = 0
    skipped: int = 0
    skipped_lines: list[Line] = field(default_factory=list)
    avg: tuple[float, Line] | None = None
    closed: bool = False
    """The footer was seen: a further row starts another run."""


class NcclTestsReader(Reader):
    name = "nccl_tests"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self.runs: list[_Run] = []
        self.runs_dropped = 0
        self.wrong: list[tuple[parse.Row, Line]] = []
        self.wrong_count = 0
        self.out_of_bounds_bad: list[tuple[int, Line]] = []
        self.out_of_bounds_bad_count = 0
        self.out_of_bounds_ok: Line | None = None
        self.rows_checked = 0
        self.rows_unchecked = 0
        self._current: _Run | None = None
        self._spill = _Run(source="")  # where lines of runs past MAX_RUNS go (counted, not judged)

    # -- feeding ----------------------------------------------------------------------------------
    def _new_run(self, line: Line) -> _Run:
        if len(self.runs) >= MAX_RUNS:
            self.runs_dropped += 1
            self._spill = _Run(source=line.source)
            self._current = self._spill
            return self._current
        run = _Run(source=line.source)
        self.runs.append(run)
        self._current = run
        return run

    def _run_for_header(self, line: Line) -> _Run:
        """A header line (`# nThread`, `# Collective test starting`) opens a run unless the current one has
        printed no rows yet (its own earlier header lines)."""
        run = self._current
        if run is None or run.source != line.source or run.rows or run.closed or run.avg:
            return self._new_run(line)
        return run

    def _run_for_row(self, line: Line) -> _Run:
        run = self._current
        if run is None or run.source != line.source or run.closed:
            return self._new_run(line)
        return run

    def feed(self, line: Line) -> None:
        text = parse.strip_prefix(line.text)
        if (test := parse.parse_test(text)) is not None:
            what, collective = test
            if what == "starting":
                run = self._run_for_header(line)
                run.test = collective
            elif self._current is not None:
                self._current.closed = True
            return
        if (header := parse.parse_header(text)) is not None:
            self._run_for_header(line).header = header
            return
        if (rank := parse.parse_rank(text)) is not None:
            run = self._run_for_header(line)
            run.rank_lines += 1
            if len(run.ranks) < MAX_RANK_LINES:
                run.ranks.setdefault(rank.rank, rank)
            if len(run.hosts) < MAX_HOSTS:
                run.hosts.add(rank.host)
            if len(run.models) < 16 or rank.name in run.models:
                run.models[rank.name] += 1
            return
        if (columns := parse.parse_columns(text)) is not None:
            run = self._run_for_header(line)
            run.columns = columns
            return
        if (oob := parse.parse_out_of_bounds(text)) is not None:
            value, ok = oob
            if value > 0 or not ok:
                self.out_of_bounds_bad_count += 1
                if len(self.out_of_bounds_bad) < MAX_EVIDENCE:
                    self.out_of_bounds_bad.append((value, line))
            elif self.out_of_bounds_ok is None:
                self.out_of_bounds_ok = line
            return
        if (avg := parse.parse_avg_busbw(text)) is not None:
            run = self._current if self._current is not None and self._current.source == line.source \
                and self._current.avg is None else self._new_run(line)
            run.avg = (avg, line)
            run.closed = True
            return
        self._feed_row(line, text)

    def _feed_row(self, line: Line, text: str) -> None:
        run = self._run_for_row(line)
        row = parse.parse_row(text, run.columns)
        if row is None:
            run.skipped += 1
            if len(run.skipped_lines) < 3:
                run.skipped_lines.append(line)
            return
        run.rows += 1
        if row.checked():
            self.rows_checked += 1
        else:
            self.rows_unchecked += 1
        if row.wrong() > 0:
            self.wrong_count += 1
            if len(self.wrong) < MAX_EVIDENCE:
                self.wrong.append((row, line))
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

    # -- findings ---------------------------------------------------------------------------------
    def findings(self, context: DiagnoseContext) -> list[Finding]:
        found: list[Finding] = []
        for run in self.runs:
            finding = self._busbw(run, context)
            if finding is not None:
                found.append(finding)
        if self.runs_dropped:
            found.append(Finding(check_id="nccl_tests.busbw_low", status=Status.SKIP,
                                 subject=Subject(host=context.host),
                                 **finding_text(said("nccl_tests.runs_dropped", count=self.runs_dropped,
                                                     max_runs=MAX_RUNS))))
        found.extend(self._wrong(context))
        found.extend(self._out_of_bounds(context))
        return found

    def _collective(self, run: _Run) -> tuple[str | None, int | None, bool]:
        """(collective, ranks, whether the rank count is inferred from busbw/algbw rather than read in the header)."""
        redop, root, ratio = run.shape or (None, None, None)
        header_ranks = run.rank_lines or None
        collective = run.test or parse.infer_collective(redop, root, ratio, header_ranks)
        if header_ranks:
            return collective, header_ranks, False
        if collective and ratio is not None and (ranks := parse.ranks_from_ratio(collective, ratio)):
            return collective, ranks, True
        return collective, None, False

    def _gpus_of_run(self, run: _Run, facts: Facts | None,
                     ranks: int | None) -> tuple[list[GpuFacts] | None, Said | None]:
        """The GPUs (from the facts among the inputs) the run used, or None and why not."""
        if facts is None or not facts.gpus:
            return None, said("nccl_tests.why_not.no_facts")
        if len(run.hosts) > 1:
            return None, said("nccl_tests.why_not.hosts", ranks=ranks or run.rank_lines, hosts=len(run.hosts))
        if run.ranks and len(run.ranks) == run.rank_lines:
            by_bus = {}
            for gpu in facts.gpus:
                bus = parse.bus_number(gpu.bus_id or "")
                if bus is not None:
                    by_bus[bus] = gpu
            matched = [by_bus.get(rank.bus_number()) for rank in run.ranks.values()]
            if all(matched) and len({id(gpu) for gpu in matched}) == len(matched):
                return matched, None
        if ranks is not None and ranks == len(facts.gpus):
            return list(facts.gpus), None
        return None, said("nccl_tests.why_not.ranks" if ranks else "nccl_tests.why_not.ranks_unknown", ranks=ranks,
                          gpus=len(facts.gpus))

    def _busbw(self, run: _Run, context: DiagnoseContext) -> Finding | None:
        if not run.rows and run.avg is None and not run.skipped:
            return None
        collective, ranks, inferred = self._collective(run)
        model = run.models.most_common(1)[0][0] if run.models else None
        host = next(iter(run.hosts)) if len(run.hosts) == 1 else context.host
        subject = Subject(host=host)
        # the optional closing sentences are nested catalogue text, or "" where they do not apply
        notes = {"run": self._describe(run, collective, ranks, inferred, model),
                 "skipped": said("nccl_tests.note.skipped", count=run.skipped) if run.skipped else "",
                 "avg_note": said("nccl_tests.note.avg", avg=run.avg[0]) if run.avg else ""}
        minimum = thresholds("nccl")["min_judged_bytes"]
        refs = [thresholds("nccl")["source"]]
        observed_base = {"collective": collective, "ranks": ranks, "gpu_model": model, "hosts": len(run.hosts) or None,
                         "avg_busbw_gb_per_s": run.avg[0] if run.avg else None, "rows": run.rows,
                         "rows_skipped": run.skipped}
        if run.best is None:
            if not run.rows:
                text = (said("nccl_tests.busbw_low.footer_only", **notes, avg_value=run.avg[0],
                             min_mib=minimum // 2**20) if run.avg
                        else said("nccl_tests.busbw_low.no_row", **notes))
            else:
                text = said("nccl_tests.busbw_low.too_small", **notes, max_mib=run.max_size / 2**20,
                            min_mib=minimum // 2**20)
            evidence = quote(([run.avg[1]] if run.avg and not run.rows else []) + run.skipped_lines)
            return Finding(check_id="nccl_tests.busbw_low", status=Status.SKIP, subject=subject,
                           **finding_text(text), observed=observed_base, refs=refs, evidence=evidence)
        row, line = run.best
        busbw, placement = row.best()
        rows_quoted = sorted([line] + [item[1] for item in run.largest if item[1] is not line],
                             key=lambda quoted: quoted.number)
        observed = {**observed_base, "busbw_gb_per_s": busbw, "size_bytes": row.size_bytes, "placement": placement}
        figure = said("nccl_tests.figure", busbw=busbw, mib=row.size_bytes / 2**20, placement=placement)
        if ranks == 1:
            return Finding(check_id="nccl_tests.busbw_low", status=Status.SKIP, subject=subject,
                           **finding_text(said("nccl_tests.busbw_low.one_rank", run=notes["run"])),
                           observed=observed, refs=refs, evidence=quote(rows_quoted))
        given = context.options.get("expect_busbw_gb_per_s")
        expected: expect.Expected | None = None
        why_not: Said | None = None
        if given:
            expected = expect.Expected(float(given), f"--expect {float(given):g} GB/s (given)")
        elif collective in (None, "send_recv") or collective not in ("all_reduce", "all_gather", "reduce_scatter",
                                                                      "all_to_all", "broadcast", "reduce"):
            why_not = (said("nccl_tests.why_not.collective", collective=collective) if collective
                       else said("nccl_tests.why_not.no_collective"))
        else:
            gpus, why_not = self._gpus_of_run(run, context.facts, ranks)
            if gpus is not None:
                name = model or next((gpu.name for gpu in gpus if gpu.name), None)
                expected = expect.nccl_busbw(context.facts, gpus, name)
                if expected is None:
                    why_not = (said("nccl_tests.why_not.no_expectation", name=name) if name
                               else said("nccl_tests.why_not.no_expectation.unnamed"))
        if expected is None:
            return Finding(check_id="nccl_tests.busbw_low", status=Status.SKIP, subject=subject,
                           **finding_text(said("nccl_tests.busbw_low.not_judged", **notes, figure=figure,
                                               why_not=why_not)),
                           observed=observed, refs=refs, evidence=quote(rows_quoted))
        limits = thresholds("validate")
        if busbw < expected.value * limits["low_fail_fraction"]:
            status = Status.FAIL
        elif busbw < expected.value * limits["low_warn_fraction"]:
            status = Status.WARN
        else:
            status = Status.PASS
        text = said("nccl_tests.busbw_low." + ("pass" if status == Status.PASS else "low"), **notes, figure=figure,
                    ratio=busbw / expected.value, expected=expected.value)
        return Finding(check_id="nccl_tests.busbw_low", status=status, subject=subject, **finding_text(text),
                       observed=observed, expected=round(expected.value, 2),
                       refs=[expected.source, limits["source"], *refs], evidence=quote(rows_quoted))

    @staticmethod
    def _describe(run: _Run, collective: str | None, ranks: int | None, inferred: bool, model: str | None) -> Said:
        """`nccl-tests all_reduce over 8× H100 on host (file)`: the run, by what its output says."""
        name: str | Said = run.test or collective or "nccl-tests"
        if collective == "all_gather" and not run.test:
            name = said("nccl_tests.name.all_gather")
        gpus: str | Said | None = model
        if ranks:
            gpus = said("nccl_tests.gpus.model", ranks=ranks, model=model) if model else \
                said("nccl_tests.gpus.ranks", ranks=ranks)
            if inferred:
                gpus = said("nccl_tests.gpus.inferred", gpus=gpus)
        where = (said("nccl_tests.where.hosts", hosts=len(run.hosts)) if len(run.hosts) > 1 else
                 said("nccl_tests.where.host", host=next(iter(run.hosts))) if run.hosts else None)
        variant = ("nccl_tests.run" + (".gpus" if gpus else "") + (".where" if where else ""))
        return said(variant, name=name, gpus=gpus, where=where, source=run.source)

    def _wrong(self, context: DiagnoseContext) -> list[Finding]:
        subject = Subject(host=context.host)
        if self.wrong_count:
            first = self.wrong[0][0]
            return [Finding(check_id="nccl_tests.wrong", status=Status.FAIL, subject=subject,
                            **finding_text(said("nccl_tests.wrong.found", count=self.wrong_count,
                                                size=first.size_bytes, dtype=first.dtype, wrong=first.wrong())),
                            observed=self.wrong_count, expected=0,
                            refs=["nccl-tests data check (-c 1): #wrong counts elements that differ from the exactly "
                                  "predictable result, summed over ranks (src/common.cu)"],
                            evidence=quote([line for _, line in self.wrong]))]
        if self.rows_checked:
            return [Finding(check_id="nccl_tests.wrong", status=Status.PASS, subject=subject,
                            **finding_text(said("nccl_tests.wrong.none", count=self.rows_checked)),
                            observed=0, expected=0)]
        if self.rows_unchecked:
            return [Finding(check_id="nccl_tests.wrong", status=Status.SKIP, subject=subject,
                            **finding_text(said("nccl_tests.wrong.unchecked", count=self.rows_unchecked)))]
        return []

    def _out_of_bounds(self, context: DiagnoseContext) -> list[Finding]:
        subject = Subject(host=context.host)
        if self.out_of_bounds_bad_count:
            worst = max(value for value, _ in self.out_of_bounds_bad)
            return [Finding(check_id="nccl_tests.out_of_bounds", status=Status.FAIL, subject=subject,
                            **finding_text(said("nccl_tests.out_of_bounds.found", count=self.out_of_bounds_bad_count,
                                                worst=worst)),
                            observed=worst, expected=0,
                            refs=["nccl-tests footer `# Out of bounds values : N FAILED` (src/common.cu)"],
                            evidence=quote([line for _, line in self.out_of_bounds_bad]))]
        if self.out_of_bounds_ok is not None:
            return [Finding(check_id="nccl_tests.out_of_bounds", status=Status.PASS, subject=subject,
                            **finding_text(said("nccl_tests.out_of_bounds.none")), observed=0, expected=0,
                            evidence=quote([self.out_of_bounds_ok]))]
        return []
