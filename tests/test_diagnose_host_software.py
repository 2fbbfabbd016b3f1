"""diagnose: host-level causes (host.oom, host.shm) and software-stack mismatches (software.driver_cuda,
software.torch_arch, software.nccl) on published logs (tests/fixtures/diagnose/host, .../software), negative cases and
linear-time checks on hostile input."""

from __future__ import annotations

import time
from pathlib import Path

from gpuready.facts import host_log, torch_errors
from gpuready.knowledge import driver_requirement
from gpuready.model import Status
from gpuready.facts.log_lines import feed_text
from helpers import judged
from gpuready.facts.host_log_reader import HostLogReader
from gpuready.verbs.diagnose.run import diagnose
from helpers import findings, of, only
from gpuready.facts.torch_log_reader import TorchErrorReader

FIXTURES = Path(__file__).parent / "fixtures" / "diagnose"
HOST, SOFTWARE = FIXTURES / "host", FIXTURES / "software"


def lines_of(finding):
    return [(Path(e.file).name, e.line) for e in finding.evidence]


# ------------------------------------------------------------------ host.oom


def test_oom_killer_global_names_process_pid_and_rss():
    oom = only(findings(HOST / "oom_dmesg_tranx_41.log"), "host.oom")
    assert oom.status is Status.FAIL
    assert (oom.observed["process"], oom.observed["pid"]) == ("python3", 25315)
    assert oom.observed["anon_rss_bytes"] == 31451456 * 1024
    assert oom.observed["cgroup"] is False and oom.observed["memcg"] == "/user.slice"
    assert "python3 (pid 25315)" in oom.message and "30.0 GiB" in oom.message and "host ran out of RAM" in oom.message
    assert "num_workers" in oom.fix and "pin_memory" in oom.fix
    assert ("oom_dmesg_tranx_41.log", 2) in lines_of(oom)


def test_oom_killer_victim_from_the_reaper_when_no_kill_line():
    oom = only(findings(HOST / "oom_invoked_deepspeech_2055.log"), "host.oom")
    assert oom.status is Status.FAIL
    assert (oom.observed["process"], oom.observed["pid"]) == ("python", 29918)
    assert oom.observed["invoked_by"] == ["gsd-color", "python"]
    assert lines_of(oom)[0] == ("oom_invoked_deepspeech_2055.log", 1)


def test_memory_cgroup_oom_names_the_container_limit():
    oom = only(findings(HOST / "oom_cgroup_reportportal_203.log"), "host.oom")
    assert (oom.observed["process"], oom.observed["pid"], oom.observed["cgroup"]) == ("uwsgi", 63214, True)
    assert oom.observed["anon_rss_bytes"] == 164992 * 1024
    assert "memory cgroup" in oom.message and "161 MiB" in oom.message
    assert "resources.limits.memory" in oom.fix and "--memory" in oom.fix


def test_memory_cgroup_oom_old_kernel_two_line_form():
    oom = only(findings(HOST / "oom_cgroup_old_kernel_doris_3525.log"), "host.oom")
    assert (oom.observed["process"], oom.observed["pid"], oom.observed["cgroup"]) == ("palo_be", 18177, True)
    assert oom.observed["anon_rss_bytes"] == 45563572 * 1024
    assert oom.observed["killed"] == [{"process": "palo_be", "pid": 18177}]


def test_sigkill_alone_is_weak_evidence():
    found = findings(FIXTURES / "torch" / "elastic_cppo_6.log")
    oom = only(found, "host.oom")
    assert oom.status is Status.WARN and oom.observed["pids"] == [14750]
    assert "possibly the host OOM killer; check dmesg" in oom.message
    assert "dmesg -T" in oom.fix
    assert only(found, "torch.rank_failed").consequence_of is None


def test_sigkill_with_an_oom_line_follows_from_host_oom():
    found = findings(FIXTURES / "torch" / "elastic_cppo_6.log", HOST / "oom_dmesg_tranx_41.log")
    oom = only(found, "host.oom")
    assert oom.status is Status.FAIL  # the kernel's line, not the weak warning
    assert only(found, "torch.rank_failed").consequence_of == "host.oom"


