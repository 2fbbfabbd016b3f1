"""Tests that kill the mutants of checks/nvlink.py that survived the suite (issue 23, mutation testing; the run and its
module → test-file table are in benchmarks/mutation_score.sh): nvlink.link_down (per-GPU link state, the `topo -m`
matrix of NVSwitch, direct-mesh, bridged and hybrid-mesh boards) and nvlink.errors (NVLink Xids in the kernel log).

Link counts per model are NVIDIA's published figures: H100 SXM 18 NVLink-4 links (H100 datasheet, "NVLink 900GB/s" =
18 × 50 GB/s), A100 SXM4 12 NVLink-3 links (A100 datasheet, 600 GB/s = 12 × 50 GB/s), V100 SXM2 6 NVLink-2 links
(V100 datasheet, 300 GB/s = 6 × 50 GB/s), RTX 3090 four x4 links on its bridge (GA102 whitepaper, Appendix A). The
messages are worked out by hand in each docstring from those counts and the inputs; boards come from tests/fixtures
(each README names its source) or are built in the `topo -m` / `nvlink -s` layout and described in the docstring.
"""

from __future__ import annotations

from conftest import FIXTURES, PUBLIC
from gpuready.checks.registry import registered_in_order, run_checks
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.topology import parse_topo_matrix
from gpuready.facts.types import Facts, GpuFacts, NvLink, Topology
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

BOARDS = FIXTURES / "boards"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
H100_NVL = "NVIDIA H100 NVL"
RTX_3090 = "NVIDIA GeForce RTX 3090"
RTX_4090 = "NVIDIA GeForce RTX 4090"
V100 = "Tesla V100-SXM2-16GB"
L4 = "NVIDIA L4"
LINK_REF = "nvidia-smi nvlink -s; nvidia-smi topo -m legend (NV# = a bonded set of # NVLinks)"
H100_DATASHEET = "https://resources.nvidia.com/en-us-gpu-resources/h100-datasheet-24306"
A100_DATASHEET = "nvidia-a100-datasheet"
GA102_WHITEPAPER = "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
TAIL = " Bandwidth to its peers drops and NCCL may route around it."
XID_CATALOG = "NVIDIA Xid catalog https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


def _gpu(index: int, name: str | None, up=(), down=(), *, nvlinks: bool = True) -> GpuFacts:
    """A GPU whose `nvidia-smi nvlink -s` lists links `up` as active and `down` as `<inactive>`."""
    links = [NvLink(link=link, active=True) for link in up] + [NvLink(link=link, active=False) for link in down]
    return GpuFacts(index=index, bus_id=f"0000:{0x18 + index:02x}:00.0", name=name,
                    nvlinks=links if nvlinks else None)


def _all_but(count: int, *missing: int) -> list[int]:
    return [link for link in range(count) if link not in missing]


def _named(count: int, name: str | None) -> list[GpuFacts]:
    return [GpuFacts(index=i, bus_id=f"0000:{0x18 + i:02x}:00.0", name=name) for i in range(count)]


def _matrix(count: int, nv: dict[tuple[int, int], int], other: str = "SYS") -> Topology:
    """A `topo -m` GPU×GPU block: `NV#` for the pairs in `nv`, `other` (SYS, PHB…) for the rest, X on the diagonal."""
    links = {(i, j): "X" if i == j else f"NV{nv[min(i, j), max(i, j)]}" if (min(i, j), max(i, j)) in nv else other
             for i in range(count) for j in range(count)}
    return Topology(gpu_labels=[f"GPU{i}" for i in range(count)], links=links)


def _every_pair(count: int, nv: int) -> dict[tuple[int, int], int]:
    return {(i, j): nv for i in range(count) for j in range(i + 1, count)}


def _link_down(facts: Facts):
    return run_checks(facts, only=["nvlink.link_down"])


def _one(facts: Facts):
    found = _link_down(facts)
    assert len(found) == 1, [(f.status.value, f.message) for f in found]
    return found[0]


def _failed(found) -> list[int]:
    assert all(f.status == Status.FAIL for f in found), [(f.status.value, f.message) for f in found]
    return [f.subject.gpu.index for f in found]


# DGX-1 with V100 (hybrid cube-mesh): NVIDIA/nccl#671 prints the NCCL topology of a DGX1-V100: GPU0 has 1 link to GPU1,
# 1 to GPU2, 2 to GPU3, 2 to GPU4; GPU1 2 to GPU5, 2 to GPU2, 1 to GPU3. The other rows follow the cube-mesh of the
# DGX-1V whitepaper (two quads, each GPU with 6 links = 4 peers, 1+1+2+2). 16 NVLinked pairs, the other 12 SYS.
DGX1V = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2, (2, 6): 1,
         (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2}


# ----------------------------------------------------------------------------------- link state (nvlink -s)


def test_the_same_two_links_down_on_two_h100_sxm_fail_both_against_the_model_count():
    """Two H100 SXM (18 links, H100 datasheet), both with links 16 and 17 `<inactive>`: 18 − 2 = 16 up on each. On
    an SXM board every link is wired, so 16 of 18 fails both even though they agree: no 'while GPUx has more' (the
    best peer has 16 too), the model's count named instead. GPU1's peer is GPU0 (the first with the most links);
    GPU0 is its own best and names no peer. Refs: the datasheet that gives 18, then the nvlink -s legend."""
    gpus = [_gpu(i, H100, _all_but(18, 16, 17), (16, 17)) for i in range(2)]
    found = _link_down(Facts(gpus=gpus))
    assert _failed(found) == [0, 1]
    assert found[0].message == ("GPU0 (H100 SXM) has 16 of 18 NVLink links up: link(s) 16-17 down; the H100 SXM has "
                                "18 links." + TAIL)
    assert found[1].message.startswith("GPU1 (H100 SXM) has 16 of 18 NVLink links up: link(s) 16-17 down; ")
    assert found[0].subject.peer is None and found[1].subject.peer.index == 0
    assert len(found[0].refs) == 2 and H100_DATASHEET in found[0].refs[0] and found[0].refs[1] == LINK_REF
    assert found[0].observed == {"nvlink_s": {"active": 16, "down": [16, 17]}}
    assert found[0].expected == {"nvlink_s": 18}


