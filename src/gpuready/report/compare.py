"""Two report documents → what got worse or better, which findings newly fail or recovered, and which versions
changed: the compare document (`gpuready compare BASE NEW`).

A measurement is matched by its name and its subject: a GPU by its bus id (GPUs renumber between boots, their bus ids
do not; the UUID, then the index, where an older document lacks it), a pair by both GPUs, a host-level figure by its
host; a bench figure also by its run's strategy and world size. Where each document covers one machine the host name
is left out of the match, so that two machines (or one renamed) are compared figure by figure. A change counts when it
passes the tolerance of the figure's kind (report/measurement_kinds.py), in the direction that kind is better.

A finding is matched by its check id and subject; where a document holds several of one check on one subject
(compute.low for each dtype on one GPU) by the words of its message values (the dtype), else by their order; a check
left with one finding on each side, on other subjects, is one check judged at another level (a shared GPU: none on
the host before, this GPU now).

Documents come from other versions or are edited by hand: a missing key or a value of the wrong type leaves that figure
or finding out (an unmatched one is listed), never a traceback.
"""

from __future__ import annotations

import json
import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Iterable

from gpuready.facts.units import normalize_bus_id
from gpuready.model import UNKNOWN_HOST, ExitCode, Status, worst_exit_code
from gpuready.report.document import mapping, number, sequence, shown_verdict
from gpuready.report.measurement_kinds import HIGHER, LOWER, Kind, default_tolerances_pct, kind_of
from gpuready.report.translate import finding_in
from gpuready.report.verb_of import verb_of

FORMAT = "gpuready.compare"
VERSION = 1
RUN_FIELDS = ("strategy", "world_size", "workers", "pin_memory")
"""The method fields that say which run a figure is of: bench's strategy and world size, the DataLoader's workers and
pinning (one figure name per run)."""
SETUP_FIELDS = ("precision", "dtype", "seq", "micro_batch", "accumulation", "parameters", "shape", "n", "bytes",
                "iterations", "warmup")
"""The method fields that say how a figure was measured (model, batch, precision, sizes): where two matched figures
differ in one, the document says so, since the figure may have changed for that reason alone."""
STATUS_LEVEL = {Status.PASS.value: 0, Status.SKIP.value: 0, Status.WARN.value: 1, Status.FAIL.value: 2,
                Status.ERROR.value: 2}
"""How bad a status is; a status this version does not know counts as an error (as the console shows it)."""
IDENTITY_FIELDS = ("verb", "host", "gpus", "driver")
"""What says which run of which machine a report is; each that both reports name and that differs is listed."""
NOT_COMPARABLE_IF_DIFFERENT = frozenset({"verb", "host", "gpus"})
"""Two verbs, two hosts or two sets of GPUs: not one machine's runs before and after. A driver alone may differ (the
comparison before and after a driver update is what compare is for): it is named, and the reports stay comparable."""
BETTER_WORDS = {HIGHER: "higher", LOWER: "lower"}
FACT_VERSIONS = (("driver", ("driver_version",)), ("cuda_driver", ("cuda_driver_version",)),
                 ("torch", ("torch", "version")), ("cuda", ("torch", "cuda")), ("nccl", ("torch", "nccl")))
"""Versions the facts name (check, validate); a measurement's own `versions` (the same names) win where both exist."""


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str
    value: float
    subject: dict
    run: dict
    """RUN_FIELDS the method names (bench: strategy and world size)."""
    setup: dict
    """SETUP_FIELDS the method names."""


