"""nvlink.link_down on every machine class, and nvlink.errors from the kernel log.

Inputs are `nvidia-smi topo -m` matrices and `nvidia-smi nvlink -s` text as the tools print them: public captures
where one exists, otherwise built in the tools' exact layout (tests/fixtures/boards/README.md says which is which).
"""

from pathlib import Path

import pytest

from conftest import FIXTURES, PUBLIC
from helpers import report_for
from gpuready.checks.registry import run_checks
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.topology import parse_nvlink_status, parse_topo_matrix
from gpuready.facts.types import Facts, GpuFacts
from gpuready.model import Status

BOARDS = FIXTURES / "boards"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
H100_NVL = "NVIDIA H100 NVL"
RTX_3090 = "NVIDIA GeForce RTX 3090"
V100 = "Tesla V100-SXM2-16GB"


def _text(path: Path) -> str:
    return path.read_text()


def _gpus(count: int, name: str | None, nvlink_s: str | None = None) -> list[GpuFacts]:
    links = parse_nvlink_status(nvlink_s) if nvlink_s is not None else {}
    return [GpuFacts(index=i, bus_id=f"0000:{0x18 + 0x10 * i:02x}:00.0", name=name,
                     nvlinks=links.get(i, []) if nvlink_s is not None else None) for i in range(count)]


def _link_down(facts: Facts):
    return [finding for finding in run_checks(facts, only=["nvlink.link_down"])]


def _errors(facts: Facts):
    return [finding for finding in run_checks(facts, only=["nvlink.errors"])]


def _summary(findings) -> list[tuple[str, int | None]]:
    return [(f.status.value, f.subject.gpu.index if f.subject.gpu else None) for f in findings]


# --------------------------------------------------------------------------- HGX/DGX NVSwitch boards (8 GPUs)


