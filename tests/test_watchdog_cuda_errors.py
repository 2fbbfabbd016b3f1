"""A GPU fault (or a kernel's) reported as a CUDA error inside PyTorch's NCCL watchdog: read from any wrapper, judged by
what the CUDA error means (knowledge/cuda_errors.toml)."""

from __future__ import annotations

import pytest

from gpuready.checks.registry import CheckOptions, run_log_checks
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.log_facts import LogFacts
from gpuready.facts.log_lines import Line
from gpuready.facts.torch_errors import parse_cuda_error
from gpuready.facts.torch_log_reader import TorchErrorReader
from gpuready.facts.types import Facts


def _findings(lines: list[str], dmesg: str | None = None):
    reader = TorchErrorReader()
    for number, text in enumerate(lines, start=1):
        reader.feed(Line(source="job.log", number=number, text=text))
    facts = Facts()
    facts.logs = LogFacts(torch=reader.facts())
    if dmesg is not None:
        facts.kernel_log = parse_kernel_log(dmesg)
    return [f for f in run_log_checks(facts, CheckOptions()) if f.status.value in ("warn", "fail")]


def _ids(findings) -> set[str]:
    return {f.check_id for f in findings}


# Real pastes (public threads), each quoted as its reporter pasted it:
# vllm-project/vllm#2682 (torch 2.1, Ray worker prefix, `[Rank N]` only in the message)
VLLM_2682 = ("(RayWorkerVllm pid=5304) [E ProcessGroupNCCL.cpp:916] [Rank 7] NCCL watchdog thread terminated with "
             "exception: CUDA error: unknown error")
# pytorch/pytorch#113128 (torchrun --tee prefix, torch 2.4's `[PG 0 (default_pg) Rank N]`)
TORCH_113128 = ("[default0]:[rank12]:[E817 17:40:34.227531918 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 12] "
                "Process group watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered")
# InternLM/lmdeploy#3258 (the exception's `what():` line, `[PG ID 0 PG GUID 0(default_pg) Rank 2]`)
LMDEPLOY_3258 = ("  what():  [PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog thread terminated with "
                 "exception: CUDA error: an illegal memory access was encountered")
# MIC-DKFZ/nnUNet#1519 (a plain RuntimeError, cudaGetErrorString of 220 as the CUDA runtime words it)
NNUNET_1519 = "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution"


@pytest.mark.parametrize(("line", "code", "rank", "watchdog"), [
    (VLLM_2682, 999, 7, True),
    (TORCH_113128, 214, 12, True),
    (LMDEPLOY_3258, 700, 2, True),
    (NNUNET_1519, 220, None, False),
])
def test_real_pastes_are_read(line, code, rank, watchdog):
    error = parse_cuda_error(line)
    assert (error.code, error.rank, error.watchdog) == (code, rank, watchdog)


# Lines rebuilt from the formats that print them, each under another wrapper:
# ProcessGroupNCCL.cpp ncclCommWatchdog (torch <= 2.2): "[Rank " rank_ "] NCCL watchdog thread terminated with
# exception: " e.what(), with c10/cuda/CUDAException.cpp's "CUDA error: " cudaGetErrorString(err); here in a JSON log
# line as a log shipper writes it.
def _json_line(message: str) -> str:
    return '{"ts": "2025-01-02T03:04:05Z", "level": "ERROR", "msg": "' + message + '"}'


@pytest.mark.parametrize(("message", "code"), [
    ("an illegal memory access was encountered", 700),
    ("unspecified launch failure", 719),
    ("misaligned address", 716),
    ("device-side assert triggered", 710),
    ("the launch timed out and was terminated", 702),
    ("uncorrectable NVLink error detected during the execution", 220),
    ("unknown error", 999),
])
def test_rebuilt_watchdog_lines_in_a_json_log(message, code):
    line = _json_line(f"[Rank 3] NCCL watchdog thread terminated with exception: CUDA error: {message}")
    error = parse_cuda_error(line)
    assert (error.code, error.rank, error.watchdog) == (code, 3, True)


