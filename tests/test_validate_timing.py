"""The duration validate predicts before it runs, against five runs recorded on one H200 (issue 23: within ±30 % of
the real wall time, for the default run and --quick). tests/fixtures/h200-validate-timing/README.md says how they
were recorded; the wall times are GNU time's, process start to exit."""

import json
import re
from pathlib import Path

import pytest

from gpuready.verbs.validate.run import ValidateOptions, predicted_seconds

RUNS = Path(__file__).parent / "fixtures" / "h200-validate-timing"
WALL_S = {match[0]: float(match[1]) for match in
          re.findall(r"validate (\S+) wall ([\d.]+) s", (RUNS / "validate.time").read_text())}


def test_five_runs_were_recorded():
    assert sorted(WALL_S) == ["default-1", "default-2", "quick-1", "quick-2", "quick-3"]


@pytest.mark.parametrize("run", sorted(WALL_S))
def test_the_prediction_is_within_thirty_percent_of_the_wall_time(run):
    report = json.loads((RUNS / f"validate-{run}.json").read_text())
    ranks = len(report["facts"]["validate"]["ranks"])
    predicted = predicted_seconds(ValidateOptions(quick=run.startswith("quick")), "cuda", ranks)
    assert abs(predicted - WALL_S[run]) <= 0.30 * WALL_S[run], f"predicted {predicted:.1f} s, ran {WALL_S[run]} s"



@pytest.mark.parametrize("warmup_s, expected", [
    (0.044, 5),    # fp32 on an H200: 51 TFLOP/s, 22 ms a product (2 × 8192³ flops); 0.1 s / 22 ms = 4.5 → 5
    (0.0028, 20),  # bf16 on an H200: ~800 TFLOP/s, 1.4 ms a product: 71 would fill 0.1 s, 20 at most
    (0.112, 4),    # fp32 on an A100: 19.5 TFLOP/s, 56 ms a product: 2 would fill 0.1 s, 4 at least
    (0.0, 20),     # a warm-up too short for the events to see: the default's count
])
def test_quick_times_the_matmuls_that_fill_a_tenth_of_a_second(warmup_s, expected):
    from gpuready.workloads.gpu_bench import quick_iterations
    assert quick_iterations(warmup_s) == expected
