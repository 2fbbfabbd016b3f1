"""Stragglers of a running job, from its training logs (`job.straggler`, facts.step_times.StepTimeFacts), and the one
rule that names them (`straggler_ranks`), which bench's judge calls too.

A straggler slows every step of a synchronous job (each collective waits for it), so the finding warns and names
the rank, and the host and local rank (GPU) where the log shows them: the node is the suspect, not the job.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, log_check
from gpuready.facts.log_facts import Series, StepTimeFacts
from gpuready.i18n import Said, finding_text, said
from gpuready.knowledge import thresholds
from gpuready.model import Finding, Status, Subject

STRAGGLER = "job.straggler"
MAX_EVIDENCE = 4
"""Lines quoted of a file's stalled collectives."""
STRAGGLER_REFS = REFS = ["https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/README_STRAGGLER.md "
        "(megatron/core/utils.py StragglerDetector)", "knowledge/thresholds.toml [straggler]"]
WHAT = {"megatron": "Megatron-LM elapsed time per iteration", "nanogpt": "iteration time",
        "torchtitan": "torchtitan 1/tps (seconds per token)", "tqdm": "tqdm step time",
        "flagscale": "FlagScale straggler report", "nvrx": "NVRx straggler report (1/score)"}


@dataclass(frozen=True, kw_only=True)
class Straggler:
    """A rank the rule names."""
    rank: int
    mean: float
    """Its mean step time."""
    above: float
    """How much slower than the mean of all ranks (0.25: 25 %)."""


@dataclass(frozen=True, kw_only=True)
class RankSpread:
    """The rule applied to the ranks' mean step times."""
    mean: float
    """The mean of the ranks' means."""
    std: float
    """Their population standard deviation."""
    slowest: Straggler
    """The slowest rank (named or not)."""
    stragglers: list[Straggler]
    """The ranks at least `sigmas` standard deviations and more than `slower_fraction` above `mean`."""


def straggler_ranks(means: Mapping[int, float]) -> RankSpread | None:
    """The rule (knowledge/thresholds.toml [straggler]) over rank → mean step time; None with fewer than two ranks."""
    if len(means) < 2:
        return None
    rule = thresholds("straggler")
    mean = statistics.fmean(means.values())
    std = statistics.pstdev(means.values())
    rows = [Straggler(rank=rank, mean=value, above=value / mean - 1 if mean > 0 else 0.0)
            for rank, value in sorted(means.items())]
    # at least (not more than) `sigmas` deviations: of two ranks the slower is always exactly one deviation above
    # the mean, so a strict test would never name one of two; 1e-9 absorbs the rounding of that equality
    named = [row for row in rows if row.mean >= mean + rule["sigmas"] * std * (1 - 1e-9)
             and row.mean > mean * (1 + rule["slower_fraction"])]
    return RankSpread(mean=mean, std=std, slowest=max(rows, key=lambda row: row.mean), stragglers=named)


@log_check(STRAGGLER)
def job_straggler(context: CheckContext) -> list[Finding]:
    """No rank of a job is markedly slower than the others (per-rank step times in its logs)."""
    steps: StepTimeFacts | None = context.facts.logs.steps
    if steps is None:
        return []
    found: list[Finding] = []
    for series in steps.series:
        found.extend(_series(context, series))
    found.extend(_minmax(context, steps))
    found.extend(_waited_for(context, steps))
    if not found and (steps.unranked or steps.loss_lines):
        lines = steps.unranked_lines or [steps.loss_first]
        text = said("job.straggler.no_ranks", source=lines[0].source, lines=steps.unranked) if steps.unranked \
            else said("job.straggler.loss_only", source=lines[0].source, lines=steps.loss_lines)
        found.append(_finding(context, Status.SKIP, text, None, evidence=lines))
    return found


def _series(context: CheckContext, series: Series) -> list[Finding]:
    what = WHAT.get(series.kind, series.kind) + (f" / {series.phase}" if series.phase else "")
    lines = [line for entry in series.ranks.values() for line in entry.lines]
    if len(series.ranks) < 2:
        rank = next(iter(series.ranks))
        return [_finding(context, Status.SKIP, said("job.straggler.one_rank", rank=rank, source=series.source,
                                                    what=what), None, evidence=lines)]
    if series.world is not None and series.world > len(series.ranks):
        low = min(series.ranks.items(), key=lambda item: item[1].mean)
        high = max(series.ranks.items(), key=lambda item: item[1].mean)
        return [_extremes(context, source=series.source, what=what, unit=series.unit, low=(low[0], low[1].mean),
                          high=(high[0], high[1].mean), world=series.world, lines=lines)]
    need = 1 if series.aggregated else thresholds("straggler")["min_steps"]
    fewest = min(entry.count for entry in series.ranks.values())
    if fewest < need:
        return [_finding(context, Status.SKIP, said("job.straggler.few_steps", ranks=len(series.ranks), steps=fewest,
                                                    min_steps=need, source=series.source, what=what),
                         None, evidence=lines)]
    spread = straggler_ranks({rank: entry.mean for rank, entry in series.ranks.items()})
    observed = {"series": what, "unit": series.unit, "ranks": {str(rank): {"mean": round(entry.mean, 6),
                "steps": entry.count, **({"host": entry.host} if entry.host else {})}
                for rank, entry in sorted(series.ranks.items())}, "mean": round(spread.mean, 6),
                "std": round(spread.std, 6), "local_ranks": series.local}
    if not spread.stragglers:
        slowest = spread.slowest
        return [_finding(context, Status.PASS, said("job.straggler.none", ranks=len(series.ranks), source=series.source,
                                                    what=what, slowest=slowest.rank,
                                                    percent=round(100 * slowest.above, 1)),
                         None, observed=observed, evidence=lines, fix=None)]
    return [_named(context, series, what, spread, row, observed) for row in spread.stragglers]


