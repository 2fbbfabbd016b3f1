"""Tests that kill the mutants of checks/topology.py that survived the suite (issue 23, mutation testing; the run and
its module → test-file table are in benchmarks/mutation_score.sh): the GPU×GPU matrix, pairs across the CPU sockets,
peer-to-peer support and the NVSwitch fabric.

Expected values come from recordings (tests/fixtures, each README names its source), NVIDIA's documentation (the
`nvidia-smi topo` legends, nvml.h) or are worked out by hand in the docstring.
"""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES, PUBLIC
from gpuready.checks.registry import registered_in_order, run_checks
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.topology import parse_topo_matrix, parse_topo_p2p
from gpuready.facts.types import Facts, GpuFacts, Topology
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

BOARDS = FIXTURES / "boards"
EVIDENCE = FIXTURES / "evidence-classes"
NCCL_P2P_LEVEL_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-p2p-level"
"""NCCL's NCCL_P2P_LEVEL: the same LOC/NVL/PIX/PXB/PHB/SYS distances `nvidia-smi topo -m` prints."""
TOPO_REF = f"nvidia-smi topo -m legend; NCCL topology: {NCCL_P2P_LEVEL_DOC}"
FM_GUIDE = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"
FM_REF = f"NVIDIA Fabric Manager User Guide, {FM_GUIDE}"
P2P_REFS = ["nvidia-smi topo -p2p r legend", "NVML nvmlDeviceGetP2PStatus"]
PCIE_ADVICE = ("Data parallel (DDP/FSDP) works over PCIe; tensor parallel across these pairs will be slow.")
P2P_TAIL = ": NCCL falls back to copies through host memory, which is slower."
FABRIC_STATE_TAIL = ": CUDA refuses to start until the fabric manager has registered it."


def _gpus(count: int, name: str | None = None, **fields) -> list[GpuFacts]:
    return [GpuFacts(index=i, bus_id=f"0000:{0x18 + i:02x}:00.0", name=name, **fields) for i in range(count)]


def _one(facts: Facts, check_id: str):
    found = run_checks(facts, only=[check_id])
    assert len(found) == 1, [(f.check_id, f.status.value, f.message) for f in found]
    return found[0]


def _topology(path: Path, check_id: str):
    topology = parse_topo_matrix(path.read_text())
    count = len(topology.gpu_labels)
    return _one(Facts(gpus=_gpus(count), topology=topology), check_id)


def _legend(path: Path) -> dict[str, str]:
    """`CODE = Meaning` lines of a recorded legend."""
    legend = {}
    for line in path.read_text().split("Legend:")[1].splitlines():
        if "=" in line:
            code, meaning = (part.strip() for part in line.split("=", 1))
            legend[code] = meaning
    return legend


# ------------------------------------------------------------------------------------------- topology.matrix

def test_a_board_whose_pairs_are_all_nvlinked_names_each_link_width_once():
    """hgx-h100-8gpu-gpu3-nv16-topo.txt: 8 H100 SXM, every pair NV18 except GPU3's seven pairs, NV16 (two links
    down). All 8·7/2 = 28 pairs are NVLink: pass, naming the two widths once each, ascending: 'NV16, NV18'."""
    finding = _topology(BOARDS / "hgx-h100-8gpu-gpu3-nv16-topo.txt", "topology.matrix")
    assert finding.status == Status.PASS
    assert finding.message == ("Every GPU pair is joined by NVLink (NV16, NV18): good for data, tensor and pipeline "
                               "parallelism.")
    assert len(finding.observed) == 28
    assert finding.observed["GPU3-GPU7"] == "NV16" and finding.observed["GPU6-GPU7"] == "NV18"
    assert finding.refs == [TOPO_REF]


