"""nccl-tests output (all_reduce_perf and friends) in the inputs: bandwidth at large sizes, data checks.

Findings:
- `nccl_tests.busbw_low`: per run, the best busbw of out-of-place/in-place at sizes >= [nccl] min_judged_bytes
  (64 MiB) against what the topology among the inputs allows (verbs/validate/expect.py) or `--expect`, at
  validate's ratios ([validate] in knowledge/thresholds.toml); skip where neither is known. The footer's
  `# Avg bus bandwidth` averages every size (small ones drag it down) and is never judged by itself.
- `nccl_tests.wrong`: a row with #wrong > 0 is corrupted data (fail, the rows quoted).
- `nccl_tests.out_of_bounds`: `# Out of bounds values : N FAILED` with N > 0 (fail).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpuready.facts import nccl_tests as parse
from gpuready.facts.types import Facts, GpuFacts
from gpuready.knowledge import thresholds
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose.evidence import MAX_EVIDENCE, DiagnoseContext, Line, Reader, quote
from gpuready.verbs.validate import expect

MAX_RUNS = 32
"""Runs judged per input set; rows of later runs still count for #wrong and out-of-bounds."""
MAX_RANK_LINES = 1024
"""`# Rank` lines kept per run (a 4096-rank run lists 4096)."""
MAX_HOSTS = 256
LARGEST_KEPT = 3
"""Rows at the largest sizes kept per run (quoted with the best row)."""

FIX_LOW = ("Rerun at large sizes (`all_reduce_perf -b 8 -e 8G -f 2`) and compare with `gpuready validate` on the "
           "same GPUs; check `nvidia-smi topo -m`, `nvidia-smi nvlink -s`, ACS/IOMMU (pcie.acs_iommu) and NCCL_P2P_* / "
           "NCCL_SHM_* / NCCL_ALGO variables.")