def compare_documents(base: dict, new: dict, tolerances_pct: dict[str, float] | None = None, *,
                      base_file: str = "", new_file: str = "", fail_on_warn: bool = False) -> dict[str, Any]:
    """The compare document of `base` and `new` (report documents as dicts); `tolerances_pct` (kind → percent)
    overrides the table's default for the kinds it names. Exit code 1 where a figure got worse or a finding newly
    fails (newly warns too, with `fail_on_warn`), else 0; 2 at least where the two are not reports of one verb on
    one machine (`comparable` false, `differences` says what differs): only what both hold is then compared, and a
    finding of one report alone is never counted as newly failing or warning."""
    tolerances_pct = {**default_tolerances_pct(), **(tolerances_pct or {})}
    hosts_matter = len(_hosts(base)) > 1 or len(_hosts(new)) > 1
    identities = {"base": identity(base), "new": identity(new)}
    differences = [{"name": name, "base": identities["base"][name], "new": identities["new"][name]}
                   for name in IDENTITY_FIELDS if identities["base"][name] is not None
                   and identities["new"][name] is not None and identities["base"][name] != identities["new"][name]]
    comparable = not any(difference["name"] in NOT_COMPARABLE_IF_DIFFERENT for difference in differences)
    figures = _compare_figures(base, new, tolerances_pct, hosts_matter)
    findings = _compare_findings(base, new, hosts_matter, alone_counts=comparable)
    codes = [ExitCode.READY]
    if figures["worse"] or findings["newly_failing"] or (fail_on_warn and findings["newly_warning"]):
        codes.append(ExitCode.NOT_READY)
    if not comparable:
        codes.append(ExitCode.USAGE)
    return _strict({"format": FORMAT, "version": VERSION,
                    "base": _summary(base, base_file), "new": _summary(new, new_file),
                    "same_host": _hosts(base) == _hosts(new), "identity": identities, "differences": differences,
                    "comparable": comparable, "tolerances_pct": dict(tolerances_pct),
                    **figures, **findings, "versions": _version_changes(base, new),
                    "exit_code": int(worst_exit_code(*codes))})


def identity(document: dict) -> dict[str, Any]:
    """What run and machine a report is of: its verb, its hosts, its GPUs (`bus id model`, sorted) and its driver;
    None for what the document does not say (a bench report lists no GPUs)."""
    facts = mapping(document.get("facts"))
    machines = [mapping(machine) for machine in sequence(facts.get("machines"))] or [facts]
    gpus = sorted(f"{normalize_bus_id(gpu['bus_id']) or gpu['bus_id']} {_gpu_model(gpu)}".strip()
                  for machine in machines for gpu in map(mapping, sequence(machine.get("gpus")))
                  if isinstance(gpu.get("bus_id"), str) and gpu["bus_id"])
    driver = facts.get("driver_version")
    hosts = ", ".join(sorted(_hosts(document) - {UNKNOWN_HOST}))
    return {"verb": verb_of(document), "host": hosts or None, "gpus": gpus or None,
            "driver": str(driver) if isinstance(driver, (str, int, float)) and str(driver) else None}


def _gpu_model(gpu: dict) -> str:
    model = gpu.get("model") or gpu.get("name")
    return model if isinstance(model, str) else ""


def _strict(value: Any) -> Any:
    """`value` as strict JSON holds it: a NaN or infinity (json.loads reads them in a hand-edited file, and copies them
    into subjects and methods) as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_strict(item) for item in value]
    return value


# --- measurements -------------------------------------------------------------------------------------------------

def _compare_figures(base: dict, new: dict, tolerances_pct: dict[str, float], hosts_matter: bool) -> dict[str, Any]:
    base_figures, new_figures = _figures(base, hosts_matter), _figures(new, hosts_matter)
    result: dict[str, list] = {"worse": [], "better": [], "changed": [], "unchanged": []}
    setup: dict[str, dict[str, Any]] = {}
    for key, now in new_figures.items():
        before = base_figures.get(key)
        if before is None:
            continue
        for field in SETUP_FIELDS:
            if field in before.setup and field in now.setup and before.setup[field] != now.setup[field]:
                setup.setdefault(field, {"name": field, "base": before.setup[field], "new": now.setup[field]})
        kind = kind_of(now.name, now.unit)
        tolerance = tolerances_pct[kind.name]
        entry = _entry(before, now, kind, tolerance)
        result[_judgement(entry["change_pct"], before.value, now.value, kind, tolerance)].append(entry)
    result["worse"].sort(key=lambda entry: _gain(entry))
    result["better"].sort(key=lambda entry: -_gain(entry))
    result["changed"].sort(key=lambda entry: -abs(entry["change_pct"] if entry["change_pct"] is not None else math.inf))
    return {**result, "setup_changes": list(setup.values()), "unmatched": {
        "base_only": [_alone(figure) for key, figure in base_figures.items() if key not in new_figures],
        "new_only": [_alone(figure) for key, figure in new_figures.items() if key not in base_figures]}}


def _figures(document: dict, hosts_matter: bool) -> dict[tuple, Figure]:
    """The document's measurements with a finite value, by what they are of (a repeat of one key numbered)."""
    keyed: dict[tuple, Figure] = {}
    seen: Counter[tuple] = Counter()
    for item in map(mapping, sequence(document.get("measurements"))):
        name, unit, value = item.get("name"), item.get("unit"), number(item.get("value"))
        if not isinstance(name, str) or not name or value is None or not math.isfinite(value):
            continue
        method = mapping(item.get("method"))
        run = {field: method[field] for field in RUN_FIELDS if isinstance(method.get(field), (str, int, float, bool))}
        setup = {field: method[field] for field in SETUP_FIELDS if method.get(field) is not None}
        subject = mapping(item.get("subject")) or {"host": document.get("host")}
        key = (name, _subject_key(subject, hosts_matter), tuple(sorted(run.items())))
        seen[key] += 1
        keyed[(*key, seen[key])] = Figure(name=name, unit=unit if isinstance(unit, str) else "", value=float(value),
                                          subject=subject, run=run, setup=setup)
    return keyed


