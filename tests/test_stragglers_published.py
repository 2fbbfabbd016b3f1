"""Stragglers named from real published logs (issue 34): the rank a collective waited for, as the log's own tool
printed it and as the thread's author or the tutorial's authors named it (tests/fixtures/public/stragglers/README.md
has each source).

The expected rank in each test is the one the source names in its own words (quoted in the test's docstring), not
one worked out by our rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.checks.job_logs import job_straggler
from gpuready.checks.registry import CheckContext
from gpuready.cli import main as cli
from gpuready.facts import step_times
from gpuready.facts.log_facts import LogFacts
from gpuready.facts.log_lines import feed_text
from gpuready.facts.step_time_reader import StepTimeReader
from gpuready.facts.types import Facts

PUBLISHED = Path(__file__).parent / "fixtures" / "public" / "stragglers"


def published(name: str) -> list:
    facts = Facts()
    facts.logs = LogFacts(steps=feed_text(StepTimeReader(), name, (PUBLISHED / name).read_text()).facts())
    return job_straggler(CheckContext(facts=facts, check_id="job.straggler"))


def test_horovod_457_names_rank_815_of_a_128_node_job():
    """horovod/horovod#457 (TACC Stampede2, 128 nodes): Horovod's coordinator printed `[missing ranks: 815]` for both
    stalled all-reduces, twice: the job waited for rank 815."""
    [finding] = published("horovod-457-missing-rank-815.log")
    assert finding.status.value == "fail" and finding.subject.rank == 815
    assert finding.observed["waited_for"] == {"815": 4} and finding.observed["tool"] == "horovod"
    assert "Rank 815 missing from 4 stalled Horovod operation(s)" in finding.message


def test_horovod_530_names_rank_2_from_the_ready_ranks():
    """horovod/horovod#530: 7 workers; the log lists `[ready ranks: 5, 6, 3, 1, 4, 0]` and the reporter wrote
    "The log says rank 2 is not ready"."""
    [finding] = published("horovod-530-ready-ranks.log")
    assert finding.status.value == "fail" and finding.subject.rank == 2
    assert finding.observed["waited_for"] == {"2": 6}


def test_openseq2seq_456_names_rank_0():
    """NVIDIA/OpenSeq2Seq#456: a docker-compose worker's log, `Stalled ops:…HorovodAllreduce_… [missing ranks: 0]`
    (the reporter asked what it meant: rank 0 had not joined the all-reduce)."""
    [finding] = published("openseq2seq-456-missing-rank-0.log")
    assert finding.subject.rank == 0 and finding.observed["collectives"] == 2
    assert "Loss_Optimization/all_reduce/HorovodAllreduce_Loss_Optimization_mul_1_0" in finding.message


@pytest.mark.parametrize("name, seq", [("pytorch-tutorials-fr-trace-hang.log", 4),
                                       ("pytorch-tutorials-torchfrtrace.log", 5)])
def test_flight_recorder_analyser_names_rank_1(name, seq):
    """PyTorch tutorials: "The CLI detected that rank 1 never issued collective_seq_id=4" (debug_hangs_with_flight_
    recorder) and "We can clearly see that rank 1 did not join the all_reduce collective" (flight_recorder_tutorial,
    `Not all ranks joining collective 5 at entry 4`)."""
    [finding] = published(name)
    assert finding.status.value == "fail" and finding.subject.rank == 1
    assert finding.observed["tool"] == "fr_trace" and finding.observed["phase"] == "not joined the collective"
    assert f"never joined collective {seq} (nccl:all_reduce)" in finding.message


def test_several_missing_ranks_are_named_together_most_often_first():
    """Made up (said so): two stalled operations miss rank 3, one misses ranks 3 and 7; old fr_trace's one-line
    `Missing ranks are {…}` form is read too."""
    text = ("a [missing ranks: 3]\nb [missing ranks: 3, 7]\n"
            "Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce  Missing ranks are {2}\n")
    facts = feed_text(StepTimeReader(), "x.log", text).facts()
    assert [(m.kind, m.missing) for m, _ in facts.missing] == [("horovod", (3,)), ("horovod", (3, 7)),
                                                                ("fr_trace", (2,))]
    found = Facts()
    found.logs = LogFacts(steps=facts)
    [finding] = job_straggler(CheckContext(facts=found, check_id="job.straggler"))
    assert finding.subject.rank is None and finding.observed["waited_for"] == {"3": 2, "2": 1, "7": 1}


@pytest.mark.parametrize("line", ["missing ranks: {}", "x [missing ranks: ]", "collective: nccl:all_reduce",
                                  "the ready ranks: none"])
def test_lines_without_ranks_name_nothing(line):
    assert step_times.parse_missing(line) is None


def test_diagnose_names_the_waited_for_rank_end_to_end(tmp_path, capsys):
    log = tmp_path / "worker.log"
    log.write_text((PUBLISHED / "horovod-457-missing-rank-815.log").read_text())
    code = cli.main(["diagnose", str(log), "--json"])
    report = json.loads(capsys.readouterr().out)
    [finding] = [f for f in report["findings"] if f["check_id"] == "job.straggler"]
    # a failed check outranks the log-only "unknown" (exit 2): not ready, exit 1
    assert code == 1 and report["verdict"] == "not_ready"
    assert finding["status"] == "fail" and finding["subject"]["rank"] == 815
