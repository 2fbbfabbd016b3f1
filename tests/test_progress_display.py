"""The live progress of validate, bench and burn (report/progress_line.py): a line rewritten in place on a terminal,
one plain line per phase change in a log or pipe, nothing on stdout, and none of it with --json."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys

import pytest

from gpuready.progress import Figure
from gpuready.report.progress_line import BenchProgress, ProgressLine, burn_progress, validate_progress
from gpuready.runner.progress import Progress

ESCAPE = re.compile(r"[\r\x1b]")
LINE = re.compile(r"^  \[ *\d+ s\] (\w+): (.+?)(?:, |$)")


def post(rank: int, phase: str, operation: str = "", **typed) -> Progress:
    return Progress(rank=rank, phase=phase, operation=operation, **typed)


def train_step(step: int, warm_up: bool = False, rank: int = 0) -> Progress:
    """A training step as workloads/train.py posts it: its number (from 0) and whether it warms up."""
    return post(rank, "train", step=step, warm_up=warm_up)


def gemms(rank: int, count: int, tflops: float, errors: int) -> Progress:
    """A burn worker's figures as workloads/burn.py posts them: GEMMs done, TFLOP/s, errors found."""
    return post(rank, "burn", figures=[Figure(value=count, unit="gemms"), Figure(value=tflops, unit="tflops")],
                errors=errors)


