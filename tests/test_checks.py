"""Every check on both sides, on bundles assembled from real captures."""

import json

import pytest

from conftest import FIXTURES, PUBLIC, SHARED_H200
from helpers import messages, report_for, statuses
from gpuready.checks import software
from gpuready.checks.registry import CheckContext, CheckOptions, CHECKS, run_checks
from gpuready.evidence.build import build_facts
from gpuready.facts.topology import parse_nvlink_status, parse_topo_p2p
from gpuready.facts.types import Facts, GpuFacts, HostFacts, TorchInfo
from gpuready.model import Status

H200_COLLECT = FIXTURES / "h200-collect"


def test_shared_h200_is_ready_with_warnings_for_ram_only(make_bundle):
    report = report_for(SHARED_H200)
    problems = {(f.check_id, f.status.value) for f in report.findings if f.status in (Status.WARN, Status.FAIL, Status.ERROR)}
    assert report.verdict().value == "ready_with_warnings"
    assert problems == {("host.memory_ratio", "warn")}
    assert report.exit_code() == 0


def test_collected_h200_bundle_is_ready_with_warnings():
    report = report_for(H200_COLLECT)
    problems = {(f.check_id, f.status.value) for f in report.findings if f.status in (Status.WARN, Status.FAIL, Status.ERROR)}
    assert problems == {("host.memory_ratio", "warn")}
    assert statuses(report, "software.torch_arch") == ["pass"]
    assert statuses(report, "software.driver_cuda") == ["pass"]
    assert statuses(report, "network.gdr") == ["pass"]
    skipped = {f.check_id for f in report.findings if f.status == Status.SKIP}
    assert skipped <= {"network.rdma", "network.nic_speed", "network.port", "network.rail_down", "network.rail_rate",
                       "network.link_layer_mixed", "network.ib_counters", "network.hca_placement",  # no RDMA facts
                       "nvlink.fabric_clique", "nvlink.fabric_health", "nvlink.imex_domain",
                       "nvlink.imex_channel"}  # no MNNVL: not judged


def test_eight_gpu_nvswitch(make_bundle):
    bundle = make_bundle({"nvidia-smi-q.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt",
                          "nvidia-smi-topo.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo.txt"})
    report = report_for(bundle, expect_gpus=8)
    assert statuses(report, "gpu.present") == ["pass"]
    assert statuses(report, "topology.matrix") == ["pass"] and "NV18" in messages(report, "topology.matrix")
    assert statuses(report, "topology.cross_numa") == ["pass"]
    assert statuses(report, "gpu.model_mismatch") == ["pass"]
    assert statuses(report, "nvlink.link_down") == ["pass"]
    assert statuses(report_for(bundle, expect_gpus=4), "gpu.present") == ["fail"]


