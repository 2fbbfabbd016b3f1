"""`gpuready bench` end to end on CPU ranks (gloo): the interface the checks use."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")


def test_bench_on_two_cpu_ranks_with_the_tiny_preset(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "gpuready", "bench", "--device", "cpu", "--ranks", "2",
                             "--preset", "tiny", "--json", "--out", str(out), "--log-dir", str(tmp_path / "logs")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    throughput = {(m["method"]["strategy"], m["method"]["world_size"]): m["value"] for m in report["measurements"]
                  if m["name"].endswith("_tokens_per_s")}
    assert set(throughput) == {("single", 1), ("ddp", 2), ("fsdp2", 2)} and all(v > 0 for v in throughput.values())
    efficiency = {m["method"]["strategy"]: m["value"] for m in report["measurements"]
                  if m["name"] == "scaling_efficiency"}
    # tokens/s at N / (N x tokens/s at 1), from the figures the report itself holds
    assert efficiency["ddp"] == round(throughput[("ddp", 2)] / (2 * throughput[("single", 1)]), 4) or \
        abs(efficiency["ddp"] - throughput[("ddp", 2)] / (2 * throughput[("single", 1)])) < 1e-6
    assert any(m["name"].startswith("peak_memory_") for m in report["measurements"])
    decision = [f for f in report["findings"] if f["check_id"] == "bench.decision"]
    assert len(decision) == 1 and decision[0]["message"].startswith("CPU ranks only check the code path")
    assert report["facts"]["bench"]["model"]["name"] == "tiny"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where torch sees no GPU")
def test_bench_without_a_gpu_and_without_device_cpu_exits_3():
    result = subprocess.run([sys.executable, "-m", "gpuready", "bench", "--preset", "tiny"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 3 and "--device cpu" in result.stderr


def test_bench_data_path_against_what_the_ranks_consumed(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "shard0.bin").write_bytes(bytes(range(256)) * 32768)  # 8 MiB
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "gpuready", "bench", "--device", "cpu", "--ranks", "2",
                             "--preset", "tiny", "--strategies", "ddp", "--data", "--data-path",
                             str(tmp_path / "data"), "--json", "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert out.exists(), result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert result.returncode == report["exit_code"]  # 0 or 1: the dataloader verdict depends on this CPU's speed
    names = {m["name"] for m in report["measurements"]}
    assert {"dataloader_samples_per_s", "storage_sequential_read_bytes_per_s",
            "storage_random_read_bytes_per_s"} <= names
    storage = next(f for f in report["findings"] if f["check_id"] == "bench.storage_slow")
    assert storage["status"] == "pass"  # a tiny model on CPU consumes far less than a local disk reads
    loader = next(f for f in report["findings"] if f["check_id"] == "bench.dataloader_bottleneck")
    assert loader["status"] != "skip"  # judged against the rate the ranks consumed
    assert report["findings"][-1]["check_id"] == "bench.decision"
