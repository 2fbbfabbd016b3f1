"""validate on CPU ranks with gloo: the collectives, DDP, the watchdog, and a two-node torchrun rendezvous."""

import json
import os
import socket
import subprocess
import sys
import time

import psutil
import pytest

pytest.importorskip("torch")


def validate(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "gpuready", "validate", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _report(tmp_path, *args, env=None):
    out = tmp_path / "report.json"
    result = validate("--device", "cpu", "--quick", "--json", "--out", str(out), "--log-dir", str(tmp_path / "logs"),
                      *args, env=env)
    return result, json.loads(out.read_text())


def _workers_left(log_dir) -> list:
    """Rank processes of this run only: their environment names this run's log folder (another suite's do not)."""
    return [p for p in psutil.process_iter(["cmdline", "environ"])
            if "gpuready.workloads.worker" in " ".join(p.info["cmdline"] or [])
            and any(str(log_dir) in value for value in (p.info["environ"] or {}).values())]


@pytest.mark.parametrize("ranks", [2, 4])
def test_collectives_and_ddp_on_gloo(tmp_path, ranks):
    result, report = _report(tmp_path, "--ranks", str(ranks), "--oversubscribe")  # CI has 2 CPUs
    assert result.returncode == 0, result.stderr[-2000:]
    names = {m["name"] for m in report["measurements"]}
    for collective in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"):
        assert f"{collective}_busbw_gb_per_s" in names
    all_reduce = next(m for m in report["measurements"] if m["name"] == "all_reduce_busbw_gb_per_s")
    assert all_reduce["method"]["ranks"] == ranks and all_reduce["value"] > 0
    rows = all_reduce["method"]["rows"]
    factor = 2 * (ranks - 1) / ranks
    assert all(row["busbw_gb_per_s"] == pytest.approx(row["algbw_gb_per_s"] * factor) for row in rows)
    gather_rows = next(m for m in report["measurements"] if m["name"] == "all_gather_busbw_gb_per_s")["method"]["rows"]
    assert {row["placement"] for row in gather_rows} == {"out_of_place", "in_place"}
    statuses = {(f["check_id"], f["status"]) for f in report["findings"]}
    assert ("ddp.mismatch", "pass") in statuses and ("nccl.failed", "pass") in statuses
    # --quick averages the gradients by hand (DDP's constructor imports torch._dynamo: seconds) and leaves FSDP2 out
    message = next(f["message"] for f in report["findings"] if f["check_id"] == "ddp.mismatch")
    assert message.startswith(f"Data-parallel training on {ranks} rank(s) (--quick: gradients averaged by one")
    assert message.endswith("parameters bitwise identical on every rank; validate without --quick runs DDP itself and"
                            " an FSDP2 step.")


def test_ddp_and_fsdp2_without_quick(tmp_path):
    out = tmp_path / "report.json"
    result = validate("--device", "cpu", "--ranks", "2", "--only", "ddp", "--json", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    message = next(f["message"] for f in json.loads(out.read_text())["findings"] if f["check_id"] == "ddp.mismatch")
    assert message.startswith("DDP on 2 rank(s): 3 steps") and "FSDP2 step matches DDP" in message


def test_gpu_workloads_are_skipped_on_cpu(tmp_path):
    result, report = _report(tmp_path, "--ranks", "2", "--only", "compute,ddp")
    assert result.returncode == 0
    assert not [m for m in report["measurements"] if m["name"].startswith("matmul")]


def test_a_stopped_rank_is_named_and_killed(tmp_path):
    started = time.monotonic()
    result, report = _report(tmp_path, "--ranks", "2", "--timeout", "4",
                             env={"GPUREADY_FAULT": "1:stop:collectives"})
    assert result.returncode == 4 and report["exit_code"] == 4
    failures = [f for f in report["findings"] if f["status"] == "fail"]
    assert [f["subject"]["rank"] for f in failures] == [1]
    assert failures[0]["check_id"] == "validate.rank_hung" and "stopped" in failures[0]["message"]
    assert time.monotonic() - started < 60
    assert not _workers_left(tmp_path / "logs")


def _only_consequences_of_rank_1(failures):
    """Rank 0 is stopped once rank 1 fails, unless its next collective fails first (gloo: "Connection closed by
    peer", whichever comes first under load): then its failure is said to follow rank 1's, never a fault of its own."""
    for failure in failures:
        if failure["subject"]["rank"] != 1:
            assert failure["check_id"] == "ddp.init_failed" and failure["subject"]["rank"] == 0
            assert "Likely a consequence of rank 1 failing, ending or hanging first." in failure["message"]


def test_a_rank_that_exits_is_named(tmp_path):
    result, report = _report(tmp_path, "--ranks", "2", "--timeout", "4", env={"GPUREADY_FAULT": "1:exit:ddp"})
    assert result.returncode == 4
    failures = [f for f in report["findings"] if f["status"] == "fail"]
    origin = [f for f in failures if f["subject"]["rank"] == 1]
    assert [f["check_id"] for f in origin] == ["validate.rank_exited"]
    assert "exited with code 17" in origin[0]["message"]
    _only_consequences_of_rank_1(failures)
    # what was measured before the failure is kept
    assert any(m["name"] == "all_reduce_busbw_gb_per_s" for m in report["measurements"])
    assert not _workers_left(tmp_path / "logs")


def test_a_workload_error_is_reported_and_its_peers_stopped(tmp_path):
    result, report = _report(tmp_path, "--ranks", "2", "--timeout", "30", env={"GPUREADY_FAULT": "1:raise:ddp"})
    assert result.returncode == 1 and report["exit_code"] == 1  # a failed workload, not a hang
    failures = [f for f in report["findings"] if f["status"] == "fail"]
    origin = [f for f in failures if f["subject"]["rank"] == 1]
    assert [f["check_id"] for f in origin] == ["ddp.init_failed"]
    assert "fault injected" in origin[0]["message"]
    _only_consequences_of_rank_1(failures)
    assert not _workers_left(tmp_path / "logs")


def test_bad_options_exit_2():
    result = validate("--only", "compute,nonsense")
    assert result.returncode == 2 and "unknown workload" in result.stderr
    result = validate("--nnodes", "2")
    assert result.returncode == 2 and "--rdzv-endpoint" in result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_nodes_over_loopback_with_torchrun(tmp_path):
    """Two torchrun 'nodes' on this machine, one rank each, c10d rendezvous over loopback."""
    endpoint = f"127.0.0.1:{_free_port()}"
    out = tmp_path / "report.json"
    common = ["--device", "cpu", "--quick", "--only", "collectives,ddp", "--json", "--out", str(out)]
    nodes = [subprocess.Popen([sys.executable, "-m", "gpuready", "validate", "--nnodes", "2",
                               "--nproc-per-node", "1", "--rdzv-endpoint", endpoint, *common],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [node.communicate(timeout=240) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-1500:] for _, err in outputs]
    report = json.loads(out.read_text())
    assert report["facts"]["validate"]["ranks"] == [0, 1]
    all_reduce = next(m for m in report["measurements"] if m["name"] == "all_reduce_busbw_gb_per_s")
    assert all_reduce["method"]["ranks"] == 2
    assert ("ddp.mismatch", "pass") in {(f["check_id"], f["status"]) for f in report["findings"]}
