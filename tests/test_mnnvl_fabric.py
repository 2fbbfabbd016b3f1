"""The NVLink fabric across trays (GB200/GB300 NVL, MNNVL) and the IMEX domain (issue 33), on published captures
(tests/fixtures/mnnvl/SOURCES.md names each source)."""

from __future__ import annotations

import json
import types

from conftest import FIXTURES
from gpuready.checks import fabric_mnnvl, topology  # noqa: F401  (importing a module registers its checks)
from gpuready.checks.registry import run_checks
from gpuready.evidence.build import build_facts
from gpuready.evidence.sniff import kind_of
from gpuready.facts.imex import parse_imex_ctl
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_text
from gpuready.facts.nvml import NvmlQuery, _read_fabric, fabric_health_of_mask, fabric_uuid
from gpuready.facts.nvml_json import NvmlDocument
from gpuready.facts.nvml_records import GpuIdentity, GpuRecord, GpuState, NvmlCollection
from gpuready.facts.types import Facts, GpuFacts
from gpuready.model import Status

MNNVL = FIXTURES / "mnnvl"
FABRIC_IDS = ["gpu.fabric", "nvlink.fabric_clique", "nvlink.fabric_health"]

# Azure/azhpc-images#506: the Fabric block of a node that the old `N/A` grep passed.
AZURE_BLOCK = """    Fabric
        State                             : Completed
        Status                            : Insufficient Resources
        CliqueId                          : 0
        ClusterUUID                       : 00000000-0000-0000-0000-000000000000
"""
# leptonai/gpud#1106: a healthy GB200 (clique 4026 of cluster 9c6f5af3-…), health rows not supported by that driver.
GPUD_BLOCK = """    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 4026
        ClusterUUID                       : 9c6f5af3-53bf-49b5-a436-b66766c413c3
        Health
            Bandwidth                     : Not Supported
            Route Recovery in progress    : Not Supported
            Route Unhealthy               : Not Supported
            Access Timeout Recovery       : Not Supported
"""


def _smi_q(product: str, fabric: str, gpus: int = 2) -> str:
    """An `nvidia-smi -q` paste: its header, then `gpus` sections that each print the given Fabric block."""
    sections = "".join(f"GPU 00000008:0{index}:00.0\n    Product Name                          : {product}\n{fabric}"
                       for index in range(1, gpus + 1))
    return ("==============NVSMI LOG==============\n\nDriver Version                            : 570.124.06\n"
            f"Attached GPUs                             : {gpus}\n{sections}")


def _findings(facts: Facts, check_id: str):
    return [finding for finding in run_checks(facts, only=[check_id])]


def _facts(text: str) -> Facts:
    return build_facts({"nvidia-smi-q.txt": text})


def test_the_azure_capture_reads_every_fabric_row():
    gpu = parse_nvidia_smi_q_text(_smi_q("NVIDIA GB200", AZURE_BLOCK, gpus=1)).gpus[0]
    assert (gpu.fabric_state, gpu.fabric_status, gpu.fabric_clique_id, gpu.fabric_cluster_uuid) == \
        ("Completed", "Insufficient Resources", 0, "00000000-0000-0000-0000-000000000000")


def test_insufficient_resources_and_a_zero_clique_fail_a_gb200_tray():
    facts = _facts(_smi_q("NVIDIA GB200", AZURE_BLOCK))
    fabric = _findings(facts, "gpu.fabric")
    assert [finding.status for finding in fabric] == [Status.FAIL, Status.FAIL]
    assert "Insufficient Resources" in fabric[0].message
    clique = _findings(facts, "nvlink.fabric_clique")
    assert [(finding.status, finding.subject.gpu.index) for finding in clique] == [(Status.FAIL, 0), (Status.FAIL, 1)]
    assert "clique id 0" in clique[0].message and "00000000-0000-0000-0000-000000000000" in clique[0].message


