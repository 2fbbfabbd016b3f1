"""Issue 9: no GPU is an error; other processes on the GPU; burn throughput against the datasheet;
burn failures classified."""

import json
from pathlib import Path

import pytest

from gpuready.cli import main as cli
from gpuready.facts import gpu_users
from gpuready.model import ExitCode, Status
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge
from gpuready.devices import blame_sharing
from gpuready.telemetry import Telemetry
from gpuready.runner.watchdog import RankFailure

torch = pytest.importorskip("torch")

FIXTURE = Path(__file__).parent / "fixtures" / "h200-burn" / "burn-60s-report.json"
IDENTITY = {"bus_id": "0000:00:06.0", "uuid": "GPU-0000", "name": "NVIDIA H200"}
GIB = 2**30


def _nvml(processes=(), index=0):
    return {"init_error": None, "gpus": [{"index": index, "bus_id": IDENTITY["bus_id"], "uuid": IDENTITY["uuid"],
                                          "memory_total_bytes": 141 * GIB, "memory_used_bytes": 40 * GIB,
                                          "processes": [dict(p) for p in processes]}]}


FOREIGN = [{"pid": 424242, "name": "python3", "kind": "C", "used_memory_bytes": 40 * GIB}]


def _gpu(tflops=656.0, dtype="bf16", **result):
    data = {"iterations": 12000, "dtype": dtype, "n": 8192, "errors": [], "tolerance_abs": 5.0,
            "reference_checksum": 1.5, "tflops": tflops, "window_start": 1002.0, "window_end": 1059.0,
            "intervals": [], "memory": {"bytes": 2**33, "wrong_words": 0}, **result}
    return BurnGpu(rank=0, nvml_index=0, identity=IDENTITY, result=data, slowdown_c=89.0)


def _judge(gpus, users=None, failures=(), telemetry=None, exclusive=False):
    judge = BurnJudge("h200", gpus, telemetry, list(failures), users=users, exclusive=exclusive)
    judge.judge()
    return judge


def _by_id(judge, check_id):
    return [f for f in judge.findings if f.check_id == check_id]


# 1. no GPU is an error, not a CPU run ---------------------------------------------------------------

@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where torch sees no GPU")
@pytest.mark.parametrize("verb", [["validate", "--quick"], ["burn", "--duration", "1s"]])
def test_no_gpu_exits_3_with_one_sentence(verb, capsys):
    assert cli.main(verb) == ExitCode.TOOL_ERROR
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "found no GPU" in error and "--device cpu" in error
    assert "Traceback" not in error


def test_no_gpu_reasons(monkeypatch):
    from gpuready.devices import NoGpuError, auto_device, no_gpu_reason
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "CPU-only build (torch.version.cuda is None)" in no_gpu_reason()
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "hides every GPU" in no_gpu_reason("burn") and no_gpu_reason("burn").startswith("burn found no GPU")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "no NVIDIA driver loaded" in no_gpu_reason()
    with pytest.raises(NoGpuError):
        auto_device("auto")
    assert auto_device("cpu") == "cpu"


def test_device_cpu_still_runs(tmp_path):
    out = tmp_path / "r.json"
    code = cli.main(["burn", "--device", "cpu", "--duration", "2s", "--json", "--out", str(out),
                     "--log-dir", str(tmp_path / "logs")])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["facts"]["burn"]["device"] == "cpu"
    assert not [f for f in report["findings"] if f["check_id"] == "burn.gpu_shared"]  # no NVML on CPU runs


# 2. who else is on the GPU ----------------------------------------------------------------------------

def test_gpu_users_leave_out_our_own_processes(monkeypatch):
    import os
    mine = {"pid": os.getpid(), "name": "python", "kind": "C", "used_memory_bytes": GIB}
    monkeypatch.setattr(gpu_users, "read_nvml", lambda: _nvml([mine, *FOREIGN]))
    users = gpu_users.gpu_users([0])
    assert [p["pid"] for p in users[0].processes] == [424242]
    assert users[0].free_bytes == 101 * GIB and users[0].held_bytes == 40 * GIB
    monkeypatch.setattr(gpu_users, "read_nvml", lambda: {"init_error": "NVMLError_DriverNotLoaded", "gpus": []})
    assert gpu_users.gpu_users([0]) is None


def test_shared_gpu_warns_and_blames_low_figures(monkeypatch):
    monkeypatch.setattr(gpu_users, "read_nvml", lambda: _nvml(FOREIGN))
    users = gpu_users.gpu_users([0], ignore=set())
    slow = _gpu(tflops=400.0)
    other = _gpu(tflops=656.0)
    other.rank, other.nvml_index = 1, 1
    other.identity = {"bus_id": "0000:00:07.0", "uuid": "GPU-0001", "name": "NVIDIA H200"}
    judge = _judge([slow, other], users=users)
    shared = _by_id(judge, "burn.gpu_shared")
    assert [f.status for f in shared] == [Status.WARN]
    assert "pid 424242" in shared[0].message and "40.0 GiB" in shared[0].message
    low = [f for f in _by_id(judge, "burn.throughput_low") if f.subject.rank == 0][0]
    assert low.status == Status.WARN and "pid 424242" in low.message and "likely cause" in low.message
    straggler = _by_id(judge, "burn.straggler")[0]
    assert "likely cause" in straggler.message
    assert "likely cause" not in [f for f in _by_id(judge, "burn.throughput_low") if f.subject.rank == 1][0].message


