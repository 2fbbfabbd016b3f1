"""nccl-tests output among diagnose's inputs (facts.log_facts.NcclTestsFacts): bandwidth at large sizes, data checks.

- `nccl_tests.busbw_low`: per run, the best busbw of out-of-place/in-place at sizes >= [nccl] min_judged_bytes
  (64 MiB) against what the topology among the inputs allows (estimate/expect.py, handed in as
  `CheckOptions.nccl_busbw`) or `--expect`, at validate's ratios ([validate] in knowledge/thresholds.toml); skip
  where neither is known. The footer's `# Avg bus bandwidth` averages every size (small ones drag it down) and is
  never judged by itself.
- `nccl_tests.wrong`: a row with #wrong > 0 is corrupted data (fail, the rows quoted).
- `nccl_tests.out_of_bounds`: `# Out of bounds values : N FAILED` with N > 0 (fail).

Messages and fixes: the catalogue's `nccl_tests.*` (locale/<lang>/LC_MESSAGES/diagnose_nccl_tests.po).
"""

from __future__ import annotations

from collections import Counter

from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, log_check
from gpuready.facts.log_facts import MAX_NCCL_TESTS_RUNS, NcclTestsFacts, NcclTestsRun
from gpuready.facts.types import Facts, GpuFacts
from gpuready.i18n import Said, finding_text, said
from gpuready.knowledge import load_table, thresholds
from gpuready.model import Finding, Status, Subject

JUDGED = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")
"""The collectives an expected bus bandwidth is known for."""


def _tests(context: CheckContext) -> NcclTestsFacts | None:
    return context.facts.logs.nccl_tests


@log_check("nccl_tests.busbw_low")
def nccl_tests_busbw_low(context: CheckContext) -> list[Finding]:
    """Each run's best bus bandwidth at large sizes against what the GPUs and their links allow."""
    tests = _tests(context)
    if tests is None:
        return []
    found = [finding for run in tests.runs if (finding := _busbw(context, run)) is not None]
    if tests.runs_dropped:
        found.append(context.skip(said("nccl_tests.runs_dropped", count=tests.runs_dropped,
                                       max_runs=MAX_NCCL_TESTS_RUNS)))
    return found


def _gpus_of_run(run: NcclTestsRun, facts: Facts, ranks: int | None) -> tuple[list[GpuFacts] | None, Said | None]:
    """The GPUs (from the facts among the inputs) the run used, or None and why not."""
    if not facts.gpus:
        return None, said("nccl_tests.why_not.no_facts")
    if len(run.hosts) > 1:
        return None, said("nccl_tests.why_not.hosts", ranks=ranks or run.rank_lines, hosts=len(run.hosts))
    if (matched := run.gpus_by_bus(facts.gpus)) is not None:
        return matched, None
    if ranks is not None and ranks == len(facts.gpus):
        return list(facts.gpus), None
    return None, said("nccl_tests.why_not.ranks" if ranks else "nccl_tests.why_not.ranks_unknown", ranks=ranks,
                      gpus=len(facts.gpus))


def _expected(context: CheckContext, run: NcclTestsRun, collective: str | None, ranks: int | None,
              model: str | None) -> tuple[tuple[float, str] | None, Said | None]:
    """((GB/s the run should reach, where that figure comes from) or None, why it is not known)."""
    given = context.options.expect_busbw_gb_per_s
    if given:
        return (float(given), f"--expect {float(given):g} GB/s (given)"), None
    if collective not in JUDGED:
        return None, (said("nccl_tests.why_not.collective", collective=collective) if collective
                      else said("nccl_tests.why_not.no_collective"))
    gpus, why_not = _gpus_of_run(run, context.facts, ranks)
    if gpus is None:
        return None, why_not
    name = model or next((gpu.name for gpu in gpus if gpu.name), None)
    estimate = context.options.nccl_busbw
    expected = estimate(context.facts, gpus, name) if estimate is not None else None
    if expected is None:
        return None, (said("nccl_tests.why_not.no_expectation", name=name) if name
                      else said("nccl_tests.why_not.no_expectation.unnamed"))
    return (expected.value, expected.source), None


