"""Report documents (files, or folders of them) → what the fleet keeps of each: host, verdict, cohort, its GPUs'
NVLink cluster and clique, and per measurement the node's worst figure. One file at a time; a large file is streamed
(report/json_stream.py), so memory holds the figures of every node and one file's wanted parts, never the telemetry."""

from __future__ import annotations

import json
import math
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from gpuready.evidence.folders import walk_folder
from gpuready.i18n import Said, said
from gpuready.model import UNKNOWN_HOST, Remediation
from gpuready.report.document import shown_verdict
from gpuready.report.measurement_kinds import kind_of
from gpuready.report.json_stream import NotJson, pick_members
from gpuready.verbs.fleet.nvlink_domain import NodeFabric, fabric_of
from gpuready.verbs.fleet.pairs import PairRun, read_pairs

WHOLE_FILE_BYTES = 4 << 20
"""A report up to this size is decoded whole (C json: ~10x its size in objects); a larger one (a long burn's
telemetry) is streamed."""
MAX_FILES = 1_000_000
"""Files taken from the folders given: a path that names a whole file system is refused, not walked forever."""
FLEET_FORMATS = ("gpuready.fleet", "gpuready.fleet-baseline")
"""The fleet's own documents (its --json, a baseline): skipped where they sit among the reports, not read as nodes."""
WANTED = frozenset({"format", "host", "verdict", "exit_code", "started_at", "facts", "run_id", "scheduler"})
VERBS_IN_FACTS = ("between_nodes", "validate", "burn", "bench", "monitor", "diagnose", "plan")
"""The verb a report is of, by the part of `facts` it writes; a report without one is `check`'s."""

MAX_NAMES_PER_REPORT = 64
"""Measurement names (with their subject kind) kept of one report, in its order: a validate of eight GPUs writes about
40, every verb's reports together fewer than 64; the rest are dropped and counted (`dropped_names`), so that one
report inventing names cannot make the fleet's spreads and its page grow without bound."""
LARGEST_FIGURE = sys.float_info.max / 4
"""The largest magnitude of a figure the statistics take: two such figures' sum and any two's difference stay finite
(a median's mean of the middle two, a MAD's deviations). A figure beyond it, or an integer too large for a float, is
`out of range`: its node is flagged, the figure kept out of the spreads."""

NOT_A_NODES_SPEED = frozenset({"memory"})
"""Kinds (knowledge/compare.toml) compare shows but the fleet does not judge: the bytes a step holds are the
workload's, not how fast the node is (power is neither better nor worse already)."""


def direction(name: str, unit: str) -> int:
    """+1 where a higher figure is better (throughput, bandwidth, MFU), -1 where lower is (latency, time), 0 where
    the fleet does not judge it: the kinds compare reads (measurement_kinds.py), one table for both verbs."""
    kind = kind_of(name, unit)
    return 0 if kind.name in NOT_A_NODES_SPEED else kind.better


DRAIN_LEVELS = frozenset(level.value for level in Remediation if level.rank >= Remediation.RESET_GPU.rank)
"""Remediation levels at which `fleet --actions` takes a node out of service: its jobs must stop first."""
MAX_DRAIN_MESSAGE = 500
"""Characters kept of the sentence of the failure that drains a node (the Reason Slurm keeps is shorter still)."""


@dataclass(frozen=True)
class Drain:
    """A report's failure at a drain level (DRAIN_LEVELS): what `fleet --actions` names in the drain Reason."""
    level: str
    check_id: str
    message: str
    """The finding's sentence as written (English unless the report was written with --lang)."""
    message_id: str | None = None
    message_values: dict | None = None


@dataclass(frozen=True)
class Outcome:
    """What `fleet --actions` keeps of every report of a node, a superseded one too: when it ran, its verdict, the
    failure that drains the node (the worst level, the first of that level)."""
    started_at: str
    path: str
    run_id: str
    verdict: str | None
    drain: Drain | None
    clears: frozenset[str] | None = None
    """The check ids a clean outcome clears: None, any (a node's own report); a between-nodes run in which the node
    is not bad clears only PAIR_CHECKS (it says nothing of its GPUs)."""


PAIR_CHECKS = frozenset({"network.node_slow", "network.link_slow"})
"""Findings of validate --between-nodes about other nodes than the report's host: the fleet judges them from the
report's pairs (pairs.py), for the nodes they name, never as a drain of the host that wrote the report."""


@dataclass(frozen=True)
class Cohort:
    """Nodes whose figures are comparable: the same GPU model, GPU count and driver."""
    gpu_model: str
    gpu_count: int
    driver_version: str

    def as_dict(self) -> dict[str, Any]:
        return {"gpu_model": self.gpu_model, "gpu_count": self.gpu_count, "driver_version": self.driver_version}


