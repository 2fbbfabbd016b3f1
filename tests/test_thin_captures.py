"""Thin and odd nvidia-smi captures judged by what they show (issue 31): a GPU row whose fields read `ERR!` is a lost
GPU, not another model; models without NVLink; P2P that a board's model cannot do.

Each capture here comes from a public source other than the shared real cases, named beside it."""

from __future__ import annotations

from helpers import report_for, statuses

# NVIDIA/gpu-operator issue #559 ("Install gpu-operator will cause GPU Error", 2023-07-28): an 8x A40 node where
# GPU 0's row reads ERR! in every NVML field; rows 0 and 1 of the table as posted.
ERR_ROW_TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 525.125.06   Driver Version: 525.125.06   CUDA Version: 12.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  ERR!                On   | 00000000:19:00.0 Off |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |      0MiB / 46068MiB |    ERR!      Default |
|                               |                      |                 ERR! |
+-------------------------------+----------------------+----------------------+
|   1  NVIDIA A40          On   | 00000000:1A:00.0 Off |                    0 |
|  0%   26C    P8    12W / 300W |      0MiB / 46068MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+
"""


def test_a_row_of_err_is_a_lost_gpu_not_another_model(tmp_path):
    (tmp_path / "nvidia-smi.txt").write_text(ERR_ROW_TABLE)
    report = report_for(tmp_path)
    assert statuses(report, "gpu.lost") == ["fail"]
    lost = next(f for f in report.findings if f.check_id == "gpu.lost")
    assert lost.subject.gpu.bus_id == "0000:19:00.0" and "ERR!" not in lost.message.split(" at ")[0]
    assert statuses(report, "gpu.model_mismatch") == ["pass"]


# ---------------------------------------------------------------------- no NVLink from the models, without topo -m

def _matrix(names: list[str]):
    from gpuready.checks.registry import registered_in_order, run_checks
    from gpuready.facts.types import Facts, GpuFacts
    registered_in_order()
    gpus = [GpuFacts(index=i, bus_id=f"0000:{i + 1:02x}:00.0", name=name) for i, name in enumerate(names)]
    (finding,) = run_checks(Facts(gpus=gpus), only=["topology.matrix"])
    return finding


def test_boards_without_an_nvlink_connector_say_so_from_their_names():
    """TU106 (RTX 2070) has no NVLink connector (TechPowerUp's Turing review); V100S PCIe has only PCIe Gen3 (V100
    datasheet): a `-q` or plain nvidia-smi capture naming them is enough (names as nvidia-smi prints them)."""
    for name, model in (("NVIDIA GeForce RTX 2070", "RTX 2070"), ("Tesla V100S-PCIE-32GB", "V100S PCIe 32GB")):
        finding = _matrix([name, name])
        assert (finding.status.value, finding.message_id) == ("warn", "topology.matrix.no_nvlink")
        assert finding.observed == {"GPU0": model, "GPU1": model}


def test_boards_with_an_optional_bridge_and_no_link_shown_warn_that_none_is_seen():
    """RTX 2080 (one x8 link) and RTX A5000 (2-way bridge, its datasheet) link only through a bridge that `-q` and the
    plain table cannot show: a warning that no NVLink is seen and how to tell, naming the bridge models only. A model
    gpuready does not know (RTX 2070 SUPER) stays unjudged."""
    for name, model in (("NVIDIA GeForce RTX 2080", "RTX 2080"), ("NVIDIA RTX A5000", "RTX A5000")):
        finding = _matrix([name, name])
        assert (finding.status.value, finding.message_id) == ("warn", "topology.matrix.bridge_unseen")
        assert model in finding.message and "nvlink -s" in finding.fix
    assert _matrix(["NVIDIA GeForce RTX 2070 SUPER"] * 2).status.value == "skip"
    mixed = _matrix(["NVIDIA GeForce RTX 2070", "NVIDIA RTX A5000", "NVIDIA RTX A5000"])
    assert mixed.message_id == "topology.matrix.bridge_unseen" and "RTX 2070" not in mixed.message


def test_one_card_of_each_bridge_model_has_no_pair_to_bridge():
    """A bridge joins two cards of one model (the RTX A5000 datasheet's '2-way bridge'): an A5000 beside an RTX 2080
    has no partner, so there is no NVLink at all."""
    finding = _matrix(["NVIDIA RTX A5000", "NVIDIA GeForce RTX 2080"])
    assert (finding.status.value, finding.message_id) == ("warn", "topology.matrix.no_bridge_pair")


def test_bridge_boards_whose_links_are_shown_are_left_to_the_nvlink_checks(make_bundle):
    """4 RTX 3090, one pair bridged, as `nvidia-smi nvlink -s` shows it (tests/fixtures/boards, its README names the
    source): the links are shown, so no "none seen" warning."""
    from conftest import FIXTURES
    bundle = make_bundle({"nvidia-smi-nvlink-s.txt": FIXTURES / "boards" / "rtx3090-4gpu-one-bridge-nvlink-s.txt"})
    matrix = [f for f in report_for(bundle).findings if f.check_id == "topology.matrix"]
    assert [f.message_id for f in matrix] != ["topology.matrix.bridge_unseen"]


# ------------------------------------------------------------------ PyTorch's collect_env: nvidia-smi -L, no UUIDs

# torch/utils/collect_env.py: env_info_fmt's "GPU models and configuration: {gpu_models}", where get_gpu_info runs
# `nvidia-smi -L` and removes every ` (UUID: …)`; one GPU prints on the label's line, several below it.
COLLECT_ENV = """\
Is CUDA available: True
CUDA runtime version: 12.1.105
GPU models and configuration:
GPU 0: NVIDIA A100-SXM4-80GB
GPU 1: NVIDIA A100-SXM4-80GB
GPU 2: NVIDIA A100-SXM4-40GB

Nvidia driver version: 535.104.05
"""


def test_collect_env_gpu_lines_are_a_gpu_list(tmp_path):
    from gpuready.evidence.sniff import kind_of
    from gpuready.facts.gpu_lists import parse_gpu_list
    assert kind_of(COLLECT_ENV) == "nvidia-smi-L.txt"
    gpus = parse_gpu_list(COLLECT_ENV, "nvidia-smi-L.txt")
    assert [(gpu.index, gpu.name, gpu.uuid) for gpu in gpus] == [
        (0, "NVIDIA A100-SXM4-80GB", None), (1, "NVIDIA A100-SXM4-80GB", None), (2, "NVIDIA A100-SXM4-40GB", None)]
    one = "GPU models and configuration: GPU 0: NVIDIA H100 80GB HBM3\n"
    assert kind_of(one) == "nvidia-smi-L.txt"
    assert [gpu.name for gpu in parse_gpu_list(one, "nvidia-smi-L.txt")] == ["NVIDIA H100 80GB HBM3"]


def test_diagnose_flags_mixed_models_in_a_collect_env_paste(tmp_path):
    from helpers import findings
    path = tmp_path / "collect_env_output.txt"  # not env.txt: a bundle name read as the environment
    path.write_text(COLLECT_ENV)
    mixed = [f for f in findings(path) if f.check_id == "gpu.model_mismatch"]
    assert [(f.status.value, f.message_id) for f in mixed] == [("warn", "gpu.model_mismatch.models")]


def test_cuda_samples_naming_pascal_geforce_cards_say_no_nvlink(tmp_path):
    """p2pBandwidthLatencyTest's device lines (cuda-samples printf "Device: %d, %s, pciBusID: %x, pciDeviceID: %x,
    pciDomainID:%x"): GP102 GeForce cards have SLI HB bridges, no NVLink (gpus.toml GTX 1080 Ti)."""
    from helpers import findings
    path = tmp_path / "p2p.txt"
    path.write_text("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"
                    "Device: 0, GeForce GTX 1080 Ti, pciBusID: 5, pciDeviceID: 0, pciDomainID:0\n"
                    "Device: 1, GeForce GTX 1080 Ti, pciBusID: 6, pciDeviceID: 0, pciDomainID:0\n"
                    "Device=0 CAN Access Peer Device=1\nDevice=1 CAN Access Peer Device=0\n")
    matrix = [f for f in findings(path) if f.check_id == "topology.matrix"]
    assert [(f.status.value, f.message_id) for f in matrix] == [("warn", "topology.matrix.no_nvlink")]


# ------------------------------------------------------------- a -q section alone: its GPU's header line not pasted

# nvidia-smi -q's ROW_REMAPPER section as its documentation lays it out (nvidia-smi(1), "Remapped Rows": Correctable
# Error, Uncorrectable Error, Pending, Remapping Failure Occurred), pasted without the "GPU 00000000:…" line above it.
REMAP_SECTION = """\
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 2
        Pending                           : {pending}
        Remapping Failure Occurred        : {failure}
"""


def test_a_remapped_rows_section_alone_is_judged(tmp_path):
    (tmp_path / "nvidia-smi-q.txt").write_text(REMAP_SECTION.format(pending="Yes", failure="No"))
    report = report_for(tmp_path)
    assert statuses(report, "health.row_remap_pending") == ["fail"]
    pending = next(f for f in report.findings if f.check_id == "health.row_remap_pending")
    assert pending.message_id == "health.row_remap_pending.pending_unnamed" and pending.subject.gpu is None
    assert statuses(report, "health.row_remap_failure") == ["skip"]  # not flagged: no finding about a GPU
    (tmp_path / "nvidia-smi-q.txt").write_text(REMAP_SECTION.format(pending="No", failure="Yes"))
    report = report_for(tmp_path)
    assert statuses(report, "health.row_remap_failure") == ["fail"]
    assert statuses(report, "health.row_remap_pending") == ["skip"]


# nvidia-smi -q's ECC section in the layout of drivers before R510 (nvidia-smi(1): Volatile / Aggregate, Single Bit /
# Double Bit, Device Memory … Total), pasted without the GPU's header line.
ECC_SECTION = """\
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : 0
                Total                     : 0
            Double Bit
                Device Memory             : {volatile}
                Total                     : {volatile}
        Aggregate
            Single Bit
                Device Memory             : 0
                Total                     : 0
            Double Bit
                Device Memory             : {aggregate}
                Total                     : {aggregate}
"""


def test_an_ecc_section_alone_is_judged(tmp_path):
    for volatile, aggregate, status in ((3, 3, "fail"), (0, 5, "warn")):
        (tmp_path / "nvidia-smi-q.txt").write_text(ECC_SECTION.format(volatile=volatile, aggregate=aggregate))
        report = report_for(tmp_path)
        assert statuses(report, "health.ecc_uncorrected") == [status], (volatile, aggregate)
    (tmp_path / "nvidia-smi-q.txt").write_text(ECC_SECTION.format(volatile=0, aggregate=0))
    assert statuses(report_for(tmp_path), "health.ecc_uncorrected") == ["skip"]


# --------------------------------------------------------------------- a cut nvidia-smi nvlink -s listing

# nvidia-smi nvlink -s lists every link of every GPU (`Link N: 25 GB/s`, a down one `Link N: <inactive>`); a poster
# who shortens the paste leaves a line of dots. Two A100 SXM4 listings (12 links each, as the A100 has) and a third
# cut after its first link: the third is not judged, the first two pass.
def _nvlink_listing(links: int) -> str:
    return "".join(f"\t Link {n}: 25 GB/s\n" for n in range(links))


def test_a_listing_cut_by_the_poster_is_not_links_down(tmp_path):
    text = "".join(f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)\n"
                   + _nvlink_listing(12 if i < 2 else 1) for i in range(3)) + "......\n"
    (tmp_path / "nvidia-smi-nvlink-s.txt").write_text(text)
    report = report_for(tmp_path)
    (finding,) = [f for f in report.findings if f.check_id == "nvlink.link_down"]
    assert (finding.status.value, finding.message_id) == ("pass", "nvlink.link_down.up")
    (tmp_path / "nvidia-smi-nvlink-s.txt").write_text(text.replace("......\n", ""))  # no elision: a link missing
    assert statuses(report_for(tmp_path), "nvlink.link_down") == ["fail"]
