"""Size and render time of the HTML report (budget: a typical report under 5 MB, one file that works offline).

Prints, per case, the page's bytes, how many of them are Bokeh's inlined JavaScript, and the render time:
- the recorded 60-s H200 burn (tests/fixtures/h200-burn): telemetry of one GPU;
- the recorded H200 bundle's check (tests/fixtures/h200-collect): findings only, no chart, so no Bokeh;
- an 8-GPU, 1-hour burn: the recorded GPU's series repeated over 8 GPUs and 3,600 samples (the largest telemetry a
  burn writes at its 1-s sampling);
- a synthetic fleet of 1,000 nodes, 8 measurements each, 3 % of them outliers.
Run: python benchmarks/html_report_size.py
"""

from __future__ import annotations

import copy
import json
import random
import re
import tempfile
import time
from pathlib import Path

from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.evidence.build import build_facts
from gpuready.report.html import write_fleet_html, write_html
from gpuready.pipeline import check_report

FIXTURES = Path(__file__).parents[1] / "tests" / "fixtures"
BUDGET_BYTES = 5_000_000
FLEET_MEASUREMENTS = {"matmul_tflops_bf16": ("tflops", 790.0), "memory_copy_gb_per_s": ("gb_per_s", 4280.0),
                      "h2d_pinned_gb_per_s": ("gb_per_s", 55.4), "d2h_pinned_gb_per_s": ("gb_per_s", 55.3),
                      "all_reduce_busbw_gb_per_s": ("gb_per_s", 360.0), "all_gather_busbw_gb_per_s": ("gb_per_s", 350.0),
                      "burn_tflops_bf16": ("tflops", 660.0), "p2p_unidirectional_gb_per_s": ("gb_per_s", 390.0)}


def burn_8gpu_1h() -> dict:
    document = json.loads((FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())
    series = []
    for index in range(8):
        for one in document["series"]:
            steady = one["values"][6:60]  # the GEMM window's samples, repeated
            values = (one["values"][:6] + steady * 67)[:3600]
            copied = copy.deepcopy(one)
            copied["subject"]["gpu"] = {**copied["subject"]["gpu"], "index": index, "bus_id": f"0000:{index:02x}:00.0"}
            copied["t_s"], copied["values"] = [float(t) for t in range(len(values))], values
            series.append(copied)
    document["series"] = series
    return document


def fleet(nodes: int = 1000, outlier_share: float = 0.03, seed: int = 1) -> dict:
    rng = random.Random(seed)
    hosts = [f"gpu-node-{number:04d}.cluster.example" for number in range(nodes)]
    values = {name: {host: centre * rng.gauss(1.0, 0.01) for host in hosts}
              for name, (_unit, centre) in FLEET_MEASUREMENTS.items()}
    rows = []
    for host in hosts:
        outliers = []
        if rng.random() < outlier_share:
            name = rng.choice(list(FLEET_MEASUREMENTS))
            values[name][host] *= 0.7
            median = FLEET_MEASUREMENTS[name][1]
            outliers.append({"name": name, "subject": {"kind": "gpu"}, "value": values[name][host],
                             "unit": FLEET_MEASUREMENTS[name][0], "median": median,
                             "deficit_pct": round(100 * (1 - values[name][host] / median), 2), "rules": ["fleet"]})
        rows.append({"host": host, "verdict": "outlier" if outliers else "healthy", "cohort": 0,
                     "files": [f"reports/{host}/validate.json"], "outliers": outliers})
    rows.sort(key=lambda row: row["verdict"] != "outlier")
    measurements = {name: {"values": [{"host": host, "value": value} for host, value in column.items()],
                           "median": FLEET_MEASUREMENTS[name][1], "mad": 0.007 * FLEET_MEASUREMENTS[name][1],
                           "n": nodes, "unit": FLEET_MEASUREMENTS[name][0]} for name, column in values.items()}
    return {"summary": {"nodes": nodes}, "nodes": rows, "cohorts": [{"key": {"gpu_model": "H200"}, "nodes": nodes}],
            "measurements": measurements}


def measure(label: str, write, folder: Path) -> None:
    path = folder / "page.html"
    started = time.perf_counter()
    write(path)
    seconds = time.perf_counter() - started
    page = path.read_text(encoding="utf-8")
    size = len(page.encode())
    bokeh = sum(len(match.group().encode()) for match in re.finditer(r"/\* BEGIN bokeh\.min\.js \*/.*?/\* END bokeh\.min\.js \*/",
                                                                      page, re.DOTALL))
    verdict = "within" if size < BUDGET_BYTES else "OVER"
    print(f"{label:<42} {size:>11,} bytes  (Bokeh JS {bokeh:>9,}; the rest {size - bokeh:>9,})  "
          f"{seconds:5.2f} s  {verdict} the 5 MB budget")


def main() -> None:
    burn = json.loads((FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())
    bundle = check_report(build_facts(read_bundle(FIXTURES / "h200-collect")), CheckOptions()).to_dict()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        measure("H200 burn, 60 s, 1 GPU (recorded)", lambda path: write_html([burn], path, "en"), folder)
        measure("H200 bundle check (recorded)", lambda path: write_html([bundle], path, "en"), folder)
        measure("H200 bundle check + burn, Chinese", lambda path: write_html([bundle, burn], path, "zh"), folder)
        measure("burn, 1 h, 8 GPUs (synthetic)", lambda path: write_html([burn_8gpu_1h()], path, "en"), folder)
        measure("fleet, 1,000 nodes x 8 measurements", lambda path: write_fleet_html(fleet(), path, "en"), folder)


if __name__ == "__main__":
    main()
