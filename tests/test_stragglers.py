"""Stragglers of a running job (issue 34): per-rank step times read from published training logs, the one rule
(checks/job_logs.py `straggler_ranks`) judging them in `diagnose` and in bench's judge.

Published logs are in tests/fixtures/public/stragglers/ (README names each source). Expected outcomes are worked out
by hand from the figures in each log, not by running the rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpuready.checks.job_logs import job_straggler, straggler_ranks
from gpuready.checks.registry import CheckContext
from gpuready.cli import main as cli
from gpuready.facts.log_facts import LogFacts
from gpuready.facts.log_lines import feed_text
from gpuready.facts.step_time_reader import StepTimeReader
from gpuready.facts.types import Facts
from gpuready.verbs.bench.judge import BenchJudge

FIXTURES = Path(__file__).parent / "fixtures"
PUBLISHED = FIXTURES / "public" / "stragglers"
BENCH = FIXTURES / "cpu-bench" / "bench-tiny-2ranks-per-rank.json"


def judged(name: str, text: str) -> list:
    facts = Facts()
    facts.logs = LogFacts(steps=feed_text(StepTimeReader(), name, text).facts())
    return job_straggler(CheckContext(facts=facts, check_id="job.straggler"))


def published(name: str) -> list:
    return judged(name, (PUBLISHED / name).read_text())


# ------------------------------------------------------------------------------------------------------------ rule

def test_the_rule_names_the_one_slow_rank_of_four():
    """Means 1.0, 1.0, 1.0, 1.5: mean 1.125, population std 0.2165; 1.5 > 1.342 and > 1.2375 (10 %)."""
    spread = straggler_ranks({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.5})
    assert [row.rank for row in spread.stragglers] == [3]
    assert spread.mean == pytest.approx(1.125) and spread.std == pytest.approx(0.216506, abs=1e-6)
    assert spread.stragglers[0].above == pytest.approx(1.5 / 1.125 - 1)


def test_ten_percent_alone_is_not_enough():
    """Means 1.0, 1.45, 1.5: mean 1.3167, std 0.2248; 1.5 is 13.9 % above but within one std (1.5415)."""
    spread = straggler_ranks({0: 1.0, 1: 1.45, 2: 1.5})
    assert spread.stragglers == [] and spread.slowest.rank == 2


def test_one_std_alone_is_not_enough():
    """Means 1.0, 1.0, 1.0, 1.05: std 0.0217, 1.05 is beyond one std (1.034) but only 3.7 % above the mean."""
    assert straggler_ranks({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.05}).stragglers == []


def test_of_two_ranks_the_ten_percent_decides():
    """Two ranks: the slower is exactly one (population) std above the mean, so 'at least one std' holds and the
    10 % decides: 1.0 / 1.25 (mean 1.125, 11.1 % above) is named, 1.0 / 1.2 (9.1 %) is not."""
    assert [row.rank for row in straggler_ranks({0: 1.0, 1: 1.25}).stragglers] == [1]
    assert straggler_ranks({0: 1.0, 1: 1.2}).stragglers == []


def test_one_rank_is_no_comparison():
    assert straggler_ranks({0: 1.0}) is None


# ------------------------------------------------------------------------------------------------ published logs

def test_flagscale_report_names_no_rank():
    """FlagScale PR #938: optimizer section, ranks 0-5 at 9.98, 10.12, 9.46, 9.40, 9.17, 9.58 ms (mean 9.618);
    the slowest, rank 1, is 5.2 % above: no straggler (FlagScale's own report said `No stragglers detected`)."""
    [finding] = published("flagscale-938-straggler-report.log")
    assert finding.status.value == "pass" and finding.subject.rank is None
    assert finding.observed["series"].endswith("/ optimizer")
    assert set(finding.observed["ranks"]) == {"0", "1", "2", "3", "4", "5"}
    assert finding.observed["mean"] == pytest.approx(57.71 / 6, abs=1e-6)
    assert "rank 1, is 5.2 %" in finding.message


def test_megatron_bridge_nvrx_two_ranks_no_straggler():
    """Megatron-Bridge PR #2114: relative scores 0.95 (rank 0) and 1.00 (rank 1) on node 22ca9bdcfc9a: 1/0.95 is
    2.6 % above the mean of 1/score; individual 0.98 / 0.99: 0.5 %."""
    findings = published("megatron-bridge-2114-nvrx.log")
    assert [(f.status.value, f.subject.rank) for f in findings] == [("pass", None), ("pass", None)]
    assert [f.observed["series"].rsplit("/ ", 1)[1] for f in findings] == ["relative", "individual"]
    assert findings[0].observed["ranks"]["0"]["host"] == "22ca9bdcfc9a"
    assert "rank 0, is 2.6 %" in findings[0].message and "rank 0, is 0.5 %" in findings[1].message


def test_nemo_nvrx_lists_five_of_512_so_only_the_spread_decides():
    """NeMo's resiliency guide: worst 0.94 (rank 76), best 0.99 (rank 432) of 512: 1/0.94 is 5.3 % above 1/0.99, so
    no rank can be 10 % above the mean of all 512; individual 0.98 vs 1.00: 2.0 %."""
    findings = published("nemo-nvrx-512-ranks.log")
    assert [f.status.value for f in findings] == ["pass", "pass"]
    assert findings[0].observed["slowest"]["rank"] == 76 and findings[0].observed["fastest"]["rank"] == 432
    assert findings[0].observed["world"] == 512
    assert "5.3 %" in findings[0].message and "2.0 %" in findings[1].message


def test_megatron_straggler_detector_min_max_line():
    """Megatron-LM README_STRAGGLER.md: MnRtt 3453.08 ms (rank 8), MxRtt 3468.20 ms (rank 0): 0.4 % apart."""
    [finding] = published("megatron-readme-straggler.log")
    assert finding.status.value == "pass"
    assert (finding.observed["fastest"]["rank"], finding.observed["slowest"]["rank"]) == (8, 0)
    assert "0.4 %" in finding.message


def test_a_min_max_line_wider_than_ten_percent_cannot_be_judged():
    """The same line with MxRtt edited to 4000 ms (15.8 % above MnRtt): only two ranks known, so skip."""
    text = (PUBLISHED / "megatron-readme-straggler.log").read_text().replace("3468.20ms/0", "4000.00ms/0")
    [finding] = judged("edited.log", text)
    assert finding.status.value == "skip" and "15.8 %" in finding.message


@pytest.mark.parametrize("name, why", [("torchtitan-2389-no-rank-prefix.log", "no rank on them"),
                                       ("nanogpt-110-single-process.log", "no rank on them"),
                                       ("torchtitan-3393-rank0.log", "Only rank 0")])
def test_logs_without_per_rank_timings_name_no_straggler(name, why):
    [finding] = published(name)
    assert finding.status.value == "skip" and why in finding.message and finding.subject.rank is None


def test_hugging_face_loss_lines_alone_name_no_straggler():
    text = "{'loss': 2.3456, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}\n" * 3
    [finding] = judged("trainer.log", text)
    assert finding.status.value == "skip" and "3 `{'loss': …}`" in finding.message


# ------------------------------------------------------------------------------------- torchrun prefixes (made up)

def _megatron(rank: int, step: int, ms: float, prefix: str = "rank") -> str:
    return (f"[{prefix}{rank}]: iteration      {step}/  500000 | consumed samples: {step * 8} | "
            f"elapsed time per iteration (ms): {ms:.1f} | learning rate: 3.0E-04 | lm loss: 6.1E+00 |")


def test_control_log_with_even_ranks_names_none():
    """A made-up control: 8 ranks, 6 steps each, all between 1000 and 1030 ms."""
    text = "\n".join(_megatron(rank, step, 1000 + (rank * 7 + step * 3) % 31) for step in range(6) for rank in range(8))
    [finding] = judged("control.log", text)
    assert finding.status.value == "pass" and len(finding.observed["ranks"]) == 8


def test_slow_local_rank_is_named_with_its_gpu():
    """Made up: local rank 5 of 8 at 1300 ms, the others at 1000 ms, 5 steps each: mean 1037.5, std 99.2."""
    text = "\n".join(_megatron(rank, step, 1300.0 if rank == 5 else 1000.0, "default")
                     for step in range(5) for rank in range(8))
    [finding] = judged("node7.log", text)
    assert (finding.status.value, finding.subject.rank) == ("warn", 5)
    assert "local rank 5 (GPU 5" in finding.message and "25.3 % above" in finding.message


def test_too_few_steps_per_rank_are_not_judged():
    text = "\n".join(_megatron(rank, step, 1300.0 if rank == 1 else 1000.0) for step in range(4) for rank in range(4))
    [finding] = judged("short.log", text)
    assert finding.status.value == "skip" and "only 4" in finding.message


# ------------------------------------------------------------------------------------------------- diagnose, CLI

def test_diagnose_end_to_end_on_a_published_log(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text((PUBLISHED / "megatron-bridge-2114-nvrx.log").read_text())
    code = cli.main(["diagnose", str(log), "--json"])
    report = json.loads(capsys.readouterr().out)
    mine = [f for f in report["findings"] if f["check_id"] == "job.straggler"]
    # a log alone does not show the GPUs: exit 2, verdict unknown (as for every log-only diagnose)
    assert code == 2 and report["verdict"] == "unknown" and [f["status"] for f in mine] == ["pass", "pass"]
    assert "steps" in report["facts"]["diagnose"]["readers"]


def test_diagnose_names_the_straggler_and_warns(tmp_path, capsys):
    log = tmp_path / "rank-logs.txt"
    log.write_text("\n".join(_megatron(rank, step, 1300.0 if rank == 2 else 1000.0)
                             for step in range(6) for rank in range(4)))
    code = cli.main(["diagnose", str(log), "--json", "--lang", "zh"])
    report = json.loads(capsys.readouterr().out)
    [finding] = [f for f in report["findings"] if f["check_id"] == "job.straggler"]
    assert code == 2 and finding["status"] == "warn" and finding["subject"]["rank"] == 2
    assert finding["message"].startswith("Straggler：")  # --lang zh


# ----------------------------------------------------------------------------------------------------------- bench

def _recorded_runs(slow: float) -> list[dict]:
    """The recorded 2-rank CPU bench's per-rank step times (its `rank_step_time_s` samples), rank 1's times
    multiplied by `slow` (the edit), as the ranks' results the judge reads."""
    report = json.loads(BENCH.read_text())
    runs: dict[str, dict] = {}
    for m in report["measurements"]:
        if m["name"] != "rank_step_time_s":
            continue
        method = m["method"]
        run = runs.setdefault(method["strategy"], {"strategy": method["strategy"], "world_size": 2, "results": {}})
        times = [t * (slow if m["subject"]["rank"] == 1 else 1.0) for t in m["samples"]]
        run["results"][m["subject"]["rank"]] = {"step_times_s": times, "tokens_per_step": method["tokens_per_step"],
                                                "seq": method["seq"], "device_type": "cpu"}
    return list(runs.values())


def test_the_recording_has_per_rank_step_times():
    report = json.loads(BENCH.read_text())
    ranks = [(m["method"]["strategy"], m["subject"]["rank"], len(m["samples"])) for m in report["measurements"]
             if m["name"] == "rank_step_time_s"]
    assert ranks == [("ddp", 0, 20), ("ddp", 1, 20), ("fsdp2", 0, 20), ("fsdp2", 1, 20)]
    assert not [f for f in report["findings"] if f["check_id"] == "bench.straggler"]


def test_bench_names_rank_one_when_its_recorded_times_are_made_slow():
    """Edited: rank 1's recorded step times ×1.3. Two ranks: rank 1 is (1.3 r1)/((r0 + 1.3 r1)/2) - 1 above."""
    judge = BenchJudge("cpu-host", _recorded_runs(1.3))
    judge.judge()
    named = [f for f in judge.findings if f.check_id == "bench.straggler"]
    assert [(f.subject.rank, f.status.value) for f in named] == [(1, "warn"), (1, "warn")]
    per_rank = [m for m in judge.measurements if m.name == "rank_step_time_s"]
    report = json.loads(BENCH.read_text())
    r0, r1 = [m["value"] for m in report["measurements"] if m["name"] == "rank_step_time_s"][:2]
    assert per_rank[1].value == pytest.approx(1.3 * r1, rel=1e-4) and per_rank[0].value == pytest.approx(r0, rel=1e-4)
    assert named[0].observed["above_mean"] == pytest.approx(1.3 * r1 / ((r0 + 1.3 * r1) / 2) - 1, abs=1e-3)


def test_bench_as_recorded_names_no_rank():
    judge = BenchJudge("cpu-host", _recorded_runs(1.0))
    judge.judge()
    assert not [f for f in judge.findings if f.check_id == "bench.straggler"]
    assert len([m for m in judge.measurements if m.name == "rank_step_time_s"]) == 4
    assert all(math.isfinite(m.value) for m in judge.measurements if m.name == "rank_step_time_s")