def test_a_gpu_flagged_by_its_links_and_by_the_matrix_names_the_datasheet_once_and_keeps_its_peer():
    """hgx-h100-8gpu-gpu3-nv16-topo.txt (GPU3 NV16 to every peer, the others NV18) with nvlink -s giving GPU3 links
    16-17 inactive (16 of 18 up) and the seven others all 18 up. GPU3 is flagged twice: by its link state against
    GPU0 (18 up) and the model's 18, and by the NVSwitch matrix (NV16 < NV18 of its model). Both flags cite the
    same datasheet: it is listed once. The peer GPU0 named by the first flag stays (the second names none)."""
    gpus = [_gpu(i, H100, _all_but(18, 16, 17) if i == 3 else range(18), (16, 17) if i == 3 else ())
            for i in range(8)]
    topology = parse_topo_matrix((BOARDS / "hgx-h100-8gpu-gpu3-nv16-topo.txt").read_text())
    found = _link_down(Facts(gpus=gpus, topology=topology))
    assert _failed(found) == [3]
    assert found[0].message == (
        "GPU3 (H100 SXM) has 16 of 18 NVLink links up: link(s) 16-17 down while GPU0 (same model) has 18 up; the H100 "
        "SXM has 18 links. GPU3 reaches its peers over NV16, fewer than the NV18 of its model on this NVSwitch board."
        + TAIL)
    assert len(found[0].refs) == 2 and H100_DATASHEET in found[0].refs[0] and found[0].refs[1] == LINK_REF
    assert found[0].subject.peer.index == 0
    assert found[0].observed == {"nvlink_s": {"active": 16, "down": [16, 17]}, "topology": "NV16"}
    assert found[0].expected == {"nvlink_s": 18, "topology": "NV18"}


def test_an_h100_sxm_with_every_link_inactive_fails_against_its_eighteen():
    """GPU0 with all 18 links up, GPU1 with all 18 `<inactive>`: GPU1 has no active link; an SXM part has all 18
    wired (H100 datasheet), so it fails naming 18 inactive and 18 wired."""
    gpus = [_gpu(0, H100, range(18)), _gpu(1, H100, (), range(18))]
    found = _link_down(Facts(gpus=gpus))
    assert _failed(found) == [1]
    assert found[0].message == ("GPU1 (H100 SXM) has no active NVLink (18 link(s) inactive), but the H100 SXM has all 18 "
                                "of its links wired on every board." + TAIL)
    assert found[0].observed == {"nvlink_s": {"active": 0, "inactive": list(range(18))}}
    assert found[0].expected == {"nvlink_s": 18}


def test_a_v100_with_no_link_up_is_held_to_the_six_links_of_the_model_not_to_its_peers_four():
    """V100 SXM2 (6 links, V100 datasheet) in a mesh: GPU0 and GPU1 both have links 3 and 5 inactive (6 − 2 = 4 up,
    alike: a mesh may leave links idle where a peer is absent), GPU2 has all 6 inactive. GPU2 fails against the
    model's 6 (not the 4 its peers show); GPU0 and GPU1, alike, are not flagged."""
    gpus = [_gpu(0, V100, (0, 1, 2, 4), (3, 5)), _gpu(1, V100, (0, 1, 2, 4), (3, 5)), _gpu(2, V100, (), range(6))]
    found = _link_down(Facts(gpus=gpus))
    assert _failed(found) == [2]
    assert found[0].message == ("GPU2 (V100 SXM2 16GB) has no active NVLink (6 link(s) inactive), but the V100 SXM2 "
                                "16GB has all 6 of its links wired on every board." + TAIL)
    assert found[0].expected == {"nvlink_s": 6}


def test_two_v100_with_the_same_links_idle_pass_as_a_mesh_by_design():
    """Two V100 SXM2 (6 links), both with links 3 and 5 inactive: 4 up on each. Mesh boards bond links to peers
    that may be absent: with two GPUs reporting alike, the model's 6 is not required. Pass, noting links 3, 5
    inactive on both alike (4 up on each)."""
    gpus = [_gpu(i, V100, (0, 1, 2, 4), (3, 5)) for i in range(2)]
    finding = _one(Facts(gpus=gpus))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 2 GPUs: links 3, 5 are inactive on all 2 "
                               "V100 SXM2 16GB GPUs alike (4 up on each): unused by design of the board or bridge, "
                               "not a fault.")
    assert finding.observed == {"active_links": {"GPU0": 4, "GPU1": 4}}
    assert finding.refs == [LINK_REF]


def test_one_v100_below_its_peer_names_the_peer_and_no_model_count():
    """V100 SXM2 GPU0 with all 6 links up, GPU1 with links 3 and 5 inactive (4 up). A mesh with two reporting GPUs
    is held to the best peer (6), not to the model: the sentence names GPU0 and stops there (no '; the … has 6
    links'), and no datasheet is cited."""
    gpus = [_gpu(0, V100, range(6)), _gpu(1, V100, (0, 1, 2, 4), (3, 5))]
    found = _link_down(Facts(gpus=gpus))
    assert _failed(found) == [1]
    assert found[0].message == ("GPU1 (V100 SXM2 16GB) has 4 of 6 NVLink links up: link(s) 3, 5 down while GPU0 (same "
                                "model) has 6 up." + TAIL)
    assert found[0].refs == [LINK_REF]


