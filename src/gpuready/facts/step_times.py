"""Per-step and per-rank timing lines of training logs, one line at a time (step_time_reader.py keeps the state).

What is read, each with where it comes from (fixtures in tests/fixtures/public/stragglers/):

- a line that a rank printed itself, under torchrun's `[rankN]:` (global rank) or `[defaultN]:` (local rank)
  prefix: Megatron-LM's `iteration 100/500000 | … | elapsed time per iteration (ms): 1234.5 | …`, nanoGPT's
  `iter 1631: loss 4.0863, time 561.94ms`, torchtitan's `step: 10  loss: …  tps: 7,282 …` (tokens per second per
  GPU: its inverse stands for the step time), tqdm's `10/100 [00:05<00:45, 2.00it/s]` or `1.52s/it`;
- a table one rank prints for every rank: FlagScale's straggler report (`Rank 3: 9.40ms` under a section name) and
  NVIDIA Resiliency Extension's (`Rank=0 Node=22ca9bdcfc9a Score=0.95`, a performance score: its inverse stands
  for the time);
- Megatron-LM's StragglerDetector line (`MnRtt/Rnk: 3453.08ms/8 | MxRtt/Rnk: 3468.20ms/0 | …`): only the fastest
  and the slowest rank;
- the ranks a collective waits for, as the tool that saw the wait names them: PyTorch's flight-recorder analyser
  (`python -m torch.distributed.flight_recorder.fr_trace` / `torchfrtrace`: `Not all ranks joining collective, sequence
  number: 4` or `… collective 5 at entry 4`, then `collective: nccl:all_reduce` and `missing ranks: {1}`) and
  Horovod's stall warning (`HorovodAllreduce_… [missing ranks: 815]`; before Horovod 0.13.11 `[ready ranks: 5, 6, 3,
  1, 4, 0]`, the others).

Parsers never judge: checks/job_logs.py does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuready.facts.torch_errors import line_rank, strip_rank_prefix

_PREFIX = re.compile(r"\[(rank|default)(\d{1,6})\]:")
_MEGATRON = re.compile(r"iteration\s+(\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*([\d.]+)")
_NANOGPT = re.compile(r"\biter (\d+): loss [\d.naif]+, time ([\d.]+)\s*ms")
_TITAN = re.compile(r"\bstep:\s*(\d+)\s+loss:.*?\btps:\s*([\d,]+)")
_TQDM = re.compile(r"\b(\d+)/\d+ \[[^\]]{0,40}?,\s*([\d.]+)\s*(s/it|it/s)\]")
_SECTION = re.compile(r"^\s{1,4}([a-z_]{1,40}):\s*$")
_SECTION_RANK = re.compile(r"^\s+Rank (\d{1,6}): ([\d.]+)\s*ms\s*$")
_NVRX_HEADER = re.compile(r"GPU (relative|individual) performance:")
_NVRX_SUBSET = re.compile(r"(?:Worst|Best) performing \d+/(\d+) ranks")
_NVRX_RANK = re.compile(r"Rank=(\d{1,6}) Node=(\S{1,120}) Score=([\d.]+|nan)")
_MINMAX = re.compile(r"MnRtt/Rnk: ([\d.]+)ms/(\d{1,6}) \| MxRtt/Rnk: ([\d.]+)ms/(\d{1,6})")
_FR_HEADER = re.compile(r"Not all ranks joining collective(?:, sequence number:)? (\d{1,12})")
_FR_OP = re.compile(r"^\s*collective: (\S{1,80})\s*$")
_FR_MISSING = re.compile(r"[Mm]issing ranks(?::| are) \{([\d, ]{1,4000})\}")
_HOROVOD = re.compile(r"(\S{1,300}) \[(missing|ready) ranks: ([\d, ]{1,4000})\]")

MARKERS = (r"elapsed time per iteration|iter \d+: loss|step:\s*\d+\s+loss:|s/it\]|it/s\]|Rank \d+: [\d.]+\s*ms|"
           r"Rank=\d+ Node=|performance:|performing \d+/\d+ ranks|MnRtt/Rnk|\]:  [a-z_]+:|'loss': |"
           r"Not all ranks joining|issing ranks|ready ranks: |^\s*collective: ")
"""What step_time_reader.StepTimeReader is fed (the last: a Hugging Face Trainer's `{'loss': …}` line, which has
no time of its own)."""


@dataclass(frozen=True, kw_only=True)
class StepTime:
    """One step's time as the rank that ran it printed it."""
    kind: str
    """`megatron`, `nanogpt`, `torchtitan` or `tqdm`: which program's line (each its own series)."""
    rank: int | None
    """The rank of the prefix; None in a single-process log."""
    local: bool
    """The prefix is torchrun's `[defaultN]:` (a local rank: the node's N-th process, usually its GPU N)."""
    step: int | None
    """The step or iteration number the line gives."""
    seconds: float
    """The step time, or for torchtitan 1/tps and for tqdm's it/s 1/rate: a figure that grows with the time."""
    unit: str
    """`s` or `s/token`."""


