"""plan's memory estimate against peak memory measured on an H200 (tests/fixtures/plan/README.md says how)."""

import json
from pathlib import Path

import pytest

from gpuready.shapes import PRESETS, with_sequence
from gpuready.verbs.plan import memory

MEASURED = json.loads((Path(__file__).parent / "fixtures" / "plan" / "h200-memory-calibration.json").read_text())
ROWS = [row for row in MEASURED["rows"] if row["status"] == "ok"]
# Where the estimate misses by more than 10 % today (measured 2026-12-03): small models' cross-entropy workspace
# under autocast, and bf16 runs where gradients and activations overlap less than the estimate assumes.
OUTSIDE_10_PERCENT = {("gpt2-small", "amp-bf16", "none", 8), ("gpt2-medium", "amp-bf16", "none", 8),
                      ("gpt2-xl", "bf16", "none", 1),
                      ("gpt2-xl", "bf16", "full", 8), ("llama2-7b", "bf16", "none", 8)}


def _breakdown(row):
    shape = with_sequence(PRESETS[row["preset"]], row["seq"])
    setup = memory.TrainSetup(shape=shape, seq=row["seq"], micro_batch=row["micro_batch"],
                              precision=row["precision"], optimizer="adamw", recompute=row["recompute"],
                              attention=row["attention"])
    return memory.memory_per_gpu(setup, memory.Strategy(name="single", dp=1))


def _estimate(row) -> int:
    return _breakdown(row).allocated


def _key(row):
    return row["preset"], row["precision"], row["recompute"], row["micro_batch"]


@pytest.mark.parametrize("row", ROWS, ids=["-".join(map(str, _key(row))) for row in ROWS])
def test_estimate_against_the_measured_peak(row):
    ratio = _estimate(row) / row["peak_allocated_bytes"]
    limit = 0.20 if _key(row) in OUTSIDE_10_PERCENT else 0.10
    assert abs(ratio - 1) <= limit, f"estimate / measured = {ratio:.3f}"


def test_the_rows_outside_ten_percent_are_exactly_the_known_ones():
    outside = {_key(row) for row in ROWS if abs(_estimate(row) / row["peak_allocated_bytes"] - 1) > 0.10}
    assert outside == OUTSIDE_10_PERCENT
    assert len(ROWS) == 27


def test_the_configuration_that_ran_out_of_memory_does_not_fit_by_the_estimate():
    """Allocated alone (138.4 GiB) would squeeze under the 139.8 GiB; with the CUDA context and the fragmentation
    margin, which `fits` counts, it does not: PyTorch reported 136.9 GiB allocated and 1.9 GiB reserved at the OOM."""
    oom = next(row for row in MEASURED["rows"] if row["status"] == "oom")
    assert _key(oom) == ("llama2-7b", "amp-bf16", "none", 8)
    assert _breakdown(oom).total > MEASURED["versions"]["gpu_total_bytes"]
    fitting = [row for row in ROWS if row["preset"] == "llama2-7b"]
    assert all(_breakdown(row).total < MEASURED["versions"]["gpu_total_bytes"] for row in fitting)