def test_a_gpu_that_lists_fewer_links_without_marking_any_inactive_says_which_are_down_is_unknown():
    """H100 SXM GPU0 with links 0-17 up; GPU1's nvlink -s lists only links 0-15, all up, and none `<inactive>`:
    16 of 18 up, but no line says which two are down: '?'."""
    gpus = [_gpu(0, H100, range(18)), _gpu(1, H100, range(16))]
    found = _link_down(Facts(gpus=gpus))
    assert _failed(found) == [1]
    assert found[0].message == ("GPU1 (H100 SXM) has 16 of 18 NVLink links up: link(s) ? down while GPU0 (same model) "
                                "has 18 up; the H100 SXM has 18 links." + TAIL)
    assert found[0].observed == {"nvlink_s": {"active": 16, "down": []}}


def test_two_bridged_rtx_3090_with_the_same_link_down_fail_against_the_bridges_four_links():
    """An RTX 3090 bridge carries four x4 links (GA102 whitepaper, Appendix A). Both cards of a bridged pair report
    link 3 inactive: 3 of 4 up on each. Alike, but a bridge carries all of the card's links, so both fail against
    4; the whitepaper is cited."""
    gpus = [_gpu(i, RTX_3090, (0, 1, 2), (3,)) for i in range(2)]
    found = _link_down(Facts(gpus=gpus))
    assert _failed(found) == [0, 1]
    assert found[0].message == ("GPU0 (RTX 3090) has 3 of 4 NVLink links up: link(s) 3 down; the RTX 3090 has 4 "
                                "links." + TAIL)
    assert GA102_WHITEPAPER in found[0].refs[0] and found[0].refs[1] == LINK_REF


def test_two_h100_nvl_on_one_bridge_with_the_same_six_links_idle_pass():
    """h100-nvl-4gpu-nvlink-s.txt (boards/README): an H100 NVL brings up 12 of its 18 links, links 4, 5, 10, 11, 16,
    17 inactive by design. Two such cards: pass, naming the six idle links once as ranges and 18 − 6 = 12 up on
    each; every card has links up, so no 'not bridged' note."""
    idle = (4, 5, 10, 11, 16, 17)
    gpus = [_gpu(i, H100_NVL, _all_but(18, *idle), idle) for i in range(2)]
    finding = _one(Facts(gpus=gpus))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 2 GPUs: links 4-5, 10-11, 16-17 are inactive "
                               "on all 2 H100 NVL GPUs alike (12 up on each): unused by design of the board or bridge, "
                               "not a fault.")


def test_one_bridged_h100_nvl_next_to_an_unbridged_one_is_noted_alone():
    """GPU0 an H100 NVL with its 12 bridge links up (4, 5, 10, 11, 16, 17 idle); GPU1 an H100 NVL with all 18
    inactive (no bridge). Only GPU0 has links up, so its idle links cannot be compared with a peer: a note of its
    own, then GPU1 noted as not bridged. Pass (PCIe cards need no bridge)."""
    idle = (4, 5, 10, 11, 16, 17)
    gpus = [_gpu(0, H100_NVL, _all_but(18, *idle), idle), _gpu(1, H100_NVL, (), range(18))]
    finding = _one(Facts(gpus=gpus))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 2 GPUs: GPU0 has link(s) 4-5, 10-11, 16-17 "
                               "inactive; no other H100 NVL reports its links to compare with; GPU1 (H100 NVL) have no "
                               "NVLink up: not bridged.")
    assert finding.observed == {"active_links": {"GPU0": 12, "GPU1": 0}}


def test_one_bridged_rtx_3090_with_every_link_up_and_a_peer_that_reports_nothing_has_no_note():
    """GPU0 an RTX 3090 with its 4 links up; GPU1's link state was not read (no nvlink -s lines for it). GPU0 has
    no inactive link: nothing to note."""
    gpus = [_gpu(0, RTX_3090, range(4)), _gpu(1, RTX_3090, nvlinks=False)]
    finding = _one(Facts(gpus=gpus))
    assert finding.status == Status.PASS
    assert finding.message == "NVLink is up as the board wires it on all 2 GPUs."
    assert finding.observed == {"active_links": {"GPU0": 4}}


def test_two_unbridged_rtx_3090_pass_as_not_bridged():
    """rtx3090-4gpu-one-bridge-nvlink-s.txt's unbridged cards: all 4 links `<inactive>`. Two such cards and nothing
    else: no card has a link up; a bridge is optional on PCIe cards, so they pass as not bridged."""
    gpus = [_gpu(i, RTX_3090, (), range(4)) for i in range(2)]
    finding = _one(Facts(gpus=gpus))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 2 GPUs: GPU0, GPU1 (RTX 3090) have no NVLink "
                               "up: not bridged.")


# ------------------------------------------------------------------------------- topo -m with no NVLink at all


def test_two_h100_sxm_whose_matrix_shows_no_nvlink_fail_each():
    """Two H100 SXM with `topo -m` SYS between them: SXM parts are NVLinked on every HGX board, so each fails; the
    matrix gives no NV# ('no NV#' observed, 'NV# to its peers' expected) and the datasheet is cited."""
    found = _link_down(Facts(gpus=_named(2, H100), topology=_matrix(2, {})))
    assert _failed(found) == [0, 1]
    assert found[1].message == ("GPU1 (H100 SXM) has no NVLink to any peer in `nvidia-smi topo -m`, though this model "
                                "is wired to its peers by NVLink on every board." + TAIL)
    assert found[0].observed == {"topology": "no NV#"} and found[0].expected == {"topology": "NV# to its peers"}
    assert len(found[0].refs) == 2 and H100_DATASHEET in found[0].refs[0] and found[0].refs[1] == LINK_REF


