"""Parsers on real tool outputs (public captures, the shared H200 recording)."""

import dataclasses
import json

import pytest

from conftest import FIXTURES, PUBLIC, SHARED_H200
from gpuready.facts.clock_reasons import REASON_BITS
from gpuready.facts.host_files import parse_df, parse_memlock, parse_meminfo, split_sections, parse_cgroup_limits
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.nvidia_smi_plain import parse_nvidia_smi_plain
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_text, parse_nvidia_smi_q_xml
from gpuready.facts.nvml_json import NvmlDocument
from gpuready.facts.smi_tree import SmiParseError
from gpuready.facts.topology import parse_nvlink_status, parse_topo_matrix, parse_topo_p2p
from gpuready.facts.units import normalize_bus_id, to_bytes


def read(path):
    return path.read_text(errors="replace")


def test_h200_xml_and_text_agree():
    xml = parse_nvidia_smi_q_xml(read(SHARED_H200 / "nvidia-smi-q.xml"))
    text = parse_nvidia_smi_q_text(read(SHARED_H200 / "nvidia-smi-q.txt"))
    a, b = dataclasses.asdict(xml.gpus[0]), dataclasses.asdict(text.gpus[0])
    differing = {key for key in a if a[key] != b[key]}
    assert differing <= {"power_draw_w", "source"}  # power was sampled twice
    gpu = xml.gpus[0]
    assert gpu.bus_id == "0000:00:06.0" and gpu.name == "NVIDIA H200"
    assert gpu.memory_total_bytes == 143771 * 2**20
    assert gpu.bar1_total_bytes == 262144 * 2**20
    assert (gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 16, 16)
    assert gpu.power_limit_w == 700 and gpu.power_default_limit_w == 700


def test_relative_temperatures_become_absolute():
    # 580 drivers print limits relative to T.Limit; NVML says slowdown 89, shutdown 95, max operating 87.
    gpu = parse_nvidia_smi_q_xml(read(SHARED_H200 / "nvidia-smi-q.xml")).gpus[0]
    assert (gpu.temperature_c, gpu.slowdown_temperature_c, gpu.shutdown_temperature_c,
            gpu.max_operating_temperature_c) == (37, 89, 95, 87)