def _entry(before: Figure, now: Figure, kind: Kind, tolerance: float) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": now.name, "kind": kind.name, "unit": now.unit, "subject": now.subject}
    if _gpu_indices(before.subject) != _gpu_indices(now.subject):
        entry["base_subject"] = before.subject  # the same GPU under another index: the reader sees both
    if now.run:
        entry["run"] = now.run
    change = None if before.value == 0 else round((now.value - before.value) / abs(before.value) * 100, 2)
    return {**entry, "base": before.value, "new": now.value, "change_pct": change, "tolerance_pct": tolerance,
            "better": BETTER_WORDS.get(kind.better, "neither")}


def _judgement(change_pct: float | None, before: float, now: float, kind: Kind, tolerance: float) -> str:
    if change_pct is None:  # from zero: any figure is an infinite change
        change_pct = 0.0 if now == before else math.copysign(math.inf, now)
    if abs(change_pct) <= tolerance:
        return "unchanged"
    if kind.better not in (HIGHER, LOWER):
        return "changed"
    return "better" if change_pct * kind.better > 0 else "worse"


def _gain(entry: dict) -> float:
    """How much better the figure got (negative: worse), in percent of the base, in its kind's direction."""
    direction = HIGHER if entry["better"] == "higher" else LOWER
    change = entry["change_pct"]
    return direction * (change if change is not None else math.copysign(math.inf, entry["new"]))


def _alone(figure: Figure) -> dict[str, Any]:
    return {"name": figure.name, "subject": figure.subject, **({"run": figure.run} if figure.run else {}),
            "value": figure.value, "unit": figure.unit}


# --- subjects -----------------------------------------------------------------------------------------------------

def _subject_key(subject: dict, hosts_matter: bool) -> tuple:
    """What a subject is, whatever its GPUs' indices: host (where the documents cover several), GPU and peer by bus
    id, NIC, and the rank where no GPU is named."""
    gpu, peer = _gpu_key(subject.get("gpu")), _gpu_key(subject.get("peer"))
    host = subject.get("host") if hosts_matter else None
    rank = subject.get("rank") if gpu is None else None
    return (str(host or ""), gpu, peer, str(subject.get("nic") or ""), rank if isinstance(rank, int) else None)


def _gpu_key(ref: Any) -> str | None:
    """A GPU by bus id (normalised: nvidia-smi's 8-digit domain and lspci's 4 are one GPU), else UUID, else index."""
    ref = mapping(ref)
    if not ref:
        return None
    bus_id = normalize_bus_id(ref["bus_id"]) if isinstance(ref.get("bus_id"), str) else None
    if bus_id:
        return bus_id
    if isinstance(ref.get("uuid"), str) and ref["uuid"]:
        return ref["uuid"]
    return f"index {ref.get('index')}"


def _gpu_indices(subject: dict) -> tuple:
    return tuple(mapping(subject.get(role)).get("index") for role in ("gpu", "peer"))


def _hosts(document: dict) -> set[str]:
    """The machines a document's figures and findings are of (its own host where none names one)."""
    hosts = {str(mapping(item.get("subject")).get("host") or "")
             for key in ("measurements", "findings") for item in map(mapping, sequence(document.get(key)))}
    hosts.discard("")
    return hosts or {str(document.get("host") or "")}


# --- findings -----------------------------------------------------------------------------------------------------