def test_unbridged_rtx_3090_with_a_pcie_matrix_note_both_facts():
    """Two RTX 3090 with every link `<inactive>` and `topo -m` PHB between them: they pass, noting that neither is
    bridged and that the matrix shows no NVLink pair; the matrix is observed as having no NV# pair."""
    gpus = [_gpu(i, RTX_3090, (), range(4)) for i in range(2)]
    finding = _one(Facts(gpus=gpus, topology=_matrix(2, {}, "PHB")))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 2 GPUs: GPU0, GPU1 (RTX 3090) have no NVLink "
                               "up: not bridged; `nvidia-smi topo -m` shows no NVLink between any GPU pair.")
    assert finding.observed == {"active_links": {"GPU0": 0, "GPU1": 0}, "topology": {}}


def test_l4_cards_on_pcie_pass_and_show_the_empty_nvlink_matrix():
    """Two L4 (no NVLink: L4 datasheet, PCIe Gen4 only) with `topo -m` PHB and no nvlink -s: PCIe GPUs by design;
    the matrix observed has no NV# pair."""
    finding = _one(Facts(gpus=_named(2, L4), topology=_matrix(2, {}, "PHB")))
    assert (finding.status, finding.message_id) == (Status.PASS, "nvlink.link_down.pcie")
    assert finding.observed == {"topology": {}}


def test_v100_sxm2_with_a_matrix_but_no_nvlink_pass_as_pcie_not_skip():
    """Two V100 SXM2 with `topo -m` SYS between them and no nvlink -s: the matrix was read (so the GPUs are not in
    MIG mode with an unanswered nvlink -s); a mesh GPU's partners may be outside this run. PCIe pass, not a skip."""
    finding = _one(Facts(gpus=_named(2, V100), topology=_matrix(2, {})))
    assert (finding.status, finding.message_id) == (Status.PASS, "nvlink.link_down.pcie")


def test_nvlink_gpus_whose_nvlink_s_answers_nothing_and_no_matrix_are_not_judged():
    """`nvidia-smi nvlink -s` answers nothing in MIG mode: H100 SXM (NVSwitch board) and V100 SXM2 (mesh) GPUs with
    an empty link list and no `topo -m` are skipped; L4s (no NVLink) in the same state pass as PCIe GPUs."""
    for name in (H100, V100):
        gpus = [_gpu(i, name, ()) for i in range(2)]
        finding = _one(Facts(gpus=gpus))
        assert (finding.status, finding.message_id) == (Status.SKIP, "nvlink.link_down.mig"), name
    finding = _one(Facts(gpus=[_gpu(i, L4, ()) for i in range(2)]))
    assert (finding.status, finding.message_id) == (Status.PASS, "nvlink.link_down.pcie")


# ------------------------------------------------------------------------------------------ NVSwitch boards


def test_eight_h100_all_at_nv16_fail_against_the_models_eighteen():
    """Eight H100 SXM, every pair NV16 in `topo -m` (two links down on every GPU, a switch tray lost): each GPU's 7
    peers × 16 = 112 links exceed the 18 any GPU has, so an NVSwitch board; the H100 SXM has 18 (datasheet), so
    all eight fail, 'of its model' (not 'of the other GPUs', which show NV16 too)."""
    found = _link_down(Facts(gpus=_named(8, H100), topology=_matrix(8, _every_pair(8, 16))))
    assert _failed(found) == list(range(8))
    assert found[7].message == ("GPU7 reaches its peers over NV16, fewer than the NV18 of its model on this NVSwitch "
                                "board." + TAIL)
    assert found[0].observed == {"topology": "NV16"} and found[0].expected == {"topology": "NV18"}
    assert H100_DATASHEET in found[0].refs[0]


def test_dgx2_matrix_alone_with_one_gpu_unlinked_and_one_at_nv5():
    """NVIDIA/nccl-tests#78 prints a DGX-2's `topo -m`: 16 V100, NV6 between every pair (NVSwitch). Edited: GPU15
    SYS to every peer, GPU14 NV5 to every peer. No other file: the GPUs are known from the matrix alone (no bus id,
    no name). Totals 14 × 6 + 5 = 89 > 18: switched. GPU14 reaches NV5 < NV6 of the others; GPU15 reaches none.
    Unnamed GPUs: no model count, no datasheet."""
    nv = {pair: 5 if 14 in pair else 6 for pair in _every_pair(15, 6)}
    found = _link_down(Facts(gpus=[], topology=_matrix(16, nv)))
    assert _failed(found) == [14, 15]
    assert found[0].message == ("GPU14 reaches its peers over NV5, fewer than the NV6 of the other GPUs on this "
                                "NVSwitch board." + TAIL)
    assert found[1].message == ("GPU15 has no NVLink to any peer, on an NVSwitch board where the other GPUs reach each "
                                "other." + TAIL)
    assert found[1].observed == {"topology": "NV0"} and found[1].expected == {"topology": "NV6"}
    assert found[1].refs == [LINK_REF]
    assert found[1].subject.gpu.bus_id is None


