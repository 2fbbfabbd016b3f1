"""Accuracy, time and memory of `gpuready fleet` on synthetic fleets made from real H200 reports (issue 22).

    python benchmarks/fleet_outliers.py [--nodes 10000] [--seed 1] [--keep DIR]

Each node is a copy of one recorded document: the validate judge's report on the H200 rank results
(tests/fixtures/h200-validate with the tests/fixtures/h200-collect facts), the SIGTERM-stopped validate run, the 60-s
burn, or the 760M bench run (tests/fixtures/h200-*). Every figure is multiplied by 1 + N(0, 0.01) (run-to-run noise:
two runs on the H200 differ by ~1 %, DESIGN.md §3); in 5 % of the nodes 1-3 judged figures are made 5-30 % worse
(a throughput lower, a latency higher). A node counts as flagged when fleet calls it an outlier.

Printed: recall (injected nodes flagged) and false alarms (healthy nodes flagged) per template and fleet size, and for
small fleets (5 nodes) judged against a baseline saved from a 200-node fleet; then the wall time and peak RSS (VmHWM
of the process that ran `gpuready fleet`) on --nodes reports; then one 24-hour 8-GPU burn report (its telemetry the
real 60-s series repeated) read through the streaming path. Targets: recall >= 99 %, false alarms <= 0.5 %,
10,000 reports in under 60 s and 2 GB.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "src"))

NOISE_SD = 0.01
INJECTED_SHARE = 0.05
DEFICIT_RANGE = (0.05, 0.30)


def templates() -> dict[str, dict]:
    """The recorded documents a node is copied from (healthy runs only: a node that fails its own report is not
    what this measures)."""
    from gpuready.evidence.reader import read_bundle
    from gpuready.evidence.build import build_facts
    from gpuready.runner.local import RunOutcome
    from gpuready.verbs.validate import build_report
    results = {int(rank): result for rank, result in
               json.loads((FIXTURES / "h200-validate" / "rank-results.json").read_text())["results"].items()}
    judged = build_report(RunOutcome(results=results, failures=[]), build_facts(read_bundle(FIXTURES / "h200-collect")),
                          "h200").to_dict()
    read = lambda path: json.loads((FIXTURES / path).read_text())  # noqa: E731
    return {"validate (judge)": judged, "validate (stopped)": read("h200-shared-gpu/validate-sigterm.json"),
            "burn 60 s": read("h200-burn/burn-60s-report.json"), "bench 760M": read("h200-bench/bench-760M-bf16-mb4.json")}


def judged_indices(document: dict) -> list[int]:
    from gpuready.verbs.fleet.read import direction
    return [index for index, item in enumerate(document["measurements"])
            if isinstance(item.get("value"), (int, float)) and direction(item["name"], item["unit"])]


def write_fleet(template: dict, nodes: int, folder: Path, rng: random.Random, prefix: str = "node",
                injected_share: float = INJECTED_SHARE) -> set[str]:
    """`nodes` reports in `folder`; the hosts whose figures were made worse."""
    from gpuready.verbs.fleet.read import direction
    folder.mkdir(parents=True, exist_ok=True)
    candidates = judged_indices(template)
    injected = set(rng.sample(range(nodes), max(1, round(nodes * injected_share)))) if injected_share else set()
    hosts = set()
    for number in range(nodes):
        host = f"{prefix}{number:05d}"
        measurements = [dict(item, value=item["value"] * (1 + rng.gauss(0, NOISE_SD)))
                        if isinstance(item.get("value"), (int, float)) else item for item in template["measurements"]]
        if number in injected:
            hosts.add(host)
            for index in rng.sample(candidates, min(len(candidates), rng.randint(1, 3))):
                item = measurements[index]
                deficit = rng.uniform(*DEFICIT_RANGE)
                sense = direction(item["name"], item["unit"])
                item["value"] *= (1 - deficit) if sense > 0 else (1 + deficit)
        document = dict(template, host=host, measurements=measurements)
        (folder / f"{host}.json").write_text(json.dumps(document, indent=1))
    return hosts


def flagged(folder: Path, baseline: Path | None = None, save: Path | None = None) -> set[str]:
    from gpuready.cli import main as cli
    argv = ["fleet", str(folder), "--json"] + (["--baseline", str(baseline)] if baseline else []) + \
        (["--save-baseline", str(save)] if save else [])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(argv)
    document = json.loads(out.getvalue())
    return {row["host"] for row in document["nodes"] if row["verdict"] in ("outlier", "failing")}


class Tally:
    def __init__(self):
        self.injected = self.caught = self.healthy = self.false_alarms = 0

    def add(self, injected: set[str], hosts: set[str], found: set[str]) -> None:
        self.injected += len(injected)
        self.caught += len(injected & found)
        self.healthy += len(hosts - injected)
        self.false_alarms += len(found - injected)

    def line(self, label: str) -> str:
        recall = self.caught / self.injected if self.injected else float("nan")
        alarms = self.false_alarms / self.healthy if self.healthy else float("nan")
        return (f"{label:<44} recall {recall:7.2%} ({self.caught}/{self.injected})   "
                f"false alarms {alarms:6.2%} ({self.false_alarms}/{self.healthy})")


def accuracy(work: Path, rng: random.Random) -> Tally:
    total = Tally()
    plan = [(20, 20), (50, 10), (200, 5), (1000, 2)]
    for name, template in templates().items():
        for size, repeats in plan:
            tally = Tally()
            for repeat in range(repeats):
                folder = work / f"acc-{len(os.listdir(work))}"
                injected = write_fleet(template, size, folder, rng)
                found = flagged(folder)
                hosts = {f"node{number:05d}" for number in range(size)}
                tally.add(injected, hosts, found)
                total.add(injected, hosts, found)
                shutil.rmtree(folder)
            print(tally.line(f"{name}, {repeats} fleets of {size}"), flush=True)
    return total


def small_fleets(work: Path, rng: random.Random) -> Tally:
    """5-node fleets (1 node made worse) judged against a baseline saved from a healthy 200-node fleet."""
    total = Tally()
    for name, template in templates().items():
        golden, baseline = work / "golden", work / "baseline.json"
        write_fleet(template, 200, golden, rng, prefix="golden", injected_share=0)
        flagged(golden, save=baseline)
        shutil.rmtree(golden)
        tally = Tally()
        for _repeat in range(40):
            folder = work / "small"
            injected = write_fleet(template, 5, folder, rng, injected_share=0.2)
            found = flagged(folder, baseline=baseline)
            hosts = {f"node{number:05d}" for number in range(5)}
            tally.add(injected, hosts, found)
            total.add(injected, hosts, found)
            shutil.rmtree(folder)
        print(tally.line(f"{name}, 40 fleets of 5 vs a baseline"), flush=True)
    return total


def measured_run(argv: list[str]) -> dict:
    """`gpuready ARGV` in a fresh process: its wall time, peak RSS and exit code."""
    child = ("import contextlib, io, json, sys, time\n"
             "from gpuready.cli import main as cli\n"
             "start = time.perf_counter()\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    code = cli.main({argv!r})\n"
             "wall = time.perf_counter() - start\n"
             "peak = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM'))\n"
             "print(json.dumps({'wall_s': wall, 'peak_mib': peak / 1024, 'code': code}))\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if done.returncode:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def scale(work: Path, rng: random.Random, nodes: int) -> None:
    template = templates()["validate (judge)"]
    folder = work / "scale"
    started = time.perf_counter()
    injected = write_fleet(template, nodes, folder, rng)
    size_mb = sum(path.stat().st_size for path in folder.iterdir()) / 1e6
    print(f"wrote {nodes:,} reports ({size_mb:,.0f} MB) in {time.perf_counter() - started:.1f} s", flush=True)
    figures = measured_run(["fleet", str(folder), "--out", str(work / "fleet.json")])
    document = json.loads((work / "fleet.json").read_text())
    found = {row["host"] for row in document["nodes"] if row["verdict"] in ("outlier", "failing")}
    tally = Tally()
    tally.add(injected, {f"node{number:05d}" for number in range(nodes)}, found)
    print(tally.line(f"validate (judge), 1 fleet of {nodes:,}"))
    print(f"gpuready fleet on {nodes:,} reports: {figures['wall_s']:.1f} s wall, peak RSS {figures['peak_mib']:,.0f} MiB "
          f"(VmHWM), exit {figures['code']}", flush=True)
    shutil.rmtree(folder)


def long_burn(work: Path) -> None:
    """A 24-hour burn on 8 GPUs: the recorded 60-s report with its telemetry series repeated per GPU."""
    document = json.loads((FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())
    seconds = 24 * 3600
    series = []
    for gpu in range(8):
        for item in document["series"]:
            values = item["values"] * (seconds // max(1, len(item["values"])))
            series.append(dict(item, subject=dict(item["subject"], gpu=dict(item["subject"].get("gpu") or {},
                                                                               index=gpu)),
                               t_s=[float(t) for t in range(len(values))], values=values))
    path = work / "long-burn.json"
    path.write_text(json.dumps(dict(document, host="longburn", series=series), indent=1))
    figures = measured_run(["fleet", str(path), "--json"])
    print(f"one 24-hour 8-GPU burn report ({path.stat().st_size / 1e6:,.0f} MB, streamed): {figures['wall_s']:.1f} s, "
          f"peak RSS {figures['peak_mib']:,.0f} MiB (VmHWM)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="build the fleets here (default: a temporary folder)")
    parser.add_argument("--skip-accuracy", action="store_true")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    work = options.keep or Path(tempfile.mkdtemp(prefix="gpuready-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} CPU(s); noise N(0, {NOISE_SD}); {INJECTED_SHARE:.0%} of nodes with 1-3 figures "
          f"{DEFICIT_RANGE[0]:.0%}-{DEFICIT_RANGE[1]:.0%} worse", flush=True)
    try:
        if not options.skip_accuracy:
            total = accuracy(work, rng)
            print(total.line("all fleets above"))
            small = small_fleets(work, rng)
            print(small.line("all small fleets against a baseline"))
        scale(work, rng, options.nodes)
        long_burn(work)
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