def test_unshared_gpu_passes_and_exclusive_fails(monkeypatch):
    monkeypatch.setattr(gpu_users, "read_nvml", lambda: _nvml())
    judge = _judge([_gpu()], users=gpu_users.gpu_users([0], ignore=set()))
    assert [f.status for f in _by_id(judge, "burn.gpu_shared")] == [Status.PASS]
    monkeypatch.setattr(gpu_users, "read_nvml", lambda: _nvml(FOREIGN))
    judge = _judge([_gpu()], users=gpu_users.gpu_users([0], ignore=set()), exclusive=True)
    assert [f.status for f in _by_id(judge, "burn.gpu_shared")] == [Status.FAIL]


def _shared_gpu_and_no_runs(monkeypatch) -> None:
    """A GPU another process computes on, torch seeing it, and any rank start an error."""
    import gpuready.runner.local
    import gpuready.verbs.validate.run as run

    def refuse(*args, **kwargs):
        raise AssertionError("nothing may start under --exclusive on a shared GPU")

    monkeypatch.setattr(run, "auto_device", lambda device, verb="validate": "cuda")
    monkeypatch.setattr(gpuready.runner.local, "run_local", refuse)
    monkeypatch.setattr(gpu_users, "read_nvml", lambda: _nvml(FOREIGN))


def _refused(report: dict, verb: str) -> None:
    shared = [f for f in report["findings"] if f["check_id"] == f"{verb}.gpu_shared"]
    assert [f["status"] for f in shared] == ["fail"] and "nothing was started" in shared[0]["message"]
    assert report["facts"][verb]["started"] is False


def test_validate_exclusive_fails_before_anything_runs(monkeypatch, capsys):
    import gpuready.verbs.validate
    import gpuready.verbs.validate.run as run
    _shared_gpu_and_no_runs(monkeypatch)
    for module in (run, gpuready.verbs.validate):
        monkeypatch.setattr(module, "resolve_device", lambda options, option="--ranks": ("cuda", 1))
    monkeypatch.setattr(run, "local_facts", lambda device: None)
    assert cli.main(["validate", "--device", "cuda", "--exclusive", "--json"]) == ExitCode.NOT_READY
    _refused(json.loads(capsys.readouterr().out), "validate")


