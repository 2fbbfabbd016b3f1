"""Run `validate` on this machine and save the raw rank results (what the judge reads) for the tests.

Run on a GPU machine: python benchmarks/record_validate_results.py OUT.json [--quick]
"""

import json
import sys
from pathlib import Path

from gpuready.verbs.validate import ValidateOptions, run_local_validate

if __name__ == "__main__":
    report, outcome = run_local_validate(ValidateOptions(quick="--quick" in sys.argv))
    Path(sys.argv[1]).write_text(json.dumps({"results": outcome.results, "wall_s": outcome.wall_s}, indent=1))
    print(report.verdict().value, f"{outcome.wall_s:.1f} s")
    for measurement in report.measurements:
        if "latency" not in measurement.name:
            print(f"{measurement.name:32} {measurement.value:12,.1f} {measurement.unit:9} expected {measurement.expected}")
