"""Bad and hostile input: --out checked before any work, --ranks bounded, stores and metrics on loopback,
a closed pipe, and nothing measured lost."""

import errno
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import SHARED_H200
from gpuready.cli import main as cli
from gpuready.facts.nvml_records import GpuIdentity, GpuSample
from gpuready.runner import rendezvous_store
from gpuready.options import UsageError
from gpuready.model import ExitCode


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(pid: int) -> set[tuple[str, int]]:
    try:
        return {(c.laddr.ip, c.laddr.port) for c in psutil.Process(pid).net_connections("inet") if c.status == "LISTEN"}
    except psutil.Error:
        return set()


def _workers() -> list:
    workers = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "gpuready.workloads.worker" in " ".join(process.cmdline()):
                workers.append(process)
        except psutil.Error:
            pass
    return workers


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if a verb gets as far as starting its work."""
    def refuse(*args, **kwargs):
        raise AssertionError("work started although the options were refused")
    import gpuready.verbs.validate
    import gpuready.runner.local
    monkeypatch.setattr(gpuready.verbs.validate, "run_local_validate", refuse)
    monkeypatch.setattr(gpuready.runner.local, "run_local", refuse)  # burn's way to its workers
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "call", refuse)


# 1. --out is checked before any work; a failed final write still delivers the report

def test_out_is_checked_before_any_work(tmp_path, capsys, no_work):
    missing = tmp_path / "missing" / "dir" / "r.json"
    for verb in (["check", "--bundle", str(SHARED_H200)], ["validate", "--device", "cpu"],
                 ["burn", "--device", "cpu", "--duration", "1s"]):
        assert cli.main([*verb, "--out", str(missing)]) == ExitCode.USAGE
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and "does not exist" in error and "Traceback" not in error
    assert not (tmp_path / "missing").exists()  # the folder is not created
    assert cli.main(["validate", "--device", "cpu", "--out", "/proc/self/r.json"]) == ExitCode.USAGE  # unwritable
    assert "cannot write in /proc/self" in capsys.readouterr().err
    assert cli.main(["check", "--bundle", str(SHARED_H200), "--out", str(tmp_path)]) == ExitCode.USAGE  # a folder
    assert "is a folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # the probe file is gone


def test_a_failed_final_write_prints_the_json_instead(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.json"
    real_write = Path.write_text

    def full_disk(self, *args, **kwargs):
        if self == out:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", full_disk)
    code = cli.main(["check", "--bundle", str(SHARED_H200), "--json", "--out", str(out)])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["exit_code"] == 0 and code == ExitCode.USAGE  # the machine is ready; the report was not written
    assert captured.err == (f"gpuready: cannot write the report to {out} (No space left on device); "
                            "the JSON report is on stdout instead\n")
    code = cli.main(["check", "--bundle", str(SHARED_H200), "--out", str(out)])  # console view, then the JSON
    output = capsys.readouterr().out
    assert code == ExitCode.USAGE and json.loads(output[output.index("\n{") + 1:])["exit_code"] == 0


# 2. --ranks is bounded; a failed spawn leaves no rank behind

def test_ranks_are_bounded_before_anything_starts(capsys, no_work):
    from gpuready.devices import OVERSUBSCRIBE_FACTOR, usable_cpus
    cpus = usable_cpus()
    cases = [(["validate", "--device", "cpu", "--ranks", "100000"], "--oversubscribe allows up to"),
             (["validate", "--device", "cpu", "--ranks", "100000", "--oversubscribe"], "the most --oversubscribe"),
             (["validate", "--device", "cpu", "--ranks", str(cpus + 1)], f"the {cpus} CPU(s)"),
             (["validate", "--device", "cpu", "--ranks", str(OVERSUBSCRIBE_FACTOR * cpus + 1), "--oversubscribe"],
              "the most --oversubscribe"),
             (["burn", "--device", "cpu", "--ranks", "100000"], "--oversubscribe allows up to"),
             (["validate", "--device", "cpu", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29500",
               "--nproc-per-node", "100000"], "--nproc-per-node 100000 is more than")]
    for argv, sentence in cases:
        assert cli.main(argv) == ExitCode.USAGE, argv
        error = capsys.readouterr().err
        assert sentence in error and error.count("\n") == 1, (argv, error)


def test_ranks_on_gpus_are_bounded_by_the_gpus(monkeypatch):
    import torch

    from gpuready.verbs.validate import ValidateOptions, resolve_device
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device(ValidateOptions(device="cuda")) == ("cuda", 2)
    with pytest.raises(ValueError, match=r"--ranks 3 is more than the 2 visible GPU\(s\): one rank per GPU"):
        resolve_device(ValidateOptions(device="cuda", ranks=3))
    with pytest.raises(ValueError, match="the most --oversubscribe"):  # gloo ranks sharing GPUs count as CPU ranks
        resolve_device(ValidateOptions(device="cuda", backend="gloo", ranks=100000, oversubscribe=True))


def test_a_failed_spawn_stops_the_ranks_already_started(monkeypatch, capsys, tmp_path):
    import gpuready.devices
    import gpuready.runner.local as runner
    real_popen, started = subprocess.Popen, []

    def third_fails(*args, **kwargs):
        if len(started) == 2:
            raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        started.append(real_popen(*args, **kwargs))
        return started[-1]
    monkeypatch.setattr(runner.subprocess, "Popen", third_fails)
    monkeypatch.setattr(gpuready.devices, "usable_cpus", lambda: 4)
    code = cli.main(["validate", "--device", "cpu", "--ranks", "4", "--json", "--log-dir", str(tmp_path)])
    error = capsys.readouterr().err
    assert code == ExitCode.TOOL_ERROR
    assert error == ("gpuready: could not start rank 2 of 4 (Resource temporarily unavailable); "
                     "the 2 rank(s) already started were stopped\n")
    assert len(started) == 2 and all(process.returncode is not None for process in started)
    assert not any(psutil.pid_exists(process.pid) for process in started) and not _workers()


# 3. the rendezvous store and the metrics server listen where they are told

def test_the_store_listens_on_loopback_only():
    from gpuready.runner.local import listening_store
    store = listening_store("127.0.0.1", 0, 10)
    assert (("127.0.0.1", store.port)) in _listening(os.getpid())
    assert not [address for address in _listening(os.getpid()) if address[1] == store.port and
                address[0] != "127.0.0.1"]
    del store


def test_a_local_validate_listens_on_loopback_only(tmp_path):
    out = tmp_path / "r.json"
    run = subprocess.Popen([sys.executable, "-m", "gpuready", "validate", "--device", "cpu", "--ranks", "2", "--quick",
                            "--only", "collectives", "--json", "--out", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[tuple[str, int]] = set()
    while run.poll() is None:  # the store in the parent, gloo's sockets in the ranks
        for process in [psutil.Process(run.pid), *psutil.Process(run.pid).children(recursive=True)]:
            seen |= _listening(process.pid)
        time.sleep(0.05)
    _, error = run.communicate()
    assert run.returncode == 0, error[-2000:]
    report = json.loads(out.read_text())
    store = report["facts"]["validate"]["rendezvous_store"]
    assert store.startswith("127.0.0.1:") and ("127.0.0.1", int(store.split(":")[1])) in seen
    assert {ip for ip, _ in seen} == {"127.0.0.1"}
    assert "Failed to initialize NumPy" not in error  # 4: torch's warning where numpy is absent


def test_multi_node_store_binds_the_endpoint_only(monkeypatch):
    port = _free_port()
    store, is_host, note = rendezvous_store.host_rendezvous_store(f"127.0.0.1:{port}", 10)
    try:
        assert is_host is False and note == f"hosting the rendezvous store on 127.0.0.1:{port} only " \
                                            f"(hosted by gpuready on {socket.gethostname()})"
        assert [address for address in _listening(os.getpid()) if address[1] == port] == [("127.0.0.1", port)]
        # a second "node" on this machine joins it; a node whose address this is not hosts nothing
        assert rendezvous_store.host_rendezvous_store(f"127.0.0.1:{port}", 10)[:2] == (None, False)
    finally:
        del store
    assert rendezvous_store.host_rendezvous_store("203.0.113.7:29500", 10)[:2] == (None, False)  # TEST-NET-3: not ours
    with pytest.raises(UsageError, match="is not HOST:PORT"):
        rendezvous_store.host_rendezvous_store("node1", 10)
    # /etc/hosts mapping this machine's name to 127.0.1.1: the other nodes could not reach that
    monkeypatch.setattr(rendezvous_store.socket, "getaddrinfo",
                        lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", 29500))])
    store, is_host, note = rendezvous_store.host_rendezvous_store("node1:29500", 10)
    assert (store, is_host) == (None, None) and "every interface" in note


class _Source:
    """One GPU; records where the metrics server listens while the monitor samples."""
    identity = [GpuIdentity(index=0, uuid="GPU-0", name="NVIDIA H200")]
    lost: set = set()

    def __init__(self, port):
        self.port, self.addresses = port, set()

    def sample(self, index):
        self.addresses = {ip for ip, port in _listening(os.getpid()) if port == self.port}
        return GpuSample(power_w=100.0)


def test_metrics_listen_on_loopback_unless_asked(capsys):
    for address, expected in ((None, {"127.0.0.1"}), ("0.0.0.0", {"0.0.0.0"})):
        port = _free_port()
        source = _Source(port)
        options = {} if address is None else {"prometheus_address": address}
        from gpuready.verbs.monitor import run_monitor
        assert run_monitor(interval_s=0.01, jsonl=None, prometheus_port=port, count=1, quiet=True, source=source,
                           **options) == ExitCode.READY
        assert source.addresses == expected


def test_bad_ports_and_jsonl_are_usage_errors(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        cases = [(["--prometheus-port", "0"], "--prometheus-port: '0' is not a TCP port from 1 to 65,535"),
                 (["--prometheus-port", "70000"], "--prometheus-port: '70000' is not a TCP port from 1 to 65,535"),
                 (["--prometheus-port", str(busy)], f"cannot serve metrics on 127.0.0.1:{busy}: Address already in use"),
                 (["--prometheus-port", "9400", "--prometheus-address", "no-such-host.invalid"], "cannot be resolved"),
                 (["--jsonl", str(tmp_path / "missing" / "m.jsonl")], "cannot append to --jsonl"),
                 (["--jsonl", str(tmp_path)], "cannot append to --jsonl")]
        for argv, sentence in cases:  # checked before NVML: the same answer with or without a driver
            assert cli.main(["monitor", "--count", "1", *argv]) == ExitCode.USAGE, argv
            error = capsys.readouterr().err
            assert sentence in error and error.count("\n") == 1, (argv, error)


# 4. a reader that goes away

@pytest.mark.parametrize("mode", [["--json"], []])  # print() and rich's console see the pipe close differently
def test_a_closed_pipe_exits_quietly(tmp_path, mode):
    out = tmp_path / "r.json"
    run = subprocess.Popen([sys.executable, "-m", "gpuready", "check", "--bundle", str(SHARED_H200), "--out", str(out),
                            *mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run.stdout.close()  # as `| head -1` does once it has its line
    _, error = run.communicate(timeout=60)
    assert run.returncode == cli.BROKEN_PIPE_EXIT == 141 and error == b""  # 128 + SIGPIPE, as for git
    assert json.loads(out.read_text())["exit_code"] == 0  # --out is complete