@dataclass(frozen=True)
class Figure:
    """A node's worst figure of one measurement over its GPUs (or GPU pairs)."""
    value: float
    unit: str
    sense: int
    """+1 higher is better, -1 lower is better."""
    expected: float | None
    gpu: int | str | None
    """The NVML index (or bus id) of the GPU the figure is of; None for a figure of the host."""
    peer: int | str | None
    noise_pct: float = 0.0
    """How far a figure of this kind moves between runs of one healthy machine (measurement_kinds.Kind.noise_pct)."""


@dataclass
class Document:
    """What the fleet keeps of one report."""
    path: str
    host: str
    verb: str
    started_at: str
    verdict: str | None
    cohort: Cohort | None
    figures: dict[tuple[str, str], Figure] = field(default_factory=dict)
    """(measurement name, subject kind: gpu | pair | host) → the worst figure."""
    out_of_range: set[tuple[str, str]] = field(default_factory=set)
    """(name, kind) of figures beyond LARGEST_FIGURE: the node is flagged for them, they are not judged."""
    dropped_names: int = 0
    """Measurement names beyond MAX_NAMES_PER_REPORT, not read."""
    fabric: NodeFabric | None = None
    """Its GPUs' NVLink cluster UUID and clique id (nvlink_domain.py), where they report one."""
    run_id: str = ""
    scheduler: dict[str, str] = field(default_factory=dict)
    """The scheduler's names of the node (`slurm_node`, `k8s_node`, `slurm_job`) the report carries."""
    drain: Drain | None = None
    pairs: PairRun | None = None
    """validate --between-nodes: the pair tests the report carries (pairs.py)."""

    def outcome(self) -> Outcome:
        return Outcome(started_at=self.started_at, path=self.path, run_id=self.run_id, verdict=self.verdict,
                       drain=self.drain)


class Unreadable(Exception):
    """A path that gives no report: the sentence says why (catalogue text)."""

    def __init__(self, path: str, why: Said):
        super().__init__(why.english())
        self.path, self.why = path, why


class FleetDocument(Exception):
    """A document of the fleet's own (its --json, a baseline) among the reports."""


class TooManyFiles(ValueError):
    """A folder holds more report files than MAX_FILES."""


def report_files(paths: list[Path]) -> Iterator[Path | Unreadable]:
    """Each file given, and the `*.json` files in each folder given (its subfolders too, in name order); a path that
    does not exist, or a folder that cannot be listed, as Unreadable."""
    count = 0
    for path in paths:
        if not path.is_dir():
            yield path if path.exists() else Unreadable(str(path), said("fleet.unreadable.missing"))
            continue
        errors: list[OSError] = []
        for item in walk_folder(path, files_first=True, on_error=lambda error, _relative: errors.append(error)):
            entry = item.entry  # a link to a folder is no report (is_dir follows it)
            if entry.name.endswith(".json") and not entry.name.startswith(".") and not entry.is_dir():
                count += 1
                if count > MAX_FILES:
                    raise TooManyFiles(str(path))
                yield Path(entry.path)
        for error in errors:
            yield Unreadable(str(error.filename or path), said("fleet.unreadable.os", error=error.strerror or str(error)))


def read_report(path: Path, whole_file_bytes: int = WHOLE_FILE_BYTES) -> Document:
    """The fleet's view of one report file; raises Unreadable (not JSON, not a report) or FleetDocument."""
    try:
        status = path.stat()
        if not stat.S_ISREG(status.st_mode):  # a FIFO would block the read, a device never end
            raise Unreadable(str(path), said("fleet.unreadable.not_file"))
        if status.st_size <= whole_file_bytes:
            with open(path, "rb") as handle:
                document = json.loads(handle.read())
            if not isinstance(document, dict):
                raise NotJson("not an object")
            picked = {key: value for key, value in document.items() if key in WANTED}
            for name, keep in EACH_ELEMENT.items():
                if isinstance(document.get(name), list):
                    picked[name] = [keep(item) for item in document[name]]
            del document
        else:
            with open(path, encoding="utf-8") as handle:
                picked = pick_members(handle, WANTED, EACH_ELEMENT)
    except OSError as error:
        raise Unreadable(str(path), said("fleet.unreadable.os", error=error.strerror or str(error))) from None
    except (NotJson, ValueError, RecursionError) as error:  # UnicodeDecodeError and json's errors are ValueErrors;
        # json recurses once per nesting level
        raise Unreadable(str(path), said("fleet.unreadable.not_json", error=str(error)[:200])) from None
    return _document(str(path), picked)


def _measurement(item: Any) -> tuple | None:
    """What the fleet keeps of one measurement: (name, kind, Figure), or None for one it does not judge."""
    if not isinstance(item, dict):
        return None
    name, unit, value = item.get("name"), item.get("unit"), item.get("value")
    if not isinstance(name, str) or not isinstance(unit, str) or not _number(value):
        return None
    sense = direction(name, unit)
    if not sense:
        return None
    subject = item.get("subject") if isinstance(item.get("subject"), dict) else {}
    gpu, peer = _gpu_of(subject.get("gpu")), _gpu_of(subject.get("peer"))
    kind = "pair" if gpu is not None and peer is not None else "gpu" if gpu is not None else "host"
    expected = item.get("expected")
    return name, kind, Figure(value=_in_range(value), unit=unit, sense=sense,
                              expected=float(expected) if _finite(expected) and expected > 0 else None,
                              gpu=gpu, peer=peer, noise_pct=kind_of(name, unit).noise_pct)