def test_a_healthy_gb200_passes_every_fabric_check():
    facts = _facts(_smi_q("NVIDIA GB200", GPUD_BLOCK))
    statuses = {finding.check_id: finding.status for check_id in FABRIC_IDS for finding in _findings(facts, check_id)}
    assert statuses == {"gpu.fabric": Status.PASS, "nvlink.fabric_clique": Status.PASS,
                        "nvlink.fabric_health": Status.SKIP}  # every health row says Not Supported
    assert facts.gpus[0].fabric_clique_id == 4026


def test_a_zero_cluster_uuid_on_an_h100_is_no_clique_finding():
    # meta-pytorch/torchcomms#1385: H100 (non-MNNVL) reports a completed state with a zero cluster UUID
    block = AZURE_BLOCK.replace("Insufficient Resources", "Success")
    findings = _findings(_facts(_smi_q("NVIDIA H100 80GB HBM3", block)), "nvlink.fabric_clique")
    assert [finding.status for finding in findings] == [Status.SKIP]
    assert "GB200/GB300" in findings[0].message


def test_the_health_mask_decodes_as_nvml_h_lays_it_out():
    # NVIDIA/nccl#2186 quotes healthMask 0xaa from a GB200 NVL72: each 2-bit field is 2, "false" (not degraded)
    assert fabric_health_of_mask(0xAA) == \
        "bandwidth=Full; route_recovery=False; route_unhealthy=False; access_timeout_recovery=False"
    # leptonai/gpud's fabric test: degraded bandwidth, route recovery and route unhealthy set (1 at shifts 0, 2, 4)
    assert fabric_health_of_mask(1 | 1 << 2 | 1 << 4) == "bandwidth=Degraded; route_recovery=True; route_unhealthy=True"
    assert fabric_health_of_mask(5 << 8 | 0xAA).endswith("incorrect_configuration=Insufficient NVLinks")
    assert fabric_uuid(bytes.fromhex("9c6f5af353bf49b5a436b66766c413c3")) == "9c6f5af3-53bf-49b5-a436-b66766c413c3"


def _gb200(health: str) -> Facts:
    return Facts(gpus=[GpuFacts(index=0, bus_id="00000008:01:00.0", name="NVIDIA GB200", fabric_state="Completed",
                                fabric_status="Success", fabric_health=health, source="nvml.json")])


def test_a_route_fault_fails_and_degraded_bandwidth_alone_warns():
    faulty = _findings(_gb200(fabric_health_of_mask(1 | 1 << 2 | 1 << 4)), "nvlink.fabric_health")
    assert [finding.status for finding in faulty] == [Status.FAIL]
    assert "route_unhealthy=True" in faulty[0].message
    reduced = _findings(_gb200(fabric_health_of_mask(1 | 0xA8)), "nvlink.fabric_health")
    assert [finding.status for finding in reduced] == [Status.WARN]
    assert _findings(_gb200(fabric_health_of_mask(0xAA)), "nvlink.fabric_health")[0].status == Status.PASS


def test_the_smi_health_rows_are_judged_like_the_mask():
    block = GPUD_BLOCK.replace("Bandwidth                     : Not Supported",
                               "Bandwidth                     : Degraded")
    findings = _findings(_facts(_smi_q("NVIDIA GB200", block, gpus=1)), "nvlink.fabric_health")
    assert [(finding.status, finding.observed) for finding in findings] == [(Status.WARN, {"bandwidth": "Degraded"})]