def test_an_nvswitch_board_with_one_gpu_unnamed_passes():
    """dgx-h100-nvswitch/nvidia-smi-topo-nics.txt (NV18 everywhere) with GPU7's name missing (nvidia-smi printed no
    product name for it): GPU0-6 are H100 SXM at their 18; GPU7, alone of its (unnamed) kind, reaches NV18 too."""
    gpus = _named(7, H100) + [GpuFacts(index=7, bus_id="0000:1f:00.0", name=None)]
    topology = parse_topo_matrix((PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo-nics.txt").read_text())
    finding = _one(Facts(gpus=gpus, topology=topology))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 8 GPUs: `topo -m`: NVSwitch fabric, NV18 per "
                               "GPU.")


def test_an_nvswitch_gpu_seen_only_in_the_matrix_is_judged_with_no_bus_id():
    """A run whose nvidia-smi names GPU0 and GPU1 (H100 SXM) while `topo -m` shows 8 GPUs, NV18 except GPU7 at NV16
    (hgx-h100-8gpu layout). GPU2-7 are known from the matrix alone: unnamed, held to the best of their kind (NV18);
    GPU7 fails with no bus id."""
    nv = {pair: 16 if 7 in pair else 18 for pair in _every_pair(8, 18)}
    found = _link_down(Facts(gpus=_named(2, H100), topology=_matrix(8, nv)))
    assert _failed(found) == [7]
    assert found[0].message == ("GPU7 reaches its peers over NV16, fewer than the NV18 of the other GPUs on this "
                                "NVSwitch board." + TAIL)
    assert found[0].subject.gpu.bus_id is None


# ------------------------------------------------------------------------------ boards without NVSwitch


def test_two_gpus_named_only_by_the_matrix_with_nv12_are_held_to_equal_pairs():
    """Two unnamed GPUs bridged at NV12 (an H100 NVL pair, boards/README): 12 links each, more than the 6 a hybrid
    mesh GPU has at most (V100 SXM2), so not a possible hybrid mesh: one pair, every pair NV12. No name, no
    link-state file: the GPUs come from the matrix."""
    finding = _one(Facts(gpus=[], topology=_matrix(2, {(0, 1): 12})))
    assert finding.status == Status.PASS
    assert finding.message == "NVLink is up as the board wires it on all 2 GPUs: `topo -m`: every pair NV12."
    assert finding.observed == {"topology": {"GPU0-GPU1": "NV12"}}


def test_a_4gpu_a100_board_with_one_gpu_unnamed_passes_as_a_full_mesh_of_the_named_three():
    """hgx-a100-4gpu-nv4-topo.txt (della, NV4 between every pair, A100 SXM4) with GPU3's name missing: the three
    A100 form 3·2/2 = 3 pairs, all NV4, all present: every pair of A100 SXM4 80GB NV4. GPU3, alone of its kind, has
    no pair within its kind and is not judged."""
    gpus = _named(3, A100) + [GpuFacts(index=3, bus_id="0000:1b:00.0", name=None)]
    topology = parse_topo_matrix((BOARDS / "hgx-a100-4gpu-nv4-topo.txt").read_text())
    finding = _one(Facts(gpus=gpus, topology=topology))
    assert finding.status == Status.PASS
    assert finding.message == "NVLink is up as the board wires it on all 4 GPUs: `topo -m`: every pair of A100 SXM4 80GB NV4."


def test_a_4gpu_a100_board_with_gpu3_off_the_mesh_fails_gpu3_naming_the_linked_three():
    """HGX A100 4-GPU board (NV4 between every pair, della capture) with GPU3 SYS to every peer: GPU0-2 are NVLinked
    (pairs 0-1, 0-2, 1-2 NV4: totals 8 ≤ 18, no NVSwitch); GPU3 has no NVLink while they have: GPU3 fails, the A100
    datasheet cited."""
    nv = {(0, 1): 4, (0, 2): 4, (1, 2): 4}
    found = _link_down(Facts(gpus=_named(4, A100), topology=_matrix(4, nv)))
    assert _failed(found) == [3]
    assert found[0].message == ("GPU3 (A100 SXM4 80GB) has no NVLink to any peer while GPU0, GPU1, GPU2 are NVLinked."
                                + TAIL)
    assert found[0].observed == {"topology": "no NV#"} and found[0].expected == {"topology": "NV# to its peers"}
    assert A100_DATASHEET in found[0].refs[0] and found[0].refs[1] == LINK_REF


def test_a_4gpu_a100_board_missing_one_pair_fails_both_ends():
    """HGX A100 4-GPU (a full NV4 mesh, della capture) with GPU0-GPU1 SYS: 5 pairs NV4, one without NVLink. Both ends
    fail, each naming the other as its peer; the matrix cell is observed as 'no NV#', NV4 expected."""
    nv = {pair: 4 for pair in _every_pair(4, 4) if pair != (0, 1)}
    found = _link_down(Facts(gpus=_named(4, A100), topology=_matrix(4, nv)))
    assert _failed(found) == [0, 1]
    assert found[0].message == ("GPU0-GPU1 has no NVLink on a board where the other A100 SXM4 80GB pairs are NV4."
                                + TAIL)
    assert found[0].observed == {"topology": {"GPU0-GPU1": "no NV#"}} and found[0].expected == {"topology": "NV4"}
    assert (found[0].subject.peer.index, found[1].subject.peer.index) == (1, 0)


def test_an_a100_pair_at_nv3_is_observed_as_that_cell_and_cites_no_datasheet():
    """hgx-a100-4gpu-pair-nv3-topo.txt: GPU0-GPU1 NV3, the other five pairs NV4. The reference is the other pairs'
    NV4 (an SXM board has no bridge count), so the datasheet is not cited: only the legend."""
    topology = parse_topo_matrix((BOARDS / "hgx-a100-4gpu-pair-nv3-topo.txt").read_text())
    found = _link_down(Facts(gpus=_named(4, A100), topology=topology))
    assert _failed(found) == [0, 1]
    assert found[1].observed == {"topology": {"GPU0-GPU1": "NV3"}} and found[1].expected == {"topology": "NV4"}
    assert found[1].refs == [LINK_REF]


def test_two_rtx_3090_bridges_one_at_nv3_are_compared_with_the_other_pair():
    """Four RTX 3090, bridges on GPU0-GPU1 (NV4) and GPU2-GPU3 (NV3, a partly seated bridge as in NVIDIA/nccl#557).
    The bridge carries 4 links (GA102 whitepaper) and the other pair shows NV4: NV3 is fewer than the NV4 of the
    other pairs; the whitepaper is cited since the bridge's 4 is the reference."""
    found = _link_down(Facts(gpus=_named(4, RTX_3090), topology=_matrix(4, {(0, 1): 4, (2, 3): 3}, "NODE")))
    assert _failed(found) == [2, 3]
    assert found[0].message == "GPU2-GPU3 is NV3, fewer links than the NV4 of the other RTX 3090 pairs." + TAIL
    assert GA102_WHITEPAPER in found[0].refs[0] and found[0].refs[1] == LINK_REF


def test_two_rtx_3090_bridges_at_nv4_are_equal_pairs_not_a_full_mesh():
    """Four RTX 3090, bridged pairs GPU0-GPU1 and GPU2-GPU3 at NV4: 2 of the 4·3/2 = 6 pairs NVLinked, equal. Not
    every pair: the note lists the two pairs and calls them equal."""
    finding = _one(Facts(gpus=_named(4, RTX_3090), topology=_matrix(4, {(0, 1): 4, (2, 3): 4}, "NODE")))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 4 GPUs: `topo -m`: GPU0-GPU1 NV4, GPU2-GPU3 "
                               "NV4: equal NV# across RTX 3090 pairs.")