FIX_WRONG = ("Data came back wrong: rerun with NCCL_P2P_DISABLE=1, then NCCL_SHM_DISABLE=1, to find the transport at "
             "fault; check the kernel log for Xid 48/63/64/74/79/94/95, ECC counters and ACS/IOMMU.")


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
                                 message=f"{self.runs_dropped} more nccl-tests run(s) after the first {MAX_RUNS} were "
                                         "not judged for bandwidth (their rows still count for #wrong)."))
        found.extend(self._wrong(context))
        found.extend(self._out_of_bounds(context))
        return found

    def _collective(self, run: _Run) -> tuple[str | None, int | None, str]:
        """(collective, ranks, how the rank count is known)."""
        redop, root, ratio = run.shape or (None, None, None)
        header_ranks = run.rank_lines or None
        collective = run.test or parse.infer_collective(redop, root, ratio, header_ranks)
        if header_ranks:
            return collective, header_ranks, "from the header"
        if collective and ratio is not None and (ranks := parse.ranks_from_ratio(collective, ratio)):
            return collective, ranks, "inferred from busbw/algbw"
        return collective, None, ""

    def _gpus_of_run(self, run: _Run, facts: Facts | None, ranks: int | None) -> tuple[list[GpuFacts] | None, str]:
        """The GPUs (from the facts among the inputs) the run used, or None and why not."""
        if facts is None or not facts.gpus:
            return None, "no nvidia-smi / topology file among the inputs"
        if len(run.hosts) > 1:
            return None, (f"{ranks or run.rank_lines} ranks on {len(run.hosts)} hosts: the network between them bounds "
                          "busbw, which one node's topology does not say")
        if run.ranks and len(run.ranks) == run.rank_lines:
            by_bus = {}
            for gpu in facts.gpus:
                bus = parse.bus_number(gpu.bus_id or "")
                if bus is not None:
                    by_bus[bus] = gpu
            matched = [by_bus.get(rank.bus_number()) for rank in run.ranks.values()]
            if all(matched) and len({id(gpu) for gpu in matched}) == len(matched):
                return matched, ""
        if ranks is not None and ranks == len(facts.gpus):
            return list(facts.gpus), ""
        return None, (f"the run's {ranks or 'unknown number of'} ranks do not match the {len(facts.gpus)} GPU(s) "
                      "in the inputs")

    def _busbw(self, run: _Run, context: DiagnoseContext) -> Finding | None:
        if not run.rows and run.avg is None and not run.skipped:
            return None
        collective, ranks, ranks_how = self._collective(run)
        model = run.models.most_common(1)[0][0] if run.models else None
        host = next(iter(run.hosts)) if len(run.hosts) == 1 else context.host
        subject = Subject(host=host)
        what = self._describe(run, collective, ranks, ranks_how, model)
        skipped = (f" {run.skipped} row(s) cut or mixed with other output were skipped."
                   if run.skipped else "")
        avg_note = (f" The footer's Avg bus bandwidth ({run.avg[0]:g} GB/s) averages every size and is not judged."
                    if run.avg else "")
        minimum = thresholds("nccl")["min_judged_bytes"]
        refs = [thresholds("nccl")["source"]]
        observed_base = {"collective": collective, "ranks": ranks, "gpu_model": model, "hosts": len(run.hosts) or None,
                         "avg_busbw_gb_per_s": run.avg[0] if run.avg else None, "rows": run.rows,
                         "rows_skipped": run.skipped}
        if run.best is None:
            if not run.rows:
                message = (f"{what}: only the footer `# Avg bus bandwidth : {run.avg[0]:g}` GB/s, which averages busbw "
                           "over every size, small ones included, so it is never judged by itself; give the output "
                           f"with its rows (sizes >= {minimum // 2**20} MiB)." if run.avg else
                           f"{what}: no complete row to judge.") + skipped
            else:
                message = (f"{what}: the largest size is {run.max_size / 2**20:,.2f} MiB, below the "
                           f"{minimum // 2**20} MiB where busbw is judged (small sizes measure latency); rerun with "
                           "`-e 8G`." + avg_note + skipped)
            evidence = quote(([run.avg[1]] if run.avg and not run.rows else []) + run.skipped_lines)
            return Finding(check_id="nccl_tests.busbw_low", status=Status.SKIP, subject=subject, message=message,
                           observed=observed_base, refs=refs, evidence=evidence)
        row, line = run.best
        busbw, placement = row.best()
        rows_quoted = sorted([line] + [item[1] for item in run.largest if item[1] is not line],
                             key=lambda quoted: quoted.number)
        observed = {**observed_base, "busbw_gb_per_s": busbw, "size_bytes": row.size_bytes, "placement": placement}
        figure = f"busbw {busbw:,.1f} GB/s at {row.size_bytes / 2**20:,.0f} MiB ({placement})"
        if ranks == 1:
            return Finding(check_id="nccl_tests.busbw_low", status=Status.SKIP, subject=subject,
                           message=f"{what}: one rank moves no data between GPUs (busbw 0 by definition); run one "
                                   "rank per GPU (`-g N` or mpirun -np N).", observed=observed, refs=refs,
                           evidence=quote(rows_quoted))
        given = context.options.get("expect_busbw_gb_per_s")
        expected: expect.Expected | None = None
        why_not = ""
        if given:
            expected = expect.Expected(float(given), f"--expect {float(given):g} GB/s (given)")
        elif collective in (None, "send_recv") or collective not in ("all_reduce", "all_gather", "reduce_scatter",
                                                                      "all_to_all", "broadcast", "reduce"):
            why_not = (f"{collective or 'an unrecognised collective'} is not judged against the topology"
                       if collective else "the rows do not say which collective this is")
        else:
            gpus, why_not = self._gpus_of_run(run, context.facts, ranks)
            if gpus is not None:
                name = model or next((gpu.name for gpu in gpus if gpu.name), None)
                expected = expect.nccl_busbw(context.facts, gpus, name)
                if expected is None:
                    why_not = f"the topology among the inputs gives no busbw expectation for {name or 'these GPUs'}"
        if expected is None:
            return Finding(check_id="nccl_tests.busbw_low", status=Status.SKIP, subject=subject,
                           message=f"{what}: measured {figure}; not judged: {why_not}. Give `--expect GB/s` (what "
                                   "this machine should reach) or the nvidia-smi -q and `nvidia-smi topo -m` output "
                                   "of the same machine." + avg_note + skipped,
                           observed=observed, refs=refs, evidence=quote(rows_quoted))
        limits = thresholds("validate")
        if busbw < expected.value * limits["low_fail_fraction"]:
            status = Status.FAIL
        elif busbw < expected.value * limits["low_warn_fraction"]:
            status = Status.WARN
        else:
            status = Status.PASS
        return Finding(check_id="nccl_tests.busbw_low", status=status, subject=subject,
                       message=f"{what}: {figure}, {busbw / expected.value:.0%} of the {expected.value:,.1f} GB/s "
                               "expected." + avg_note + skipped,
                       observed=observed, expected=round(expected.value, 2),
                       fix=FIX_LOW if status != Status.PASS else None,
                       refs=[expected.source, limits["source"], *refs], evidence=quote(rows_quoted))

    @staticmethod
    def _describe(run: _Run, collective: str | None, ranks: int | None, ranks_how: str, model: str | None) -> str:
        name = run.test or collective or "nccl-tests"
        if collective == "all_gather" and not run.test:
            name = "all_gather (or alltoall: same factor)"
        parts = []
        if ranks:
            gpus = f"{ranks}× {model}" if model else f"{ranks} ranks"
            parts.append(gpus + (f" ({ranks_how})" if ranks_how and ranks_how != "from the header" else ""))
        elif model:
            parts.append(model)
        if len(run.hosts) > 1:
            parts.append(f"on {len(run.hosts)} hosts")
        elif len(run.hosts) == 1:
            parts.append(f"on {next(iter(run.hosts))}")
        return f"nccl-tests {name}" + (f" over {' '.join(parts)}" if parts else "") + f" ({run.source})"

    def _wrong(self, context: DiagnoseContext) -> list[Finding]:
        subject = Subject(host=context.host)
        if self.wrong_count:
            first = self.wrong[0][0]
            return [Finding(check_id="nccl_tests.wrong", status=Status.FAIL, subject=subject,
                            message=f"nccl-tests data check: {self.wrong_count} row(s) with wrong elements (#wrong > 0), "
                                    f"first at {first.size_bytes} B {first.dtype} with {first.wrong()} wrong: the "
                                    "collective returned corrupted data.",
                            observed=self.wrong_count, expected=0, fix=FIX_WRONG,
                            refs=["nccl-tests data check (-c 1): #wrong counts elements that differ from the exactly "
                                  "predictable result, summed over ranks (src/common.cu)"],
                            evidence=quote([line for _, line in self.wrong]))]
        if self.rows_checked:
            return [Finding(check_id="nccl_tests.wrong", status=Status.PASS, subject=subject,
                            message=f"nccl-tests data check: {self.rows_checked} row(s) checked, none wrong.",
                            observed=0, expected=0)]
        if self.rows_unchecked:
            return [Finding(check_id="nccl_tests.wrong", status=Status.SKIP, subject=subject,
                            message=f"nccl-tests data check: {self.rows_unchecked} row(s) without a #wrong count "
                                    "(`-c 0` prints N/A; old versions print a float error): data not judged.")]
        return []

    def _out_of_bounds(self, context: DiagnoseContext) -> list[Finding]:
        subject = Subject(host=context.host)
        if self.out_of_bounds_bad_count:
            worst = max(value for value, _ in self.out_of_bounds_bad)
            return [Finding(check_id="nccl_tests.out_of_bounds", status=Status.FAIL, subject=subject,
                            message=f"nccl-tests reported out-of-bounds values in {self.out_of_bounds_bad_count} "
                                    f"run(s) (up to {worst}): results differed from the expected data.",
                            observed=worst, expected=0, fix=FIX_WRONG,
                            refs=["nccl-tests footer `# Out of bounds values : N FAILED` (src/common.cu)"],
                            evidence=quote([line for _, line in self.out_of_bounds_bad]))]
        if self.out_of_bounds_ok is not None:
            return [Finding(check_id="nccl_tests.out_of_bounds", status=Status.PASS, subject=subject,
                            message="nccl-tests reported no out-of-bounds values.", observed=0, expected=0,
                            evidence=quote([self.out_of_bounds_ok]))]
        return []