def test_a_pcie_only_two_socket_box_counts_each_link_kind_in_distance_order():
    """public/pcie-8gpu-2socket/nvidia-smi-topo.txt (lattice/quda#669): two sockets of four GPUs. Per socket the
    pairs (0,1), (2,3) are PIX: 2 × 2 = 4 PIX; the other four pairs of a socket's 4·3/2 = 6 are PXB: 4 × 2 = 8 PXB;
    4 × 4 = 16 pairs cross the sockets (SYS). 4 + 8 + 16 = 28 = 8·7/2, none NVLinked. The kinds go nearest first
    (PIX, PXB, …, SYS, the NCCL_P2P_LEVEL order); the example is the first four pairs of row GPU0."""
    finding = _topology(PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt", "topology.matrix")
    assert (finding.status, finding.message_id) == (Status.WARN, "topology.matrix.some_pcie")
    assert finding.message == ("28 of 28 GPU pairs have no NVLink (4 PIX, 8 PXB, 16 SYS; e.g. GPU0-GPU1 PIX, "
                               f"GPU0-GPU2 PXB, GPU0-GPU3 PXB, GPU0-GPU4 SYS). {PCIE_ADVICE}")
    assert finding.expected == "NV# between every pair for tensor parallelism"
    assert finding.refs == [TOPO_REF]


def test_the_host_bridge_kind_is_counted_between_pix_and_sys():
    """public/pcie-8gpu-2socket/nvidia-smi-topo-spaces.txt (NVIDIA/nccl#1439): as above but PHB where the other box
    has PXB: 4 PIX, 2 × 4 = 8 PHB, 16 SYS."""
    finding = _topology(PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo-spaces.txt", "topology.matrix")
    assert finding.message.startswith("28 of 28 GPU pairs have no NVLink (4 PIX, 8 PHB, 16 SYS; e.g. GPU0-GPU1 PIX, "
                                      "GPU0-GPU2 PHB, GPU0-GPU3 PHB, GPU0-GPU4 SYS). ")


def test_one_bridged_pair_among_pcie_pairs_is_named_and_counted():
    """boards/rtx3090-4gpu-one-bridge-topo.txt: 4 RTX 3090, GPU0-GPU1 bridged (NV4); GPU2-GPU3 PHB; the four pairs
    between {0,1} and {2,3} NODE. 4·3/2 = 6 pairs, 6 − 1 = 5 without NVLink: 1 PHB, 4 NODE (PHB before NODE: nearer).
    The example stops at four pairs (GPU2-GPU3 PHB, the fifth, is left out); 1 pair is NVLinked."""
    finding = _topology(BOARDS / "rtx3090-4gpu-one-bridge-topo.txt", "topology.matrix")
    assert (finding.status, finding.message_id) == (Status.WARN, "topology.matrix.some_pcie_partly_nvlinked")
    assert finding.message == ("5 of 6 GPU pairs have no NVLink (1 PHB, 4 NODE; e.g. GPU0-GPU2 NODE, GPU0-GPU3 NODE, "
                               f"GPU1-GPU2 NODE, GPU1-GPU3 NODE). {PCIE_ADVICE} 1 pair(s) are NVLinked: keep "
                               "tensor-parallel groups inside them.")


def test_a_partial_hybrid_mesh_lists_the_matrix_pair_by_pair_in_order():
    """boards/hybrid-mesh-nv2-nv1-4gpu-topo.txt: rows GPU0 X NV2 NV2 SYS / GPU1 NV2 X SYS NV1 / GPU2 NV2 SYS X NV2.
    Pairs (i < j): 0-1 NV2, 0-2 NV2, 0-3 SYS, 1-2 SYS, 1-3 NV1, 2-3 NV2: 2 of 6 without NVLink, 6 − 2 = 4 NVLinked."""
    finding = _topology(BOARDS / "hybrid-mesh-nv2-nv1-4gpu-topo.txt", "topology.matrix")
    assert list(finding.observed.items()) == [("GPU0-GPU1", "NV2"), ("GPU0-GPU2", "NV2"), ("GPU0-GPU3", "SYS"),
                                              ("GPU1-GPU2", "SYS"), ("GPU1-GPU3", "NV1"), ("GPU2-GPU3", "NV2")]
    assert finding.message == ("2 of 6 GPU pairs have no NVLink (2 SYS; e.g. GPU0-GPU3 SYS, GPU1-GPU2 SYS). "
                               f"{PCIE_ADVICE} 4 pair(s) are NVLinked: keep tensor-parallel groups inside them.")


def test_two_l4_without_a_matrix_warn_that_the_model_has_no_nvlink():
    """No `topo -m`; two GPUs named 'NVIDIA L4'. The L4 datasheet lists no NVLink (PCIe Gen4 x16 only): two GPUs
    are already a pair, so the model alone says they talk over PCIe."""
    finding = _one(Facts(gpus=_gpus(2, "NVIDIA L4")), "topology.matrix")
    assert (finding.status, finding.message_id) == (Status.WARN, "topology.matrix.no_nvlink")
    assert finding.message == ("No NVLink: L4 has none, so all 2 GPUs talk over PCIe. Data parallel (DDP/FSDP) "
                               "works; tensor parallelism over PCIe will be slow.")
    assert finding.observed == {"GPU0": "L4", "GPU1": "L4"}
    assert finding.expected == "NV# between GPUs for tensor parallelism"
    assert finding.refs[0] == TOPO_REF and "https://www.nvidia.com/en-us/data-center/l4/" in finding.refs[1]


def test_two_models_without_nvlink_are_named_together_in_alphabetical_order():
    """An L4 and an RTX 4090, neither with NVLink (L4 datasheet; GeForce RTX 40 has no NVLink connector): the plural
    sentence, 'L4, RTX 4090' (alphabetical), 2 GPUs; each model's source cited after the topology legend."""
    gpus = [GpuFacts(index=0, bus_id="0000:01:00.0", name="NVIDIA GeForce RTX 4090"),
            GpuFacts(index=1, bus_id="0000:02:00.0", name="NVIDIA L4")]
    finding = _one(Facts(gpus=gpus), "topology.matrix")
    assert (finding.status, finding.message_id) == (Status.WARN, "topology.matrix.no_nvlink_models")
    assert finding.message == ("No NVLink: L4, RTX 4090 have none, so all 2 GPUs talk over PCIe. Data parallel "
                               "(DDP/FSDP) works; tensor parallelism over PCIe will be slow.")
    assert finding.observed == {"GPU0": "RTX 4090", "GPU1": "L4"}
    assert len(finding.refs) == 3 and finding.refs[0] == TOPO_REF


# ---------------------------------------------------------------------------------------- topology.cross_numa

def test_two_sockets_of_four_pcie_gpus_cross_in_sixteen_pairs():
    """public/pcie-8gpu-2socket/nvidia-smi-topo.txt: GPU0-3 on one socket, GPU4-7 on the other (SYS between):
    4 × 4 = 16 crossing pairs, the first four GPU0-GPU4 … GPU0-GPU7; the groups without SYS are the two sockets. The
    old driver printed no NUMA column, so no NUMA node is known."""
    finding = _topology(PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt", "topology.cross_numa")
    assert finding.status == Status.WARN
    assert finding.message == ("16 GPU pair(s) communicate across the CPU sockets' interconnect (SYS), e.g. GPU0-GPU4, "
                               "GPU0-GPU5, GPU0-GPU6, GPU0-GPU7: P2P is slower or off there. Groups that stay within "
                               "one socket: {GPU0, GPU1, GPU2, GPU3}; {GPU4, GPU5, GPU6, GPU7}.")
    assert finding.observed == {"sys_pairs": 16, "numa": {}}
    assert finding.expected == "no SYS pairs inside a tensor-parallel group"
    assert finding.refs == [TOPO_REF]


def test_the_hybrid_mesh_splits_into_two_groups_with_their_numa_nodes():
    """boards/hybrid-mesh-nv2-nv1-4gpu-topo.txt: SYS only for 0-3 and 1-2 (2 pairs). GPU1 joins GPU0 (NV2);
    GPU2 cannot (SYS to GPU1): a group of its own, which GPU3 joins (NV2; SYS to GPU0 keeps it out of the first).
    NUMA Affinity column: 0, 0, 1, 1."""
    finding = _topology(BOARDS / "hybrid-mesh-nv2-nv1-4gpu-topo.txt", "topology.cross_numa")
    assert finding.message == ("2 GPU pair(s) communicate across the CPU sockets' interconnect (SYS), e.g. GPU0-GPU3, "
                               "GPU1-GPU2: P2P is slower or off there. Groups that stay within one socket: "
                               "{GPU0, GPU1}; {GPU2, GPU3}.")
    assert finding.observed == {"sys_pairs": 2, "numa": {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}}


def test_a_row_cut_short_puts_its_gpu_in_a_group_of_its_own():
    """A matrix whose last row was cut after its first cell (a paste): GPU2's row says only GPU2-GPU0 PIX, so its
    link to GPU1 is unknown. GPU1 joins GPU0 (PIX); GPU2 would join them only if none of its links to a member were
    SYS, and an unknown link is taken as the worst (SYS): {GPU0, GPU1}; {GPU2}. The one SYS pair is GPU0-GPU3 (GPU3
    has no row of its own here)."""
    links = {(0, 0): "X", (0, 1): "PIX", (0, 2): "PIX", (0, 3): "SYS",
             (1, 0): "PIX", (1, 1): "X", (1, 2): "PIX",
             (2, 0): "PIX"}
    topology = Topology(gpu_labels=["GPU0", "GPU1", "GPU2", "GPU3"], links=links)
    finding = _one(Facts(gpus=_gpus(4), topology=topology), "topology.cross_numa")
    assert finding.message == ("1 GPU pair(s) communicate across the CPU sockets' interconnect (SYS), e.g. GPU0-GPU3: "
                               "P2P is slower or off there. Groups that stay within one socket: {GPU0, GPU1}; {GPU2}.")


# ----------------------------------------------------------------------------------------------- topology.p2p

def test_eight_h100_with_all_p2p_ok_pass_for_28_pairs():
    """public/topo-p2p/nvidia-smi-topo-p2p.txt (stas00/ml-engineering): 8 H100, every off-diagonal cell OK: 8·7 = 56
    ordered cells, 56 / 2 = 28 pairs."""
    p2p = parse_topo_p2p((PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p.txt").read_text())
    finding = _one(Facts(gpus=_gpus(8, "NVIDIA H100 80GB HBM3"), p2p_read=p2p), "topology.p2p")
    assert finding.status == Status.PASS
    assert finding.message == "P2P reads are supported between all 28 GPU pairs."
    assert finding.observed == "all OK"


def test_two_l4_behind_a_chipset_without_p2p_say_cns_in_the_catalogue_sentence():
    """public/topo-p2p/nvidia-smi-topo-p2p-cns-2xL4.txt: GPU0-GPU1 CNS both ways, one pair. The nvidia-smi legend:
    'CNS = Chipset not supported'. One known code: its own catalogue sentence (topology.p2p.blocked_CNS)."""
    p2p = parse_topo_p2p((PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p-cns-2xL4.txt").read_text())
    finding = _one(Facts(gpus=_gpus(2, "NVIDIA L4"), p2p_read=p2p), "topology.p2p")
    assert (finding.status, finding.message_id) == (Status.WARN, "topology.p2p.blocked_CNS")
    assert finding.message == f"P2P is not available between 1 GPU pair(s) (GPU0-GPU1 CNS; CNS = chipset not supported){P2P_TAIL}"
    assert (finding.observed, finding.expected) == ({"GPU0-GPU1": "CNS"}, "OK")
    assert finding.refs == P2P_REFS


def test_two_rtx_5090_say_gns_in_the_catalogue_sentence():
    """public/topo-p2p/nvidia-smi-topo-p2p-gns-2x5090.txt (tab-separated, newer legend): GNS both ways; the legend
    says 'GNS = GPU not supported'."""
    path = PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p-gns-2x5090.txt"
    assert _legend(path)["GNS"] == "GPU not supported"
    finding = _one(Facts(gpus=_gpus(2, "NVIDIA GeForce RTX 5090"), p2p_read=parse_topo_p2p(path.read_text())),
                   "topology.p2p")
    assert finding.message_id == "topology.p2p.blocked_GNS"
    assert finding.message == f"P2P is not available between 1 GPU pair(s) (GPU0-GPU1 GNS; GNS = GPU not supported){P2P_TAIL}"


def _symmetric(cells: dict[tuple[int, int], str], count: int) -> dict[tuple[int, int], str]:
    matrix = {(i, i): "X" for i in range(count)}
    for (i, j), value in cells.items():
        matrix[(i, j)] = matrix[(j, i)] = value
    return matrix


def test_every_nvml_p2p_code_at_once_is_explained_code_by_code_in_alphabetical_order():
    """NVML's nvmlGpuP2PStatus_t: CHIPSET_NOT_SUPPORTED (CNS), GPU_NOT_SUPPORTED (GNS), IOH_TOPOLOGY_NOT_SUPPORTED
    (TNS), DISABLED_BY_REGKEY (DNS), NOT_SUPPORTED (NS), UNKNOWN (U); one code per pair of four GPUs (4·3/2 = 6
    pairs). Several codes: the generic sentence, each code's meaning from the nvidia-smi legend (lower case; DR
    'Disabled by regkey' read as the driver's registry key), codes sorted: CNS, DNS, GNS, NS, TNS, U."""
    legend = _legend(PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p-gns-2x5090.txt")
    cells = {(0, 1): "CNS", (0, 2): "GNS", (0, 3): "TNS", (1, 2): "NS", (1, 3): "DNS", (2, 3): "U"}
    finding = _one(Facts(gpus=_gpus(4), p2p_read=_symmetric(cells, 4)), "topology.p2p")
    assert (finding.status, finding.message_id) == (Status.WARN, "topology.p2p.blocked")
    meanings = {"CNS": "chipset not supported", "DNS": "disabled by the driver (regkey)", "GNS": "GPU not supported",
                "NS": "not supported", "TNS": "topology not supported", "U": "unknown"}
    assert all(legend[code].casefold() == meanings[code].casefold() for code in ("CNS", "GNS", "TNS", "NS", "U"))
    assert legend["DR"] == "Disabled by regkey"
    meaning = "; ".join(f"{code} = {text}" for code, text in meanings.items())
    assert finding.message == ("P2P is not available between 6 GPU pair(s) (GPU0-GPU1 CNS, GPU0-GPU2 GNS, "
                               f"GPU0-GPU3 TNS, GPU1-GPU2 NS, GPU1-GPU3 DNS, GPU2-GPU3 U; {meaning}){P2P_TAIL}")
    assert finding.observed == {"GPU0-GPU1": "CNS", "GPU0-GPU2": "GNS", "GPU0-GPU3": "TNS", "GPU1-GPU2": "NS",
                                "GPU1-GPU3": "DNS", "GPU2-GPU3": "U"}
    assert (finding.expected, finding.refs) == ("OK", P2P_REFS)


def test_two_codes_explain_both():
    """Three GPUs: GPU0-GPU1 and GPU0-GPU2 CNS, GPU1-GPU2 TNS: 3 pairs, two codes, both explained."""
    cells = {(0, 1): "CNS", (0, 2): "CNS", (1, 2): "TNS"}
    finding = _one(Facts(gpus=_gpus(3), p2p_read=_symmetric(cells, 3)), "topology.p2p")
    assert finding.message == ("P2P is not available between 3 GPU pair(s) (GPU0-GPU1 CNS, GPU0-GPU2 CNS, GPU1-GPU2 "
                               f"TNS; CNS = chipset not supported; TNS = topology not supported){P2P_TAIL}")


def test_a_code_gpuready_does_not_know_takes_the_generic_sentence():
    """A code no legend here has (one a later nvidia-smi might add, `ZZ`): a warning in the generic sentence, the pair
    named with its code, the code standing for itself."""
    finding = _one(Facts(gpus=_gpus(2), p2p_read=_symmetric({(0, 1): "ZZ"}, 2)), "topology.p2p")
    assert (finding.status, finding.message_id) == (Status.WARN, "topology.p2p.blocked")
    assert finding.message.startswith("P2P is not available between 1 GPU pair(s) (GPU0-GPU1 ZZ; ZZ = ZZ)")


def test_one_gpu_with_a_two_gpu_p2p_matrix_has_no_pair_to_judge():
    """The CNS matrix of two L4 next to an inventory of one GPU (the other hidden, e.g. CUDA_VISIBLE_DEVICES in a
    container): fewer than two GPUs, so nothing to judge."""
    p2p = parse_topo_p2p((PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p-cns-2xL4.txt").read_text())
    finding = _one(Facts(gpus=_gpus(1, "NVIDIA L4"), p2p_read=p2p), "topology.p2p")
    assert (finding.status, finding.message) == (Status.PASS, "Fewer than two GPUs: no peer-to-peer pairs to judge.")


# ------------------------------------------------------------------------------------------------- gpu.fabric

def test_gpu0_stuck_in_progress_fails_named_as_gpu0():
    """cases/h800x8-fabric-in-progress-dcgm-120: 'Fabric State : In Progress', Status N/A. GPU index 0 is a GPU
    like any other (index ≥ 0): named, and the finding is about it."""
    gpus = _gpus(1, "NVIDIA H800", fabric_state="In Progress")
    finding = _one(Facts(gpus=gpus), "gpu.fabric")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.fabric.state")
    assert finding.message == f"GPU0's NVSwitch fabric state is 'In Progress'{FABRIC_STATE_TAIL}"
    assert finding.subject.gpu is not None and finding.subject.gpu.index == 0
    assert (finding.observed, finding.expected, finding.refs) == ("In Progress", "Completed", [FM_REF])


def test_a_fabric_status_is_quoted_next_to_the_state():
    """nvidia-smi -q's Fabric section has State and Status: a GPU reporting 'Not Started' with a status says both."""
    gpus = _gpus(2, "NVIDIA H100 80GB HBM3", fabric_state="Completed")
    gpus[1].fabric_state, gpus[1].fabric_status = "Not Started", "Insufficient Resources"
    finding = _one(Facts(gpus=gpus), "gpu.fabric")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.fabric.state_status")
    assert finding.message == (f"GPU1's NVSwitch fabric state is 'Not Started' (Insufficient Resources)"
                               f"{FABRIC_STATE_TAIL}")


def test_all_gpus_completed_pass_with_their_count():
    """Eight GPUs, each 'Completed' (the state NVML calls NVML_GPU_FABRIC_STATE_COMPLETED): one pass, 8 GPUs."""
    finding = _one(Facts(gpus=_gpus(8, "NVIDIA H100 80GB HBM3", fabric_state="Completed")), "gpu.fabric")
    assert (finding.status, finding.message) == (Status.PASS, "NVSwitch fabric registration is complete on all 8 GPU(s).")


def _log(path: Path):
    return parse_kernel_log(path.read_text(), source=path.name)


def test_fabric_manager_with_nothing_to_do_next_to_completed_gpus_is_one_pass_of_the_gpus():
    """evidence-classes/fm-nothing-to-do-a40-gpu-operator-610.log (NV_WARN_NOTHING_TO_DO on an A40 box, which is
    bridged, not NVSwitch): no fault. With the GPUs' own fabric state Completed, the one finding is theirs: the pass
    for both GPUs, not the log's pass."""
    facts = Facts(gpus=_gpus(2, "NVIDIA A40", fabric_state="Completed"),
                  kernel_log=_log(EVIDENCE / "fm-nothing-to-do-a40-gpu-operator-610.log"))
    found = run_checks(facts, only=["gpu.fabric"])
    assert [(f.status, f.message) for f in found] == [
        (Status.PASS, "NVSwitch fabric registration is complete on all 2 GPU(s).")]


def test_a_version_mismatch_is_reported_alone_when_the_gpus_are_completed():
    """evidence-classes/fm-version-mismatch-akash-632.log: 'fabric manager NVIDIA GPU driver interface version
    550.127.05 don't match with driver version 550.120': a failure naming both versions. The GPUs' Completed state
    adds no pass next to a problem."""
    facts = Facts(gpus=_gpus(2, "NVIDIA H100 80GB HBM3", fabric_state="Completed"),
                  kernel_log=_log(EVIDENCE / "fm-version-mismatch-akash-632.log"))
    found = run_checks(facts, only=["gpu.fabric"])
    assert [(f.status, f.message_id) for f in found] == [(Status.FAIL, "gpu.fabric.version_mismatch")]
    assert found[0].message.startswith("Fabric Manager 550.127.05 does not match the driver 550.120: ")
    assert found[0].observed == {"fabric_manager": "550.127.05", "driver": "550.120"}
    assert (found[0].expected, found[0].refs) == ("the same version", [FM_REF])


def test_a_version_mismatch_comes_first_then_the_gpu_stuck_in_progress():
    """The same log, GPU0 Completed and GPU1 'In Progress': both problems, the log's first, then GPU1's (GPU0's pass
    is dropped next to problems)."""
    gpus = _gpus(2, "NVIDIA H100 80GB HBM3", fabric_state="Completed")
    gpus[1].fabric_state = "In Progress"
    found = run_checks(Facts(gpus=gpus, kernel_log=_log(EVIDENCE / "fm-version-mismatch-akash-632.log")),
                       only=["gpu.fabric"])
    assert [(f.status, f.message_id) for f in found] == [(Status.FAIL, "gpu.fabric.version_mismatch"),
                                                         (Status.FAIL, "gpu.fabric.state")]
    assert found[1].message == f"GPU1's NVSwitch fabric state is 'In Progress'{FABRIC_STATE_TAIL}"


def test_cuda_error_802_fails_with_the_cuda_error_name():
    """cases/cuda-802-azure-nd96asr-lisa-2823/lisa.log: 'Error 802: system not yet initialized' (CUDA's
    cudaErrorSystemNotReady = 802): the fabric is not up."""
    events = _log(FIXTURES / "cases" / "cuda-802-azure-nd96asr-lisa-2823" / "lisa.log")
    finding = _one(Facts(gpus=[], kernel_log=events), "gpu.fabric")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.fabric.cuda_802")
    assert (finding.observed, finding.expected, finding.refs) == ("cudaErrorSystemNotReady", "fabric Completed",
                                                                  [FM_REF])


FM_FAILED = ("Nov 05 13:55:26 node1 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, "
             "status=1/FAILURE")
"""The systemd line of evidence-classes/fm-version-mismatch-akash-632.log alone: the service exited."""


def test_fabric_manager_failing_on_an_nvswitch_board_fails_as_failed():
    """Fabric Manager's service exited (no NOTHING_TO_DO line) on H100 SXM (HGX: NVSwitch): it failed, not 'nothing
    to do'."""
    events = parse_kernel_log(FM_FAILED)
    assert [event.detail for event in events] == ["failed"]
    finding = _one(Facts(gpus=_gpus(8, "NVIDIA H100 80GB HBM3"), kernel_log=events), "gpu.fabric")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.fabric.failed_nvswitch")
    assert finding.message == ("Fabric Manager exited with a failure on a board wired through NVSwitches: the fabric "
                               "stays uninitialised and CUDA will not start.")
    assert (finding.observed, finding.expected) == (["failed"], "Fabric Manager running")


def test_fabric_manager_failing_on_a_bridged_board_is_not_needed():
    """The same line on an A40 box (NVLink by bridge, no NVSwitch): nothing for Fabric Manager to manage, a pass."""
    finding = _one(Facts(gpus=_gpus(2, "NVIDIA A40"), kernel_log=parse_kernel_log(FM_FAILED)), "gpu.fabric")
    assert (finding.status, finding.message_id) == (Status.PASS, "gpu.fabric.not_needed")
    assert (finding.observed, finding.refs) == (["failed"], [FM_REF])


def test_fabric_manager_failing_on_an_unknown_board_warns():
    """The same line with no GPU model known: whether the board needs Fabric Manager is open: a warning."""
    finding = _one(Facts(gpus=[], kernel_log=parse_kernel_log(FM_FAILED)), "gpu.fabric")
    assert (finding.status, finding.message_id) == (Status.WARN, "gpu.fabric.failed_unknown_board")
    assert finding.message == ("The Fabric Manager service exited with a failure; whether this board needs it "
                               "(NVSwitch) is not in this input.")
    assert (finding.expected, finding.refs) == ("running on NVSwitch boards", [FM_REF])


def test_a_completed_registration_with_an_error_status_fails():
    """nvml.h (nvmlGpuFabricInfo_t): the status "must be checked only if state returns complete". The published
    DGX H100 `nvidia-smi -q` (8 GPUs, each Completed / Success) with the second GPU's status changed to Insufficient
    Resources: that GPU fails, by its bus id 0000:2a:00.0; the unchanged capture passes."""
    from gpuready.evidence.build import build_facts
    text = (PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt").read_text()
    second = text.index("GPU 00000000:2A:00.0")
    status = text.index("Status                            : Success", second)
    broken = text[:status] + "Status                            : Insufficient Resources" + \
        text[status + len("Status                            : Success"):]
    healthy = _one(build_facts({"nvidia-smi-q.txt": text}), "gpu.fabric")
    assert (healthy.status, healthy.message) == (Status.PASS, "NVSwitch fabric registration is complete on all 8 GPU(s).")
    failed = _one(build_facts({"nvidia-smi-q.txt": broken}), "gpu.fabric")
    assert (failed.status, failed.subject.gpu.bus_id, failed.observed, failed.expected) == \
        (Status.FAIL, "0000:2a:00.0", "Insufficient Resources", "Success")
    assert failed.message.startswith("GPU1's NVSwitch fabric registration completed with status "
                                     "'Insufficient Resources': NVLink through the NVSwitches is not usable on it")


def test_a_completed_registration_with_status_n_a_passes():
    """A driver that prints N/A for the status of a completed registration (nothing to report) is no failure."""
    finding = _one(Facts(gpus=_gpus(2, "NVIDIA H100 80GB HBM3", fabric_state="Completed", fabric_status="N/A")),
                   "gpu.fabric")
    assert finding.status == Status.PASS


def test_a_pair_disabled_by_a_registry_key_is_read_with_the_legend_s_code():
    """nvidia-smi's own legend (the published 2× RTX 5090 capture) prints `DR = Disabled by regkey`. The same matrix
    with its GNS cells made DR: the file is still recognised as `topo -p2p` without its name, and the one pair is
    blocked with that meaning and the registry-key fix."""
    from gpuready.evidence.sniff import kind_of
    text = (PUBLIC / "topo-p2p" / "nvidia-smi-topo-p2p-gns-2x5090.txt").read_text()
    assert "DR   = Disabled by regkey" in text
    disabled = text.replace("X\tGNS", "X\tDR").replace("GNS\tX", "DR\tX")
    assert kind_of(disabled) == "nvidia-smi-topo-p2p.txt"
    finding = _one(Facts(gpus=_gpus(2, "NVIDIA GeForce RTX 5090"), p2p_read=parse_topo_p2p(disabled)), "topology.p2p")
    assert (finding.status, finding.observed) == (Status.WARN, {"GPU0-GPU1": "DR"})
    assert finding.message == ("P2P is not available between 1 GPU pair(s) (GPU0-GPU1 DR; DR = disabled by a driver "
                               "registry key): NCCL falls back to copies through host memory, which is slower.")
    assert "NVreg_RegistryDwords" in finding.fix
