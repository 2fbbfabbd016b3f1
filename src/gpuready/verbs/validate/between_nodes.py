"""`validate --between-nodes`: rank 0's pair results → `facts.between_nodes` and the findings `network.node_slow` and
`network.link_slow` (the conclusion is estimate/pair_tests.py's, the one `fleet` recomputes)."""

from __future__ import annotations

from typing import Any

from gpuready.estimate.pair_tests import Conclusion, PairResult, conclude
from gpuready.i18n import finding_text, said
from gpuready.knowledge import thresholds
from gpuready.model import Finding, Status, Subject

NODE_SLOW, LINK_SLOW = "network.node_slow", "network.link_slow"


def pair_results(rounds: list[dict[str, Any]]) -> list[PairResult]:
    """The measured pairs of `facts.between_nodes.rounds`, in order (a pair's figure is None where it failed)."""
    results = []
    for entry in rounds:
        for pair in entry.get("pairs") or []:
            figure = pair.get("gb_per_s")
            results.append(PairResult(nodes=(str(pair["nodes"][0]), str(pair["nodes"][1])),
                                      gb_per_s=float(figure) if isinstance(figure, (int, float)) else None,
                                      kind=str(entry.get("kind", "ring")), round_id=str(entry.get("round", ""))))
    return results


def between_nodes_facts(data: dict[str, Any], expected_gb_per_s: float | None = None,
                        expected_source: str | None = None) -> tuple[dict[str, Any], Conclusion]:
    """`facts.between_nodes` from rank 0's workload result: its rounds with each pair's `slow`, the basis, the bad
    nodes and links, and the conclusion itself. `expected_gb_per_s`: one pair's figure from the nodes' facts (one
    NIC's large-message rate, `expected_source` saying how), None: the median of the ring's pairs."""
    rounds = [{**entry, "pairs": [dict(pair) for pair in entry.get("pairs") or []]} for entry in data.get("rounds") or []]
    conclusion = conclude(pair_results(rounds), expected_gb_per_s)
    flags = iter(conclusion.slowness.slow)
    for entry in rounds:
        for pair in entry["pairs"]:
            pair["slow"] = next(flags)
    facts = {"method": {**(data.get("method") or {}), "floor_gb_per_s": _rounded(conclusion.slowness.floor_gb_per_s),
                        "reference_gb_per_s": _rounded(conclusion.slowness.reference_gb_per_s),
                        "floor_fraction": thresholds("between_nodes")["floor_fraction"],
                        "expected_source": expected_source},
             "basis": conclusion.slowness.basis, "expected_gb_per_s": expected_gb_per_s,
             "nodes": data.get("nodes") or [], "rounds": rounds, "bad_nodes": conclusion.bad_nodes,
             "bad_links": [list(link) for link in conclusion.bad_links],
             "undecided": [list(pair) for pair in conclusion.undecided]}
    return facts, conclusion


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def _figures(results: list[PairResult], node: str) -> str:
    return ", ".join(f"{other} {'failed' if r.gb_per_s is None else f'{r.gb_per_s:.3g}'}"
                     for r in results for other in [r.nodes[1] if r.nodes[0] == node else r.nodes[0]]
                     if node in r.nodes)


def between_nodes_findings(facts: dict[str, Any], conclusion: Conclusion, host: str) -> list[Finding]:
    """A fail per bad node, a fail (below half the reference) or warn per bad link, a warn per slow pair not
    narrowed; one pass where no pair is slow; a skip where fewer than two nodes took part."""
    results = pair_results(facts["rounds"])
    slowness = conclusion.slowness
    values = {"reference": _rounded(slowness.reference_gb_per_s),
              "basis": said(f"validate.between_nodes.basis.{slowness.basis}")}
    refs = [thresholds("between_nodes")["source"]]
    if not results:
        return [_finding(NODE_SLOW, Status.SKIP, host, said("validate.between_nodes.one_node",
                                                            nodes=len(facts["nodes"])), refs=refs)]
    findings = [_finding(NODE_SLOW, Status.FAIL, node, said("validate.between_nodes.node_slow", node=node,
                                                            figures=_figures(results, node), **values),
                         observed=_figures(results, node), expected=values["reference"], refs=refs)
                for node in conclusion.bad_nodes]
    by_pair = {frozenset(r.nodes): r for r in results}
    link_fail = thresholds("between_nodes")["link_fail_fraction"]
    for link, narrowed in [(link, True) for link in conclusion.bad_links] + \
                          [(pair, False) for pair in conclusion.undecided]:
        figure = by_pair[frozenset(link)].gb_per_s
        low = figure is None or (slowness.reference_gb_per_s or 0) * link_fail > figure
        text = said("validate.between_nodes.link_slow" if narrowed else "validate.between_nodes.link_slow.undecided",
                    a=link[0], b=link[1], value="failed" if figure is None else round(figure, 3), **values)
        findings.append(_finding(LINK_SLOW, Status.FAIL if narrowed and low else Status.WARN, f"{link[0]}↔{link[1]}",
                                 text, observed=figure, expected=values["reference"], refs=refs))
    if not findings:
        findings.append(_finding(NODE_SLOW, Status.PASS, host, said(
            "validate.between_nodes.pass", pairs=len(results), nodes=len(facts["nodes"]),
            floor=_rounded(slowness.floor_gb_per_s), **values), refs=refs, fix=None))
    return findings


def _finding(check_id: str, status: Status, host: str, text: Any, **kwargs: Any) -> Finding:
    return Finding(check_id=check_id, status=status, subject=Subject(host=host), **{**finding_text(text), **kwargs})