def test_two_a100_sxm_without_nvlink_next_to_bridged_cards_fail_each():
    """GPU0, GPU1 A100 SXM4 with SYS between them, GPU2-GPU3 two RTX 3090 bridged at NV4. The A100 pair has no
    NVLink though the model is NVLinked on every board: both A100 fail; the 3090 pair passes."""
    gpus = _named(2, A100) + [GpuFacts(index=i, bus_id=f"0000:{0x40 + i:02x}:00.0", name=RTX_3090) for i in (2, 3)]
    found = _link_down(Facts(gpus=gpus, topology=_matrix(4, {(2, 3): 4})))
    assert _failed(found) == [0, 1]
    assert found[0].message == ("GPU0 (A100 SXM4 80GB) has no NVLink to any peer while this model is NVLinked to its "
                                "peers on every board." + TAIL)


def test_a_lone_h100_sxm_next_to_bridged_cards_has_no_peer_of_its_model_to_miss():
    """GPU0 one H100 SXM, GPU1-GPU2 two RTX 3090 bridged at NV4. The H100 has no other H100 to be NVLinked to, so
    it is not flagged; the bridged pair is every pair of the 3090s."""
    gpus = [GpuFacts(index=0, bus_id="0000:18:00.0", name=H100)] + \
        [GpuFacts(index=i, bus_id=f"0000:{0x40 + i:02x}:00.0", name=RTX_3090) for i in (1, 2)]
    finding = _one(Facts(gpus=gpus, topology=_matrix(3, {(1, 2): 4})))
    assert finding.status == Status.PASS
    assert finding.message == "NVLink is up as the board wires it on all 3 GPUs: `topo -m`: every pair of RTX 3090 NV4."


def test_a_partly_seated_bridge_is_found_after_a_group_of_cards_without_nvlink():
    """GPU0-GPU1 RTX 4090 (no NVLink connector), GPU2-GPU3 RTX 3090 bridged at NV3 (4 links on the bridge, GA102
    whitepaper): the 4090s come first and have no pair; the 3090 pair still fails against the bridge's 4."""
    gpus = _named(2, RTX_4090) + [GpuFacts(index=i, bus_id=f"0000:{0x40 + i:02x}:00.0", name=RTX_3090) for i in (2, 3)]
    found = _link_down(Facts(gpus=gpus, topology=_matrix(4, {(2, 3): 3}, "PHB")))
    assert _failed(found) == [2, 3]
    assert found[0].message == ("GPU2-GPU3 is NV3, fewer links than the 4 links the RTX 3090 bridge carries." + TAIL)


def test_a_partly_seated_bridge_is_found_after_a_v100_mesh():
    """GPU0-GPU1 V100 SXM2 at NV2 (a mesh, not held to equal pairs), GPU2-GPU3 RTX 3090 at NV3: the V100 pair comes
    first and is noted; the 3090 pair still fails against the bridge's 4."""
    gpus = _named(2, V100) + [GpuFacts(index=i, bus_id=f"0000:{0x40 + i:02x}:00.0", name=RTX_3090) for i in (2, 3)]
    found = _link_down(Facts(gpus=gpus, topology=_matrix(4, {(0, 1): 2, (2, 3): 3})))
    assert _failed(found) == [2, 3]


# ---------------------------------------------------------------------------------------- hybrid meshes


def test_an_unnamed_dgx1_v100_matrix_passes_as_a_possible_hybrid_mesh():
    """DGX-1V hybrid cube-mesh (NVIDIA/nccl#671, see DGX1V above), GPUs unnamed: each GPU bonds 1+1+2+2 = 6 links,
    at most the 6 a hybrid-mesh GPU has, so NV1 and NV2 pairs are not held equal. 16 pairs: the first four in order
    (0-1 NV1, 0-2 NV1, 0-3 NV2, 0-4 NV2), then an ellipsis."""
    finding = _one(Facts(gpus=[], topology=_matrix(8, DGX1V)))
    assert finding.status == Status.PASS
    assert finding.message == (
        "NVLink is up as the board wires it on all 8 GPUs: `topo -m`: GPU0-GPU1 NV1, GPU0-GPU2 NV1, GPU0-GPU3 NV2, "
        "GPU0-GPU4 NV2, …; GPU pairs (models not named) bond different link counts, as a hybrid mesh (DGX-1, POWER9) "
        "does by design (unnamed GPUs with at most 6 NVLinks each may be such a mesh).")
    assert len(finding.observed["topology"]) == 16


