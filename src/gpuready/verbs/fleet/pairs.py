"""`fleet`: the pair tests between nodes that `validate --between-nodes` reports carry (`facts.between_nodes`), read
from every report given and concluded again with estimate/pair_tests.py's `conclude` (the same code validate's judge
runs), so that several runs combine: a node slow in one run's pairs and in another's is named once, with every
figure.

The reports come from outside: node names are bounded printable text, a figure a finite number >= 0 (anything else
counts as a failed pair, as validate writes one), and one report gives at most MAX_PAIRS pairs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from gpuready.estimate.pair_tests import RETEST, RING_KINDS, ROUND_KINDS, PairResult, conclude
from gpuready.facts.units import finite

MAX_PAIRS = 10_000
"""Pairs read from one report: 16 nodes' plan is 16 ring pairs and a few retests; a report with more is cut."""
MAX_NAME = 253
"""A node name's longest form (node.py: a DNS name)."""
PAIR_KEY = ("between_nodes_pair_gb_per_s", "ring")
"""A baseline's entry for the pair figure of a healthy between-nodes run, per cohort (--save-baseline): the expected
pair figure of a later run of that cohort where its own facts gave none (no RDMA NIC named: gloo, sockets)."""


@dataclass(kw_only=True)
class PairRun:
    """One report's pair tests."""
    path: str
    results: list[PairResult] = field(default_factory=list)
    transports: list[str | None] = field(default_factory=list)
    expected_gb_per_s: float | None = None
    started_at: str = ""
    run_id: str = ""
    cohort: Any = None
    """The cohort of the report that carries the pairs (rank 0's node: every node of one run is one SKU)."""


def read_pairs(facts: dict[str, Any], path: str, started_at: str = "", run_id: str = "",
               cohort: Any = None) -> PairRun | None:
    """The pair tests of one report's facts, or None where it has none."""
    data = facts.get("between_nodes") if isinstance(facts, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("rounds"), list):
        return None
    expected = data.get("expected_gb_per_s")
    run = PairRun(path=path, expected_gb_per_s=finite(expected, non_negative=True), started_at=started_at,
                  run_id=run_id, cohort=cohort)
    for number, entry in enumerate(data["rounds"], 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("pairs"), list):
            continue
        kind = entry.get("kind") if entry.get("kind") in ROUND_KINDS else RETEST
        for pair in entry["pairs"]:
            nodes = pair.get("nodes") if isinstance(pair, dict) else None
            if not (isinstance(nodes, list) and len(nodes) == 2 and all(map(_name, nodes))) or nodes[0] == nodes[1]:
                continue
            if len(run.results) >= MAX_PAIRS:
                return run
            figure = pair.get("gb_per_s")
            run.results.append(PairResult(nodes=(nodes[0], nodes[1]), kind=kind, round_id=f"{path}#{number}",
                                          gb_per_s=finite(figure, non_negative=True)))
            transport = pair.get("transport")
            run.transports.append(transport[:100] if isinstance(transport, str) and transport.isprintable() else None)
    return run if run.results else None


def _name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and value.isprintable()


def newest_pairs(runs: list[PairRun]) -> list[tuple[PairResult, str | None]]:
    """Every pair measured, with its transport; a pair measured again by a newer run (by start time: a node repaired,
    a cable replaced since) counts by the newest run's figures only (every one of that run: a confirm round's pair is
    judged with its earlier figures and its round's references, estimate/pair_tests.py)."""
    ordered = sorted(runs, key=lambda run: run.started_at)
    newest = {frozenset(result.nodes): index for index, run in enumerate(ordered) for result in run.results}
    return [(result, transport) for index, run in enumerate(ordered)
            for result, transport in zip(run.results, run.transports) if newest[frozenset(result.nodes)] == index]


def expected_of(run: PairRun, baseline: Mapping | None = None) -> float | None:
    """The figure a run's pairs are held to: the one its nodes' facts gave (a NIC's rate), else the median pair figure
    of a healthy run of the same cohort in the baseline, else None (the median of the run's own ring)."""
    if run.expected_gb_per_s is not None:
        return run.expected_gb_per_s
    golden = (baseline or {}).get((run.cohort, PAIR_KEY))
    return golden.median if golden is not None and golden.median > 0 else None


