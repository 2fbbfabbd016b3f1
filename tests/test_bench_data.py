"""bench --data: DataLoader throughput and storage throughput, judged against the rate the GPUs consume."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")

from gpuready.model import Status
from gpuready.verbs.bench.data import dataloader_throughput, storage_throughput


@pytest.fixture(scope="module")
def small_loader():
    return dataloader_throughput(needed_samples_per_s=None, workers=(0, 1), samples=64, host="h")


def test_dataloader_two_positive_figures(small_loader):
    measurements, findings = small_loader
    assert [m.method["workers"] for m in measurements] == [0, 1]
    assert all(m.name == "dataloader_samples_per_s" and m.value > 0 for m in measurements)
    assert all(m.method["batch"] == 32 and "crop" in m.method["per_sample_work"] for m in measurements)
    assert findings[0].check_id == "bench.dataloader_bottleneck" and findings[0].status == Status.SKIP
    assert "rate the GPUs consume" in findings[0].message


def test_dataloader_cannot_keep_up_fails():
    _, findings = dataloader_throughput(needed_samples_per_s=1e9, workers=(0,), samples=64, host="h")
    assert findings[0].status == Status.FAIL
    assert "num_workers" in findings[0].fix


def test_dataloader_keeps_up_passes_with_smallest_count():
    _, findings = dataloader_throughput(needed_samples_per_s=1, workers=(0, 1), samples=64, host="h")
    assert findings[0].status == Status.PASS
    assert "num_workers=0" in findings[0].message


def test_dataloader_skips_counts_above_twice_the_cpus():
    measurements, findings = dataloader_throughput(needed_samples_per_s=None, workers=(0, 10_000), samples=64,
                                                   host="h")
    assert [m.method["workers"] for m in measurements] == [0]
    assert "10000" in findings[0].message


@pytest.fixture()
def data_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "shard-000.bin").write_bytes(os.urandom(32 << 20))
    return tmp_path


def test_storage_figures_and_method(data_folder):
    measurements, findings = storage_throughput(data_folder, needed_bytes_per_s=None, host="h", timeout_s=10)
    names = {m.name: m for m in measurements}
    assert set(names) == {"storage_sequential_read_bytes_per_s", "storage_random_read_bytes_per_s"}
    assert all(m.value > 0 and m.unit == "bytes_per_s" for m in measurements)
    assert all(m.method["method"] and m.method["method"] != "none" for m in measurements)
    assert names["storage_sequential_read_bytes_per_s"].method["bytes_read"] == 32 << 20
    assert findings[0].status == Status.SKIP


def test_storage_needed_huge_fails(data_folder):
    _, findings = storage_throughput(data_folder, needed_bytes_per_s=1e15, host="h", timeout_s=10)
    assert findings[0].check_id == "bench.storage_slow" and findings[0].status == Status.FAIL
    assert findings[0].fix


def test_storage_needed_small_passes(data_folder):
    _, findings = storage_throughput(data_folder, needed_bytes_per_s=1, host="h", timeout_s=10)
    assert findings[0].status == Status.PASS


def test_storage_max_bytes_bounds_the_read(data_folder):
    measurements, _ = storage_throughput(data_folder, needed_bytes_per_s=None, host="h", max_bytes=1 << 20,
                                         timeout_s=10)
    seq = next(m for m in measurements if m.name == "storage_sequential_read_bytes_per_s")
    assert seq.method["bytes_read"] == 1 << 20


def test_storage_empty_or_missing_folder_skips(tmp_path):
    for folder in (tmp_path, tmp_path / "missing"):
        measurements, findings = storage_throughput(folder, needed_bytes_per_s=1e9, host="h")
        assert measurements == []
        assert findings[0].status == Status.SKIP and findings[0].message.count(".") >= 1


def test_dataloader_only_largest_count_keeps_up_warns():
    from gpuready.model import Subject
    from gpuready.verbs.bench.data import _judge_dataloader

    finding = _judge_dataloader(Subject(host="h"), 300.0, {0: 100.0, 2: 200.0, 4: 320.0}, [], 2, [])
    assert finding.status == Status.WARN and "(4)" in finding.message and finding.fix


def test_storage_without_o_direct_says_fadvise(data_folder, monkeypatch):
    monkeypatch.delattr(os, "O_DIRECT", raising=False)
    monkeypatch.setattr("shutil.which", lambda name: None)
    measurements, _ = storage_throughput(data_folder, needed_bytes_per_s=None, host="h", timeout_s=10)
    assert all("posix_fadvise(DONTNEED)" in m.method["method"] for m in measurements)
    assert all(m.method["tool"] == "built-in reader" for m in measurements)