def _compare_findings(base: dict, new: dict, hosts_matter: bool, alone_counts: bool = True) -> dict[str, Any]:
    """Paired findings whose status got worse: `newly_failing` (now fail, error or unknown) and `newly_warning` (now
    warn); `alone_counts`: a finding of the new report alone (a check the base did not run) that fails or warns counts
    too (not where the reports are not comparable: another verb runs other checks)."""
    base_groups, new_groups = _finding_groups(base, hosts_matter), _finding_groups(new, hosts_matter)
    pairs, only_base, only_new = [], [], []
    for key in [*new_groups, *(key for key in base_groups if key not in new_groups)]:
        matched, rest_base, rest_new = _pair(base_groups.get(key, []), new_groups.get(key, []))
        pairs += matched
        only_base += rest_base
        only_new += rest_new
    pairs += _pair_by_check(only_base, only_new)
    worse, recovered, new_only = [], [], []
    unchanged = 0
    for before, now in pairs:
        if _level(now.get("status")) > _level(before.get("status")) and _level(now.get("status")) > 0:
            worse.append(_finding_entry(before, now))
        elif _level(now.get("status")) < _level(before.get("status")):
            recovered.append(_finding_entry(before, now))
        else:
            unchanged += 1
    for now in only_new:  # a check the base did not run (or not on this subject) that fails now
        if alone_counts and _level(now.get("status")) > 0:
            worse.append(_finding_entry(None, now))
        else:
            new_only.append(_finding_alone(now))
    worse.sort(key=lambda entry: -_level(entry["new"]))
    return {"newly_failing": [entry for entry in worse if _level(entry["new"]) >= STATUS_LEVEL[Status.FAIL.value]],
            "newly_warning": [entry for entry in worse if _level(entry["new"]) < STATUS_LEVEL[Status.FAIL.value]],
            "recovered": recovered, "findings_unchanged": unchanged,
            "findings_unmatched": {"base_only": [_finding_alone(before) for before in only_base],
                                   "new_only": new_only}}


def _pair_by_check(only_base: list[dict], only_new: list[dict]) -> list[tuple[dict, dict]]:
    """A check left with one finding on each side, on other subjects, is one check judged at another level (a shared
    GPU: none on the host before, this GPU now): paired, and taken out of `only_base` and `only_new` (in one pass)."""
    def by_check(findings: list[dict]) -> dict[str, list[dict]]:
        groups: dict[str, list[dict]] = {}
        for finding in findings:
            groups.setdefault(finding["check_id"], []).append(finding)
        return groups
    before_groups = by_check(only_base)
    pairs = [(before_groups[check_id][0], now[0]) for check_id, now in by_check(only_new).items()
             if len(now) == 1 and len(before_groups.get(check_id, ())) == 1]
    paired = {id(finding) for pair in pairs for finding in pair}
    only_base[:] = [finding for finding in only_base if id(finding) not in paired]
    only_new[:] = [finding for finding in only_new if id(finding) not in paired]
    return pairs


def _finding_groups(document: dict, hosts_matter: bool) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for item in map(mapping, sequence(document.get("findings"))):
        if isinstance(item.get("check_id"), str) and item["check_id"]:
            key = (item["check_id"], _subject_key(mapping(item.get("subject")), hosts_matter))
            groups.setdefault(key, []).append(item)
    return groups


def _pair(before: list[dict], now: list[dict]) -> tuple[list[tuple[dict, dict]], list[dict], list[dict]]:
    """Findings of one check on one subject paired: one each, or by what their message values name (compute.low's
    dtype: each finding's words serialised once, the new side's kept in a dict by them, first come first paired),
    then those that name nothing (a document without message values) by order."""
    if len(before) == 1 and len(now) == 1:
        return [(before[0], now[0])], [], []
    now_about = [_about(item) for item in now]
    waiting: dict[str, deque[int]] = {}
    for position, about in enumerate(now_about):
        if about:
            waiting.setdefault(about, deque()).append(position)
    taken = [False] * len(now)
    pairs, rest_before = [], []
    for item in before:
        about = _about(item)
        queue = waiting.get(about) if about else None
        if queue:
            position = queue.popleft()
            taken[position] = True
            pairs.append((item, now[position]))
        else:
            rest_before.append((item, about))
    unnamed_now = [position for position, about in enumerate(now_about) if not about and not taken[position]]
    unnamed_before = [item for item, about in rest_before if not about]
    for item, position in zip(unnamed_before, unnamed_now):
        pairs.append((item, now[position]))
        taken[position] = True
    paired = {id(item) for item, _ in pairs}
    return (pairs, [item for item, _ in rest_before if id(item) not in paired],
            [item for item, used in zip(now, taken) if not used])