def common_expected(runs: list[PairRun], baseline: Mapping | None = None) -> float | None:
    """The expected pair figure where every run had the same one, else None (the median of the pairs)."""
    expected = {expected_of(run, baseline) for run in runs}
    return next(iter(expected)) if len(expected) == 1 else None


def healthy_ring_figures(runs: list[PairRun]) -> dict[Any, list[float]]:
    """Per cohort, the ring pairs' figures of the runs that named no bad node, no bad link and nothing undecided:
    what --save-baseline keeps as the cohort's healthy pair figure."""
    figures: dict[Any, list[float]] = {}
    for run in runs:
        conclusion = conclude(run.results, run.expected_gb_per_s)
        if run.cohort is None or conclusion.bad_nodes or conclusion.bad_links or conclusion.undecided:
            continue
        figures.setdefault(run.cohort, []).extend(result.gb_per_s for result in run.results
                                                  if result.kind in RING_KINDS and result.gb_per_s is not None)
    return {cohort: values for cohort, values in figures.items() if values}


def fleet_pairs(runs: list[PairRun], baseline: Mapping | None = None) -> dict[str, Any] | None:
    """The fleet document's `between_nodes`: the bad nodes (each with its pairs' figures and transport), the bad links
    and the pairs not narrowed (each pair by its newest figure), against the expected figure where every run had the same one, else the median of the
    ring's pairs of all runs; None where no report carried pair tests."""
    if not runs:
        return None
    newest = newest_pairs(runs)
    results = [result for result, _transport in newest]
    transports = [transport for _result, transport in newest]
    common = common_expected(runs, baseline)
    conclusion = conclude(results, common)
    reference = conclusion.slowness.reference_gb_per_s

    def rows(wanted) -> list[dict[str, Any]]:
        return [{"nodes": list(result.nodes), "gb_per_s": result.gb_per_s, "expected_gb_per_s": reference,
                 "transport": transport, "slow": is_slow}
                for result, transport, is_slow in zip(results, transports, conclusion.slowness.slow) if wanted(result)]
    return {"runs": [run.path for run in runs], "pairs": len(results), "basis": conclusion.slowness.basis,
            "expected_gb_per_s": common, "reference_gb_per_s": reference,
            "floor_gb_per_s": conclusion.slowness.floor_gb_per_s,
            "bad_nodes": [{"node": node, "pairs": rows(lambda result, node=node: node in result.nodes)}
                          for node in conclusion.bad_nodes],
            "bad_links": [{"nodes": list(link), "pairs": rows(lambda result, link=link: set(result.nodes) == set(link))}
                          for link in conclusion.bad_links],
            "undecided": [{"nodes": list(pair), "pairs": rows(lambda result, pair=pair: set(result.nodes) == set(pair))}
                          for pair in conclusion.undecided]}


def run_verdicts(run: PairRun, baseline: Mapping | None = None) -> dict[str, bool]:
    """What one run says of each node it tested: True, a bad node; False, clean (not bad and in no slow pair); a node
    in a slow pair it does not explain (a bad link, undecided) is left out: that run neither drains nor clears it."""
    conclusion = conclude(run.results, expected_of(run, baseline))
    in_slow = {node for result, is_slow in zip(run.results, conclusion.slowness.slow) if is_slow for node in result.nodes}
    tested = {node for result in run.results for node in result.nodes}
    return {node: node in conclusion.bad_nodes for node in sorted(tested)
            if node in conclusion.bad_nodes or node not in in_slow}


def pair_figures(run: PairRun, node: str) -> str:
    """A node's pairs in one run, for a sentence: `n4 3.0, n6 failed` (GB/s)."""
    return ", ".join(f"{other} {'failed' if result.gb_per_s is None else f'{result.gb_per_s:.3g}'}"
                     for result in run.results if node in result.nodes
                     for other in [result.nodes[1] if result.nodes[0] == node else result.nodes[0]])
