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
    result = subprocess.run([sys.executable, "-m", "gpuready", "bench", "--preset", "gpt2-small", "--seq", "1024",
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


def test_ddp_and_fsdp2_on_two_gloo_ranks_sharing_the_gpu(tmp_path):
    """The multi-rank training path with CUDA tensors on a one-GPU machine: DDP over gloo trains (both ranks end
    with the same weights); FSDP2 over gloo with CUDA tensors is a skip on every rank, not a crash."""
    from gpuready.runner.local import run_local
    shape = {"name": "small", "layers": 2, "hidden": 256, "heads": 4, "vocab": 1024, "max_positions": 256}
    runs = {"single": {"shape": shape, "strategy": "single", "seq": 128, "micro_batch": 2, "warmup_steps": 1,
                       "steps": 3},
            "ddp": {"shape": shape, "strategy": "ddp", "seq": 128, "micro_batch": 2, "warmup_steps": 1, "steps": 3},
            "fsdp2": {"shape": shape, "strategy": "fsdp2", "seq": 128, "micro_batch": 2, "warmup_steps": 1,
                      "steps": 3}}
    spec = {"device": "cuda", "backend": "gloo", "workloads": ["train.single", "train.ddp", "train.fsdp2"],
            "startup_timeout_s": 120, "options": {"timeout_s": 120, "train_runs": runs}}
    outcome = run_local(world_size=2, spec=spec, log_dir=tmp_path, startup_timeout_s=120)
    assert not outcome.failures, [(tmp_path / f"rank{r}.log").read_text()[-2000:] for r in range(2)]
    results = {rank: outcome.results[rank]["workloads"] for rank in range(2)}
    assert results[0]["train.single"]["matmul_bf16"]["tflops"] > 0
    assert results[1]["train.single"] == {"waited_for": 0, "strategy": "single", "world_size": 1}
    ddp = [results[rank]["train.ddp"] for rank in range(2)]
    assert all(len(r["step_times_s"]) == 3 and r["peak_allocated_bytes"] > 0 for r in ddp)
    assert ddp[0]["param_checksum"] == ddp[1]["param_checksum"]
    assert all(results[rank]["train.fsdp2"]["skipped"].startswith("FSDP2 needs NCCL") for rank in range(2))


def test_ddp_and_fsdp2_on_one_nccl_rank(tmp_path):
    """The NCCL paths of the training workload on the one GPU a single-GPU machine has: DDP, FSDP2 resharding and
    not, bf16 with fused AdamW on sharded (DTensor) parameters, and the all-reduced parameter checksum."""
    from gpuready.runner.local import run_local
    shape = {"name": "small", "family": "llama", "layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2,
             "vocab": 1024, "ffn_hidden": 688, "max_positions": 256}
    common = {"shape": shape, "seq": 128, "micro_batch": 2, "warmup_steps": 1, "steps": 3, "precision": "bf16"}
    runs = {strategy: {**common, "strategy": strategy} for strategy in ("ddp", "fsdp2", "fsdp2-noreshard")}
    spec = {"device": "cuda", "workloads": [f"train.{strategy}" for strategy in runs], "startup_timeout_s": 120,
            "options": {"timeout_s": 120, "train_runs": runs}}
    outcome = run_local(world_size=1, spec=spec, log_dir=tmp_path, startup_timeout_s=120)
    assert not outcome.failures, (tmp_path / "rank0.log").read_text()[-3000:]
    workloads = outcome.results[0]["workloads"]
    for strategy in runs:
        result = workloads[f"train.{strategy}"]
        assert "error" not in result and "skipped" not in result, result
        assert len(result["step_times_s"]) == 3 and result["loss_last"] > 0
        assert result["versions"]["nccl"]
    # the same seed and data: the three strategies end with the same weights on one rank (bf16 sums)
    sums = [workloads[f"train.{strategy}"]["param_checksum"] for strategy in runs]
    assert max(sums) - min(sums) <= 1e-3 * max(abs(s) for s in sums)
