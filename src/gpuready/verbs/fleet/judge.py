"""Nodes → cohorts → per measurement the cohort's spread → each node's outliers, verdict, and the fleet document.

A node is a host: its reports (validate, burn, bench …) are read together, the newest of each verb kept (an older one
is superseded, and said so). Its figure of a measurement is its worst GPU's (or GPU pair's). Within a cohort (same
GPU model, GPU count, driver) the figure is judged against the cohort's median and MAD, or against a baseline's
where one covers the cohort (stats.stands_out); and against its own expectation, so that a fleet slow everywhere is
still caught (stats.share_of_expected below validate's warning line). Across cohorts, the NVLink cluster and clique
GB200/GB300 trays registered in (nvlink_domain.py): a node outside its domain is an outlier too.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gpuready import __version__
from gpuready.checks.remediation import level_of
from gpuready.estimate.pair_tests import conclude
from gpuready.i18n import json_values, text_in
from gpuready.model import ExitCode, Status, worst_exit_code
from gpuready.verbs.fleet.nvlink_domain import NodeFabric, judge_domains
from gpuready.verbs.fleet.pairs import (PairRun, common_expected, fleet_pairs, newest_pairs, pair_figures,
                                       run_verdicts)
from gpuready.verbs.fleet.read import (LARGEST_FIGURE, MAX_NAMES_PER_REPORT, PAIR_CHECKS, WHOLE_FILE_BYTES, Cohort,
                                      Document, Drain, Figure, FleetDocument, Outcome, Unreadable, read_report,
                                      report_files)
from gpuready.report.measurement_kinds import kinds
from gpuready.verbs.fleet.stats import (Limits, Spread, bounded, deficit_pct, modified_z, share_of_expected, spread,
                                       stands_out)

FORMAT = "gpuready.fleet"
VERSION = 1
Key = tuple[str, str]
"""(measurement name, subject kind: gpu | pair | host)."""
REPORT_VERDICT_ORDER = ("not_ready", "unknown", "no_verdict", "ready_with_warnings", "ready")
NODE_VERDICT_ORDER = ("failing", "outlier", "unknown", "healthy")
"""Node verdicts, worst first: its own report failed; a figure stands out; its report could not judge it; fine."""


@dataclass
class Node:
    name: str
    """The host, or '' where its report names none (then one node per file)."""
    documents: dict[str, Document] = field(default_factory=dict)
    """verb → its newest report."""
    history: list[Outcome] = field(default_factory=list)
    """Every report of the node read, superseded ones too (`fleet --actions`: a drain and the clean run after it)."""

    @property
    def scheduler(self) -> dict[str, str]:
        """The scheduler's names of the node its newest report carries."""
        return next((document.scheduler for document in self._newest_first() if document.scheduler), {})

    @property
    def cohort(self) -> Cohort | None:
        return next((document.cohort for document in self._newest_first() if document.cohort), None)

    @property
    def fabric(self) -> NodeFabric | None:
        return next((document.fabric for document in self._newest_first() if document.fabric), None)

    def figures(self) -> dict[Key, Figure]:
        merged: dict[Key, Figure] = {}
        for document in reversed(self._newest_first()):  # the newest report's figure wins a name two reports share
            merged.update(document.figures)
        return merged

    def out_of_range(self) -> list[Key]:
        return sorted({key for document in self.documents.values() for key in document.out_of_range})

    def dropped_names(self) -> int:
        return sum(document.dropped_names for document in self.documents.values())

    def report_verdict(self) -> str | None:
        verdicts = [document.verdict for document in self.documents.values() if document.verdict]
        return min(verdicts, key=_rank(REPORT_VERDICT_ORDER), default=None)

    def files(self) -> list[str]:
        return sorted(document.path for document in self.documents.values())

    def _newest_first(self) -> list[Document]:
        return sorted(self.documents.values(), key=lambda document: (document.started_at, document.path), reverse=True)


def _rank(order: tuple[str, ...]):
    return lambda value: order.index(value) if value in order else len(order)


