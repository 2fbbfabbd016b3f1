"""validate on a real GPU (marked `gpu`; skipped without CUDA)."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")]


def test_quick_validate_measures_every_gpu_workload(tmp_path):
    out = tmp_path / "report.json"
    result = subprocess.run([sys.executable, "-m", "gpuready", "validate", "--quick", "--json", "--out", str(out)],
                            capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    assert result.returncode == report["exit_code"], result.stderr[-2000:]
    failed = [f["check_id"] for f in report["findings"] if f["status"] == "fail"]
    assert result.returncode == (1 if failed else 0)  # a figure may be low on an unknown machine; nothing hung
    assert not [name for name in failed if name.startswith("validate.rank_")]
    names = {m["name"] for m in report["measurements"]}
    assert {"matmul_tflops_bf16", "memory_copy_gb_per_s", "h2d_pinned_gb_per_s", "d2h_pinned_gb_per_s",
            "all_reduce_latency_us"} <= names
    if torch.cuda.device_count() > 1:
        assert "all_reduce_busbw_gb_per_s" in names
    bf16 = next(m for m in report["measurements"] if m["name"] == "matmul_tflops_bf16")
    assert bf16["value"] > 0 and bf16["versions"]["torch"] == torch.__version__
    assert ("ddp.mismatch", "pass") in {(f["check_id"], f["status"]) for f in report["findings"]}