def test_absolute_temperatures_of_older_drivers():
    gpu = parse_nvidia_smi_q_text(read(PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q-535.161.08.txt")).gpus[0]
    assert gpu.slowdown_temperature_c is not None and gpu.slowdown_temperature_c > 60


def test_idle_reason_is_decoded():
    gpu = parse_nvidia_smi_q_xml(read(SHARED_H200 / "nvidia-smi-q.xml")).gpus[0]
    assert gpu.clock_event_reasons == frozenset({"gpu_idle"})


def test_eight_h100_text_in_bus_order():
    query = parse_nvidia_smi_q_text(read(PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt"))
    assert len(query.gpus) == 8
    assert [gpu.bus_id for gpu in query.gpus] == sorted(gpu.bus_id for gpu in query.gpus)
    assert {gpu.name for gpu in query.gpus} == {"NVIDIA H100 80GB HBM3"}


def test_old_driver_xml_k80():
    query = parse_nvidia_smi_q_xml(read(PUBLIC / "nvidia-smi-q-xml" / "nvidia-smi-q.xml"))
    assert len(query.gpus) == 4 and query.driver_version.startswith("430")


def test_ecc_double_bit_and_retired_pages_from_v100_xml():
    gpu = parse_nvidia_smi_q_xml(read(PUBLIC / "ecc-errors" / "nvidia-smi-q.xml")).gpus[0]
    assert gpu.ecc_uncorrected_volatile >= 1
    assert gpu.ecc_uncorrected_aggregate >= 7627
    assert gpu.retired_pages_pending is True


def test_remap_pending_from_a10_text():
    gpu = parse_nvidia_smi_q_text(read(PUBLIC / "ecc-errors" / "nvidia-smi-q.txt")).gpus[0]
    assert gpu.remap_pending is True and gpu.remapped_rows_uncorrectable == 4


def test_mig_enabled():
    assert parse_nvidia_smi_q_text(read(PUBLIC / "mig" / "nvidia-smi-q.txt")).gpus[0].mig_enabled is True
    assert parse_nvidia_smi_q_xml(read(PUBLIC / "mig" / "nvidia-smi-q.xml")).gpus[0].mig_enabled is True


def test_x8_link():
    gpu = parse_nvidia_smi_q_text(read(PUBLIC / "pcie-x8" / "nvidia-smi-q.txt")).gpus[0]
    assert (gpu.pcie_width_current, gpu.pcie_width_max) == (8, 16)


def test_single_unknown_error_field_is_not_a_lost_gpu():
    query = parse_nvidia_smi_q_text(read(PUBLIC / "gpu-err" / "nvidia-smi-q-unknown-error.txt"))
    assert len(query.gpus) == 8 and not any(gpu.lost for gpu in query.gpus)


def test_garbage_is_a_parse_error():
    with pytest.raises(SmiParseError):
        parse_nvidia_smi_q_xml("<nvidia_smi_log><gpu id='0000:01:00.0'>")
    with pytest.raises(SmiParseError):
        parse_nvidia_smi_q_text("hello world\nthis is not nvidia-smi\n")


def test_topology_nvswitch_tabs_and_spaces():
    for name in ("nvidia-smi-topo.txt", "nvidia-smi-topo-nics.txt"):
        topology = parse_topo_matrix(read(PUBLIC / "dgx-h100-nvswitch" / name))
        assert len(topology.gpu_labels) == 8
        assert {link for (i, j), link in topology.links.items() if i != j} == {"NV18"}


def test_topology_two_sockets():
    topology = parse_topo_matrix(read(PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt"))
    assert "SYS" in topology.links.values() and "PIX" in topology.links.values()


def test_topology_with_ansi_header():
    topology = parse_topo_matrix(read(SHARED_H200 / "nvidia-smi-topo.txt"))
    assert topology.links == {(0, 0): "X"} and topology.cpu_affinity == {0: "0-15"}


def test_p2p_matrix():
    status = parse_topo_p2p(read(PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p-cns-2xL4.txt"))
    assert status[(0, 1)] == "CNS"


def test_nvlink_inactive():
    links = parse_nvlink_status(read(PUBLIC / "nvlink-status" / "nvidia-smi-nvlink-s-inactive.txt"))
    inactive = [(gpu, link.link) for gpu, gpu_links in links.items() for link in gpu_links if not link.active]
    assert (3, 3) in inactive and (3, 5) in inactive
    healthy = parse_nvlink_status(read(PUBLIC / "nvlink-status" / "nvidia-smi-nvlink-s.txt"))
    assert len(healthy) == 8 and all(len(gpu_links) == 12 and all(l.active for l in gpu_links)
                                     for gpu_links in healthy.values())


def test_xid_lines_and_fallen_off_bus_forms():
    events = parse_kernel_log(read(PUBLIC / "xid" / "xid48-63-94-dmesg.txt"))
    assert [e.code for e in events if e.kind == "xid"][:3] == [48, 63, 94]
    assert events[0].bus_id == "0000:19:00.0"
    multiline = parse_kernel_log(read(PUBLIC / "xid" / "xid79-no-xid-multiline-dmesg.txt"))
    # The module banner after the failed probe is a driver load (same load: the fallen-off-bus stays current).
    assert [(e.kind, e.bus_id) for e in multiline] == [("fallen_off_bus", "0000:b3:00.0"), ("driver_load", None)]
    assert multiline[1].detail == "570.158.01" and multiline[0].timestamp_s == 1843.308145
    legacy = parse_kernel_log(read(PUBLIC / "xid" / "fallen-off-bus-legacy-dmesg.txt"))
    assert legacy[0].bus_id == "0000:01:00.0"
    sxid = parse_kernel_log(read(PUBLIC / "xid" / "xid79-sxid-dmesg.txt"))
    assert any(e.kind == "sxid" and e.code == 20034 for e in sxid)


def test_healthy_dmesg_has_no_faults():
    events = parse_kernel_log(read(SHARED_H200 / "dmesg.txt"))
    assert not [e for e in events if e.kind in ("xid", "sxid", "fallen_off_bus", "aer")]
    assert [e.detail for e in events if e.kind == "iommu"] == ["iommu: Default domain type: Translated"]


def test_plain_nvidia_smi_driver_errors():
    mismatch = parse_nvidia_smi_plain(read(PUBLIC / "driver-mismatch" / "nvidia-smi.txt"))
    assert mismatch.error_kind == "version_mismatch"
    assert parse_nvidia_smi_plain(read(PUBLIC / "no-driver" / "nvidia-smi.txt")).error_kind == "no_driver"


def test_plain_nvidia_smi_mixed_models():
    plain = parse_nvidia_smi_plain(read(PUBLIC / "mixed-models" / "nvidia-smi.txt"))
    assert [gpu.name for gpu in plain.gpus] == ["NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 3090 Ti"]


def test_host_files():
    assert parse_meminfo(read(SHARED_H200 / "meminfo.txt"))["MemTotal"] == 131961788 * 1024
    shm = next(disk for disk in parse_df(read(SHARED_H200 / "df.txt")) if disk.mount == "/dev/shm")
    assert shm.size_bytes == 128 * 2**30
    assert parse_memlock("max locked memory           (kbytes, -l) 8192\n") == 8192 * 1024
    assert parse_memlock("max locked memory           (kbytes, -l) unlimited\n") == -1
    sections = split_sections("==> /sys/fs/cgroup/memory.max <==\n68719476736\n==> /proc/1/cgroup <==\n"
                              "0::/kubepods/burstable/pod1\n")
    assert parse_cgroup_limits(sections) == (68719476736, None, "kubernetes")


def test_units():
    assert normalize_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert normalize_bus_id("PCI:0000:2b:00") == "0000:2b:00.0"
    assert to_bytes("143771 MiB") == 143771 * 2**20 and to_bytes("N/A") is None


# --- nvml.json: version 1 (recorded) and version 2 (what collect writes now) ------------------------------------------

# nvml.json version 2 names the figures that move as telemetry does (facts/nvml_records.py GpuSample), written here by
# hand from that layout; version 1 named them as GpuFacts does, and listed the clock-event reasons by name.
VERSION_2_NAMES = {"power_draw_w": "power_w", "temperature_memory_c": "memory_temperature_c",
                   "utilization_gpu_pct": "utilization_pct", "ecc_corrected_volatile": "ecc_corrected",
                   "ecc_uncorrected_volatile": "ecc_uncorrected", "pcie_replay_count": "pcie_replay",
                   "pcie_width_current": "pcie_width"}


def _as_version_2(document: dict) -> dict | None:
    """A version-1 document as collect writes it now; None where its reasons name a bit nvml.h does not have."""
    gpus = []
    for entry in document.get("gpus", []):
        if not isinstance(entry, dict):
            return None
        renamed = {VERSION_2_NAMES.get(key, key): value for key, value in entry.items()}
        reasons = entry.get("clock_event_reasons")
        if isinstance(reasons, list):
            if not all(isinstance(name, str) and name in REASON_BITS for name in reasons):
                return None
            renamed["clock_event_reasons"] = sum(REASON_BITS[name] for name in set(reasons))
        if isinstance(entry.get("errors"), dict):
            renamed["errors"] = {VERSION_2_NAMES.get(key, key): text for key, text in entry["errors"].items()}
        gpus.append(renamed)
    return {**document, "version": 2, "gpus": gpus}


def _read_nvml(text: str):
    try:
        document = NvmlDocument(text)
    except ValueError as error:
        return type(error).__name__, str(error)
    return document.init_error, document.driver_version, document.device_count, document.gpus, document.p2p_read


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("nvml.json")), ids=lambda path: path.parent.name)
def test_every_recorded_nvml_json_reads_the_same_as_version_2(path):
    """Every nvml.json under tests/fixtures (version 1: recorded on real machines, or a fuzzer's crasher) gives the
    same facts, or the same refusal, when the same answers are written in version 2's names."""
    document = json.loads(path.read_text())
    if document.get("format") != "gpuready-nvml":
        pytest.skip("an ad-hoc recording that predates gpuready's format (its README says so)")
    rewritten = _as_version_2(document)
    if rewritten is None:
        pytest.skip("reasons no nvml.h bit names")
    assert document["version"] == 1
    assert _read_nvml(json.dumps(rewritten)) == _read_nvml(path.read_text())


def test_a_version_2_gpu_reads_as_the_facts_every_source_shares():
    """nvml.json version 2 as collect writes it (facts/nvml_records.py): the sample's figures land in GpuFacts' names,
    the clock-event mask becomes the reasons it sets, the memory clock (no GpuFacts field) is left out, and an error
    of a renamed figure names the fact."""
    entry = {"index": 0, "bus_id": "0000:3B:00.0", "name": "NVIDIA H200", "power_w": 640.0, "power_limit_w": 700.0,
             "temperature_c": 40, "memory_temperature_c": 55.0, "sm_clock_mhz": 1980, "memory_clock_mhz": 3201,
             "utilization_pct": 7, "clock_event_reasons": REASON_BITS["sw_power_cap"] | REASON_BITS["gpu_idle"],
             "ecc_corrected": 2, "ecc_uncorrected": None, "pcie_replay": 7, "pcie_width": 16,
             "errors": {"ecc_uncorrected": "NVMLError_Unknown: Unknown Error", "memory_clock_mhz": "NVMLError_Unknown"},
             "lost": False}
    gpu = NvmlDocument(json.dumps({"format": "gpuready-nvml", "version": 2, "gpus": [entry]})).gpus[0]
    assert (gpu.bus_id, gpu.power_draw_w, gpu.power_limit_w, gpu.temperature_memory_c, gpu.utilization_gpu_pct,
            gpu.ecc_corrected_volatile, gpu.pcie_replay_count, gpu.pcie_width_current) == (
        "0000:3b:00.0", 640.0, 700.0, 55.0, 7, 2, 7, 16)
    assert gpu.clock_event_reasons == frozenset({"sw_power_cap", "gpu_idle"})
    assert gpu.error_fields == ["ecc_uncorrected_volatile"]
    with pytest.raises(ValueError, match="version 3 is not the 1, 2 this tool reads"):
        NvmlDocument(json.dumps({"format": "gpuready-nvml", "version": 3, "gpus": []}))