@dataclass
class Gathered:
    nodes: dict[str, Node] = field(default_factory=dict)
    unreadable: list[Unreadable] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    files_read: int = 0
    pair_runs: list[PairRun] = field(default_factory=list)
    """Every report's pair tests between nodes (validate --between-nodes), superseded ones too: runs combine."""


def gather(paths, whole_file_bytes: int = WHOLE_FILE_BYTES, baseline: "Baseline | None" = None) -> Gathered:
    """Read every report under `paths`, one file at a time; raises read.TooManyFiles. `baseline` gives pair tests
    without an expected figure of their own the healthy pair figure of their cohort."""
    gathered = Gathered()
    for path in report_files(paths):
        if isinstance(path, Unreadable):
            gathered.unreadable.append(path)
            continue
        try:
            document = read_report(path, whole_file_bytes)
        except Unreadable as unreadable:
            gathered.unreadable.append(unreadable)
            continue
        except FleetDocument:
            gathered.skipped.append(str(path))
            continue
        gathered.files_read += 1
        if document.pairs is not None:
            gathered.pair_runs.append(document.pairs)
        node = gathered.nodes.setdefault(document.host or f"\0{document.path}", Node(name=document.host))
        node.history.append(document.outcome())
        kept = node.documents.get(document.verb)
        if kept is None or (document.started_at, document.path) > (kept.started_at, kept.path):
            node.documents[document.verb] = document
            if kept is not None:
                gathered.superseded.append(kept.path)
        else:
            gathered.superseded.append(document.path)
    _add_pair_outcomes(gathered, baseline)
    return gathered


NODE_SLOW = "network.node_slow"
NODE_SLOW_REASON = "fleet.pairs.node_slow"


def _add_pair_outcomes(gathered: Gathered, baseline: "Baseline | None" = None) -> None:
    """Each between-nodes run's word on the nodes it tested, as outcomes in their history (`fleet --actions`): a bad
    node's drain (network.node_slow: slow with every peer), a clean node's resume of such a drain only. A node named
    bad (by one run or by the runs together) gets a node of its own where no report of it was given."""
    verdicts = [(run, run_verdicts(run, baseline)) for run in gathered.pair_runs]
    named = set(conclude([result for result, _transport in newest_pairs(gathered.pair_runs)],
                         common_expected(gathered.pair_runs, baseline)).bad_nodes)
    named |= {node for _run, said in verdicts for node, bad in said.items() if bad}
    for node in sorted(named):
        gathered.nodes.setdefault(node, Node(name=node))
    level = level_of(NODE_SLOW, Status.FAIL).value
    for run, said in verdicts:
        for node, bad in said.items():
            if node not in gathered.nodes:
                continue
            values = {"node": node, "figures": pair_figures(run, node)}
            drain = Drain(level=level, check_id=NODE_SLOW, message=text_in("en", NODE_SLOW_REASON, values) or "",
                          message_id=NODE_SLOW_REASON, message_values=values) if bad else None
            gathered.nodes[node].history.append(Outcome(
                started_at=run.started_at, path=run.path, run_id=run.run_id, verdict="not_ready" if bad else "ready",
                drain=drain, clears=PAIR_CHECKS))


# --- the judgement -------------------------------------------------------------------------------------------------

Baseline = dict[tuple[Cohort | None, Key], Spread]


@dataclass
class Outlier:
    key: Key
    figure: Figure
    centre: Spread
    z: float | None
    rules: list[str]
    """`fleet` or `baseline` (the figure stands out against that spread), `expected` (below validate's line)."""

    def deficit(self) -> float:
        return bounded(deficit_pct(self.figure.value, self.centre.median, self.figure.sense)) \
            if self.centre.median else 0.0