def test_other_wrappers_name_the_same_error():
    # NCCL src/include/checks.h CUDACHECK: "Cuda failure %d '%s'"; nccl-tests src/common.h: "Test CUDA failure %s:%d
    # '%s'"; a Ray worker with its ip; torch >= 2.6's get_cuda_error_help names the enum.
    assert parse_cuda_error("node1:812:900 [1] NCCL WARN Cuda failure 700 'an illegal memory access was encountered'"
                            ).code == 700
    assert parse_cuda_error("Test CUDA failure common.cu:892 'unspecified launch failure'").code == 719
    ray = parse_cuda_error("(RayWorkerWrapper pid=77, ip=10.1.2.3) RuntimeError: CUDA error: unknown error")
    assert (ray.code, ray.host) == (999, "10.1.2.3")
    assert parse_cuda_error("Search for `cudaErrorMisalignedAddress' in https://docs.nvidia.com/cuda/"
                            "cuda-runtime-api/group__CUDART__TYPES.html for more information.").code == 716
    # a paste that wrapped the line inside the message
    assert parse_cuda_error("  thread terminated with exception: CUDA error: an illegal memory access").watchdog


def test_unknown_error_is_a_lost_gpu_naming_the_rank():
    findings = _findings([VLLM_2682, "(RayWorkerVllm pid=5304) CUDA kernel errors might be asynchronously reported"])
    lost = [f for f in findings if f.check_id == "gpu.lost"]
    assert len(lost) == 1 and lost[0].status.value == "fail" and lost[0].subject.rank == 7
    assert "79" in lost[0].fix and lost[0].consequence_of is None


def test_application_error_warns_and_follows_the_xid_where_dmesg_has_one():
    lines = [_json_line("[Rank 1] NCCL watchdog thread terminated with exception: CUDA error: an illegal memory "
                        "access was encountered"),
             "terminate called after throwing an instance of 'c10::DistBackendError'",
             "  what():  [Rank 1] NCCL watchdog thread terminated with exception: CUDA error: an illegal memory "
             "access was encountered"]
    alone = [f for f in _findings(lines) if f.check_id == "torch.cuda_error"]
    assert len(alone) == 1 and alone[0].status.value == "warn" and alone[0].subject.rank == 1
    assert "CUDA_LAUNCH_BLOCKING=1" in alone[0].fix and len(alone[0].evidence) >= 2
    # NVIDIA's documented Xid line format (`NVRM: Xid (PCI:…): 13, …`)
    dmesg = "[ 812.1] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics Exception: ESR 0x404600=0x80"
    with_xid = [f for f in _findings(lines, dmesg) if f.check_id == "torch.cuda_error"]
    assert with_xid[0].consequence_of == "health.xid"
    assert with_xid[0].observed["kernel_xids_application"] == [13]


def test_nvlink_error_is_an_nvlink_fault():
    findings = _findings([NNUNET_1519])
    assert [f.status.value for f in findings if f.check_id == "nvlink.errors"] == ["fail"]
    assert "torch.cuda_error" not in _ids(findings)


def test_ecc_stays_the_kernel_readings():
    """cudaErrorECCUncorrectable is health.ecc_uncorrected's (the same line read as the kernel log reads it)."""
    assert {"gpu.lost", "nvlink.errors", "torch.cuda_error"}.isdisjoint(_ids(_findings([TORCH_113128])))


def test_controls_stay_with_their_checks():
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "79.10 GiB of which 1.02 GiB is free.")
    assert _ids(_findings([oom])) == {"torch.oom"}
    assert parse_cuda_error("RuntimeError: CUDA error: out of memory") is None
    timeout = ("[rank0]:[E ProcessGroupNCCL.cpp:1182] [Rank 0] NCCL watchdog thread terminated with exception: [Rank 0] "
               "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=15074, OpType=_ALLGATHER_BASE, "
               "NumelIn=8388608, NumelOut=67108864, Timeout(ms)=1800000) ran for 1800218 milliseconds before timing out.")
    assert parse_cuda_error(timeout) is None
    assert _ids(_findings([timeout])) == {"nccl.timeout"}
    assert parse_cuda_error("Failed to initialize NVML: Unknown Error") is None
