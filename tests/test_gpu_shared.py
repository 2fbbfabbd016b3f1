"""A GPU shared with another process, on a real GPU (marked `gpu`; skipped without CUDA): burn names the process
and the memory it holds, and --exclusive refuses to start."""

import json
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")]

FOREIGN_GIB = 2
FOREIGN = f"""
import time, torch
held = torch.empty({FOREIGN_GIB} * 2**30, dtype=torch.uint8, device="cuda:0")
a = torch.randn(4096, 4096, device="cuda:0")
print("ready", flush=True)
end = time.time() + 120
while time.time() < end:
    a @ a
    torch.cuda.synchronize()
"""


@pytest.fixture
def foreign_process():
    process = subprocess.Popen([sys.executable, "-c", FOREIGN], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    time.sleep(1)  # NVML lists the context a moment after it is made
    yield process
    process.kill()
    process.wait()


def _burn(tmp_path, *args):
    out = tmp_path / "report.json"
    result = subprocess.run([sys.executable, "-m", "gpuready", "burn", "--gpus", "0", "--json", "--out", str(out),
                             *args], capture_output=True, text=True, timeout=300)
    return result, json.loads(out.read_text())


def test_burn_names_the_other_process_on_the_gpu(tmp_path, foreign_process):
    result, report = _burn(tmp_path, "--duration", "10s")
    shared = [f for f in report["findings"] if f["check_id"] == "burn.gpu_shared"]
    assert [f["status"] for f in shared] == ["warn"], result.stderr[-2000:]
    assert f"pid {foreign_process.pid}" in shared[0]["message"]
    held = [p for p in shared[0]["observed"] if p["pid"] == foreign_process.pid][0]["used_memory_bytes"]
    assert held >= FOREIGN_GIB * 2**30
    assert not [f for f in report["findings"] if f["check_id"] in ("burn.errors", "burn.failed") and f["status"] != "pass"]


def test_exclusive_refuses_a_shared_gpu_before_anything_runs(tmp_path, foreign_process):
    result, report = _burn(tmp_path, "--duration", "10s", "--exclusive")
    assert result.returncode == 1
    shared = [f for f in report["findings"] if f["check_id"] == "burn.gpu_shared"]
    assert [f["status"] for f in shared] == ["fail"] and "nothing was started" in shared[0]["message"]
    assert report["measurements"] == [] and report["facts"]["burn"]["started"] is False