def test_eight_pcie_gpus_on_two_sockets(make_bundle):
    bundle = make_bundle({"nvidia-smi-q.txt": PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt",
                          "nvidia-smi-topo.txt": PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt"})
    report = report_for(bundle)
    assert statuses(report, "topology.matrix") == ["warn"]
    assert statuses(report, "topology.cross_numa") == ["warn"]
    assert "GPU0" in messages(report, "topology.cross_numa")
    assert statuses(report, "gpu.ecc_mode") == ["pass"]  # GeForce: ECC off is not a fault
    assert statuses(report, "nvlink.link_down") == ["pass"]


def test_mixed_models(make_bundle):
    report = report_for(make_bundle({"nvidia-smi.txt": PUBLIC / "mixed-models" / "nvidia-smi.txt"}))
    assert "warn" in statuses(report, "gpu.model_mismatch")
    assert "RTX 3090 Ti" in messages(report, "gpu.model_mismatch")


def test_x8_link(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.txt": PUBLIC / "pcie-x8" / "nvidia-smi-q.txt"}))
    assert statuses(report, "pcie.link_degraded") == ["fail"]
    assert "x8 of x16" in messages(report, "pcie.link_degraded")


def test_full_width_link_passes():
    assert statuses(report_for(SHARED_H200), "pcie.link_degraded") == ["pass"]


def test_xid_79_and_48(make_bundle):
    report = report_for(make_bundle({
        "nvidia-smi-q.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt",
        "dmesg.txt": (PUBLIC / "xid" / "xid79-sxid-dmesg.txt").read_text() + (PUBLIC / "xid" / "xid48-63-94-dmesg.txt").read_text()}))
    text = messages(report, "health.xid")
    assert "Xid 79" in text and "Xid 48" in text
    xid79 = next(f for f in report.findings if f.check_id == "health.xid" and f.observed["xid"] == 79)
    assert xid79.status == Status.FAIL and xid79.observed["count"] == 2  # Xid line + its fallen-off-bus line
    assert statuses(report, "health.sxid") == ["fail", "fail", "fail"]  # one per NVSwitch, each logged "Fatal"
    assert report.verdict().value == "not_ready" and report.exit_code() == 1


def test_application_xid_is_a_warning(make_bundle):
    report = report_for(make_bundle({"dmesg.txt": PUBLIC / "xid" / "xid31-32-dmesg.txt",
                                     "nvidia-smi.txt": SHARED_H200 / "nvidia-smi.txt"}))
    xid31 = [f for f in report.findings if f.check_id == "health.xid" and f.observed["xid"] == 31]
    assert xid31 and xid31[0].status == Status.WARN


def test_clean_kernel_log_passes():
    assert statuses(report_for(SHARED_H200), "health.xid") == ["pass"]


def test_ecc_errors_and_retired_pages(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.xml": PUBLIC / "ecc-errors" / "nvidia-smi-q.xml"}))
    assert statuses(report, "health.ecc_uncorrected") == ["fail"]
    assert statuses(report, "health.retired_pages") == ["warn"]


def test_row_remap_pending(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.txt": PUBLIC / "ecc-errors" / "nvidia-smi-q.txt"}))
    assert statuses(report, "health.row_remap_pending") == ["fail"]
    assert statuses(report, "health.row_remap_failure") == ["pass"]


def test_mig_enabled(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.txt": PUBLIC / "mig" / "nvidia-smi-q.txt"}))
    assert statuses(report, "gpu.mig") == ["warn"]
    assert statuses(report_for(SHARED_H200), "gpu.mig") == ["pass"]


def _torch_json(arch_list):
    return json.dumps({"version": "2.3.0+cu118", "cuda": "11.8", "arch_list": arch_list, "device_count": 1,
                       "nccl_version": "2.19.3"})


def test_torch_without_the_gpus_arch(make_bundle):
    old = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]
    report = report_for(make_bundle({"nvidia-smi-q.xml": SHARED_H200 / "nvidia-smi-q.xml",
                                     "nvml.json": (H200_COLLECT / "nvml.json").read_text(),
                                     "torch.json": _torch_json(old)}))
    assert statuses(report, "software.torch_arch") == ["fail"]
    good = report_for(make_bundle({"nvml.json": H200_COLLECT / "nvml.json",
                                   "torch.json": _torch_json(old + ["sm_90"])}))
    assert statuses(good, "software.torch_arch") == ["pass"]
    ptx = report_for(make_bundle({"nvml.json": H200_COLLECT / "nvml.json",
                                  "torch.json": _torch_json(old + ["compute_86"])}))
    assert statuses(ptx, "software.torch_arch") == ["pass"] and "PTX" in messages(ptx, "software.torch_arch")


# (arch entry, capability, runs): the entries the two rules of torch's architecture list disagreed on before issue 30
# (checks/software.py `_arch_supported` for torch.json, verbs/diagnose/torch_errors.py `wheel_for` for logs).
SUFFIXED_ARCHS = [
    ("sm_80a", "8.6", False),      # was: check no, logs yes (the suffix was stripped: sm_80 SASS runs on 8.6)
    ("sm_90a", "9.0", True),       # both yes
    ("compute_90a", "9.0", True),  # was: check no (suffixed PTX never counted), logs yes
    ("compute_90a", "10.0", False),  # was: check no, logs yes (PTX at or below the capability)
    ("sm_100f", "10.3", True),     # was: check no (a suffix required the same minor), logs yes
    ("sm_100f", "12.0", False),    # both no: another major is another family
    ("compute_120f", "12.1", True),  # was: check no, logs yes
]


@pytest.mark.parametrize(("arch", "capability", "runs"), SUFFIXED_ARCHS)
def test_one_architecture_rule_for_suffixed_entries(arch, capability, runs, monkeypatch):
    """One rule decides whether torch has kernels for a GPU, from torch.json's arch list (`check`) and from a log's
    capability warning (`diagnose`: the wheel to install). Its source, NVIDIA's: the PTX ISA's target notes say code
    for a target with the `a` suffix (sm_90a, compute_90a: architecture-specific features) runs on that architecture
    alone and does not follow the onion-layer model, its PTX not even on later devices; the CUDA 12.9 announcement of
    family-specific features (developer.nvidia.com blog, "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce
    Family-Specific Architecture Features") says an `f` target (sm_100f) runs on the later minors of its family (10.0
    and 10.3) and not on another major. The two old rules disagreed on these entries; the kept one is
    checks/software.py's, corrected for suffixed PTX and families."""
    name = {"8.6": "NVIDIA A10", "9.0": "NVIDIA H100 80GB HBM3", "10.0": "NVIDIA B200", "10.3": "NVIDIA B300",
            "12.0": "NVIDIA GeForce RTX 5090", "12.1": "NVIDIA GB10"}[capability]
    facts = Facts(gpus=[GpuFacts(index=0, bus_id="0000:18:00.0", name=name, compute_capability=capability)],
                  torch=TorchInfo(version="2.9.0+cu130", cuda="13.0", arch_list=[arch]))
    (finding,) = run_checks(facts, only=["software.torch_arch"])
    assert finding.status == (Status.PASS if runs else Status.FAIL)
    wheel = {"index": "cu999", "cuda": "12.8", "archs": [arch], "source": "a wheel built for this entry alone"}
    monkeypatch.setattr(software, "load_table", lambda name: {"wheel": [wheel]})
    sm = "sm_" + capability.replace(".", "")
    assert (software.wheel_for(sm) is wheel) is runs


def test_driver_too_old_for_torch_cuda(make_bundle):
    torch = json.dumps({"version": "2.9.0+cu130", "cuda": "13.0", "arch_list": ["sm_90"], "device_count": 1})
    old_driver = (PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q-535.161.08.txt")
    report = report_for(make_bundle({"nvidia-smi-q.txt": old_driver, "torch.json": torch}))
    assert statuses(report, "software.driver_cuda") == ["fail"]


def _shm_df(size_bytes: int) -> str:
    # The shared H200 df output with /dev/shm resized: edited on purpose, no public capture shows 64 MiB.
    return ("Filesystem 1B-blocks Used Available Use% Mounted on\n"
            f"shm {size_bytes} 0 {size_bytes} 0% /dev/shm\n/dev/vda 270582939648 18253611008 68719476736 21% /\n")


def test_container_with_64_mib_shm(make_bundle):
    bundle = make_bundle({"nvidia-smi-q.txt": PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt",
                          "df.txt": _shm_df(64 * 2**20),
                          "cgroup.txt": "==> /proc/1/cgroup <==\n0::/docker/abc123\n"})
    report = report_for(bundle)
    assert statuses(report, "host.shm") == ["fail"]
    assert "--shm-size" in report.findings[[f.check_id for f in report.findings].index("host.shm")].fix
    assert statuses(report_for(SHARED_H200), "host.shm") == ["pass"]


def test_memory_ratio_levels():
    facts = build_facts({"nvml.json": (H200_COLLECT / "nvml.json").read_text()})
    for ram_gib, expected in ((64, "fail"), (200, "warn"), (256, "pass")):
        facts.host = HostFacts(memory_total_bytes=ram_gib * 2**30)
        found = [f for f in run_checks(facts) if f.check_id == "host.memory_ratio"]
        assert [f.status.value for f in found] == [expected], ram_gib


def test_no_driver_and_version_mismatch(make_bundle):
    for folder, phrase in (("no-driver", "kernel module is not loaded"), ("driver-mismatch", "differ")):
        report = report_for(make_bundle({"nvidia-smi.txt": PUBLIC / folder / "nvidia-smi.txt"}))
        assert statuses(report, "gpu.present") == ["fail"]
        assert phrase in messages(report, "gpu.present")
        assert report.exit_code() == 1
        assert all(f.status == Status.SKIP for f in report.findings if f.check_id == "pcie.link_degraded")


def _two_gpus(name="NVIDIA A100-SXM4-80GB") -> list[GpuFacts]:
    return [GpuFacts(index=i, bus_id=f"0000:0{i + 1}:00.0", name=name) for i in range(2)]


def test_nvlink_link_down_and_up():
    statuses_by_gpu = parse_nvlink_status((PUBLIC / "nvlink-status" / "nvidia-smi-nvlink-s-inactive.txt").read_text())
    gpus = [GpuFacts(index=i, bus_id=f"0000:{i + 1:02x}:00.0", name="Tesla V100-SXM2-32GB",
                     nvlinks=statuses_by_gpu.get(i, [])) for i in range(4)]
    found = [f for f in run_checks(Facts(gpus=gpus)) if f.check_id == "nvlink.link_down"]
    assert [f.status.value for f in found] == ["fail"] and found[0].subject.gpu.index == 3
    healthy = parse_nvlink_status((PUBLIC / "nvlink-status" / "nvidia-smi-nvlink-s.txt").read_text())
    gpus = [GpuFacts(index=i, bus_id=f"0000:{i + 1:02x}:00.0", name="NVIDIA A100-SXM4-80GB", nvlinks=healthy[i])
            for i in range(8)]
    assert [f.status.value for f in run_checks(Facts(gpus=gpus)) if f.check_id == "nvlink.link_down"] == ["pass"]


def test_p2p_not_supported_pair():
    p2p = parse_topo_p2p((PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p-cns-2xL4.txt").read_text())
    found = [f for f in run_checks(Facts(gpus=_two_gpus("NVIDIA L4"), p2p_read=p2p)) if f.check_id == "topology.p2p"]
    assert [f.status.value for f in found] == ["warn"] and "CNS" in found[0].message
    ok = parse_topo_p2p((PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p.txt").read_text())
    gpus = [GpuFacts(index=i, bus_id=f"0000:{i + 1:02x}:00.0", name="NVIDIA H100 80GB HBM3") for i in range(8)]
    assert [f.status.value for f in run_checks(Facts(gpus=gpus, p2p_read=ok)) if f.check_id == "topology.p2p"] == ["pass"]


def test_fabric_manager_not_done():
    gpus = _two_gpus("NVIDIA H100 80GB HBM3")
    gpus[1].fabric_state = "In Progress"
    found = [f for f in run_checks(Facts(gpus=gpus)) if f.check_id == "gpu.fabric"]
    assert [f.status.value for f in found] == ["fail"]


def test_thermal_levels_and_power_cap_is_normal():
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", name="NVIDIA H200", temperature_c=40, slowdown_temperature_c=89,
                   clock_event_reasons=frozenset({"sw_power_cap"}))
    for temperature, reasons, expected in ((40, {"sw_power_cap"}, "pass"), (86, set(), "warn"), (90, set(), "fail"),
                                           (60, {"hw_thermal_slowdown"}, "fail")):
        gpu.temperature_c, gpu.clock_event_reasons = temperature, frozenset(reasons)
        found = [f for f in run_checks(Facts(gpus=[gpu])) if f.check_id == "thermal.current"]
        assert [f.status.value for f in found] == [expected], temperature


def test_power_limit_and_budget():
    gpus = [GpuFacts(index=i, bus_id=f"0000:{i + 1:02x}:00.0", name="NVIDIA H200", power_limit_w=700,
                     power_default_limit_w=700) for i in range(8)]
    gpus[3].power_limit_w = 500
    found = run_checks(Facts(gpus=gpus), CheckOptions(psu_watts=5000, circuit_watts=20000))
    assert [f.status.value for f in found if f.check_id == "power.limit"] == ["warn"]
    assert [f.status.value for f in found if f.check_id == "power.budget"] == ["fail", "pass"]
    found = run_checks(Facts(gpus=gpus), CheckOptions(psu_watts=12000))
    assert [f.status.value for f in found if f.check_id == "power.budget"] == ["pass"]


def test_env_and_visible_devices():
    facts = Facts(gpus=_two_gpus(), env={"NCCL_P2P_DISABLE": "1", "CUDA_VISIBLE_DEVICES": "1,0"})
    found = {f.check_id: f.status.value for f in run_checks(facts)}
    assert found["software.env"] == "warn" and found["gpu.visible_devices"] == "warn"
    facts = Facts(gpus=_two_gpus(), env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    found = {f.check_id: f.status.value for f in run_checks(facts)}
    assert found["software.env"] == "pass" and found["gpu.visible_devices"] == "pass"


def test_busy_gpu_is_judged_by_processes():
    from gpuready.facts.types import GpuProcess
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", name="NVIDIA H200", processes=[], memory_used_bytes=600 * 2**20)
    assert [f.status.value for f in run_checks(Facts(gpus=[gpu])) if f.check_id == "gpu.busy"] == ["pass"]
    gpu.processes = [GpuProcess(pid=42, name="python", kind="C")]
    assert [f.status.value for f in run_checks(Facts(gpus=[gpu])) if f.check_id == "gpu.busy"] == ["warn"]


def test_network_checks():
    from gpuready.facts.types import IbPort, NetInterface
    facts = Facts(gpus=_two_gpus(), net_interfaces=[NetInterface(name="eno1", speed_mbit_per_s=1000, operstate="up")],
                  ib_ports=[])
    found = {f.check_id: f.status.value for f in run_checks(facts)}
    assert found["network.nic_speed"] == "fail" and found["network.rdma"] == "warn"
    facts.ib_ports = [IbPort(device="mlx5_0", port=1, state="ACTIVE", rate_gbit_per_s=400, link_layer="InfiniBand")]
    facts.host = HostFacts(kernel_modules={"nvidia_peermem", "ib_uverbs"})
    found = {f.check_id: f.status.value for f in run_checks(facts)}
    assert found["network.rdma"] == "pass" and found["network.gdr"] == "pass"


def test_single_and_multi_node_verdicts():
    from gpuready.facts.types import NetInterface
    from gpuready.pipeline import check_report
    facts = build_facts({"nvml.json": (H200_COLLECT / "nvml.json").read_text()})
    facts.host = HostFacts(memory_total_bytes=512 * 2**30)
    facts.net_interfaces = [NetInterface(name="eno1", speed_mbit_per_s=1000, operstate="up")]
    report = check_report(facts, CheckOptions())
    assert report.verdicts()["single_node"].value == "ready"
    assert report.verdicts()["multi_node"].value == "not_ready"


def test_every_check_has_a_stable_dotted_id():
    """The ids are a contract (reports, --fail-on, JUnit names): the registry holds exactly the ids the README's
    "Check catalog" table documents (and `check` itself adds the one about a bundle of mixed machines), each
    `category.name`; a finding's category is its id's first part (DESIGN.md §1), whatever facts it ran on."""
    import re
    from pathlib import Path
    from gpuready.pipeline import MIXED_MACHINES_ID
    catalog = (Path(__file__).resolve().parents[1] / "docs" / "findings.md").read_text()  # the catalog's page
    documented = {check_id for line in catalog.splitlines() if line.startswith("| `")
                  for check_id in re.findall(r"`([a-z_0-9]+\.[a-z_0-9]+)`", line.split(" | ")[0])}
    run_checks(Facts())
    assert set(CHECKS) | {MIXED_MACHINES_ID} == documented and MIXED_MACHINES_ID not in CHECKS
    # 52 of the machine's facts, 30 of logs alone (diagnose's, judged in checks/ since issue 30), mixed machines
    assert len(documented) == 91
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z_0-9]+", check_id) for check_id in documented)
    findings = run_checks(build_facts({"nvml.json": (H200_COLLECT / "nvml.json").read_text()}))
    assert {f.check_id for f in findings} <= documented
    assert all(f.category == f.check_id.split(".")[0] for f in findings)