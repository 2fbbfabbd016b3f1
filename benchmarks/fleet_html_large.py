"""Seconds `gpuready fleet --html` takes on fleets with many measurement names (issue 32).

    python benchmarks/fleet_html_large.py [--shapes 5x160,50x160,5x1000]

Each node is a copy of the recorded H200 validate (tests/fixtures/h200-shared-gpu/validate-sigterm.json) whose six
figures are joined by N invented bandwidth figures (`invented_<i>_gb_per_s`, unit gb_per_s: each is judged and drawn),
every node writing the same N names. Printed per shape: the names the fleet kept (a report's names are cut at
verbs/fleet/read.py MAX_NAMES_PER_REPORT), the charts the page drew (report/charts/fleet.py MAX_CHARTS), the
wall time (and this process's CPU time: on a shared machine the wall time includes waiting) of `gpuready fleet DIR
--html PAGE --json` in this process, and the page's size. Before issue 32, 5 x 160
took 62 s (each chart added to the Bokeh document re-walked every earlier model) and a report's names were unbounded.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpuready.cli import main as cli  # noqa: E402

RECORDED = ROOT / "tests" / "fixtures" / "h200-shared-gpu" / "validate-sigterm.json"


def write_fleet(folder: Path, nodes: int, names: int) -> None:
    recorded = json.loads(RECORDED.read_text())
    for index in range(nodes):
        document = json.loads(json.dumps(recorded))
        document["host"] = f"node-{index:03d}"
        document["measurements"] += [{"name": f"invented_{name}_gb_per_s", "unit": "gb_per_s",
                                      "value": 100.0 + index + name, "subject": {"host": document["host"]}}
                                     for name in range(names)]
        (folder / f"{document['host']}.json").write_text(json.dumps(document))


def measure(nodes: int, names: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        reports, page = Path(scratch) / "reports", Path(scratch) / "fleet.html"
        reports.mkdir()
        write_fleet(reports, nodes, names)
        output = io.StringIO()
        started, cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(output):
            code = cli.main(["fleet", str(reports), "--html", str(page), "--json"])
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        document = json.loads(output.getvalue())
        charts = page.read_text(encoding="utf-8").count('<figure class="chart"')
        print(f"{nodes:>4} nodes x {names:>5} names: exit {code}, {len(document['measurements']):>3} names kept, "
              f"{charts:>3} charts, {seconds:6.2f} s ({cpu:.2f} s CPU), page {page.stat().st_size / 1e6:.1f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="5x160,50x160,5x1000", help="NODESxNAMES, comma-separated")
    args = parser.parse_args()
    for shape in args.shapes.split(","):
        nodes, names = (int(part) for part in shape.split("x"))
        measure(nodes, names)


if __name__ == "__main__":
    main()