@dataclass(frozen=True, kw_only=True)
class TableRow:
    """One rank's figure in a table that one rank printed for all (each figure already a mean over its window)."""
    kind: str
    """`flagscale` or `nvrx`."""
    rank: int
    host: str | None
    value: float
    """Milliseconds (FlagScale), or 1/score (NVRx)."""


@dataclass(frozen=True, kw_only=True)
class MinMax:
    """Megatron-LM StragglerDetector's fastest and slowest rank of one report."""
    min_ms: float
    min_rank: int
    max_ms: float
    max_rank: int


def prefix(text: str) -> tuple[int | None, bool]:
    """(rank, whether it is a local rank) of a torchrun prefix; (None, False) without one."""
    match = _PREFIX.search(text[:120])
    if match is None:
        return None, False
    return int(match.group(2)), match.group(1) == "default"


def parse_step(text: str) -> StepTime | None:
    """A step-time line of a rank (or of a single process), else None."""
    rank, local = prefix(text)
    if rank is None:
        rank = line_rank(text)
    body = strip_rank_prefix(text)
    if (match := _MEGATRON.search(body)) is not None:
        return StepTime(kind="megatron", rank=rank, local=local, step=int(match.group(1)),
                        seconds=float(match.group(2)) / 1000, unit="s")
    if (match := _NANOGPT.search(body)) is not None:
        return StepTime(kind="nanogpt", rank=rank, local=local, step=int(match.group(1)),
                        seconds=float(match.group(2)) / 1000, unit="s")
    if (match := _TITAN.search(body)) is not None:
        tps = float(match.group(2).replace(",", ""))
        return StepTime(kind="torchtitan", rank=rank, local=local, step=int(match.group(1)),
                        seconds=1 / tps, unit="s/token") if tps > 0 else None
    if (match := _TQDM.search(body)) is not None:
        rate = float(match.group(2))
        if rate <= 0:
            return None
        return StepTime(kind="tqdm", rank=rank, local=local, step=int(match.group(1)),
                        seconds=rate if match.group(3) == "s/it" else 1 / rate, unit="s")
    return None


def section_name(text: str) -> str | None:
    """A FlagScale straggler report's section header (`  optimizer:`), else None."""
    match = _SECTION.match(strip_rank_prefix(text))
    return match.group(1) if match else None


def nvrx_header(text: str) -> str | None:
    """`relative` / `individual` for NVRx's `GPU … performance:` header, else None."""
    match = _NVRX_HEADER.search(text)
    return match.group(1) if match else None


def nvrx_subset(text: str) -> int | None:
    """The world size of NVRx's `Worst performing 5/512 ranks:` (only the worst and best few are listed)."""
    match = _NVRX_SUBSET.search(text)
    return int(match.group(1)) if match else None


def parse_row(text: str) -> TableRow | None:
    """A per-rank row of FlagScale's or NVRx's straggler report."""
    body = strip_rank_prefix(text)
    if (match := _SECTION_RANK.match(body)) is not None:
        return TableRow(kind="flagscale", rank=int(match.group(1)), host=None, value=float(match.group(2)))
    if (match := _NVRX_RANK.search(body)) is not None:
        score = float(match.group(3))
        if not score > 0:
            return None
        return TableRow(kind="nvrx", rank=int(match.group(1)), host=match.group(2), value=1 / score)
    return None


def parse_minmax(text: str) -> MinMax | None:
    match = _MINMAX.search(text)
    if match is None:
        return None
    return MinMax(min_ms=float(match.group(1)), min_rank=int(match.group(2)), max_ms=float(match.group(3)),
                  max_rank=int(match.group(4)))