def _about(finding: dict) -> str:
    """The words of a finding's message values (numbers left out: they are what changes): `bf16`, `TFLOP/s`."""
    values = finding.get("message_values")
    return json.dumps(list(_words(values)), ensure_ascii=False) if isinstance(values, dict) and values else ""


def _words(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _words(value[key])
    elif isinstance(value, list):
        for item in value:
            yield from _words(item)
    elif isinstance(value, str):
        yield value


def _level(status: Any) -> int:
    if status is None:
        return 0
    return STATUS_LEVEL.get(status, STATUS_LEVEL[Status.ERROR.value]) if isinstance(status, str) else 2


FINDING_SECTIONS = ("newly_failing", "newly_warning", "recovered")
"""The lists of compare's document whose entries carry a finding's message (with its id and values)."""


def compare_in_language(document: dict[str, Any], lang: str) -> dict[str, Any]:
    """compare's document with its findings' messages in `lang` (`language` says which; ids and values stay), as a
    report's --json under --lang."""
    translated = {**document, "language": lang}
    for section in FINDING_SECTIONS:
        translated[section] = [finding_in(entry, lang) for entry in sequence(document.get(section))]
    return translated


def _finding_entry(before: dict | None, now: dict) -> dict[str, Any]:
    entry = {"check_id": now["check_id"], "subject": mapping(now.get("subject")),
             "base": before.get("status") if before else None, "new": now.get("status")}
    if before is not None and _gpu_indices(mapping(before.get("subject"))) != _gpu_indices(entry["subject"]):
        entry["base_subject"] = mapping(before.get("subject"))
    for key in ("message", "message_id", "message_values"):
        if now.get(key) is not None:
            entry[key] = now[key]
    return entry


def _finding_alone(finding: dict) -> dict[str, Any]:
    return {"check_id": finding["check_id"], "subject": mapping(finding.get("subject")),
            "status": finding.get("status")}


# --- versions and the documents themselves ------------------------------------------------------------------------

def _version_changes(base: dict, new: dict) -> list[dict[str, Any]]:
    before, now = _versions(base), _versions(new)
    return [{"name": name, "base": before[name], "new": now[name]}
            for name in [*now, *(name for name in before if name not in now)]
            if name in before and name in now and not _same_version(before[name], now[name])]


def _versions(document: dict) -> dict[str, str]:
    """name → version: gpuready's own, the facts' driver/CUDA/torch/NCCL, overridden by what the measurements
    recorded (several values, from several nodes, joined)."""
    found: dict[str, str] = {}
    if isinstance(document.get("tool_version"), str):
        found["gpuready"] = document["tool_version"]
    facts = mapping(document.get("facts"))
    for name, path in FACT_VERSIONS:
        value: Any = facts
        for part in path:
            value = mapping(value).get(part)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value):
            found[name] = str(value)
    recorded: dict[str, set[str]] = {}
    for item in map(mapping, sequence(document.get("measurements"))):
        for name, value in mapping(item.get("versions")).items():
            if isinstance(value, (str, int, float)) and str(value):
                recorded.setdefault(str(name), set()).add(str(value))
    found.update({name: ", ".join(sorted(values)) for name, values in recorded.items()})
    return found


def _same_version(before: str, now: str) -> bool:
    """`2.11.0` (torch's version in the facts) and `2.11.0+cu130` (the same torch as a measurement records it) are
    one version; two local builds (`+cu126`, `+cu130`) are not."""
    if before == now:
        return True
    return ("+" in before) != ("+" in now) and before.split("+")[0] == now.split("+")[0]


def _summary(document: dict, file: str) -> dict[str, Any]:
    return {"file": file, **{key: document.get(key) for key in ("host", "started_at", "tool_version", "exit_code")},
            "verdict": shown_verdict(document),
            "measurements": len(sequence(document.get("measurements"))),
            "findings": len(sequence(document.get("findings")))}
