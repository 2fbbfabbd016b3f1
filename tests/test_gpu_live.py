"""Live checks on a machine with NVIDIA GPUs (marked `gpu`; skipped without a driver)."""

import pytest

from gpuready.evidence.collect import collect
from gpuready.evidence.build import build_facts
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_xml
from gpuready.facts.nvml_json import NvmlDocument
from gpuready.pipeline import check_report
from gpuready.checks.registry import CheckOptions

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def live_files():
    files, manifest = collect(with_torch=False)
    if NvmlDocument(files["nvml.json"]).init_error or "nvidia-smi-q.xml" not in files:
        pytest.skip("no NVIDIA driver on this machine")
    return files


def test_nvml_and_nvidia_smi_agree(live_files):
    nvml = NvmlDocument(live_files["nvml.json"])
    smi = parse_nvidia_smi_q_xml(live_files["nvidia-smi-q.xml"])
    assert [gpu.bus_id for gpu in nvml.gpus] == [gpu.bus_id for gpu in smi.gpus]
    for from_nvml, from_smi in zip(nvml.gpus, smi.gpus):
        assert from_nvml.uuid == from_smi.uuid and from_nvml.name == from_smi.name
        assert from_nvml.memory_total_bytes == from_smi.memory_total_bytes
        assert from_nvml.pcie_width_max == from_smi.pcie_width_max
        assert from_nvml.power_limit_w == pytest.approx(from_smi.power_limit_w, abs=1)
        assert from_nvml.slowdown_temperature_c == from_smi.slowdown_temperature_c


def test_live_check_sees_the_gpus(live_files):
    report = check_report(build_facts(live_files, live=True), CheckOptions())
    present = [f for f in report.findings if f.check_id == "gpu.present"]
    assert present[0].status.value == "pass"
    assert not [f for f in report.findings if f.status.value == "error"]
