"""Issue 34's end-to-end check, repeated: one slowed node among 8 simulated nodes is named, with no other node named,
in k of RUNS runs.

Each run is tests/test_between_nodes_slowed.py's scenario: 8 torchrun "nodes" on this host (one CPU rank each,
gloo), one chosen at random (the seed printed) started inside a cgroup with a CPU quota of a fifth of one CPU, then
`validate --between-nodes` and `gpuready fleet` on its report. A run counts when fleet's bad nodes are exactly the
slowed node and it names no link and leaves no pair undecided. Prints each run's seed, slowed node, named nodes,
links, basis and floor, every pair's figure by round (the slowed node's marked *; a confirm round's pairs are the
suspect pair between its references), the cgroup's throttled periods and the wall time; then the load average and
"k of RUNS".

    python benchmarks/between_nodes_ci.py [--runs 10] [--seed S] [--nodes 8] [--quota 0.2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from cpu_quota import QuotaUnavailable  # noqa: E402
from test_between_nodes_slowed import NODES, QUOTA, pair_figures, run_slowed  # noqa: E402


def _line(run) -> tuple[bool, str]:
    between = run.fleet.get("between_nodes") or {}
    named = [entry["node"] for entry in between.get("bad_nodes") or []]
    links = [entry["nodes"] for entry in between.get("bad_links") or []]
    undecided = [entry["nodes"] for entry in between.get("undecided") or []]
    ok = named == [run.slowed] and not links and not undecided
    figures = " | ".join(f"{entry['kind']}: " + " ".join(
        f"{a}-{b}:{'failed' if f is None else f'{f:.2f}'}{'*' if run.slowed in (a, b) else ''}"
        for a, b, f in pair_figures({"facts": {"between_nodes": {"rounds": [entry]}}}))
        for entry in run.report["facts"]["between_nodes"]["rounds"])
    floor = between.get("floor_gb_per_s")
    text = (f"seed {run.seed} slowed {run.slowed} named {named} links {links} undecided {undecided} "
            f"basis {between.get('basis')} reference {between.get('reference_gb_per_s'):.2f} floor "
            f"{floor:.2f} throttled {run.throttling.get('nr_throttled')}/{run.throttling.get('nr_periods')} "
            f"wall {run.wall_s:.1f} s {'OK' if ok else 'MISSED'}\n    {figures}")
    return ok, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None, help="the first run's seed (then seed+1, …)")
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--quota", type=float, default=QUOTA)
    args = parser.parse_args()
    first = args.seed if args.seed is not None else time.time_ns() % 2**32
    named = 0
    for index in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="gpuready-ci-") as folder:
            try:
                run = run_slowed(Path(folder), first + index, args.nodes, args.quota)
            except QuotaUnavailable as why:
                print(f"no CPU quota can be set here: {why}")
                return 2
        ok, text = _line(run)
        named += ok
        print(f"run {index + 1}: {text} (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"{named} of {args.runs}: the slowed node named alone (nodes {args.nodes}, quota {args.quota} CPU, "
          f"{os.cpu_count()} CPUs, load average {' '.join(f'{v:.1f}' for v in os.getloadavg())})")
    return 0 if named == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
