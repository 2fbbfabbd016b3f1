"""How many rounds `validate --between-nodes` needs beyond the ring's two, as the node count grows (issue 34: one bad
node among N must cost O(log N) extra rounds, not N).

The plan is estimate/pair_tests.py's, as rank 0 runs it; a pair's figure here is 10 GB/s, or 3 where one of its nodes
or its link is bad. For each N: the most extra rounds over every place of one bad node, every bad link of the ring,
and every two bad nodes (those judged against an expected figure: with the median as basis, two bad nodes of four
slow every ring pair and nothing is below the median), and how many were named exactly (no other node or link).
With three nodes the middle one's two pairs are all the ring has: its median is no basis (1 of 3 not named), and two
bad nodes of three leave no node to pass with (undecided, never guessed).

    python benchmarks/between_nodes_rounds.py [N ...]     (default 4 8 16 32 64)
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpuready.estimate.pair_tests import PairResult, conclude, plan, ring_rounds  # noqa: E402

GOOD, BAD = 10.0, 3.0


def run(count: int, bad_nodes=(), bad_links=(), expected=None) -> tuple[int, bool]:
    """(extra rounds, named exactly) of one cluster's plan."""
    nodes = [f"n{i}" for i in range(count)]
    links = {frozenset(link) for link in bad_links}
    results: list[PairResult] = []
    done = 0
    while (planned := plan(nodes, done, results, expected))[1]:
        kind, pairs = planned
        done += 1
        results += [PairResult(nodes=pair, kind=kind, round_id=str(done),
                               gb_per_s=BAD if set(pair) & set(bad_nodes) or frozenset(pair) in links else GOOD)
                    for pair in pairs]
    conclusion = conclude(results, expected)
    exact = (conclusion.bad_nodes == sorted(bad_nodes) and {frozenset(link) for link in conclusion.bad_links} == links
             and not conclusion.undecided)
    return done - len(ring_rounds(nodes)), exact


def main(counts: list[int]) -> None:
    print(f"{'N':>4} {'log2 N':>6} {'1 bad node':>12} {'1 bad link':>12} {'2 bad nodes':>12}   (extra rounds, worst case; "
          f"in brackets: cases named exactly / cases)")
    for count in counts:
        nodes = [f"n{i}" for i in range(count)]
        ring_links = [pair for pairs in ring_rounds(nodes) for pair in pairs]
        one = [run(count, bad_nodes=[node]) for node in nodes]
        link = [run(count, bad_links=[pair]) for pair in ring_links]
        two = [run(count, bad_nodes=list(pair), expected=GOOD) for pair in itertools.combinations(nodes, 2)]

        def shown(outcomes):
            rounds = max(extra for extra, _ in outcomes)
            missed = sum(not exact for _, exact in outcomes)
            return f"{rounds} ({len(outcomes) - missed}/{len(outcomes)})"
        print(f"{count:>4} {math.log2(count):>6.1f} {shown(one):>12} {shown(link):>12} {shown(two):>12}")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [4, 8, 16, 32, 64])