def test_a_named_dgx1_v100_passes_as_a_mesh_without_the_unnamed_hint():
    """The same DGX-1V matrix with the GPUs named Tesla V100-SXM2-16GB (the DGX-1V's GPU): a V100 SXM2 mesh by
    model, so no 'unnamed GPUs…' hint; pairs named by model."""
    finding = _one(Facts(gpus=_named(8, V100), topology=_matrix(8, DGX1V)))
    assert finding.status == Status.PASS
    assert finding.message == (
        "NVLink is up as the board wires it on all 8 GPUs: `topo -m`: GPU0-GPU1 NV1, GPU0-GPU2 NV1, GPU0-GPU3 NV2, "
        "GPU0-GPU4 NV2, …; V100 SXM2 16GB pairs bond different link counts, as a hybrid mesh (DGX-1, POWER9) does by "
        "design.")


def test_the_ac922_with_named_v100_pairs_at_one_count_is_not_held_to_it():
    """ac922-v100-nv3-pairs-topo.txt (IBM AC922): GPU0-GPU1 NV3, GPU2-GPU3 NV3, named V100 SXM2 16GB (boards/README):
    one link count only, but a mesh is not held to one: 'not held to one link count'."""
    topology = parse_topo_matrix((BOARDS / "ac922-v100-nv3-pairs-topo.txt").read_text())
    finding = _one(Facts(gpus=_named(4, V100), topology=topology))
    assert finding.message == ("NVLink is up as the board wires it on all 4 GPUs: `topo -m`: GPU0-GPU1 NV3, GPU2-GPU3 "
                               "NV3; V100 SXM2 16GB pairs are not held to one link count.")


def test_a_hybrid_mesh_of_exactly_four_pairs_lists_them_all_without_an_ellipsis():
    """hybrid-mesh-nv2-nv1-4gpu-topo.txt ("delos"): pairs 0-1 NV2, 0-2 NV2, 1-3 NV1, 2-3 NV2 (0-3 and 1-2 SYS): four
    NVLinked pairs, all shown, no ellipsis. Per GPU 2+2 = 4 ≤ 6 links: a possible hybrid mesh."""
    topology = parse_topo_matrix((BOARDS / "hybrid-mesh-nv2-nv1-4gpu-topo.txt").read_text())
    finding = _one(Facts(gpus=[], topology=topology))
    assert finding.message == (
        "NVLink is up as the board wires it on all 4 GPUs: `topo -m`: GPU0-GPU1 NV2, GPU0-GPU2 NV2, GPU1-GPU3 NV1, "
        "GPU2-GPU3 NV2; GPU pairs (models not named) bond different link counts, as a hybrid mesh (DGX-1, POWER9) "
        "does by design (unnamed GPUs with at most 6 NVLinks each may be such a mesh).")


def test_a_mesh_of_exactly_five_pairs_shows_four_and_an_ellipsis():
    """A 6-GPU AC922 (two sockets of three V100 SXM2, NV2 between the GPUs of a socket: pairs 0-1, 0-2, 1-2, 3-4,
    3-5, 4-5), GPUs unnamed, with pair 4-5 SYS: five pairs, the first four shown, then an ellipsis."""
    nv = {(0, 1): 2, (0, 2): 2, (1, 2): 2, (3, 4): 2, (3, 5): 2}
    finding = _one(Facts(gpus=[], topology=_matrix(6, nv)))
    assert finding.message == (
        "NVLink is up as the board wires it on all 6 GPUs: `topo -m`: GPU0-GPU1 NV2, GPU0-GPU2 NV2, GPU1-GPU2 NV2, "
        "GPU3-GPU4 NV2, …; GPU pairs (models not named) are not held to one link count (unnamed GPUs with at most 6 "
        "NVLinks each may be such a mesh).")


def test_two_gpus_of_the_run_and_four_in_the_matrix_judge_the_pair_of_each_kind():
    """nvidia-smi names GPU0 and GPU1 (A100 SXM4) while the della matrix shows four (NV4 between every pair): the
    named pair is every pair of A100; GPU2 and GPU3, from the matrix alone, are an unnamed pair at NV4 with 3 × 4 =
    12 links each (more than a hybrid mesh's 6): every pair NV4."""
    topology = parse_topo_matrix((BOARDS / "hgx-a100-4gpu-nv4-topo.txt").read_text())
    finding = _one(Facts(gpus=_named(2, A100), topology=topology))
    assert finding.status == Status.PASS
    assert finding.message == ("NVLink is up as the board wires it on all 2 GPUs: `topo -m`: every pair of A100 SXM4 "
                               "80GB NV4; `topo -m`: every pair NV4.")


# --------------------------------------------------------------------------------------------- nvlink.errors

XID145_ON_D8 = (BOARDS / "xid145-nonfatal-dmesg.txt").read_text().replace("PCI:0018:01:00", "PCI:0000:d8:00")
RELOAD = "[ 9000.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
D8 = [GpuFacts(index=0, bus_id="0000:18:00.0", name=H100), GpuFacts(index=1, bus_id="0000:d8:00.0", name=H100)]


def _errors(log: str, gpus=D8):
    return run_checks(Facts(gpus=gpus, kernel_log=parse_kernel_log(log), kernel_log_readable=True),
                      only=["nvlink.errors"])