def test_nvswitch_h100_all_nv18_passes():
    topology = parse_topo_matrix(_text(PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo-nics.txt"))
    found = _link_down(Facts(gpus=_gpus(8, H100), topology=topology))
    assert _summary(found) == [("pass", None)]
    assert "NVSwitch fabric, NV18 per GPU" in found[0].message


def test_nvswitch_gpu_below_the_models_link_count_fails():
    topology = parse_topo_matrix(_text(BOARDS / "hgx-h100-8gpu-gpu3-nv16-topo.txt"))
    found = _link_down(Facts(gpus=_gpus(8, H100), topology=topology))
    assert _summary(found) == [("fail", 3)]
    assert "GPU3 reaches its peers over NV16" in found[0].message
    assert found[0].observed == {"topology": "NV16"} and found[0].expected == {"topology": "NV18"}


def test_nvswitch_gpu_with_links_down_while_peers_have_them_up_fails():
    nvlink_s = _text(BOARDS / "hgx-h100-8gpu-gpu5-links-6-7-down-nvlink-s.txt")
    topology = parse_topo_matrix(_text(PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo-nics.txt"))
    found = _link_down(Facts(gpus=_gpus(8, H100, nvlink_s), topology=topology))
    assert _summary(found) == [("fail", 5)]
    assert "GPU5 (H100 SXM) has 16 of 18 NVLink links up: link(s) 6-7 down" in found[0].message
    assert found[0].observed["nvlink_s"] == {"active": 16, "down": [6, 7]}
    assert "nvidia-smi nvlink -e -i 5" in found[0].fix


def test_nvswitch_links_missing_on_every_gpu_alike_still_fail():
    # On an NVSwitch board every link goes to a switch: the same two links down everywhere is a dead switch
    # port set, not a design choice. The capture with links 16 and 17 marked inactive on all eight GPUs.
    text = _text(BOARDS / "hgx-h100-8gpu-gpu5-links-6-7-down-nvlink-s.txt")
    for link in (6, 7):
        text = text.replace(f"Link {link}: <inactive>", f"Link {link}: 26.562 GB/s")
    for link in (16, 17):
        text = text.replace(f"Link {link}: 26.562 GB/s", f"Link {link}: <inactive>")
    found = _link_down(Facts(gpus=_gpus(8, H100, text)))
    assert _summary(found) == [("fail", i) for i in range(8)]
    assert all("16 of 18" in f.message and "16-17" in f.message for f in found)


# --------------------------------------------------------------------------- HGX 4-GPU boards without NVSwitch


def test_hgx_a100_4gpu_direct_nv4_mesh_passes():
    # 12 links per A100 = NV4 to each of 3 peers; the older rule failed this board (NV4 < 12 links).
    topology = parse_topo_matrix(_text(BOARDS / "hgx-a100-4gpu-nv4-topo.txt"))
    nvlink_s = _text(PUBLIC / "nvlink-status" / "nvidia-smi-nvlink-s.txt")
    found = _link_down(Facts(gpus=_gpus(4, A100, nvlink_s), topology=topology))
    assert _summary(found) == [("pass", None)]
    assert "every pair of A100 SXM4 80GB NV4" in found[0].message


def test_hgx_a100_4gpu_pair_with_fewer_links_fails_both_gpus():
    topology = parse_topo_matrix(_text(BOARDS / "hgx-a100-4gpu-pair-nv3-topo.txt"))
    found = _link_down(Facts(gpus=_gpus(4, A100), topology=topology))
    assert _summary(found) == [("fail", 0), ("fail", 1)]
    assert all("GPU0-GPU1 is NV3, fewer links than the NV4 of the other A100 SXM4 80GB pairs" in f.message
               for f in found)
    assert found[0].subject.peer.index == 1 and found[1].subject.peer.index == 0


def test_hgx_h100_4gpu_nv6_from_the_matrix_alone(make_bundle):
    # The NV6 4-GPU H100 board of NVIDIA/nccl#1617 in the layout of the della capture: no other file.
    text = _text(BOARDS / "hgx-a100-4gpu-nv4-topo.txt").replace("NV4", "NV6")
    report = report_for(make_bundle({"nvidia-smi-topo.txt": text}))
    found = [f for f in report.findings if f.check_id == "nvlink.link_down"]
    assert _summary(found) == [("pass", None)] and "every pair NV6" in found[0].message


def test_hgx_4gpu_degraded_pair_from_the_matrix_alone(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-topo.txt": BOARDS / "hgx-a100-4gpu-pair-nv3-topo.txt"}))
    found = [f for f in report.findings if f.check_id == "nvlink.link_down"]
    assert _summary(found) == [("fail", 0), ("fail", 1)]
    assert all(f.subject.gpu.bus_id is None for f in found)  # known only from the matrix


# --------------------------------------------------------------------------- PCIe cards with NVLink bridges


def test_h100_nvl_bridged_pairs_with_links_inactive_by_design_pass():
    topology = parse_topo_matrix(_text(BOARDS / "h100-nvl-4gpu-2bridges-topo.txt"))
    nvlink_s = _text(BOARDS / "h100-nvl-4gpu-nvlink-s.txt")
    found = _link_down(Facts(gpus=_gpus(4, H100_NVL, nvlink_s), topology=topology))
    assert _summary(found) == [("pass", None)]
    assert "links 4-5, 10-11, 16-17 are inactive on all 4 H100 NVL GPUs alike" in found[0].message
    assert "by design" in found[0].message
    assert found[0].observed["active_links"] == {"GPU0": 12, "GPU1": 12, "GPU2": 12, "GPU3": 12}


def test_h100_nvl_gpu_with_fewer_active_links_than_its_peers_fails():
    nvlink_s = _text(BOARDS / "h100-nvl-4gpu-gpu3-8-links-nvlink-s.txt")
    topology = parse_topo_matrix(_text(BOARDS / "h100-nvl-4gpu-2bridges-topo.txt"))
    found = _link_down(Facts(gpus=_gpus(4, H100_NVL, nvlink_s), topology=topology))
    assert _summary(found) == [("fail", 3)]
    assert "GPU3 (H100 NVL) has 8 of 12 NVLink links up: link(s) 0-3 down" in found[0].message


def test_h100_nvl_bridged_pair_with_fewer_links_than_its_twin_fails():
    topology = parse_topo_matrix(_text(BOARDS / "h100-nvl-4gpu-pair-nv8-topo.txt"))
    found = _link_down(Facts(gpus=_gpus(4, H100_NVL), topology=topology))
    assert _summary(found) == [("fail", 2), ("fail", 3)]
    assert "GPU2-GPU3 is NV8, fewer links than the NV12 of the other H100 NVL pairs" in found[0].message


def test_rtx_3090_one_bridged_pair_and_two_unbridged_cards_pass():
    topology = parse_topo_matrix(_text(BOARDS / "rtx3090-4gpu-one-bridge-topo.txt"))
    nvlink_s = _text(BOARDS / "rtx3090-4gpu-one-bridge-nvlink-s.txt")
    found = _link_down(Facts(gpus=_gpus(4, RTX_3090, nvlink_s), topology=topology))
    assert _summary(found) == [("pass", None)]
    assert "GPU2, GPU3 (RTX 3090) have no NVLink up: not bridged" in found[0].message


def test_partly_seated_bridge_fails_when_the_model_is_known():
    # NVIDIA/nccl#557: two bridged cards showing NV3 (a connector making partial contact). A 3090 bridge
    # carries all 4 links; without a model name the matrix alone cannot tell.
    text = _text(BOARDS / "bridge-2gpu-nv3-topo.txt")
    found = _link_down(Facts(gpus=_gpus(2, RTX_3090), topology=parse_topo_matrix(text)))
    assert _summary(found) == [("fail", 0), ("fail", 1)]
    assert "GPU0-GPU1 is NV3, fewer links than the 4 links the RTX 3090 bridge carries" in found[0].message
    unnamed = _link_down(Facts(gpus=_gpus(2, None), topology=parse_topo_matrix(text)))
    assert _summary(unnamed) == [("pass", None)]


# --------------------------------------------------------------------------- partial meshes without NVSwitch


def test_power9_ac922_nv3_pairs_pass():
    topology = parse_topo_matrix(_text(BOARDS / "ac922-v100-nv3-pairs-topo.txt"))
    found = _link_down(Facts(gpus=_gpus(4, V100), topology=topology))
    assert _summary(found) == [("pass", None)]
    assert "GPU0-GPU1 NV3, GPU2-GPU3 NV3" in found[0].message


def test_power9_ac922_from_the_matrix_alone_passes(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-topo.txt": BOARDS / "ac922-v100-nv3-pairs-topo.txt"}))
    assert _summary([f for f in report.findings if f.check_id == "nvlink.link_down"]) == [("pass", None)]


def test_hybrid_mesh_with_nv1_and_nv2_pairs_passes(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-topo.txt": BOARDS / "hybrid-mesh-nv2-nv1-4gpu-topo.txt"}))
    found = [f for f in report.findings if f.check_id == "nvlink.link_down"]
    assert _summary(found) == [("pass", None)]
    assert "bond different link counts" in found[0].message


def test_v100_links_down_on_one_gpu_while_its_peers_have_them_up():
    # Azure/azhpc-diagnostics#73 (GPU3: links 3 and 5 inactive), with its three peers reporting all six links up.
    gpu3 = _text(PUBLIC / "nvlink-status" / "nvidia-smi-nvlink-s-inactive.txt")
    healthy = "".join(gpu3.replace("GPU 3:", f"GPU {i}:").replace("<inactive>", "25.781 GB/s") for i in range(3))
    found = _link_down(Facts(gpus=_gpus(4, "Tesla V100-SXM2-32GB", healthy + gpu3)))
    assert _summary(found) == [("fail", 3)]
    assert "link(s) 3, 5 down while GPU0 (same model) has 6 up" in found[0].message


def test_pcie_cards_without_nvlink_pass(make_bundle):
    report = report_for(make_bundle({
        "nvidia-smi-q.txt": PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt",
        "nvidia-smi-topo.txt": PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt"}))
    found = [f for f in report.findings if f.check_id == "nvlink.link_down"]
    assert _summary(found) == [("pass", None)] and "No NVLink reported" in found[0].message


# --------------------------------------------------------------------------- nvlink.errors


def _kernel_facts(*names: Path, gpus: list[GpuFacts] | None = None) -> Facts:
    return Facts(gpus=gpus, kernel_log=parse_kernel_log("".join(_text(name) for name in names)),
                 kernel_log_readable=True)


def _sxids(facts: Facts) -> list:
    return run_checks(facts, only=["health.sxid"])


def test_fatal_sxids_become_one_finding_per_switch():
    facts = _kernel_facts(PUBLIC / "xid" / "xid79-sxid-dmesg.txt")
    found = _sxids(facts)
    assert [(f.status.value, f.observed["switch"], f.observed["bus_id"]) for f in found] == [
        ("fail", 0, "0000:05:00.0"), ("fail", 1, "0000:06:00.0"), ("fail", 2, "0000:07:00.0")]
    assert "NVSwitch 1 (0000:06:00.0): SXid 20034, 1 line(s) (fatal) on link(s) 48" in found[1].message
    assert found[0].observed["sxids"]["20034"]["links"] == [62, 63]
    assert "nvidia-fabricmanager" in found[0].fix and "RMA" in found[0].fix
    # SXids are health.sxid's alone (nvlink.errors judges NVLink Xids), and health.xid still reports the Xid 79.
    assert [f.status.value for f in _errors(facts)] == ["pass"]
    others = run_checks(facts, only=["health.xid"])
    assert any(f.check_id == "health.xid" and f.observed["xid"] == 79 for f in others)


def test_non_fatal_sxid_is_a_warning_naming_the_switch():
    found = _sxids(_kernel_facts(BOARDS / "sxid12028-nonfatal-dmesg.txt"))
    assert [(f.status.value, f.observed["switch"]) for f in found] == [("warn", 3)]
    assert "NVSwitch 3 (0000:05:00.0): SXid 12028, 1 line(s) (non-fatal) on link(s) 32" in found[0].message


def test_xid_74_fails_on_the_gpu_named_by_its_bus_id():
    gpus = [GpuFacts(index=0, bus_id="0000:18:00.0", name=H100), GpuFacts(index=1, bus_id="0000:d8:00.0", name=H100)]
    found = _errors(_kernel_facts(BOARDS / "xid74-dmesg.txt", gpus=gpus))
    assert _summary(found) == [("fail", 1)]
    assert "GPU1 (0000:d8:00.0): Xid 74 NVLINK_ERROR ×2 on link(s) 14-15" in found[0].message
    assert found[0].observed["links"] == [14, 15]
    assert "nvidia-smi nvlink -e" in found[0].fix and "nvidia-smi -r" in found[0].fix


def test_nvlink5_xids_fatal_and_non_fatal():
    found = _errors(_kernel_facts(BOARDS / "xid145-nonfatal-dmesg.txt", BOARDS / "xid149-fatal-dmesg.txt", gpus=[]))
    assert [(f.status.value, f.observed["bus_id"]) for f in found] == [("warn", "0018:01:00.0"),
                                                                        ("fail", "0019:01:00.0")]
    assert "Xid 145 NVLINK_RLW_ERROR ×1 on link(s) 13 (non-fatal)" in found[0].message
    assert "Xid 149 NVLINK_NETIR_ERROR ×1 on link(s) 0 (fatal)" in found[1].message


def test_nvlink5_xids_named_as_the_cause_of_xid_45():
    # open-gpu-kernel-modules#1150: only the Xid 45 lines survive, each naming the NVLink Xid 145/149 before it.
    gpus = [GpuFacts(index=i, bus_id=bus, name="NVIDIA B200")
            for i, bus in enumerate(["0000:97:00.0", "0000:ba:00.0", "0000:dc:00.0"])]
    found = _errors(_kernel_facts(PUBLIC / "xid" / "xid45-after-145-149-kernlog.txt", gpus=gpus))
    assert [(f.status.value, f.subject.gpu.index if f.subject.gpu else f.observed["bus_id"]) for f in found] == [
        ("fail", 0), ("fail", 1), ("fail", 2), ("fail", "0000:ed:00.0")]
    assert "the GPU at 0000:ed:00.0: Xid 145 NVLINK_RLW_ERROR named as the cause by 2 later Xid line(s)" \
        in found[3].message
    assert found[2].observed["xids"]["149"]["named_as_cause"] == 2


def test_kernel_log_alone_without_nvlink_errors_passes(make_bundle):
    report = report_for(make_bundle({"dmesg.txt": PUBLIC / "xid" / "xid119-dmesg.txt"}))
    found = [f for f in report.findings if f.check_id == "nvlink.errors"]
    assert _summary(found) == [("pass", None)]


def test_no_kernel_log_is_a_skip():
    found = _errors(Facts(gpus=_gpus(2, H100)))
    assert [f.status for f in found] == [Status.SKIP]


@pytest.mark.parametrize(("name", "check_id", "expected"), [("xid74-dmesg.txt", "nvlink.errors", "fail"),
                                                            ("sxid12028-nonfatal-dmesg.txt", "health.sxid", "warn")])
def test_errors_are_judged_from_a_kernel_log_alone(make_bundle, name, check_id, expected):
    report = report_for(make_bundle({"dmesg.txt": BOARDS / name}))
    assert [f.status.value for f in report.findings if f.check_id == check_id] == [expected]


_RELOAD = "[ 9000.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"


def test_nvlink_errors_before_a_driver_reload_are_history_not_a_failure():
    gpus = [GpuFacts(index=0, bus_id="0000:d8:00.0", name="NVIDIA H100 80GB HBM3", source="nvidia-smi.txt")]
    xid74 = _text(BOARDS / "xid74-dmesg.txt")
    current = _errors(Facts(gpus=gpus, kernel_log=parse_kernel_log(xid74)))
    assert [f.status for f in current] == [Status.FAIL]
    past = _errors(Facts(gpus=gpus, kernel_log=parse_kernel_log(xid74 + _RELOAD)))
    assert [f.status for f in past] == [Status.WARN]
    assert "history" in past[0].message and past[0].subject.gpu.index == 0


def test_nvlink_errors_on_a_gpu_outside_the_pod_are_a_note_of_the_node():
    from gpuready.facts.types import HostFacts
    gpus = [GpuFacts(index=0, bus_id="0000:18:00.0", name="NVIDIA H100 80GB HBM3", source="nvidia-smi.txt")]
    facts = Facts(gpus=gpus, kernel_log=parse_kernel_log(_text(BOARDS / "xid74-dmesg.txt")),
                  host=HostFacts(container="kubernetes", container_evidence=["/proc/1/cgroup: kubepods"]),
                  env={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    findings = _errors(facts)
    assert [f.status for f in findings] == [Status.WARN]
    assert "0000:d8:00.0" in findings[0].message and "not allocated to this container" in findings[0].message