def _busbw(context: CheckContext, run: NcclTestsRun) -> Finding | None:
    if not run.rows and run.avg is None and not run.skipped:
        return None
    collective, ranks, inferred = run.collective()
    model = run.models.most_common(1)[0][0] if run.models else None
    subject = Subject(host=next(iter(run.hosts)) if len(run.hosts) == 1 else context.host)
    # the optional closing sentences are nested catalogue text, or "" where they do not apply
    notes = {"run": _describe(run, collective, ranks, inferred, model),
             "skipped": said("nccl_tests.note.skipped", count=run.skipped) if run.skipped else "",
             "avg_note": said("nccl_tests.note.avg", avg=run.avg[0]) if run.avg else ""}
    minimum = thresholds("nccl")["min_judged_bytes"]
    refs = [thresholds("nccl")["source"]]
    observed = {"collective": collective, "ranks": ranks, "gpu_model": model, "hosts": len(run.hosts) or None,
                "avg_busbw_gb_per_s": run.avg[0] if run.avg else None, "rows": run.rows,
                "rows_skipped": run.skipped}

    def finding(status: Status, text: Said, evidence: list, expected: float | None = None,
                sources: list[str] | None = None) -> Finding:
        return Finding(check_id=context.check_id, status=status, subject=subject, **finding_text(text),
                       observed=observed, expected=expected, refs=sources or refs, evidence=evidence)
    if run.best is None:
        if not run.rows:
            text = (said("nccl_tests.busbw_low.footer_only", **notes, avg_value=run.avg[0],
                         min_mib=minimum // 2**20) if run.avg
                    else said("nccl_tests.busbw_low.no_row", **notes))
        else:
            text = said("nccl_tests.busbw_low.too_small", **notes, max_mib=run.max_size / 2**20,
                        min_mib=minimum // 2**20)
        return finding(Status.SKIP, text,
                       quote(([run.avg[1]] if run.avg and not run.rows else []) + run.skipped_lines))
    row, line = run.best
    busbw, placement = row.best()
    rows_quoted = quote(sorted([line] + [item[1] for item in run.largest if item[1] is not line],
                               key=lambda quoted: quoted.number))
    observed = {**observed, "busbw_gb_per_s": busbw, "size_bytes": row.size_bytes, "placement": placement}
    figure = said("nccl_tests.figure", busbw=busbw, mib=row.size_bytes / 2**20, placement=placement)
    if ranks == 1:
        return finding(Status.SKIP, said("nccl_tests.busbw_low.one_rank", run=notes["run"]), rows_quoted)
    if len(run.hosts) > 1 and not context.options.expect_busbw_gb_per_s:
        status, text, value, sources = _across_nodes(context, run, collective, ranks, model, notes)
        best = _best_judged(run, ranks)
        if best is not None and best[1] is not line:
            observed = {**observed, "busbw_gb_per_s": best[0].best()[0], "size_bytes": best[0].size_bytes,
                        "placement": best[0].best()[1]}
        return finding(status, text, rows_quoted, expected=round(value, 2) if value else None,
                       sources=[*sources, *refs] if sources else None)
    expected, why_not = _expected(context, run, collective, ranks, model)
    if expected is None:
        return finding(Status.SKIP, said("nccl_tests.busbw_low.not_judged", **notes, figure=figure, why_not=why_not),
                       rows_quoted)
    value, source = expected
    limits = thresholds("validate")
    if busbw < value * limits["low_fail_fraction"]:
        status = Status.FAIL
    elif busbw < value * limits["low_warn_fraction"]:
        status = Status.WARN
    else:
        status = Status.PASS
    text = said("nccl_tests.busbw_low." + ("pass" if status == Status.PASS else "low"), **notes, figure=figure,
                ratio=busbw / value, expected=value)
    return finding(status, text, rows_quoted, expected=round(value, 2), sources=[source, limits["source"], *refs])


def _best_judged(run: NcclTestsRun, ranks: int | None) -> tuple | None:
    """(row, line): the best row at a size the NICs bound: at least [internode] min_bytes_per_rank × ranks (knowledge/nics.toml)."""
    need = load_table("nics")["internode"]["min_bytes_per_rank"] * (ranks or 1)
    rows = [item for item in ([run.best] if run.best else []) + list(run.largest) if item[0].size_bytes >= need]
    return max(rows, key=lambda item: item[0].best()[0], default=None)


def _socket_only(facts: Facts) -> bool:
    """NCCL's logs among the inputs show channels over NET/Socket and none over an RDMA transport."""
    nccl = facts.logs.nccl if facts.logs is not None else None
    kinds = set(nccl.transport_lines) if nccl is not None else set()
    return "NET/Socket" in kinds and not any(kind.startswith("NET/") and kind != "NET/Socket" for kind in kinds)


def _across_nodes(context: CheckContext, run: NcclTestsRun, collective: str | None, ranks: int | None,
                  model: str | None, notes: dict) -> tuple[Status, Said, float | None, list[str]]:
    """A run whose ranks span several hosts, judged against the NICs of its nodes (estimate/expect.py
    `internode_busbw_floor_gb_per_s`, through `CheckOptions.nccl_busbw` with `nodes`)."""
    per_host = Counter(rank.host for rank in run.ranks.values())
    nodes, per_node = len(run.hosts), max(per_host.values(), default=0)
    best = _best_judged(run, ranks)
    shown = best or run.best
    figure = said("nccl_tests.figure", busbw=shown[0].best()[0], mib=shown[0].size_bytes / 2**20,
                  placement=shown[0].best()[1]) if shown else None
    estimate = context.options.nccl_busbw
    expected = (estimate(context.facts, [], model, nodes=nodes, gpus_per_node=per_node, collective=collective)
                if estimate is not None and per_node and collective in JUDGED and not _socket_only(context.facts)
                else None)
    if expected is None or best is None:
        why_not = (said("nccl_tests.why_not.collective", collective=collective) if collective not in JUDGED and
                   collective else said("nccl_tests.why_not.no_collective") if collective is None else
                   said("nccl_tests.why_not.socket") if _socket_only(context.facts) else
                   said("nccl_tests.why_not.no_nics", ranks=ranks or run.rank_lines, hosts=nodes))
        if expected is not None:
            minimum = load_table("nics")["internode"]["min_bytes_per_rank"]
            return Status.SKIP, said("nccl_tests.busbw_low.across.small", **notes, ranks=ranks or run.rank_lines,
                                     max_mib=run.max_size / 2**20, per_rank_mib=minimum // 2**20,
                                     need_gib=(ranks or 1) * minimum / 2**30), None, []
        return Status.SKIP, said("nccl_tests.busbw_low.across.not_judged", **notes,
                                 figure=figure, why_not=why_not), None, []
    busbw = best[0].best()[0]
    nics = expected.nics
    values = dict(**notes, figure=figure, floor=expected.value, nodes=nodes, per_node=per_node, nics=expected.nics_used,
                  listed=nics.count, model=nics.model or "RDMA", rate=max(nics.rates_gbit_per_s),
                  ceiling=expected.ceiling_gb_per_s, fraction=expected.fraction,
                  rate_note=said("nccl_tests.note.rate_known" if nics.rate_known else "nccl_tests.note.rate_top"))
    if busbw >= expected.value:
        return Status.PASS, said("nccl_tests.busbw_low.across.pass", **values), expected.value, [expected.source]
    status = Status.FAIL if nics.rate_known else Status.WARN
    return status, said("nccl_tests.busbw_low.across.low", **values), expected.value, [expected.source]


def _describe(run: NcclTestsRun, collective: str | None, ranks: int | None, inferred: bool, model: str | None) -> Said:
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


@log_check("nccl_tests.wrong")
def nccl_tests_wrong(context: CheckContext) -> list[Finding]:
    """No row with #wrong > 0: the data each collective produced is the predictable result."""
    tests = _tests(context)
    if tests is None:
        return []
    if tests.wrong_count:
        first = tests.wrong[0][0]
        return [context.fail(said("nccl_tests.wrong.found", count=tests.wrong_count, size=first.size_bytes,
                                  dtype=first.dtype, wrong=first.wrong()),
                             observed=tests.wrong_count, expected=0,
                             refs=["nccl-tests data check (-c 1): #wrong counts elements that differ from the exactly "
                                   "predictable result, summed over ranks (src/common.cu)"],
                             evidence=quote([line for _, line in tests.wrong]))]
    if tests.rows_checked:
        return [context.passed(said("nccl_tests.wrong.none", count=tests.rows_checked), observed=0, expected=0)]
    if tests.rows_unchecked:
        return [context.skip(said("nccl_tests.wrong.unchecked", count=tests.rows_unchecked))]
    return []


@log_check("nccl_tests.out_of_bounds")
def nccl_tests_out_of_bounds(context: CheckContext) -> list[Finding]:
    """`# Out of bounds values : 0 OK`: no value outside what the data check allows."""
    tests = _tests(context)
    if tests is None:
        return []
    if tests.out_of_bounds_bad_count:
        worst = max(value for value, _ in tests.out_of_bounds_bad)
        return [context.fail(said("nccl_tests.out_of_bounds.found", count=tests.out_of_bounds_bad_count, worst=worst),
                             observed=worst, expected=0,
                             refs=["nccl-tests footer `# Out of bounds values : N FAILED` (src/common.cu)"],
                             evidence=quote([line for _, line in tests.out_of_bounds_bad]))]
    if tests.out_of_bounds_ok is not None:
        return [context.passed(said("nccl_tests.out_of_bounds.none"), observed=0, expected=0,
                               evidence=quote([tests.out_of_bounds_ok]))]
    return []