def gpuready(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpuready", *args]


def phases(stderr: str, verb: str) -> list[str]:
    """The phase of each plain progress line (`  [   3 s] validate: collectives 1/2, ...`)."""
    return [match.group(2) for line in stderr.splitlines() if (match := LINE.match(line)) and match.group(1) == verb]


def on_terminal(command: list[str]) -> tuple[str, str, int]:
    """Run `command` with stderr on a pseudo-terminal and stdout on a pipe: (terminal text, stdout, exit code)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                               env={**os.environ, "TERM": "xterm", "COLUMNS": "200"})
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower side closed: the process is gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    stdout = process.stdout.read().decode()
    return seen.decode(errors="replace"), stdout, process.wait(timeout=60)


def test_plain_lines_one_per_phase_change_without_escapes():
    stream = io.StringIO()
    display = ProgressLine("validate", "2 rank(s) on cpu", validate_progress(40.0, ["collectives", "ddp"]),
                           stream=stream)
    for posts in ({}, {0: post(0, "startup")}, {0: post(0, "collectives", "all_reduce 8 B out_of_place"),
                                                 1: post(1, "collectives")},
                  {0: post(0, "collectives", "all_reduce 16 B out_of_place")}, {0: post(0, "ddp", "step 1\x1b[2J")},
                  {0: post(0, "done", "finished"), 1: post(1, "done")}):
        display(posts)
    display.close()
    text = stream.getvalue()
    assert text.splitlines()[0] == "gpuready validate: 2 rank(s) on cpu"
    assert phases(text, "validate") == ["launching", "startup", "collectives 1/2", "ddp 2/2", "done"]
    assert "about 40 s left" in text and "all_reduce 8 B out_of_place" in text and "almost done" in text
    assert not ESCAPE.search(text)  # the rank's escape sequence is shown, not sent
    assert "step 1\\x1b[2J" in text


def test_bench_steps_rate_and_time_left():
    runs = [("single", 1), ("ddp", 2)]
    describe = BenchProgress(runs, steps=5, tokens_per_step=lambda strategy, world_size: 100 * world_size)
    assert describe({}, 0.0).phase == "single×1 launching"
    assert describe({0: post(0, "train", stage="build")}, 1.0).phase == "single×1 build"
    warm = describe({0: train_step(0, warm_up=True)}, 2.0)
    assert (warm.phase, warm.step, warm.steps, warm.rate, warm.left_s) == ("single×1 warm-up", 1, 5, None, None)
    measured = describe({0: train_step(2)}, 3.0)
    # 2 steps in 1 s: 0.5 s a step, 100 tokens a step; 2 steps left here, then 2 s of start-up and 5 steps
    assert (measured.phase, measured.step, measured.rate) == ("single×1 steps", 3, "200 tokens/s")
    assert measured.left_s == pytest.approx(2 * 0.5 + 2.0 + 5 * 0.5)
    assert describe({0: train_step(1, warm_up=True)}, 6.0, run=1).phase == "ddp×2 warm-up"
    second = describe({0: train_step(3), 1: train_step(3, rank=1)}, 7.0, run=1)
    # steps 2 to 4 in 1 s: 0.5 s a step of 200 tokens (2 ranks); 1 step left, the last run
    assert (second.phase, second.rate, second.detail) == ("ddp×2 steps", "400 tokens/s", "run 2/2")
    assert second.left_s == pytest.approx(0.5)


def test_burn_window_figures_and_samples():
    describe = burn_progress(60.0, 15.0, samples=lambda: 7)
    start = describe({0: post(0, "burn", "memory pattern write/verify")}, 1.0)
    assert (start.phase, start.left_s, start.rate) == ("memory", 74.0, "7 telemetry samples")
    gemm = describe({0: gemms(0, 1200, 650, 0), 1: gemms(1, 1100, 640, 2)}, 10.0)
    assert gemm.phase == "gemm" and gemm.step == 2 and gemm.steps == 60
    assert gemm.rate == "2,300 GEMMs, 1,290 TFLOP/s, 2 error(s), 7 telemetry samples"
    assert gemm.left_s == pytest.approx(58.0)  # the window began one publication (2 s) before its first figures


def test_validate_piped_and_json():
    piped = subprocess.run(gpuready("validate", "--device", "cpu", "--quick"), capture_output=True, text=True,
                           timeout=300)
    assert piped.stderr.startswith("gpuready validate: 2 rank(s) on cpu, workloads collectives, ddp (quick); "
                                   "predicted about ")
    seen = phases(piped.stderr, "validate")
    order = ["launching", "startup", "ready", "collectives 1/2", "ddp 2/2", "finishing", "done"]
    # Phases are polled every 0.25 s: --quick's data-parallel check takes 0.11-0.14 s on CPU ranks, so "ddp 2/2" may
    # start and end between two polls. The collectives (about a second) and the end are always seen.
    assert "collectives 1/2" in seen and seen[-1] == "done", piped.stderr
    assert [order.index(phase) for phase in seen] == sorted(order.index(phase) for phase in seen)
    assert len(seen) == len(set(seen))  # one line per phase change
    assert not ESCAPE.search(piped.stderr)
    assert "validate: " not in piped.stdout and "left" not in piped.stdout
    quiet = subprocess.run(gpuready("validate", "--device", "cpu", "--quick", "--only", "collectives", "--json"),
                           capture_output=True, text=True, timeout=300)
    assert json.loads(quiet.stdout)["measurements"]
    assert "gpuready validate:" not in quiet.stderr and not phases(quiet.stderr, "validate")


def test_validate_on_a_terminal():
    terminal, stdout, code = on_terminal(gpuready("validate", "--device", "cpu", "--quick"))
    frames = terminal.split("\r")
    assert "\x1b[2K" in terminal and len(frames) > 5  # rewritten in place
    line = next(frame for frame in frames if "validate: collectives 1/2" in frame)
    assert re.search(r"\d+ s elapsed, (about [\d a-z]+ left|[\d a-z]+ past the plan)", line), line
    assert "validate: collectives" not in stdout and "\x1b" not in stdout and "busbw_gb_per_s" in stdout and code == 0


def test_bench_on_a_terminal_and_piped():
    args = ("bench", "--device", "cpu", "--strategies", "ddp", "--steps", "6", "--warmup", "1")
    terminal, stdout, code = on_terminal(gpuready(*args))
    assert code == 0 and "tokens/s" in stdout and "bench: ddp" not in stdout
    # Phases are polled every 0.25 s: on a fast box the tiny model's warm-up or steps can start and end between two
    # polls, so which ddp×2 phases show is not fixed. What is: the line redraws in place with the run and its time,
    # piped output is one plain line per phase, and stdout holds the report only.
    frames = [frame for frame in terminal.split("\r") if "bench: ddp×2 " in frame]
    assert frames and all(re.search(r"bench: ddp×2 [a-z-]+( \d+/7)?, .*\d+ s elapsed, .*run 2/2", frame)
                          for frame in frames), frames
    piped = subprocess.run(gpuready(*args), capture_output=True, text=True, timeout=300)
    assert piped.stderr.startswith("gpuready bench: tiny on 2 cpu rank(s), runs single×1, ddp×2; 1 warm-up + 6 "
                                   "measured steps each\n")
    seen = [phase.split(" ")[:2] for phase in phases(piped.stderr, "bench")]
    assert seen[0] == ["single×1", "launching"] and any(run == "ddp×2" for run, _phase in seen), seen
    assert not ESCAPE.search(piped.stderr) and "bench: ddp" not in piped.stdout and "s left" not in piped.stdout


def test_burn_piped_and_json():
    piped = subprocess.run(gpuready("burn", "--device", "cpu", "--duration", "4s"), capture_output=True, text=True,
                           timeout=300)
    assert piped.stderr.startswith("gpuready burn: 1 worker(s) on cpu, fp32 GEMMs for 4 s after a memory pattern\n")
    seen = [phase.split(" ")[0] for phase in phases(piped.stderr, "burn")]
    assert seen[0] == "launching" and "gemm" in seen and seen[-1] == "done", piped.stderr
    assert re.search(r"burn: gemm \d/4 s, [\d,]+ GEMMs, \d+ TFLOP/s, 0 error\(s\), about \d+ s left", piped.stderr)
    assert not ESCAPE.search(piped.stderr)
    quiet = subprocess.run(gpuready("burn", "--device", "cpu", "--duration", "2s", "--json"), capture_output=True,
                           text=True, timeout=300)
    assert json.loads(quiet.stdout)["facts"]["burn"]["duration_s"] == 2.0
    assert "gpuready burn:" not in quiet.stderr and not phases(quiet.stderr, "burn")
