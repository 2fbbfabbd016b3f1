"""A live `check` starts collecting before the CLI is imported (gpuready/__main__.py): the guess from argv starts
work only for a live check, and the parsed options still decide (a collection nobody takes is dropped)."""

import subprocess
import sys

import pytest

from gpuready.__main__ import live_check_with_torch
from gpuready.evidence import collect as collect_module


@pytest.mark.parametrize("argv, expected", [
    ([], True), (["check"], True), (["--fast"], False), (["check", "--fast", "--json"], False),
    (["check", "--fas"], False), (["--lang", "zh", "check", "--verbose"], True), (["--lang=zh"], True),
    (["check", "--bundle", "node7.tar.gz"], None), (["check", "--bundle=x"], None), (["check", "-h"], None),
    (["check", "--help"], None), (["--version"], None), (["plan", "--preset", "llama2-7b"], None),
    (["diagnose", "check"], None), (["launch", "slurm", "--", "check", "--fast"], None), (["compare", "a", "b"], None),
])
def test_only_a_live_check_starts_early(argv, expected):
    assert live_check_with_torch(argv) is expected


def test_collect_takes_the_early_result_once(monkeypatch):
    calls = []
    monkeypatch.setattr(collect_module, "_collect_now", lambda with_torch, only: calls.append((with_torch, only)) or
                        ({"x": str(len(calls))}, {}))
    collect_module.start_early(False)
    assert collect_module.collect(with_torch=False) == ({"x": "1"}, {})
    assert collect_module.collect(with_torch=False) == ({"x": "2"}, {})  # the early one was taken, not kept
    collect_module.start_early(True)
    collect_module._EARLY[True].result()
    assert collect_module.collect(with_torch=False) == ({"x": "4"}, {})  # another kind: collected anew
    assert calls[:2] == [(False, None), (False, None)]
    collect_module._EARLY.clear()


def test_a_live_fast_check_runs_through_the_console_entry(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gpuready", "check", "--fast", "--json"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120)
    assert '"schema_version"' in result.stdout and "Traceback" not in result.stderr


def _fake_tool(folder, name: str, body: str):
    tool = folder / name
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)


def test_a_prestarted_tool_is_taken_by_its_collector_once(monkeypatch, tmp_path):
    from gpuready.evidence import prestart
    _fake_tool(tmp_path, "nvidia-smi", 'echo "args: $* locale: $LC_ALL"')
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    prestart.start(with_torch=False)
    assert prestart.TORCH_PROBE not in prestart._running  # --fast: no torch probe
    running = prestart._running[("nvidia-smi", "-q", "-x")][0]
    collected = collect_module.run_command(["nvidia-smi", "-q", "-x"])
    assert collected.text == "args: -q -x locale: C\n" and collected.exit_code == 0
    assert running.returncode == 0 and prestart.take(["nvidia-smi", "-q", "-x"]) is None
    for argv in list(prestart._running):  # the others this test did not collect
        prestart.take(argv)[0].communicate()


def test_a_prestarted_tool_that_hangs_is_stopped_at_its_timeout(monkeypatch, tmp_path):
    from gpuready.evidence import prestart
    _fake_tool(tmp_path, "nvidia-smi", "exec sleep 30")
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    prestart.start(with_torch=False)
    collected = collect_module.run_command(["nvidia-smi"], timeout_s=0.5)
    assert collected.text is None and collected.error == "timed out after 0 s"
    for argv in list(prestart._running):
        process = prestart.take(argv)[0]
        process.kill()
        process.communicate()
