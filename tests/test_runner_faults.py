"""The runner under faults, on CPU ranks with gloo: stop signals, a hang at the end, the overall deadline, a parent
killed outright, the group's timeouts, and torchrun runs where a rank raises, a rank dies or rank 0 dies."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("torch")


def _workers_left(log_dir: Path) -> list:
    """Rank processes of this run only: their environment names this run's log folder."""
    found = []
    for process in psutil.process_iter(["cmdline", "environ"]):
        try:
            if "gpuready.workloads.worker" in " ".join(process.info["cmdline"] or []) and \
                    any(str(log_dir) in value for value in (process.info["environ"] or {}).values()):
                found.append(process)
        except psutil.Error:
            pass
    return found


def _start(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpuready", "validate", "--device", "cpu", "--quick", "--json",
                             "--out", str(tmp_path / "report.json"), "--log-dir", str(tmp_path / "logs"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def _wait_for_sleep(log: Path, timeout_s: float = 150) -> None:
    """Until the injected `sleep` fault says, in the rank's log, that it has started sleeping."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and "sleeps in" in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{log} never reached the injected fault")


def _report(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stop_signal_keeps_what_was_measured_and_stops_the_ranks(tmp_path, signum, code):
    # rank 1 sleeps in ddp (alive, beating, not advancing): the collectives before it are measured by then
    run = _start(tmp_path, "--ranks", "2", "--timeout", "120", env={"GPUREADY_FAULT": "1:sleep:ddp"})
    _wait_for_sleep(tmp_path / "logs" / "rank1.log")
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == code, stderr[-2000:]
    report = _report(tmp_path)
    assert report["exit_code"] == code
    assert report["facts"]["validate"]["interrupted_by"] == signal.Signals(signum).name
    stopped = report["findings"][0]
    assert (stopped["check_id"], stopped["status"]) == ("validate.interrupted", "warn")
    assert stopped["message"].startswith(f"Stopped by {signal.Signals(signum).name}")
    assert report["verdict"] == "no_verdict"  # CPU ranks: no verdict on a machine, stopped or not (issue 32)
    assert any(m["name"] == "all_reduce_busbw_gb_per_s" for m in report["measurements"])
    assert not _workers_left(tmp_path / "logs")


def test_a_rank_stuck_after_its_results_is_named(tmp_path):
    """A hang in the final barrier / destroy_process_group, after every result was stored."""
    run = _start(tmp_path, "--ranks", "2", "--timeout", "4", "--only", "collectives",
                 env={"GPUREADY_FAULT": "1:sleep:finishing"})
    _, stderr = run.communicate(timeout=180)
    assert run.returncode == 4, stderr[-2000:]
    report = _report(tmp_path)
    hung = [f for f in report["findings"] if f["status"] == "fail"]
    assert [(f["check_id"], f["subject"]["rank"]) for f in hung] == [("validate.rank_hung", 1)]
    assert "its last report: finishing: results stored" in hung[0]["message"]
    assert any(m["name"] == "all_reduce_busbw_gb_per_s" for m in report["measurements"])  # results were kept
    assert not _workers_left(tmp_path / "logs")


def test_the_overall_deadline_ends_a_run_that_is_still_advancing(tmp_path):
    started = time.monotonic()
    # 256 MiB collectives on two gloo ranks take well over the deadline, so the run is still moving at 3 s
    run = _start(tmp_path, "--ranks", "2", "--deadline", "3", "--only", "collectives,ddp", "--max-bytes", "256M")
    _, stderr = run.communicate(timeout=180)
    assert run.returncode == 4, stderr[-2000:]
    report = _report(tmp_path)
    hung = [f for f in report["findings"] if f["check_id"] == "validate.rank_hung"]
    assert hung and all("overall deadline of 3 s" in f["message"] for f in hung)
    assert report["facts"]["validate"]["deadline_s"] == 3
    assert time.monotonic() - started < 90
    assert not _workers_left(tmp_path / "logs")


def test_ranks_die_with_a_parent_killed_outright(tmp_path):
    run = _start(tmp_path, "--ranks", "2", "--timeout", "120", env={"GPUREADY_FAULT": "1:sleep:collectives"})
    _wait_for_sleep(tmp_path / "logs" / "rank1.log")
    assert len(_workers_left(tmp_path / "logs")) == 2
    run.kill()  # SIGKILL: no handler runs in the parent; PR_SET_PDEATHSIG ends the ranks
    run.communicate(timeout=30)
    deadline = time.monotonic() + 20
    while _workers_left(tmp_path / "logs") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _workers_left(tmp_path / "logs")


def test_start_up_and_operation_timeouts_reach_the_group(tmp_path):
    run = _start(tmp_path, "--ranks", "2", "--only", "collectives", "--startup-timeout", "77", "--timeout", "9")
    _, stderr = run.communicate(timeout=180)
    assert run.returncode == 0, stderr[-2000:]
    # created with the start-up timeout; after the first barrier, the per-operation timeout (+30 s for NCCL's
    # own watchdog to report first), read back from the group's backend
    assert _report(tmp_path)["facts"]["validate"]["group_timeouts_s"] == {"startup": 77, "operations": 39}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _two_nodes(tmp_path: Path, fault: str, *args: str) -> tuple[list[int], dict]:
    endpoint = f"127.0.0.1:{_free_port()}"
    out = tmp_path / "report.json"
    common = ["--device", "cpu", "--quick", "--only", "collectives,ddp", "--json", "--out", str(out),
              "--timeout", "20", *args]
    nodes = [subprocess.Popen([sys.executable, "-m", "gpuready", "validate", "--nnodes", "2",
                               "--nproc-per-node", "1", "--rdzv-endpoint", endpoint, *common],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "GPUREADY_FAULT": fault}) for _ in range(2)]
    outputs = [node.communicate(timeout=240) for node in nodes]
    assert out.exists(), [err[-1500:] for _, err in outputs]
    return [node.returncode for node in nodes], json.loads(out.read_text())


def test_torchrun_a_raising_rank_is_reported_by_rank_0(tmp_path):
    codes, report = _two_nodes(tmp_path, "1:raise:ddp")
    failures = {f["subject"]["rank"]: f for f in report["findings"] if f["status"] == "fail"}
    assert failures[1]["check_id"] == "ddp.init_failed" and "fault injected" in failures[1]["message"]
    assert "consequence" not in failures[1]["message"]
    # rank 0 may see its peer leave in its own DDP set-up (gloo: "Connection closed by peer"): named as the consequence
    assert set(failures) <= {0, 1}
    if 0 in failures:
        assert "Likely a consequence of rank 1 failing" in failures[0]["message"]
    assert any(m["name"] == "all_reduce_busbw_gb_per_s" for m in report["measurements"])
    assert report["exit_code"] == 1 and all(code != 0 for code in codes)


def test_torchrun_a_rank_that_dies_is_named_by_rank_0(tmp_path):
    codes, report = _two_nodes(tmp_path, "1:exit:ddp")
    failures = [f for f in report["findings"] if f["status"] == "fail"]
    assert (failures[0]["check_id"], failures[0]["subject"]["rank"]) == ("validate.rank_exited", 1)
    assert "its last report: ddp" in failures[0]["message"]  # where it died: the injected fault's phase
    # rank 0's own collective fails when its peer is gone (gloo: "Connection closed by peer"): named as the consequence
    for consequence in failures[1:]:
        assert consequence["subject"]["rank"] == 0 and "Likely a consequence of rank 1 " in consequence["message"]
    assert report["exit_code"] == 4 and all(code != 0 for code in codes)
    assert any(m["name"] == "all_reduce_busbw_gb_per_s" for m in report["measurements"])


def test_torchrun_rank_0_dying_leaves_the_report_to_the_node_hosting_the_store(tmp_path):
    codes, report = _two_nodes(tmp_path, "0:exit:ddp")
    assert report["facts"]["validate"]["written_by"].startswith("the node hosting the rendezvous store")
    exited = [f for f in report["findings"] if f["check_id"] == "validate.rank_exited"]
    assert exited and exited[0]["subject"]["rank"] == 0 and "ended before writing the report" in exited[0]["message"]
    assert any(m["name"] == "all_reduce_busbw_gb_per_s" for m in report["measurements"])
    assert report["exit_code"] == 4 and all(code != 0 for code in codes)


def test_burn_stopped_by_sigterm_keeps_its_throughput_so_far(tmp_path):
    run = subprocess.Popen([sys.executable, "-m", "gpuready", "burn", "--device", "cpu", "--duration", "120s",
                            "--json", "--out", str(tmp_path / "report.json"), "--log-dir", str(tmp_path / "logs")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    log = tmp_path / "logs" / "rank0.log"
    while time.monotonic() < deadline and not _burning(tmp_path / "logs"):
        time.sleep(0.5)
    time.sleep(5)  # past the first partial publication (every 2 s)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 143, stderr[-2000:]
    report = _report(tmp_path)
    assert report["findings"][0]["check_id"] == "burn.interrupted" and report["facts"]["burn"]["interrupted_by"] == "SIGTERM"
    throughput = next(m for m in report["measurements"] if m["name"] == "burn_tflops_fp32")
    assert throughput["value"] > 0 and throughput["method"]["partial"] == "the run was stopped before the window ended"
    assert not _workers_left(tmp_path / "logs") and log.exists()


def _burning(log_dir: Path) -> bool:
    """The burn worker is past start-up: its process has run for a while (it logs nothing on success)."""
    workers = _workers_left(log_dir)
    return bool(workers) and time.time() - workers[0].create_time() > 8


@pytest.mark.parametrize("imports", ["import torch", "import json"])
def test_a_process_ends_with_its_code_and_its_output_flushed(imports):
    """exit_without_teardown: with torch imported the process ends through os._exit, which flushes nothing itself;
    the last line printed without a newline still arrives, the exit code is the one given, and nothing is said on
    standard error. Without torch, the usual exit does the same."""
    code = (f"{imports}\nimport sys\nfrom gpuready.signals import exit_without_teardown\n"
            "print('partial', end='')\nsys.stderr.write('e')\nexit_without_teardown(3)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={key: value for key, value in os.environ.items() if not key.startswith("COV")})
    assert (done.returncode, done.stdout, done.stderr) == (3, "partial", "e")
