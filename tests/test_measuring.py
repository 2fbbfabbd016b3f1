"""The measuring-run template (measuring.py): prepare / run / judge with what the run holds in one ExitStack, the
preparation before the ranks start or while they import torch, and a failed start or Ctrl-C closing everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready import measuring
from gpuready.measuring import Measured, MeasuringRun, Selection
from gpuready.model import Report
from gpuready.runner.local import RunOutcome, SpawnError


class Display:
    """A progress line that records when it is opened and closed."""

    def __init__(self, events: list[str]):
        self.events = events
        events.append("display")

    def __call__(self, posts: dict) -> None:
        pass

    def close(self) -> None:
        self.events.append("closed")


class Probe(MeasuringRun):
    """A verb that says what the template asks of it, in order."""

    verb = "probe"

    def __init__(self, early: bool, exclusive: bool = False):
        super().__init__(exclusive=exclusive)
        self.early, self.events = early, []

    def select(self) -> Selection:
        return Selection(device="cpu", ranks=2)

    def prepares_early(self) -> bool:
        return self.early

    def prepare(self, selection: Selection) -> None:
        self.events.append("prepare")

    def open_display(self, selection: Selection) -> Display:
        return Display(self.events)

    def run(self, selection: Selection) -> RunOutcome:
        return self.start_ranks(spec={"workloads": []}, log_dir=Path("unused"), startup_timeout_s=1.0, deadline_s=2.0)

    def judge(self, measured: Measured) -> Report:
        self.events.append("judge")
        self.measured = measured
        return Report(tool_version="test", host=measured.host)


def ranks_that(monkeypatch, events: list[str], then=None) -> dict:
    """runner.local.run_local stood in for: the ranks 'start', the caller's on_started runs, then `then` (an exception
    to raise) or an outcome."""
    asked = {}

    def run_local(**kwargs):
        asked.update(kwargs)
        events.append("spawned")
        if kwargs["on_started"] is not None:
            kwargs["on_started"]()
        if then is not None:
            raise then
        events.append("ran")
        return RunOutcome(interrupted=True, interrupted_by="SIGTERM")
    monkeypatch.setattr(measuring.local_runner, "run_local", run_local)
    return asked


@pytest.mark.parametrize("early, order", [
    (True, ["prepare", "display", "spawned", "ran", "closed", "judge"]),
    (False, ["display", "spawned", "prepare", "ran", "closed", "judge"]),  # while the ranks import torch
])
def test_prepare_run_judge_in_order_and_what_the_run_held_is_closed_before_the_judge(monkeypatch, early, order):
    probe = Probe(early=early)
    asked = ranks_that(monkeypatch, probe.events)
    report = probe.measure()
    assert probe.events == order
    assert asked["world_size"] == 2 and asked["on_progress"] is probe.display and asked["extra_env"] == {}
    # a stopped run is judged like any other: what was measured is kept (the verb says it was interrupted)
    assert probe.measured.outcome.interrupted_by == "SIGTERM" and report.host == probe.measured.host
    assert probe.measured.users is None and probe.measured.checked_sharing is False  # CPU ranks: nobody looked


def test_an_exclusive_run_prepares_before_any_rank_starts(monkeypatch):
    probe = Probe(early=False, exclusive=True)
    ranks_that(monkeypatch, probe.events)
    probe.measure()
    assert probe.events[:3] == ["prepare", "display", "spawned"]


@pytest.mark.parametrize("failure", [SpawnError("rank 1 could not be started"), KeyboardInterrupt()])
def test_a_failed_start_or_ctrl_c_closes_what_the_run_held_and_judges_nothing(monkeypatch, failure):
    probe = Probe(early=False)
    ranks_that(monkeypatch, probe.events, then=failure)
    with pytest.raises(type(failure)):
        probe.measure()
    assert probe.events == ["display", "spawned", "prepare", "closed"]
