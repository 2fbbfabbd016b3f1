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