def test_bench_exclusive_fails_before_anything_runs(monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    import gpuready.runner.local
    import gpuready.verbs.bench.run as bench_run
    _shared_gpu_and_no_runs(monkeypatch)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(bench_run, "node_view", lambda device, ranks: bench_run.NodeView(gpus=[0]))
    monkeypatch.setattr("gpuready.measuring.start_telemetry", lambda device, gpus, *args, **kwargs: (None, None))
    assert cli.main(["bench", "--device", "cuda", "--exclusive", "--json"]) == ExitCode.NOT_READY
    report = json.loads(capsys.readouterr().out)
    _refused(report, "bench")
    assert report["facts"]["bench"] == {"device": "cuda", "runs": [], "exclusive": True, "started": False}
    # without --exclusive the same GPU is used, and the runs start
    monkeypatch.setattr(gpuready.runner.local, "run_local", lambda **kwargs: (_ for _ in ()).throw(
        RuntimeError("started")))
    cli.main(["bench", "--device", "cuda", "--json"])
    assert "RuntimeError: started" in capsys.readouterr().err


def test_validate_low_compute_on_a_shared_gpu_names_the_process():
    from gpuready.model import Finding, GpuRef, Subject
    users = {0: gpu_users.GpuUsers(index=0, bus_id=IDENTITY["bus_id"], uuid=IDENTITY["uuid"],
                                   processes=[dict(FOREIGN[0])])}
    subject = Subject(host="h", gpu=GpuRef(index=0, bus_id=IDENTITY["bus_id"], uuid=IDENTITY["uuid"]), rank=0)
    findings = [Finding(check_id="compute.low", status=Status.WARN, subject=subject, message="bf16 matmul: low."),
                Finding(check_id="compute.low", status=Status.PASS, subject=subject, message="bf16 matmul: fine.")]
    blame_sharing(findings, users)
    assert "pid 424242 (python3) holding 40.0 GiB" in findings[0].message
    assert findings[1].message == "bf16 matmul: fine."


# 3. burn throughput against what the GPU should sustain ---------------------------------------------

def test_recorded_h200_burn_passes_against_the_datasheet():
    recorded = json.loads(FIXTURE.read_text())
    measured = next(m["value"] for m in recorded["measurements"] if m["name"] == "burn_tflops_bf16")
    judge = _judge([_gpu(tflops=measured)])
    finding = _by_id(judge, "burn.throughput_low")[0]
    assert finding.status == Status.PASS and finding.expected == pytest.approx(989 * 0.66, abs=0.1)
    measurement = next(m for m in judge.measurements if m.name == "burn_tflops_bf16")
    assert measurement.expected == pytest.approx(652.7, abs=0.1) and measurement.expected_source != "unmeasured"


@pytest.mark.parametrize("tflops,status", [(290.0, Status.FAIL), (560.0, Status.WARN), (600.0, Status.PASS)])
def test_throughput_levels(tflops, status):
    finding = _by_id(_judge([_gpu(tflops=tflops)]), "burn.throughput_low")[0]
    assert finding.status == status, finding.message
    if tflops == 290.0:
        assert "44%" in finding.message


def test_power_limit_scales_the_expectation_and_unmeasured_dtypes_say_so():
    gpu = _gpu(tflops=400.0)
    gpu.power_limit_w, gpu.power_default_limit_w = 420.0, 700.0
    judge = _judge([gpu])
    finding = _by_id(judge, "burn.throughput_low")[0]
    assert finding.expected == pytest.approx(989 * 0.66 * 0.6, abs=0.1) and finding.status == Status.PASS
    telemetry = Telemetry(started_at=1000.0, samples={0: [(5.0, {"power_limit_w": 700.0})]}, xid_source="none")
    gpu = _gpu(tflops=400.0)
    gpu.power_limit_w, gpu.power_default_limit_w = 420.0, 700.0
    judge = BurnJudge("h200", [gpu], telemetry, [])
    assert judge.expected_tflops(gpu)[1]["power_scale"] == 1.0  # the sampled limit wins over the start's
    fp16 = _judge([_gpu(tflops=600.0, dtype="fp16")])
    measurement = next(m for m in fp16.measurements if m.name == "burn_tflops_fp16")
    assert measurement.expected_source == "unmeasured"
    assert "unmeasured" in _by_id(fp16, "burn.throughput_low")[0].message


def test_unknown_gpu_is_not_judged_against_a_datasheet():
    gpu = _gpu()
    gpu.identity = {**IDENTITY, "name": "cpu"}
    assert not _by_id(_judge([gpu]), "burn.throughput_low")


# 4. burn failures classified ----------------------------------------------------------------------------

def _failed_worker(error):
    gpu = BurnGpu(rank=0, nvml_index=0, identity=IDENTITY, result={"error": error, "traceback": "..."})
    return gpu, [RankFailure(rank=0, kind="workload", detail="the workload raised")]


@pytest.mark.parametrize("error,cause", [
    ("OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB", "out_of_memory"),
    ("AcceleratorError: CUDA error: an illegal memory access was encountered", "illegal_address"),
    ("RuntimeError: CUDA error: unspecified launch failure", "launch_failure"),
    ("RuntimeError: CUDA error: GPU is lost", "device_lost"),
    ("ValueError: something of ours", "other"),
])
def test_worker_exceptions_are_burn_failed_not_burn_errors(error, cause):
    gpu, failures = _failed_worker(error)
    judge = _judge([gpu], failures=failures)
    failed = _by_id(judge, "burn.failed")
    assert [f.status for f in failed] == [Status.FAIL] and failed[0].observed["cause"] == cause
    assert not _by_id(judge, "burn.errors")


def test_out_of_memory_names_who_holds_the_memory():
    users = {0: gpu_users.GpuUsers(index=0, bus_id=IDENTITY["bus_id"], uuid=IDENTITY["uuid"],
                                   processes=[dict(FOREIGN[0])])}
    gpu, failures = _failed_worker("OutOfMemoryError: CUDA out of memory.")
    failed = _by_id(_judge([gpu], users=users, failures=failures), "burn.failed")[0]
    assert "pid 424242 (python3) holding 40.0 GiB" in failed.message and failed.observed["holders"][0]["pid"] == 424242


def test_wrong_results_stay_burn_errors_and_the_memory_test_says_what_it_covered():
    wrong = _gpu(errors=[{"iteration": 60, "elements": 1, "max_abs_error": 21.0, "t": 1010.0}])
    judge = _judge([wrong])
    assert [f.status for f in _by_id(judge, "burn.errors")] == [Status.FAIL] and not _by_id(judge, "burn.failed")
    sized = _gpu(memory={"bytes": 8 * GIB, "wrong_words": 0, "free_bytes_at_start": 100 * GIB,
                         "sizing": "25% of the memory free at start, at most 8 GiB"})
    message = _by_id(_judge([sized]), "burn.errors")[0].message
    assert "8.0 GiB" in message and "100.0 GiB free" in message