@dataclass(frozen=True, kw_only=True)
class Missing:
    """The ranks a collective waited for, as the tool that saw the wait printed them."""
    kind: str
    """`fr_trace` (PyTorch's flight-recorder analyser) or `horovod` (its stall warning)."""
    op: str | None
    """The collective (`nccl:all_reduce`) or Horovod's tensor operation name."""
    seq: int | None
    """The collective's sequence number (fr_trace)."""
    missing: tuple[int, ...] = ()
    """The ranks that had not joined it."""
    ready: tuple[int, ...] = ()
    """Old Horovod: the ranks that had joined it (the missing ones are the others)."""


def fr_header(text: str) -> int | None:
    """The sequence number of fr_trace's `Not all ranks joining collective …` header, else None."""
    match = _FR_HEADER.search(text)
    return int(match.group(1)) if match else None


def fr_op(text: str) -> str | None:
    """fr_trace's `collective: nccl:all_reduce` line under that header."""
    match = _FR_OP.match(text)
    return match.group(1) if match else None


def _ranks(listed: str) -> tuple[int, ...]:
    return tuple(sorted({int(part) for part in listed.replace(" ", "").split(",") if part.isdigit()}))


def parse_missing(text: str, seq: int | None = None, op: str | None = None) -> Missing | None:
    """fr_trace's `missing ranks: {1}` (with the header's sequence number and collective), or Horovod's
    `name [missing ranks: 0]` / `name [ready ranks: …]`."""
    if (match := _FR_MISSING.search(text)) is not None:
        ranks = _ranks(match.group(1))
        return Missing(kind="fr_trace", op=op, seq=seq, missing=ranks) if ranks else None
    if (match := _HOROVOD.search(text)) is not None:
        ranks = _ranks(match.group(3))
        name = match.group(1).rsplit(":", 1)[-1]
        if not ranks:
            return None
        return Missing(kind="horovod", op=name, seq=None, **{match.group(2): ranks})
    return None


def is_loss_line(text: str) -> bool:
    """A Hugging Face Trainer's `{'loss': 1.23, …, 'epoch': 0.5}`: a training log line without a time."""
    return "{'loss': " in text and "'epoch': " in text


@dataclass(kw_only=True)
class RankSeries:
    """One rank's figures of one series: bounded (a count and a sum, the first and last lines)."""
    count: int = 0
    total: float = 0.0
    host: str | None = None
    lines: list = field(default_factory=list)
    """The first and the latest line (facts.log_lines.Line) of this rank."""

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass(kw_only=True)
class Series:
    """Comparable figures of several ranks: one program's lines in one file, or one section of a report."""
    source: str
    kind: str
    """`megatron`, `nanogpt`, `torchtitan`, `tqdm` (a rank's own lines), `flagscale`, `nvrx` (a table)."""
    phase: str | None = None
    """The part of the step the figures time, where the log says (FlagScale's section, NVRx's `relative`)."""
    unit: str = "s"
    aggregated: bool = False
    """Each figure is already a mean over a window of steps (a table): one report suffices."""
    local: bool = False
    """The ranks are torchrun's local ranks (`[defaultN]:`): the node's processes, usually its GPUs."""
    world: int | None = None
    """The number of ranks where the table lists only some (NVRx's `Worst performing 5/512 ranks`)."""
    ranks: dict[int, RankSeries] = field(default_factory=dict)


@dataclass(kw_only=True)
class StepTimeFacts:
    """Per-rank step times in training logs (facts/step_time_reader.py)."""
    series: list[Series] = field(default_factory=list)
    """Series with at least one ranked figure (bounded)."""
    unranked: int = 0
    """Step-time lines without a rank (a single-process log, or ranks printing without a prefix)."""
    unranked_lines: list = field(default_factory=list)
    """The first of those lines."""
    loss_lines: int = 0
    """Hugging Face Trainer `{'loss': …}` lines (no time of their own)."""
    loss_first: object = None
    """The first of those lines."""
    minmax: list[tuple[MinMax, object]] = field(default_factory=list)
    """Megatron-LM StragglerDetector's min/max reports and their lines (bounded)."""
    missing: list[tuple[Missing, object]] = field(default_factory=list)
    """Collectives that waited for some ranks (fr_trace, Horovod), and their lines (bounded)."""
