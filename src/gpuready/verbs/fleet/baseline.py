"""Golden statistics: a healthy fleet's spread per cohort and measurement, saved (--save-baseline) to judge a small
fleet, or new nodes, against (--baseline) where the fleet's own median and MAD are weak."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuready.i18n import said
from gpuready.options import UsageError
from gpuready.verbs.fleet.judge import Baseline, Key, Node, json_names
from gpuready.verbs.fleet.pairs import PAIR_KEY, PairRun, healthy_ring_figures
from gpuready.verbs.fleet.read import LARGEST_FIGURE, MAX_FILES, Cohort
from gpuready.verbs.fleet.stats import BOUND, Spread, spread

FORMAT = "gpuready.fleet-baseline"
VERSION = 1
MAX_BASELINE_BYTES = 64 << 20


def baseline_document(fleet: dict[str, Any], nodes: list[Node], pair_runs: list[PairRun] = ()) -> dict[str, Any]:
    """The baseline of the nodes the fleet judged healthy (failing and outlier nodes left out: their figures are not
    golden), per cohort: each measurement's median, MAD and node count, the files they came from, and the date; and
    the ring pairs' figure of the between-nodes runs that named no bad node or link (PAIR_KEY)."""
    healthy_files = {path for row in fleet["nodes"] if row["verdict"] in ("healthy", "unknown") for path in row["files"]}
    cohorts: dict[Cohort | None, list[Node]] = {}
    for node in nodes:
        if set(node.files()) <= healthy_files:
            cohorts.setdefault(node.cohort, []).append(node)
    pair_figures = healthy_ring_figures(list(pair_runs))
    for cohort in pair_figures:
        cohorts.setdefault(cohort, [])
    entries = []
    for cohort, members in cohorts.items():
        columns: dict[Key, list[float]] = {}
        units: dict[Key, tuple[str, int]] = {}
        for node in members:
            for key, figure in node.figures().items():
                columns.setdefault(key, []).append(figure.value)
                units[key] = (figure.unit, figure.sense)
        if cohort in pair_figures:
            columns[PAIR_KEY], units[PAIR_KEY] = pair_figures[cohort], ("gb_per_s", 1)
        names = json_names(columns)
        entries.append({"key": cohort.as_dict() if cohort else None, "nodes": len(members),
                        "sources": sorted({path for node in members for path in node.files()} |
                                          {run.path for run in pair_runs if run.cohort == cohort and cohort in pair_figures}),
                        "measurements": {names[key]: {"name": key[0], "subject": key[1], "unit": units[key][0],
                                                      "higher_is_better": units[key][1] > 0,
                                                      **spread(values).as_dict()}
                                         for key, values in sorted(columns.items())}})
    return {"format": FORMAT, "version": VERSION, "created_at": fleet["created_at"],
            "tool_version": fleet["tool_version"], "cohorts": entries}


def read_baseline(path: Path) -> Baseline:
    """A baseline file as (cohort, measurement) → Spread; UsageError (one sentence) where it is not one."""
    try:
        if path.stat().st_size > MAX_BASELINE_BYTES:
            raise UsageError(said("fleet.baseline.unusable", path=str(path),
                                  why=said("fleet.baseline.too_large", mib=MAX_BASELINE_BYTES >> 20)))
        document = json.loads(path.read_bytes())
    except OSError as error:
        raise UsageError(said("fleet.baseline.unreadable", path=str(path), error=error.strerror or str(error))) \
            from None
    except (ValueError, RecursionError) as error:
        raise UsageError(said("fleet.baseline.unusable", path=str(path),
                              why=said("fleet.baseline.not_json", error=str(error)[:200]))) from None
    try:
        return _spreads(document)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):  # int(1e999) overflows
        raise UsageError(said("fleet.baseline.unusable", path=str(path), why=said("fleet.baseline.not_baseline"))) \
            from None


def _spreads(document: Any) -> Baseline:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError("not a baseline")
    spreads: Baseline = {}
    for entry in document["cohorts"]:
        key = entry["key"]
        cohort = None if key is None else Cohort(gpu_model=str(key["gpu_model"]), gpu_count=int(key["gpu_count"]),
                                                 driver_version=str(key["driver_version"]))
        for item in entry["measurements"].values():
            median, mad, count = float(item["median"]), float(item["mad"]), int(item["n"])
            if not (abs(median) <= LARGEST_FIGURE and 0 <= mad <= LARGEST_FIGURE and 0 < count <= MAX_FILES) or \
                    (mad and abs(median) / mad > BOUND):  # not a spread a fleet measured
                raise ValueError(item)
            spreads[(cohort, (str(item["name"]), str(item["subject"])))] = Spread(median=median, mad=mad, n=count)
    return spreads


def write_baseline(document: dict[str, Any], path: Path) -> None:
    try:
        path.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n")
    except OSError as error:
        raise UsageError(said("fleet.baseline.unwritable", path=str(path), error=error.strerror or str(error))) \
            from None