def test_no_host_oom_for_oom_in_names_or_cuda_oom(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("saving checkpoint to /data/oom_test/room_7/ckpt.pt\n"
                   "loading bigscience/bloom-560m from /cache/zoom/\n"
                   "oom_score_adj set for the loader\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    found = findings(log, FIXTURES / "torch" / "oom_msswift_6301.log")
    assert of(found, "host.oom") == [] and of(found, "host.shm") == []
    assert of(found, "torch.oom")  # GPU memory is the PyTorch reader's


# ------------------------------------------------------------------ host.shm


def test_dataloader_bus_error_is_host_shm():
    shm = only(findings(HOST / "shm_bus_error_pipedream_28.log"), "host.shm")
    assert shm.status is Status.FAIL
    assert shm.observed["kinds"] == ["bus_error"] and shm.observed["worker_pids"] == [325]
    assert shm.observed["lines"] == 4
    assert "--shm-size=16g" in shm.fix and "--ipc=host" in shm.fix and "medium: Memory" in shm.fix
    assert [line for _name, line in lines_of(shm)] == [3, 4, 5, 15]


def test_torch_shared_memory_file_no_space_and_old_form():
    shm = only(findings(HOST / "shm_no_space_nnunet_2162.log"), "host.shm")
    assert shm.observed["kinds"] == ["no_space"]
    assert shm.observed["files"] == ["/torch_8226_3581395585_0", "/torch_8289_606636967_0"]
    old = only(findings(HOST / "shm_write_failed_nnunet_294.log"), "host.shm")
    assert old.observed["kinds"] == ["write_failed"] and lines_of(old) == [("shm_write_failed_nnunet_294.log", 9)]


def test_nccl_shared_memory_stays_with_the_nccl_reader():
    found = findings(FIXTURES / "nccl" / "shm-nccl-tests-166.log")
    assert of(found, "nccl.shm_too_small") and of(found, "host.shm") == []


def test_host_ids_match_check():
    from gpuready.checks.registry import CHECKS
    import gpuready.checks.host  # noqa: F401  (registers)
    import gpuready.checks.software  # noqa: F401
    assert {"host.shm", "software.driver_cuda", "software.torch_arch", "software.nccl"} <= set(CHECKS)


# ------------------------------------------------------------------ software.driver_cuda


def test_driver_too_old_integer_form_names_driver_floors_from_knowledge():
    driver = only(findings(SOFTWARE / "driver_too_old_11000_yuan_65.log"), "software.driver_cuda")
    assert driver.status is Status.FAIL
    assert (driver.observed["driver_supports_cuda"], driver.observed["driver_api"]) == ("11.0", 11000)
    assert f"12.x needs >= {driver_requirement('12').minimum}" in driver.fix
    assert f"13.x needs >= {driver_requirement('13').minimum}" in driver.fix


def test_driver_too_old_with_torch_build_names_the_minimum_driver(tmp_path):
    pip = tmp_path / "pip-freeze.log"
    pip.write_text("torch==2.4.0+cu124\n")
    driver = only(findings(SOFTWARE / "driver_too_old_11000_yuan_65.log", pip), "software.driver_cuda")
    requirement = driver_requirement("12.4")
    assert driver.observed["torch_cuda"] == "12.4" and driver.observed["required_driver"] == requirement.minimum
    assert f">= {requirement.minimum}" in driver.fix and requirement.full_feature in driver.fix


def test_insufficient_driver_error_35():
    driver = only(findings(SOFTWARE / "driver_insufficient_bladebit_431.log"), "software.driver_cuda")
    assert (driver.observed["kind"], driver.observed["cuda_error"]) == ("driver_too_old", 35)
    assert [line for _name, line in lines_of(driver)] == [3, 6]


def test_forward_compatibility_error_804():
    driver = only(findings(SOFTWARE / "forward_compat_804_torchpod_43.log"), "software.driver_cuda")
    assert (driver.observed["kind"], driver.observed["cuda_error"]) == ("forward_compat", 804)
    assert "compat" in driver.fix and "LD_LIBRARY_PATH" in driver.fix
    assert any("cuda-compatibility" in ref for ref in driver.refs)


# ------------------------------------------------------------------ software.torch_arch


def test_arch_warning_over_several_lines():
    arch = only(findings(SOFTWARE / "arch_sm120_wyoming_xtts_1.log"), "software.torch_arch")
    assert arch.status is Status.FAIL
    assert (arch.observed["arch"], arch.observed["gpu_name"]) == ("sm_120", "NVIDIA GeForce RTX 5060 Ti")
    assert arch.observed["supported"] == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert arch.observed["wheel_index"] == "cu128"
    assert "https://download.pytorch.org/whl/cu128" in arch.fix
    assert f">= {driver_requirement('12.8').minimum}" in arch.fix
    assert lines_of(arch) == [("arch_sm120_wyoming_xtts_1.log", 2)]


def test_arch_warning_on_one_line_and_with_compute_entries():
    one = only(findings(SOFTWARE / "arch_sm120_one_line_kokoro_306.log"), "software.torch_arch")
    assert (one.observed["arch"], one.observed["gpu_name"]) == ("sm_120", "NVIDIA GeForce RTX 5060 Ti")
    assert one.observed["supported"][-1] == "sm_90"
    laptop = only(findings(SOFTWARE / "arch_sm120_compute37_slicer_58.log"), "software.torch_arch")
    assert laptop.observed["gpu_name"] == "NVIDIA GeForce RTX 5070 Laptop GPU"
    assert laptop.observed["supported"][0] == "sm_37" and laptop.observed["supported"][-1] == "compute_37"


def test_no_kernel_image_without_an_architecture():
    arch = only(findings(SOFTWARE / "no_kernel_image_tensorrt_pro_162.log"), "software.torch_arch")
    assert arch.observed["arch"] is None and arch.observed["wheel_index"] is None
    assert "get_arch_list" in arch.fix and "cu128" in arch.fix
    assert [line for _name, line in lines_of(arch)] == [1, 2, 3]


# ------------------------------------------------------------------ software.nccl


def test_nccl_invalid_device_function_names_the_nccl_banner():
    found = findings(SOFTWARE / "nccl_invalid_device_function_nccl_932.log")
    nccl = only(found, "software.nccl")
    assert nccl.status is Status.FAIL and nccl.observed["nccl_versions"] == ["2.8.3+cuda10.0"]
    assert lines_of(nccl) == [("nccl_invalid_device_function_nccl_932.log", 6),
                              ("nccl_invalid_device_function_nccl_932.log", 2)]
    warn = [f for f in of(found, "nccl.warn") if "invalid device function" in f.message]
    assert len(warn) == 1 and warn[0].consequence_of == "software.nccl"


def test_nccl_error_whose_last_error_is_invalid_device_function_follows_from_software_nccl():
    reader = feed_text(TorchErrorReader(), "rank7.log", (
        "[rank7]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank7]: Last error:\n"
        "[rank7]: Cuda failure 98 'invalid device function'\n"))
    found = judged(reader, host="node1")
    assert only(found, "software.nccl").observed["kind"] == "nccl_arch"
    assert only(found, "nccl.error").consequence_of == "software.nccl"


def test_parsers():
    assert torch_errors.cuda_from_driver_api(11000) == "11.0" and torch_errors.cuda_from_driver_api(12020) == "12.2"
    assert torch_errors.parse_version_mismatch("RuntimeError: CUDA error: no kernel image is available for execution "
                                               "on the device").kind == "arch"
    assert torch_errors.parse_version_mismatch("CUDA error: invalid device function") is None  # not NCCL's
    assert host_log.parse_oom_kill("Out of memory: Killed process 15925 ((resolved)) total-vm:168424kB, "
                                   "anon-rss:4064kB").process == "(resolved)"
    assert host_log.parse_oom_kill("[ 1.0] oom_reaper: reaped process 12 (python), now anon-rss:0kB").kind == "reaped"
    assert host_log.parse_sigkill("failed (exitcode: -9) local_rank: 3 (pid: 812) of binary: x").pid == 812
    assert host_log.parse_sigkill("RuntimeError: DataLoader worker (pid 2991) is killed by signal: Killed.").source \
        == "dataloader"


# ------------------------------------------------------------------ linear time on hostile input


def _timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def test_parsers_are_linear_on_200_kb_of_one_marker():
    hostile = [
        "Out of memory: Killed process 1 (" + "x" * 200_000,
        "Out of memory: Kill" * 10_000,
        "oom-kill:constraint=CONSTRAINT_NONE," + ",task=" * 35_000,
        "a " * 100_000 + " invoked oom-killer",
        "Killed process 1 (" + "(" * 200_000,
        "unable to write to file </torch_" * 6_000,
        "killed by signal: " * 11_000,
        "a" * 200_000 + " with CUDA capability sm_120 is not compatible with the current PyTorch installation",
        "The current PyTorch install supports CUDA capabilities " + "sm_90 " * 33_000,
        "lib" * 70_000 + ".so: undefined symbol: nccl",
        "NCCL WARN Cuda failure " * 9_000 + "invalid device function",
    ]
    for text in hostile:
        assert _timed(host_log.parse_oom_kill, text) < 0.2
        assert _timed(host_log.parse_shm_error, text) < 0.2
        assert _timed(host_log.parse_sigkill, text) < 0.2
        assert _timed(torch_errors.parse_version_mismatch, text) < 0.2


def test_diagnose_on_200_kb_of_one_repeated_marker(tmp_path):
    for name, text in (("one-line.log", "Out of memory: Kill" * 11_000),
                       ("lines.log", " invoked oom-killer: \n" * 10_000),
                       ("arch.log", "with CUDA capability sm_120 is not compatible " * 4_500),
                       ("shm.log", "unable to write to file </torch_" * 6_500)):
        path = tmp_path / name
        path.write_text(text)
        assert path.stat().st_size >= 200_000
        start = time.perf_counter()
        diagnose([path])
        assert time.perf_counter() - start < 1.0, name


def test_readers_stay_fast_and_bounded_on_a_flood(tmp_path):
    flood = tmp_path / "flood.log"
    flood.write_text("".join(f"[{i}.0] Out of memory: Killed process {i} (python) total-vm:1kB, anon-rss:1kB\n"
                             for i in range(20_000))
                     + "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
                       "shared memory (shm).\n" * 20_000)
    start = time.perf_counter()
    found = findings(flood)
    assert time.perf_counter() - start < 5
    oom, shm = only(found, "host.oom"), only(found, "host.shm")
    assert oom.observed["oom_lines"] == 20_000 and len(oom.evidence) <= 5
    assert shm.observed["lines"] == 20_000 and len(shm.evidence) <= 5
    reader = feed_text(HostLogReader(), "x", "Out of memory: Killed process 1 (p) total-vm:1kB\n" * 1_000)
    assert len(reader.facts().ooms) <= 16


# ------------------------------------------------------------------ the container toolkit refusing an image

def test_container_toolkit_requirement_error_is_the_driver_too_old_for_the_image(tmp_path):
    """Lines built from the toolkit's own formats, not from a case: libnvidia-container's CLI (`requirement error:
    unsatisfied condition: %s, please update your driver …`) inside containerd's JSON log, and the Go toolkit's
    internal/requirements/constraints/binary.go (`unsatisfied condition: %v (%v)`) in a docker error."""
    legacy = tmp_path / "containerd.log"
    legacy.write_text('{"level":"error","msg":"RunContainerError: failed to create containerd task: OCI runtime '
                      'create failed: error running hook #0: exit status 1, stdout: , stderr: nvidia-container-cli: '
                      'requirement error: unsatisfied condition: cuda>=11.6, please update your driver to a newer '
                      'version, or use an earlier cuda container: unknown","time":"2023-02-01T10:00:00Z"}\n')
    smi = tmp_path / "nvidia-smi.txt"
    smi.write_text("+-----------------------------------------------------------------------------+\n"
                   "| NVIDIA-SMI 470.161.03   Driver Version: 470.161.03   CUDA Version: 11.4     |\n")
    found = only(findings(legacy, smi), "software.driver_cuda")
    assert found.status is Status.FAIL and found.observed["required"] == "cuda>=11.6"
    assert found.observed["host"] == "11.4" and "11.4" in found.message and "470.161.03" in found.message
    go = tmp_path / "docker.txt"
    go.write_text("docker: Error response from daemon: failed to create task for container: error during container "
                  "init: error running prestart hook #1: exit status 1, stderr: unsatisfied condition: cuda>=12.6 "
                  "(cuda=12.2): unknown.\n")
    alone = only(findings(go), "software.driver_cuda")
    assert alone.observed["host"] == "12.2" and "12.6" in alone.message
    other = tmp_path / "other.txt"
    other.write_text("requirement error: unsatisfied condition: brand = tesla\n")
    assert of(findings(other), "software.driver_cuda") == []
