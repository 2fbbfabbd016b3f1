"""bench on a real GPU (marked `gpu`; skipped without CUDA): the local run and the torchrun group on one GPU."""

import json
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")]


def _bench(tmp_path, *args):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "gpuready", "bench", "--preset", "125M", "--seq", "1024",
                             "--steps", "6", "--warmup", "2", "--json", "--out", str(out), *args],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NCCL_NVLS_ENABLE": "0"})
    report = json.loads(out.read_text())
    assert result.returncode == report["exit_code"], result.stderr[-2000:]
    return report


def _measured(report, name, strategy="single"):
    found = [m for m in report["measurements"] if m["name"] == name and m["method"]["strategy"] == strategy]
    assert len(found) == 1, [m["name"] for m in report["measurements"]]
    return found[0]


def test_one_gpu_bench_measures_mfu_memory_and_the_matmul_it_is_held_against(tmp_path):
    report = _bench(tmp_path, "--ranks", "1")
    assert _measured(report, "single_tokens_per_s")["value"] > 0
    mfu = _measured(report, "mfu")
    assert 0 < mfu["value"] < 1 and mfu["versions"]["torch"] == torch.__version__
    versus = _measured(report, "mfu_vs_measured_matmul")
    assert versus["method"]["peak_source"].startswith("bf16 matmul TFLOP/s measured on the 1-GPU run's GPU")
    assert versus["value"] > mfu["value"]  # a GPU's measured matmul rate is below its datasheet peak
    assert _measured(report, "peak_memory_reserved_bytes")["value"] > _measured(report,
                                                                               "peak_memory_allocated_bytes")["value"]
    assert report["findings"][-1]["check_id"] == "bench.decision"


def test_one_gpu_bench_through_torchrun(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    report = _bench(tmp_path, "--nnodes", "1", "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{port}")
    assert report["facts"]["bench"]["launcher"] == "torchrun"
    assert _measured(report, "single_tokens_per_s")["value"] > 0
    assert ("bench.gpu_shared" in {f["check_id"] for f in report["findings"]})  # each rank read its own GPU