def test_a_kernel_log_without_nvlink_xids_names_the_codes_it_looked_for():
    """xid/xid119-dmesg.txt holds an Xid 119 (GSP timeout), no NVLink error: pass. The codes listed are numbers
    separated by ', ' and include 74 (NVLINK_ERROR) and 144-150 (NVLINK5 errors), as in NVIDIA's Xid catalog
    (tests/fixtures/nvidia-xid-catalog/catalog.tsv)."""
    import re
    found = _errors((PUBLIC / "xid" / "xid119-dmesg.txt").read_text(), gpus=[])
    assert [f.status for f in found] == [Status.PASS]
    match = re.fullmatch(r"No NVLink Xid \((\d+(?:, \d+)*)\) in the kernel log\.", found[0].message)
    assert match, found[0].message
    codes = [int(code) for code in match.group(1).split(", ")]
    assert 74 in codes and set(range(144, 151)) <= set(codes)


def test_a_fatal_and_a_non_fatal_nvlink_xid_on_one_gpu_are_listed_per_code():
    """xid74-dmesg.txt (two Xid 74 'fatal error detected' lines on 0000:d8:00, links 14 and 15) and the Xid 145
    'Nonfatal' line of xid145-nonfatal-dmesg.txt moved to the same GPU (link 13). One finding for GPU1: Xid 74 ×2
    fatal on links 14-15, Xid 145 ×1 non-fatal on link 13; links of both codes 13, 14, 15. The worst decides: fail,
    with the fatal action. Each code cites its catalog source once."""
    log = (BOARDS / "xid74-dmesg.txt").read_text() + XID145_ON_D8
    found = _errors(log)
    assert [(f.status, f.subject.gpu.index) for f in found] == [(Status.FAIL, 1)]
    finding = found[0]
    assert finding.message == ("NVLink errors on GPU1 (0000:d8:00.0): Xid 74 NVLINK_ERROR ×2 on link(s) 14-15 (fatal); "
                               "Xid 145 NVLINK_RLW_ERROR ×1 on link(s) 13 (non-fatal). Last: " + XID145_ON_D8.strip())
    assert finding.observed["links"] == [13, 14, 15]
    assert finding.observed["xids"]["74"] == {"count": 2, "named_as_cause": 0, "links": [14, 15], "fatal": True,
                                              "status": "fail", "why": "catalog severity critical"}
    assert finding.observed["xids"]["145"]["fatal"] is False
    assert finding.observed["xids"]["145"]["status"] == "warn"
    assert finding.expected == "no NVLink Xid"
    assert len(finding.refs) == 2 and all(ref.startswith(XID_CATALOG) for ref in finding.refs)
    assert finding.fix.startswith("Drain the node;")


def test_a_non_fatal_nvlink_xid_before_a_driver_reload_stays_non_fatal():
    """The Xid 145 'Nonfatal' line, then a driver load: history, a warning; the line said non-fatal, so it is not
    counted as fatal and the action is the non-fatal one."""
    found = _errors(XID145_ON_D8 + RELOAD)
    assert [f.status for f in found] == [Status.WARN]
    assert found[0].observed["xids"]["145"]["fatal"] is False
    assert found[0].fix.startswith("No immediate action for a non-fatal NVLink error;")


def test_a_fatal_nvlink_xid_before_a_driver_reload_is_history_but_still_fatal():
    """xid74-dmesg.txt then a driver load: history (a warning), but the lines said fatal: counted as fatal and the
    fatal action given; the reasons are the catalog's severity and the history, joined by '; '."""
    found = _errors((BOARDS / "xid74-dmesg.txt").read_text() + RELOAD)
    assert [f.status for f in found] == [Status.WARN]
    xid = found[0].observed["xids"]["74"]
    assert (xid["fatal"], xid["status"]) == (True, "warn")
    assert xid["why"] == "catalog severity critical; history: a later driver load or reset of this GPU came after it"
    assert found[0].fix.startswith("Drain the node;")
    last = (BOARDS / "xid74-dmesg.txt").read_text().splitlines()[1]  # the link-15 line
    assert found[0].message == ("NVLink errors on GPU1 (0000:d8:00.0): Xid 74 NVLINK_ERROR ×2 on link(s) 14-15 "
                                "(fatal); all before a later driver load or reset of this GPU: history, watch whether "
                                f"it returns. Last: {last}")


def test_an_nvlink_xid_line_naming_no_link_and_no_severity_adds_nothing_after_its_count():
    """Hand-built Xid 74 line with no 'link N' and no fatal/non-fatal word ('pid=2144, name=python3, Ch 00000001'):
    the part is just 'Xid 74 NVLINK_ERROR ×1', followed by '. Last: ' and the line."""
    line = "[  100.000000] NVRM: Xid (PCI:0000:d8:00): 74, pid=2144, name=python3, Ch 00000001"
    found = _errors(line + "\n")
    assert found[0].message == f"NVLink errors on GPU1 (0000:d8:00.0): Xid 74 NVLINK_ERROR ×1. Last: {line}"
    assert found[0].observed["links"] == []


def test_a_long_last_line_is_quoted_to_two_hundred_characters():
    """An Xid 74 line of xid74-dmesg.txt's form with 40 more register words. Its first 120 characters run up to
    'link 14(' (15 timestamp + 32 'NVRM: Xid (PCI:0000:d8:00): 74, ' + 33 "pid='<unknown>', name=<unknown>, " + 40
    'NVLink: fatal error detected on link 14('), then '0x10000000' (10) makes 130, then ', 0x0' groups of 5:
    (200 − 130) / 5 = 14 whole groups. The quote stops there, before the 15th group's comma."""
    head = "[ 8812.302216] NVRM: Xid (PCI:0000:d8:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error " \
        "detected on link 14("
    line = head + "0x10000000" + ", 0x0" * 40 + ")"
    found = _errors(line + "\n")
    assert found[0].message.endswith(" Last: " + head + "0x10000000" + ", 0x0" * 14)