def judge(gathered: Gathered, limits: Limits, baseline: Baseline | None = None,
          baseline_path: str | None = None) -> dict[str, Any]:
    """The fleet document (JSON-ready): nodes worst first, cohorts with their spreads, fleet-wide spreads."""
    baseline = baseline or {}
    by_cohort: dict[Cohort | None, list[Node]] = defaultdict(list)
    for node in gathered.nodes.values():
        by_cohort[node.cohort].append(node)
    ordered = sorted(by_cohort.items(), key=lambda item: (item[0] is None, -len(item[1]), str(item[0])))
    outliers: dict[int, list[Outlier]] = defaultdict(list)
    cohorts = [_judge_cohort(cohort, nodes, limits, baseline, outliers) for cohort, nodes in ordered]
    domains, domain_found = judge_domains([(id(node), node.fabric) for node in gathered.nodes.values()])
    pairs = fleet_pairs(gathered.pair_runs, baseline)
    bad_pairs = {entry["node"]: entry["pairs"] for entry in (pairs or {}).get("bad_nodes", [])}
    rows = [_node_row(node, outliers.get(id(node), []), index, domain_found.get(id(node)), bad_pairs.get(node.name))
            for index, (_cohort, nodes) in enumerate(ordered) for node in nodes]
    rows.sort(key=lambda row: (_rank(NODE_VERDICT_ORDER)(row["verdict"]),
                               -max((outlier["deficit_pct"] for outlier in row["outliers"]), default=0.0),
                               row["host"] or "", row["files"]))
    counts = {verdict: sum(row["verdict"] == verdict for row in rows) for verdict in NODE_VERDICT_ORDER}
    code = ExitCode.NOT_READY if counts["failing"] or counts["outlier"] else ExitCode.READY
    if pairs and (pairs["bad_nodes"] or pairs["bad_links"]):
        code = worst_exit_code(code, ExitCode.NOT_READY)
    if gathered.unreadable:
        code = worst_exit_code(code, ExitCode.USAGE)
    return {
        "format": FORMAT, "version": VERSION, "tool_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "limits": {"floor_pct": limits.floor_pct, "z_limit": limits.z_limit, "mad_to_sigma": limits.mad_to_sigma,
                   "expected_fraction": limits.expected_fraction, "min_robust_nodes": limits.min_robust_nodes,
                   "names_per_report": MAX_NAMES_PER_REPORT,
                   "floor_pct_by_kind": {kind.name: kind.noise_pct for kind in kinds() if kind.noise_pct > limits.floor_pct},
                   "sources": Limits.sources()},
        "baseline": baseline_path,
        "summary": {"nodes": len(rows), **counts, "cohorts": len(cohorts), "files_read": gathered.files_read,
                    "unreadable": len(gathered.unreadable), "superseded": len(gathered.superseded),
                    "skipped": len(gathered.skipped)},
        "exit_code": int(code),
        "nodes": rows,
        "cohorts": cohorts,
        "nvlink_domains": domains,
        "between_nodes": pairs,
        "measurements": _fleet_wide(gathered.nodes.values()),
        "unreadable": [{"file": item.path, "reason": str(item),
                        "reason_text": {"message_id": item.why.msg_id, "message_values": json_values(item.why.values)}}
                       for item in gathered.unreadable],
        "superseded": sorted(gathered.superseded),
        "skipped": sorted(gathered.skipped),
    }


def _judge_cohort(cohort: Cohort | None, nodes: list[Node], limits: Limits, baseline: Baseline,
                  outliers: dict[int, list[Outlier]]) -> dict[str, Any]:
    """The cohort's entry of the document; each node's outliers added to `outliers` (by node id)."""
    columns = _columns(nodes)
    names = json_names(columns)
    measurements = {}
    covered = False
    for key, column in columns.items():
        own = spread([figure.value for _node, figure in column])
        golden = baseline.get((cohort, key))
        covered = covered or golden is not None
        centre = golden or own
        for node, figure in column:
            rules = _rules(figure, centre, limits, "baseline" if golden else "fleet")
            if rules:
                z = modified_z(figure.value, centre, figure.sense, limits)
                outliers[id(node)].append(Outlier(key, figure, centre, z, rules))
        sample = column[0][1]
        measurements[names[key]] = {"name": key[0], "subject": key[1], "unit": sample.unit,
                                    "higher_is_better": sample.sense > 0, **own.as_dict(),
                                    **({"baseline": golden.as_dict()} if golden else {})}
    return {"key": cohort.as_dict() if cohort else None, "nodes": len(nodes),
            "basis": "baseline" if covered else "fleet",
            "weak": len(nodes) < limits.min_robust_nodes and not covered,
            "hosts": sorted(node.name or node.files()[0] for node in nodes),
            "measurements": measurements}