def test_nvml_json_keeps_the_new_fields_and_reads_older_documents():
    state = GpuState(fabric_state="Completed", fabric_status="Insufficient Resources", fabric_clique_id=0,
                     fabric_cluster_uuid="00000000-0000-0000-0000-000000000000",
                     fabric_health="bandwidth=Full; route_recovery=False")
    record = GpuRecord(identity=GpuIdentity(index=0, bus_id="00000008:01:00.0", name="NVIDIA GB200"), state=state)
    document = NvmlCollection(driver_version="570.124.06", device_count=1, gpus=[record]).to_json()
    gpu = NvmlDocument(json.dumps(document)).gpus[0]
    assert (gpu.fabric_status, gpu.fabric_clique_id, gpu.fabric_health) == \
        ("Insufficient Resources", 0, "bandwidth=Full; route_recovery=False")
    for key in ("fabric_status", "fabric_clique_id", "fabric_cluster_uuid", "fabric_health"):
        del document["gpus"][0][key]
    older = NvmlDocument(json.dumps(document)).gpus[0]
    assert older.fabric_state == "Completed" and older.fabric_clique_id is None and older.error_fields == []


def test_eighteen_nodes_up_pass():
    text = (MNNVL / "imex-ctl-18-nodes-up.txt").read_text()
    domain = parse_imex_ctl(text)
    assert (domain.state, len(domain.nodes), domain.nodes[17].host, domain.nodes[17].version) == \
        ("UP", 18, "172.31.56.47", "570.172")
    assert all(len(node.connections) == 18 for node in domain.nodes)
    findings = _findings(Facts(imex=domain), "nvlink.imex_domain")
    assert [(finding.status, finding.message) for finding in findings] == \
        [(Status.PASS, "The IMEX domain is UP: 18 nodes READY, every pair CONNECTED.")]


def test_one_way_disconnection_is_named_by_its_direction():
    lines = (MNNVL / "imex-ctl-18-nodes-up.txt").read_text().splitlines()
    row = next(index for index, line in enumerate(lines) if line.split()[:1] == ["3"])
    cells = lines[row].split()
    cells[1 + 7] = "D"  # node 3's connection to node 7 lost; node 7 still sees node 3
    lines[row] = "       3        " + "   ".join(cells[1:])
    findings = _findings(Facts(imex=parse_imex_ctl("\n".join(lines))), "nvlink.imex_domain")
    assert [(finding.status, finding.observed) for finding in findings] == [(Status.FAIL, {"3->7": "DISCONNECTED"})]


def test_a_down_domain_names_the_node_that_is_not_ready():
    domain = parse_imex_ctl((MNNVL / "imex-ctl-2-nodes-down.json").read_text())
    findings = _findings(Facts(imex=domain), "nvlink.imex_domain")
    assert [finding.status for finding in findings] == [Status.FAIL, Status.FAIL]
    assert "DOWN" in findings[0].message
    assert findings[1].observed == {"10.0.0.2": "UNAVAILABLE"}


def test_a_single_node_nvswitch_box_gets_no_imex_finding():
    # NVIDIA/NVSentinel#1471: IMEX judged unhealthy on HGX/DGX, which do not use it
    domain = parse_imex_ctl((MNNVL / "imex-ctl-1-node-up.txt").read_text().replace("UP", "DOWN"))
    hgx = Facts(gpus=[GpuFacts(index=0, bus_id="00000000:18:00.0", name="NVIDIA H100 80GB HBM3")], imex=domain)
    assert [finding.status for finding in _findings(hgx, "nvlink.imex_domain")] == [Status.SKIP]
    tray = Facts(gpus=[GpuFacts(index=0, bus_id="00000008:01:00.0", name="NVIDIA GB200")], imex=domain)
    assert [finding.status for finding in _findings(tray, "nvlink.imex_domain")] == [Status.FAIL]
    assert [finding.status for finding in _findings(Facts(), "nvlink.imex_domain")] == [Status.SKIP]


def test_both_forms_are_recognised_and_read_from_a_bundle():
    for name in ("imex-ctl-18-nodes-up.txt", "imex-ctl-1-node-up.txt", "imex-ctl-2-nodes-down.json"):
        text = (MNNVL / name).read_text()
        assert kind_of(text) == "nvidia-imex-ctl.txt", name
        assert build_facts({"nvidia-imex-ctl.txt": text}).imex is not None


