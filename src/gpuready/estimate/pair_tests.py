"""Pair tests between nodes: which pairs to test, which pairs are slow, and the bad nodes and bad links they point to.

Pure (no torch): `validate --between-nodes` plans its rounds with it inside rank 0, and `fleet` recomputes the
conclusion from the pair figures of one or several reports with the same `conclude`.

The model: a pair's figure is low when one of its nodes is bad (a bad node slows every pair it is in) or when the link
between the two is bad. Two rounds of disjoint pairs cover a ring, so every node is in one or two pairs:

- a node with a passing pair is *cleared* (a bad node passes no pair);
- a node none of whose pairs passed is a *suspect*; it is a bad node once it was slow with two different cleared nodes
  (one slow partner alone could be a bad link), else it is retested with a *trusted* node (every pair of it passed)
  it has not met yet, or, where none is left, with another cleared node;
- a slow pair whose two nodes are both cleared is a bad link, once it was measured again (a `confirm` round, when no
  suspect is left to retest) and was slow again: a pair is slow only where every measurement of it was, so a burst of
  other work on a host during one measurement names no link (measured on a 2-core host at a load of 12-17: a healthy
  pair at 0.97 GB/s against a median of 1.75 named a link, benchmarks/between_nodes_ci.py). A pair left undecided
  is measured again the same way.
- the confirmation is judged against figures of its own round, not only against the ring's: the confirm round also
  measures, for each of the pair's nodes, a pair of it that passed (with a trusted partner where one passed with it),
  and one passing pair of neither node: its three *references*. The confirmed pair is slow only where it is below the
  floor of the basis (expected figure or ring median) **and** below `floor_fraction` of the median of that round's
  references. On one shared host the figures drift with the host's other work (healthy loopback pairs at 2.0-3.9 GB/s
  over a few minutes): a healthy pair at 2.04, then 2.14 GB/s, under a floor of 0.70 x the ring median 3.18 measured
  minutes earlier, was named a link (benchmarks/between_nodes_ci.py, 9 of 10); there the pairs of a host run one after
  another, so the references are measured right before and right after the pair, by the same two nodes. On a real
  cluster (one node per host, an expected figure from the NIC's rate) the references run at once, one wave before the
  pair, on the same two NICs and the fabric as it is at that moment: the pair is still held to the expected figure, and
  the round's floor only keeps a fabric slow for everyone at that moment (other jobs' traffic, a congested spine) from
  being blamed on one link; a link below what its own two nodes reach with other partners a few seconds earlier is the
  link. A pair of a confirm round that passed before is a reference (`round_id` groups a round's results); where a round
  has no reference (two or three nodes) the basis alone judges, as before. A node slow in every pair of one confirm
  round, with two cleared partners (the pair and its own reference), is a bad node: seen at one moment, a bad node whose
  ring pair passed by chance (1.53 GB/s against a floor of 1.47, between_nodes_ci.py) is not taken for a bad link; the
  third reference keeps the round's median from being dragged down by that node's own low reference.

Cost. With one bad node among N (N >= 4, even) both of its ring partners are cleared by their other pair, so it is
named after the two ring rounds: no extra round. Where it has one ring pair only (the ends of an odd ring) or shares
its pair with nodes that cannot be cleared, one retest round names it. So one bad node costs a constant number of
extra rounds (at most 1, below log2 N for every N >= 4), never N. Suspects outnumbering trusted nodes need more retest
rounds (ceil(suspects / trusted)); where no node can be trusted (every ring pair slow: bad nodes at every other place
of the ring, or N <= 3 with a bad node in the middle), suspects are paired with suspects they have not met, as a
halving step of group testing would split a failing group: any passing pair clears two nodes that then serve as
trusted partners. The rounds stop at `max_extra_rounds` (ceil(log2 N) + 1); what is left undecided is said so, never
guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median
from typing import Iterable, Sequence

from gpuready.knowledge import thresholds

Pair = tuple[str, str]
RING_KINDS = ("ring", "ring_shifted")
CONFIRM = "confirm"
"""The kind of a round that measures a slow pair again before it is named a bad link (module docstring)."""
RETEST = "retest"
ROUND_KINDS = (*RING_KINDS, RETEST, CONFIRM)
"""Every kind of round a report holds (the report schema's `between_nodes.rounds[].kind`)."""


def floor_fraction() -> float:
    """Below this fraction of the expected (or median) figure a pair is slow (knowledge/thresholds.toml)."""
    return float(thresholds("between_nodes")["floor_fraction"])


def ring_rounds(nodes: Sequence[str]) -> list[list[Pair]]:
    """Two rounds of disjoint pairs covering a ring: (0,1),(2,3)… then (1,2),(3,4)…,(N-1,0). With an odd N one node
    idles each round (the last one first, then node 0): each is in a pair of the other round. N = 2: one round."""
    count = len(nodes)
    if count < 2:
        return []
    first = [(nodes[i], nodes[i + 1]) for i in range(0, count - 1, 2)]
    if count == 2:
        return [first]
    second = [(nodes[i], nodes[i + 1]) for i in range(1, count - 1, 2)]
    if count % 2 == 0:
        second.append((nodes[count - 1], nodes[0]))
    return [first, second]


@dataclass(kw_only=True)
class PairResult:
    nodes: Pair
    gb_per_s: float | None
    """None: the pair failed or timed out (its error says which); a failed pair counts as slow."""
    kind: str = "ring"
    """`ring`, `ring_shifted`, `retest` or `confirm`: the round it came from."""
    round_id: str = ""
    """Which round it came from: results with one `round_id` were measured at the same time (a confirm round's
    references, module docstring); validate: the round's number, fleet: the report and the number."""


@dataclass(kw_only=True)
class Slowness:
    basis: str
    """`expected` (a figure from the nodes' facts) or `median` (of the ring's measured pairs: no expected figure)."""
    reference_gb_per_s: float | None
    """The figure the pairs are held to: the expected one, else the median; None where no pair measured."""
    floor_gb_per_s: float | None
    slow: list[bool]
    """One per pair, in the order given."""


def slow(figures: Sequence[float | None], expected: float | None, fraction: float | None = None,
         basis_figures: Sequence[float | None] | None = None) -> Slowness:
    """Which pairs are slow: below `fraction` of the expected figure, or with none, of the median of the measured
    `basis_figures` (default: all). A pair without a figure (it failed) is slow."""
    fraction = floor_fraction() if fraction is None else fraction
    measured = [value for value in (figures if basis_figures is None else basis_figures) if value is not None]
    if expected is not None and expected > 0:
        basis, reference = "expected", float(expected)
    else:
        basis, reference = "median", (median(measured) if measured else None)
    floor = reference * fraction if reference is not None else None
    return Slowness(basis=basis, reference_gb_per_s=reference, floor_gb_per_s=floor,
                    slow=[value is None or (floor is not None and value < floor) for value in figures])


def suspects(pairs: Iterable[Pair], slow_flags: Iterable[bool]) -> list[str]:
    """Nodes in slow pairs that passed no pair (a node with a passing pair is cleared)."""
    in_slow, cleared = _split(pairs, slow_flags)
    return sorted(in_slow - cleared)


def _split(pairs: Iterable[Pair], slow_flags: Iterable[bool]) -> tuple[set[str], set[str]]:
    in_slow: set[str] = set()
    cleared: set[str] = set()
    for pair, is_slow in zip(pairs, slow_flags):
        (in_slow if is_slow else cleared).update(pair)
    return in_slow, cleared


def retest_round(suspect_nodes: Sequence[str], trusted: Sequence[str],
                 met: Iterable[Pair] = ()) -> list[list[Pair]]:
    """Each suspect paired with a trusted node it has not met (disjoint pairs): one round while trusted nodes
    suffice, more rounds only where they run short. A suspect every trusted node has met is left out."""
    seen = {frozenset(pair) for pair in met}
    waiting = list(suspect_nodes)
    rounds: list[list[Pair]] = []
    while waiting and trusted:
        busy: set[str] = set()
        this_round: list[Pair] = []
        left: list[str] = []
        for node in waiting:
            partner = next((t for t in trusted if t not in busy and t != node
                            and frozenset((node, t)) not in seen), None)
            if partner is None:
                if any(t != node and frozenset((node, t)) not in seen for t in trusted):
                    left.append(node)  # a free trusted partner comes in the next round
                continue
            busy.add(partner)
            this_round.append((partner, node))
            seen.add(frozenset((node, partner)))
        if not this_round:
            break
        rounds.append(this_round)
        waiting = left
    return rounds


def cross_round(suspect_nodes: Sequence[str], met: Iterable[Pair] = ()) -> list[Pair]:
    """Where no node is trusted: suspects paired with suspects they have not met (disjoint pairs), the halving step
    of group testing for pairs: a passing pair clears both nodes."""
    seen = {frozenset(pair) for pair in met}
    busy: set[str] = set()
    pairs: list[Pair] = []
    for index, node in enumerate(suspect_nodes):
        if node in busy:
            continue
        partner = next((other for other in suspect_nodes[index + 1:]
                        if other not in busy and frozenset((node, other)) not in seen), None)
        if partner is not None:
            busy.update((node, partner))
            pairs.append((node, partner))
    return pairs


@dataclass(kw_only=True)
class Conclusion:
    slowness: Slowness
    bad_nodes: list[str] = field(default_factory=list)
    bad_links: list[Pair] = field(default_factory=list)
    undecided: list[Pair] = field(default_factory=list)
    """Slow pairs neither a bad node nor a bad link explains (not narrowed: too few nodes, too many bad ones)."""
    retest: list[str] = field(default_factory=list)
    """Suspects that another pair could still decide."""


def conclude(results: Sequence[PairResult], expected: float | None = None,
             fraction: float | None = None) -> Conclusion:
    """Bad nodes, bad links and what stays undecided, from every pair measured (any number of rounds or runs)."""
    # the median of the ring's pairs: retests, which seek out the slow nodes, would drag it down
    ring = [result.gb_per_s for result in results if result.kind in RING_KINDS]
    slowness = slow([result.gb_per_s for result in results], expected, fraction, ring or None)
    slowness.slow = _held_to_their_round(results, slowness.slow, floor_fraction() if fraction is None else fraction)
    measured_slow = list(slowness.slow)
    # a pair measured again (CONFIRM) is slow only where every measurement of it was: a burst of other work on a
    # host slows one measurement, a bad node or link every one
    passed = {frozenset(pair.nodes) for pair, is_slow in zip(results, slowness.slow) if not is_slow}
    slowness.slow = [is_slow and frozenset(pair.nodes) not in passed for pair, is_slow in zip(results, slowness.slow)]
    pairs = [result.nodes for result in results]
    in_slow, cleared = _split(pairs, slowness.slow)
    slow_partners: dict[str, set[str]] = {}
    for (a, b), is_slow in zip(pairs, slowness.slow):
        if is_slow:
            slow_partners.setdefault(a, set()).add(b)
            slow_partners.setdefault(b, set()).add(a)
    bad = sorted({node for node in in_slow - cleared if len(slow_partners[node] & cleared) >= 2}
                 | _slow_in_one_round(results, measured_slow, cleared))
    conclusion = Conclusion(slowness=slowness, bad_nodes=bad)
    for (a, b), is_slow in zip(pairs, slowness.slow):
        if not is_slow or a in bad or b in bad:
            continue
        target = conclusion.bad_links if a in cleared and b in cleared else conclusion.undecided
        if (a, b) not in target and (b, a) not in target:
            target.append((a, b))
    conclusion.retest = sorted(in_slow - cleared - set(bad))
    return conclusion


def _held_to_their_round(results: Sequence[PairResult], flags: Sequence[bool], fraction: float) -> list[bool]:
    """The slow flags with each confirm round's pairs also held to that round's references (its pairs that passed in
    another round): slow only where below the basis's floor and below `fraction` of the references' median."""
    passed_in: dict[frozenset[str], set[str]] = {}
    for result, is_slow in zip(results, flags):
        if not is_slow:
            passed_in.setdefault(frozenset(result.nodes), set()).add(result.round_id)
    floors: dict[str, float] = {}
    for round_id in {result.round_id for result in results if result.kind == CONFIRM}:
        references = [result.gb_per_s for result in results
                      if result.kind == CONFIRM and result.round_id == round_id and result.gb_per_s is not None
                      and passed_in.get(frozenset(result.nodes), set()) - {round_id}]
        if references:
            floors[round_id] = median(references) * fraction
    return [is_slow and (result.gb_per_s is None or result.kind != CONFIRM or result.round_id not in floors
                         or result.gb_per_s < floors[result.round_id])
            for result, is_slow in zip(results, flags)]


def _slow_in_one_round(results: Sequence[PairResult], measured_slow: Sequence[bool], cleared: set[str]) -> set[str]:
    """Nodes slow in every pair of theirs of one confirm round, with two or more cleared partners: the node, seen at
    one moment (a bad node whose ring pair passed by chance clears itself no more than a burst names a link)."""
    seen: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    for result, is_slow in zip(results, measured_slow):
        if result.kind == CONFIRM:
            a, b = result.nodes
            seen.setdefault((result.round_id, a), []).append((b, is_slow))
            seen.setdefault((result.round_id, b), []).append((a, is_slow))
    return {node for (_round, node), pairs in seen.items()
            if all(is_slow for _other, is_slow in pairs) and len({other for other, _ in pairs} & cleared) >= 2}


def trusted_nodes(results: Sequence[PairResult], slow_flags: Sequence[bool]) -> list[str]:
    """Nodes every pair of which passed."""
    in_slow, cleared = _split([result.nodes for result in results], slow_flags)
    return sorted(cleared - in_slow)


def max_extra_rounds(count: int) -> int:
    """The retest rounds after the ring: ceil(log2 N) + 1 at most."""
    return math.ceil(math.log2(max(count, 2))) + 1


def next_round(nodes: Sequence[str], results: Sequence[PairResult], expected: float | None = None,
               fraction: float | None = None) -> list[Pair]:
    """The next retest round after the pairs measured so far: suspects with trusted nodes, else with one another;
    empty where nothing is left to decide or no new pair could decide it."""
    conclusion = conclude(results, expected, fraction)
    if not conclusion.retest:
        return []
    met = [result.nodes for result in results]
    trusted = [node for node in trusted_nodes(results, conclusion.slowness.slow) if node in nodes]
    # then the other cleared nodes (a pair passed with them: no bad node), where no trusted one is left to meet
    _, cleared = _split(met, conclusion.slowness.slow)
    partners = trusted + sorted(node for node in cleared - set(trusted) if node in nodes)
    rounds = retest_round(conclusion.retest, partners, met)
    if rounds:
        return rounds[0]
    return cross_round(conclusion.retest, met)


def confirm_round(conclusion: Conclusion, results: Sequence[PairResult]) -> list[Pair]:
    """The slow pairs no bad node explains (bad links, undecided pairs) measured once only, to be measured again
    (disjoint pairs) before they are named, each between its references: a pair of each of its nodes that passed
    (module docstring), so that on one host they run right before and right after it."""
    times: dict[frozenset[str], int] = {}
    for result in results:
        times[frozenset(result.nodes)] = times.get(frozenset(result.nodes), 0) + 1
    busy: set[str] = set()
    links: list[Pair] = []
    for pair in conclusion.bad_links + conclusion.undecided:
        if times.get(frozenset(pair)) == 1 and not busy & set(pair):
            busy.update(pair)
            links.append(pair)
    trusted = set(trusted_nodes(results, conclusion.slowness.slow))
    failed = {frozenset(result.nodes) for result, is_slow in zip(results, conclusion.slowness.slow) if is_slow}
    good = [result.nodes for result in results if frozenset(result.nodes) not in failed]
    pairs: list[Pair] = []
    for link in links:
        used: set[str] = set(link)
        around = []
        for node in link:
            reference = _reference(node, good, trusted, used | busy) or _reference(node, good, trusted, used)
            if reference is not None:
                used.update(reference)
                around.append(reference)
        # and one pair of neither node: the median of three references holds where one node's own one is low
        beside = [pair for pair in good if not set(pair) & used]
        third = next((pair for pair in beside if set(pair) <= trusted), beside[0] if beside else None)
        if third is not None:
            around.append(third)
        pairs += [*around[:1], link, *around[1:]]
    return list(dict.fromkeys(pairs))


def _reference(node: str, good: Sequence[Pair], trusted: set[str], avoid: set[str]) -> Pair | None:
    """A pair of `node` that passed every time it was measured, with a trusted partner where one is, not in `avoid`."""
    mine = [pair for pair in good if node in pair and not (set(pair) - {node}) & avoid]
    return next((pair for pair in mine if set(pair) - {node} <= trusted), mine[0] if mine else None)


def plan(nodes: Sequence[str], done: int, measured: Sequence[PairResult], expected: float | None = None) -> tuple[
        str, list[Pair]]:
    """The round after `done` rounds whose pairs gave `measured`: (its kind, its pairs); no pairs where the plan is
    done (the ring's rounds, then retests while they can decide something, then one `confirm` round of the slow pairs
    no bad node explains; at most `max_extra_rounds` after the ring)."""
    ring = ring_rounds(nodes)
    if done < len(ring):
        return RING_KINDS[done], ring[done]
    if done - len(ring) >= max_extra_rounds(len(nodes)):
        return RETEST, []
    pairs = next_round(nodes, measured, expected)
    if pairs:
        return RETEST, pairs
    return CONFIRM, confirm_round(conclude(measured, expected), measured)