def _columns(nodes) -> dict[Key, list[tuple[Node, Figure]]]:
    """Per measurement, each node's figure of it."""
    columns: dict[Key, list[tuple[Node, Figure]]] = defaultdict(list)
    for node in nodes:
        for key, figure in node.figures().items():
            columns[key].append((node, figure))
    return dict(sorted(columns.items()))


def _fleet_wide(nodes) -> dict[str, dict[str, Any]]:
    """Each measurement's spread over every node, whatever its cohort (a view of the fleet; the judgement uses each
    cohort's own), and each node's figure (its worst GPU's) for the distribution plots."""
    columns = _columns(nodes)
    names = json_names(columns)
    return {names[key]: {**spread([figure.value for _node, figure in column]).as_dict(), "unit": column[0][1].unit,
                         "values": [{"host": node.name or None, "value": figure.value} for node, figure in column]}
            for key, column in columns.items()}


def json_names(keys) -> dict[Key, str]:
    """A measurement's name in the document; `name (kind)` only where one name is measured of several kinds."""
    kinds: dict[str, int] = defaultdict(int)
    for name, _kind in keys:
        kinds[name] += 1
    return {(name, kind): name if kinds[name] == 1 else f"{name} ({kind})" for name, kind in keys}


def _rules(figure: Figure, centre: Spread, limits: Limits, basis: str) -> list[str]:
    rules = [basis] if stands_out(figure.value, centre, figure.sense, limits, figure.noise_pct) else []
    if figure.expected and share_of_expected(figure.value, figure.expected, figure.sense) < limits.expected_fraction:
        rules.append("expected")
    return rules


def _node_row(node: Node, outliers: list[Outlier], cohort_index: int, domain: dict | None,
              bad_pairs: list[dict] | None = None) -> dict[str, Any]:
    """`bad_pairs`: the node is a bad node of the pair tests between nodes (its pairs): an outlier, as a node outside
    its NVLink domain is."""
    report_verdict = node.report_verdict()
    out_of_range = node.out_of_range()
    verdict = ("failing" if report_verdict == "not_ready" else
               "outlier" if outliers or out_of_range or domain or bad_pairs else
               "unknown" if report_verdict in (None, "unknown", "no_verdict") else "healthy")
    return {"host": node.name or None, "verdict": verdict, "report_verdict": report_verdict, "cohort": cohort_index,
            "files": node.files(),
            "reports": [{"file": document.path, "verb": document.verb, "verdict": document.verdict,
                         "started_at": document.started_at or None}
                        for document in sorted(node.documents.values(), key=lambda document: document.path)],
            "outliers": [_outlier_row(outlier) for outlier in sorted(outliers, key=lambda outlier: -outlier.deficit())]
            + [{"name": name, "subject": {"kind": kind, "gpu": None, "peer": None}, "value": None, "unit": None,
                "median": None, "deficit_pct": 0.0, "z": None, "expected": None, "share_of_expected": None,
                "rules": ["out_of_range"], "limit": LARGEST_FIGURE} for name, kind in out_of_range],
            "dropped_measurements": node.dropped_names(), "nvlink_domain": domain, "between_nodes": bad_pairs}


def _outlier_row(outlier: Outlier) -> dict[str, Any]:
    figure = outlier.figure
    name, kind = outlier.key
    return {"name": name, "subject": {"kind": kind, "gpu": figure.gpu, "peer": figure.peer}, "value": figure.value,
            "unit": figure.unit, "median": outlier.centre.median, "deficit_pct": round(outlier.deficit(), 2),
            "z": round(bounded(outlier.z), 2) if outlier.z is not None else None, "expected": figure.expected,
            "share_of_expected": round(bounded(share_of_expected(figure.value, figure.expected, figure.sense)), 4)
            if figure.expected else None,
            "rules": outlier.rules}