def test_a_broken_imex_file_is_one_sentence():
    facts = build_facts({"nvidia-imex-ctl.txt": '{"nodes": {"x": 1}, "connections": {}}'})
    assert facts.imex is None
    assert [(name, str(error)) for name, error in facts.input_errors] == \
        [("nvidia-imex-ctl.txt", "nvidia-imex-ctl.txt could not be parsed as nvidia-imex-ctl.txt: "
                                 "IMEX node entry 'x' is not an object with a numeric key")]


def test_nvl72_trays_never_get_a_host_fabric_manager_demand():
    # Fabric Manager has nothing to do on a GB200 tray (its NVLink Switch trays run it): no finding that asks for it
    log = "Nov 12 10:00:01 tray nv-fabricmanager[2211]: request to query NVSwitch device information from NVSwitch " \
          "driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n"
    facts = build_facts({"nvidia-smi-q.txt": _smi_q("NVIDIA GB200", GPUD_BLOCK), "dmesg.txt": log})
    findings = _findings(facts, "gpu.fabric")
    assert all(finding.status == Status.PASS for finding in findings)


def _binding(fill, versioned: bool):
    """nvidia-ml-py's own fabric structs, with a driver that answers through `fill` (raising for a missing call)."""
    import pynvml

    def call_v(handle, pointer):
        fill(pointer._obj)

    def call_v_missing(handle, pointer):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    return types.SimpleNamespace(c_nvmlGpuFabricInfoV_t=pynvml.c_nvmlGpuFabricInfoV_t,
                                 c_nvmlGpuFabricInfo_t=pynvml.c_nvmlGpuFabricInfo_t,
                                 nvmlDeviceGetGpuFabricInfoV=call_v if versioned else call_v_missing,
                                 nvmlDeviceGetGpuFabricInfo=call_v)


def _gb200_answer(info) -> None:
    info.state, info.status, info.cliqueId = 3, 23, 0  # COMPLETED, NVML_ERROR_INSUFFICIENT_RESOURCES
    if hasattr(info, "healthMask"):
        info.healthMask = 1 | 1 << 2 | 1 << 4


def test_nvml_reads_the_versioned_call_and_falls_back_to_the_older_one():
    for versioned, health in ((True, "bandwidth=Degraded; route_recovery=True; route_unhealthy=True"), (False, None)):
        state = GpuState()
        query = NvmlQuery("test", timeout_s=None)
        _read_fabric(query, _binding(_gb200_answer, versioned), object(), state)
        assert (state.fabric_state, state.fabric_status, state.fabric_clique_id, state.fabric_cluster_uuid,
                state.fabric_health) == ("Completed", "Insufficient Resources", 0,
                                         "00000000-0000-0000-0000-000000000000", health)
        assert query.errors == {}


def test_a_gb200_tray_whose_fabric_failed_is_not_told_to_restart_a_host_fabric_manager():
    """Azure/azhpc-images#506's Fabric block (Completed, Insufficient Resources) on GB200 trays, and the same tray in
    'In Progress': gpu.fabric fails, and its fix names the rack's NVLink switch trays and IMEX, never
    `systemctl restart nvidia-fabricmanager` (NVL72 compute trays run no host Fabric Manager). An HGX H100 in the
    same state is still told to restart its Fabric Manager."""
    for block in (AZURE_BLOCK, AZURE_BLOCK.replace("Completed", "In Progress")):
        fabric = _findings(_facts(_smi_q("NVIDIA GB200", block)), "gpu.fabric")
        assert [finding.status for finding in fabric] == [Status.FAIL, Status.FAIL]
        assert all("nvidia-fabricmanager" not in finding.fix and "nvidia-imex" in finding.fix for finding in fabric)
    hgx = _findings(_facts(_smi_q("NVIDIA H100 80GB HBM3", AZURE_BLOCK.replace("Completed", "In Progress"))),
                    "gpu.fabric")
    assert hgx and all("restart nvidia-fabricmanager" in finding.fix for finding in hgx)