def _named(context: CheckContext, series: Series, what: str, spread: RankSpread, row: Straggler,
           observed: dict) -> Finding:
    entry = series.ranks[row.rank]
    kind = "local" if series.local else "global"
    where = said(f"job.straggler.where.{kind}", rank=row.rank, host=entry.host or "?")
    text = said("job.straggler.named", where=where, source=series.source, what=what, mean=_figure(row.mean),
                unit=series.unit, percent=round(100 * row.above, 1), ranks=len(series.ranks),
                overall=_figure(spread.mean), std=_figure(spread.std), phase=series.phase or "step")
    finding = _finding(context, Status.WARN, text, row.rank, host=entry.host, observed={**observed,
                       "straggler": row.rank, "phase": series.phase, "above_mean": round(row.above, 4)},
                       evidence=entry.lines)
    finding.expected = "within one standard deviation or 10 % of the mean of all ranks"
    return finding


def _minmax(context: CheckContext, steps: StepTimeFacts) -> list[Finding]:
    """Megatron-LM's StragglerDetector names only the fastest and the slowest rank: the widest report decides."""
    if not steps.minmax:
        return []
    worst, line = max(steps.minmax, key=lambda item: item[0].max_ms / max(item[0].min_ms, 1e-9))
    return [_extremes(context, source=line.source, what="Megatron-LM StragglerDetector", unit="ms",
                      low=(worst.min_rank, worst.min_ms), high=(worst.max_rank, worst.max_ms), world=None,
                      lines=[each for _, each in steps.minmax])]


def _extremes(context: CheckContext, *, source: str, what: str, unit: str, low: tuple[int, float],
              high: tuple[int, float], world: int | None, lines: list) -> Finding:
    """Only the fastest and the slowest ranks are known: within 10 % of each other, no rank can be 10 % above the
    mean of all (the mean lies between them); wider apart, the mean of all ranks is unknown."""
    spread = high[1] / low[1] - 1 if low[1] > 0 else float("inf")
    values = dict(source=source, what=what, unit=unit, min_rank=low[0], min_value=_figure(low[1]),
                  max_rank=high[0], max_value=_figure(high[1]), percent=round(100 * spread, 1),
                  world=world if world is not None else "?")
    observed = {"series": what, "unit": unit, "fastest": {"rank": low[0], "value": round(low[1], 6)},
                "slowest": {"rank": high[0], "value": round(high[1], 6)}, "world": world}
    if spread <= thresholds("straggler")["slower_fraction"]:
        return _finding(context, Status.PASS, said("job.straggler.extremes_none", **values), None,
                        observed=observed, evidence=lines, fix=None)
    return _finding(context, Status.SKIP, said("job.straggler.extremes_unknown", **values), None,
                    observed=observed, evidence=lines)


def _waited_for(context: CheckContext, steps: StepTimeFacts) -> list[Finding]:
    """The ranks a collective waited for, as fr_trace or Horovod named them: the others wait in the collective, so
    the job runs at the pace of these ranks (or not at all). One finding per file. Old Horovod lists the ranks that
    joined: the missing ones are the others below the highest that joined (a missing highest rank is not seen)."""
    by_source: dict[str, list] = {}
    for missing, line in steps.missing:
        by_source.setdefault(line.source, []).append((missing, line))
    found = []
    for source, items in by_source.items():
        counts: dict[int, int] = {}
        for missing, _line in items:
            ranks = missing.missing or sorted(set(range(max(missing.ready) + 1)) - set(missing.ready))
            for rank in ranks:
                counts[rank] = counts.get(rank, 0) + 1
        if not counts:
            continue
        ranks = sorted(counts, key=lambda rank: (-counts[rank], rank))
        first = items[0][0]
        text = said(f"job.straggler.waited_for.{first.kind}", ranks=", ".join(map(str, ranks)), source=source,
                    collectives=len(items), op=first.op or "?", seq=first.seq if first.seq is not None else "?")
        observed = {"tool": first.kind, "waited_for": {str(rank): counts[rank] for rank in ranks},
                    "collectives": len(items), "phase": "not joined the collective"}
        found.append(_finding(context, Status.FAIL, text, ranks[0] if len(ranks) == 1 else None, observed=observed,
                              evidence=[line for _missing, line in items[:MAX_EVIDENCE]],
                              expected="every rank joins each collective"))
    return found


def _figure(value: float) -> str:
    return f"{value:.4g}"


def _finding(context: CheckContext, status: Status, text: Said, rank: int | None, *, host: str | None = None,
             observed: object = None, evidence: list | None = None, **override: object) -> Finding:
    return Finding(check_id=STRAGGLER, status=status, subject=Subject(host=host or context.host, rank=rank),
                   **{**finding_text(text), **override}, observed=observed, refs=REFS,
                   evidence=quote([line for line in evidence or [] if line is not None]))
