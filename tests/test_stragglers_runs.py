"""Per-rank step times in gpuready's own runs (issue 34): validate's DDP workload times each rank's forward and
backward pass, its judge applies the straggler rule (checks/job_logs.py `straggler_ranks`) to GPU ranks and names the
GPU; bench's straggler finding names the rank's GPU too.

Recorded: tests/fixtures/cpu-validate/ (README says how) and tests/fixtures/cpu-bench/bench-tiny-2ranks-per-rank.json.
Where a test edits or makes up figures, its docstring says so; expected outcomes are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.model import Status
from gpuready.runner.local import RunOutcome
from gpuready.verbs.bench.judge import BenchJudge
from gpuready.verbs.validate.judge import Judge

FIXTURES = Path(__file__).parent / "fixtures"
VALIDATE = FIXTURES / "cpu-validate" / "validate-cpu-2ranks-ddp.json"
BENCH = FIXTURES / "cpu-bench" / "bench-tiny-2ranks-per-rank.json"


def test_the_validate_recording_has_per_rank_ddp_times():
    """Rank 0's timed passes 1.303, 1.301, 1.183, 0.97, 0.9 ms: median 1.183; rank 1's 1.085, 1.025, 1.061, 0.917,
    0.878: median 1.025 (README). CPU ranks: measured, not judged."""
    report = json.loads(VALIDATE.read_text())
    rows = [(m["subject"]["rank"], m["value"], len(m["samples"]), m["unit"]) for m in report["measurements"]
            if m["name"] == "ddp_step_time_ms"]
    assert rows == [(0, 1.183, 5, "ms"), (1, 1.025, 5, "ms")]
    assert not [f for f in report["findings"] if f["check_id"] == "ddp.straggler"]


def _rank(rank: int, times_s: list[float], gpu: bool = True) -> dict:
    """Made up: a rank's result as validate's DDP workload returns it (a passing check), with its timed passes."""
    ddp = {"method": "by_hand", "steps": 3, "world_size": 4, "losses": [], "gradient_worst_ratio": 0.0,
           "gradient_mismatched": [], "parameters_identical": True, "ranks_differing_from_rank0": [],
           "fsdp": {"status": "skip", "reason": "quick"}, "step_times_s": times_s, "warmup_steps": 1}
    result = {"rank": rank, "host": "node-a", "local_rank": rank, "versions": {}, "workloads": {"ddp": ddp}}
    if gpu:
        result["gpu"] = {"bus_id": f"0000:{0x18 + rank:02x}:00.0", "uuid": f"GPU-{rank}"}
    return result


def _judged(results: list[dict]) -> Judge:
    judge = Judge(RunOutcome(results=dict(enumerate(results))), None, "node-a")
    judge.judge_all()
    return judge


def test_validate_names_the_slow_gpu_rank_with_its_gpu():
    """Made up: 4 GPU ranks, passes of 1 ms after a 5 ms warm-up, rank 2's of 1.3 ms. Medians 1, 1, 1.3, 1 ms: mean
    1.075, population std 0.1299; 1.3 is beyond 1.2049 (one std) and 1.1825 (10 %): rank 2 is named, 20.9 % above."""
    results = [_rank(r, [0.005] + [0.0013 if r == 2 else 0.001] * 5) for r in range(4)]
    judge = _judged(results)
    [finding] = [f for f in judge.findings if f.check_id == "ddp.straggler"]
    assert finding.status == Status.WARN and finding.subject.rank == 2 and finding.subject.gpu.index == 2
    assert finding.subject.gpu.bus_id == "0000:1a:00.0"
    assert "rank 2 (GPU2 on node-a) took 1.3 ms" in finding.message and "20.9 % above" in finding.message
    assert [m.value for m in judge.measurements if m.name == "ddp_step_time_ms"] == [1.0, 1.0, 1.3, 1.0]


def test_validate_one_pause_does_not_make_a_straggler():
    """Made up: rank 1 paused once (20 ms in one of its 5 timed passes): its median stays 1 ms, nobody is named."""
    results = [_rank(r, [0.005, 0.001, 0.001, 0.020 if r == 1 else 0.001, 0.001, 0.001]) for r in range(2)]
    assert not [f for f in _judged(results).findings if f.check_id == "ddp.straggler"]


def test_validate_cpu_ranks_are_measured_not_judged():
    results = [_rank(r, [0.005] + [0.003 if r == 1 else 0.001] * 5, gpu=False) for r in range(2)]
    judge = _judged(results)
    assert len([m for m in judge.measurements if m.name == "ddp_step_time_ms"]) == 2
    assert not [f for f in judge.findings if f.check_id == "ddp.straggler"]


def test_validate_too_few_passes_are_not_judged():
    """4 timed passes after the warm-up: under the 5 the rule asks (knowledge/thresholds.toml [straggler])."""
    results = [_rank(r, [0.005] + [0.003 if r == 1 else 0.001] * 4) for r in range(2)]
    judge = _judged(results)
    assert not [m for m in judge.measurements if m.name == "ddp_step_time_ms"]
    assert not [f for f in judge.findings if f.check_id == "ddp.straggler"]


def _bench_runs(slow: float, device_index: bool) -> list[dict]:
    """The recorded 2-rank CPU bench's per-rank step times, rank 1's ×`slow` (edited); with `device_index`, the
    ranks are said to have run on cuda:0 and cuda:1 (made up: the recording is from CPU ranks)."""
    report = json.loads(BENCH.read_text())
    runs: dict[str, dict] = {}
    for m in report["measurements"]:
        if m["name"] != "rank_step_time_s":
            continue
        method, rank = m["method"], m["subject"]["rank"]
        run = runs.setdefault(method["strategy"], {"strategy": method["strategy"], "world_size": 2, "results": {}})
        run["results"][rank] = {"step_times_s": [t * (slow if rank == 1 else 1.0) for t in m["samples"]],
                                "tokens_per_step": method["tokens_per_step"], "seq": method["seq"],
                                "device_type": "cuda" if device_index else "cpu",
                                "device_index": rank if device_index else None,
                                "gpu_bus_id": f"0000:{0x18 + rank:02x}:00.0" if device_index else None}
    return list(runs.values())


@pytest.mark.parametrize("device_index, said", [(True, "rank 1 (GPU cuda:1) on host-a"),
                                                 (False, "rank 1 (a CPU rank) on host-a")])
def test_bench_straggler_names_the_gpu(device_index, said):
    judge = BenchJudge("host-a", _bench_runs(1.3, device_index))
    judge.judge()
    named = [f for f in judge.findings if f.check_id == "bench.straggler"]
    assert named and all(said in f.message and f.subject.rank == 1 for f in named)
    gpu = named[0].observed["gpu"]
    assert gpu == ({"cuda_index": 1, "bus_id": "0000:19:00.0"} if device_index else
                   {"cuda_index": None, "bus_id": None})