def _drain(item: Any) -> Drain | None:
    """What the fleet keeps of one finding: a failure at a drain level, or None."""
    if not isinstance(item, dict) or item.get("status") != "fail" or item.get("remediation") not in DRAIN_LEVELS \
            or item.get("check_id") in PAIR_CHECKS:
        return None
    check_id, message = item.get("check_id"), item.get("message")
    values = item.get("message_values")
    return Drain(level=item["remediation"], check_id=check_id if isinstance(check_id, str) else "?",
                 message=message[:MAX_DRAIN_MESSAGE] if isinstance(message, str) else "",
                 message_id=item.get("message_id") if isinstance(item.get("message_id"), str) else None,
                 message_values=values if isinstance(values, dict) else None)


EACH_ELEMENT = {"measurements": _measurement, "findings": _drain}
"""Array members read one element at a time, only what the fleet keeps of each."""


def _gpu_of(ref: Any) -> int | str | None:
    if not isinstance(ref, dict) or not ref:
        return None
    index = ref.get("index")
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    return str(ref.get("bus_id") or ref.get("uuid") or "?")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (isinstance(value, int) or
                                                                                 math.isfinite(value))


def _finite(value: Any) -> bool:
    return _number(value) and _in_range(value) == _in_range(value)


def _in_range(value: int | float) -> float:
    """The figure as a float, or NaN where it is out of range (beyond LARGEST_FIGURE, or an int no float holds)."""
    try:
        figure = float(value)
    except OverflowError:
        return math.nan
    return figure if abs(figure) <= LARGEST_FIGURE else math.nan


def _document(path: str, picked: dict[str, Any]) -> Document:
    if picked.get("format") in FLEET_FORMATS:
        raise FleetDocument(path)
    measurements = picked.get("measurements")
    if not isinstance(measurements, list) or "verdict" not in picked:
        raise Unreadable(path, said("fleet.unreadable.not_report"))
    facts = picked.get("facts") if isinstance(picked.get("facts"), dict) else {}
    host = picked.get("host")
    verdict = shown_verdict(picked)  # a CPU-only run is no verdict on the node (`no_verdict`)
    started = picked.get("started_at")
    scheduler = {key: value for key, value in (picked.get("scheduler") or {}).items()
                 if isinstance(value, str) and value} if isinstance(picked.get("scheduler"), dict) else {}
    host = scheduler.get("slurm_node") or scheduler.get("k8s_node") or host  # the node as its scheduler names it
    drains = [entry for entry in picked.get("findings") or [] if entry is not None]
    document = Document(path=path, host=host if isinstance(host, str) and host and host != UNKNOWN_HOST else "",
                        verb=next((verb for verb in VERBS_IN_FACTS if verb in facts), "check"),
                        started_at=started if isinstance(started, str) else "",
                        verdict=verdict if isinstance(verdict, str) else None, cohort=cohort_of(facts),
                        fabric=fabric_of(facts), scheduler=scheduler,
                        run_id=picked["run_id"] if isinstance(picked.get("run_id"), str) else "",
                        drain=max(drains, key=lambda drain: Remediation(drain.level).rank, default=None),
                        pairs=read_pairs(facts, path, started if isinstance(started, str) else "",
                                         picked["run_id"] if isinstance(picked.get("run_id"), str) else "",
                                         cohort_of(facts)))
    for entry in measurements:
        if entry is None:
            continue
        name, kind, figure = entry
        if (name, kind) not in document.figures and (name, kind) not in document.out_of_range and \
                len(document.figures) + len(document.out_of_range) >= MAX_NAMES_PER_REPORT:
            document.dropped_names += 1
            continue
        if figure.value != figure.value:  # NaN: out of range
            document.out_of_range.add((name, kind))
            continue
        kept = document.figures.get((name, kind))
        if kept is None or _worse(figure, kept):
            document.figures[(name, kind)] = figure
    return document


def _worse(figure: Figure, than: Figure) -> bool:
    return figure.value * figure.sense < than.value * than.sense


def cohort_of(facts: dict[str, Any]) -> Cohort | None:
    """The cohort the report's facts name: its GPUs' model (`+` between models where they differ), their count and
    the driver; None where the facts lack the GPUs or the driver (a burn or bench report, an old document)."""
    gpus = [gpu for gpu in facts.get("gpus") or [] if isinstance(gpu, dict)] if isinstance(facts.get("gpus"), list) \
        else []
    driver = facts.get("driver_version")
    if not gpus or not isinstance(driver, str) or not driver:
        return None
    models = sorted({str(gpu.get("model") or gpu.get("name") or "?") for gpu in gpus})
    return Cohort(gpu_model="+".join(models), gpu_count=len(gpus), driver_version=driver)
