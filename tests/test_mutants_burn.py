"""Tests that kill the mutants of verbs/burn/run.py that survived the suite (issue 23, mutation testing; see
benchmarks/mutation_score.sh): the timing that makes a silent worker lost and holds the run to a deadline.

Separate from test_mutants_judges.py because burn imports torch (seconds, once per session)."""

from __future__ import annotations


def test_burn_holds_each_rank_to_the_silence_timeout_and_the_run_to_an_overall_deadline(monkeypatch, tmp_path):
    """burn --timeout 7s --duration 30s on CPU: a worker silent for 7 s counts as lost (the ranks' spec carries
    timeout_s 7), start-up may take 300 s (burn's STARTUP_TIMEOUT_S), and the whole run is held to start-up 300 s +
    the memory phase 120 s (MEMORY_PHASE_S) + the 30 s window + one timeout 7 s = 457 s, which the report states."""
    from gpuready.runner import local
    from gpuready.runner.local import RunOutcome
    from gpuready.verbs.burn.run import BurnOptions, run_burn
    asked = {}

    def run_local(**kwargs):
        asked.update(kwargs)
        return RunOutcome(log_dir=tmp_path, deadline_s=kwargs["deadline_s"])
    monkeypatch.setattr(local, "run_local", run_local)
    report = run_burn(BurnOptions(device="cpu", duration_s=30.0, timeout_s=7.0, log_dir=tmp_path))
    assert asked["spec"]["options"]["timeout_s"] == 7.0
    assert asked["spec"]["options"]["burn"]["duration_s"] == 30.0
    assert (asked["startup_timeout_s"], asked["spec"]["startup_timeout_s"]) == (300.0, 300.0)
    assert asked["deadline_s"] == 457.0 and asked["independent"] is True
    assert report.facts["burn"]["deadline_s"] == 457.0 and report.hung is False
