"""Tests that kill the mutants of verbs/plan/machine.py that survived the suite (issue 23, mutation testing; the run
and its module → test-file table are in benchmarks/mutation_score.sh).

The figures are published ones (NVIDIA datasheets, as knowledge/gpus.toml cites them), what recorded tool outputs
under tests/fixtures say, or worked out by hand in the test's docstring. The all_reduce bus bandwidth a node should
reach is validate's expectation, by hand:
  NVLink: 82 % of the per-direction NVLink rate of one GPU (sjeaugey, NVIDIA/nccl-tests#212: ~370 GB/s effective of
          the 450 GB/s line rate of an H100; 0.82 × 450 = 369);
  PCIe:   75 % of the per-direction rate of the GPU's x16 link (gpuready's stated default, NVIDIA/nccl#1639), a lane
          carrying 8 / 16 / 32 GT/s × 128/130 / 8 = 0.985 / 1.969 / 3.938 GB/s for Gen3 / Gen4 / Gen5 (PCI-SIG).
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from gpuready.evidence.reader import read_bundle
from gpuready.evidence.build import build_facts
from gpuready.facts.types import Facts, GpuFacts
from gpuready.estimate.machine import Machine, MachineError, machine_from_description, machine_from_facts

from conftest import FIXTURES, PUBLIC

BOARDS = FIXTURES / "boards"


def _facts(make_bundle, files: dict):
    return build_facts(read_bundle(make_bundle(files)))


def _busbw(description: str) -> tuple[int, float | None]:
    machine = machine_from_description(description)
    return machine.nvlink_domain, machine.intra_node_busbw_gb_per_s


# ------------------------------------------------------------------------------------------- the Machine record

def test_a_machine_given_only_its_gpu_and_count_is_a_pcie_node_of_unknown_figures():
    """The field docstrings: nodes 1, nvlink_domain 1 ("1: PCIe only"), no peak, no measured figure, and None
    ("unknown") for memory, board power and both bus bandwidths; source empty (said by no one)."""
    machine = Machine(gpu_name="Mystery GPU", gpus_per_node=2)
    assert dataclasses.asdict(machine) == {
        "gpu_name": "Mystery GPU", "gpus_per_node": 2, "nodes": 1, "memory_bytes_per_gpu": None, "nvlink_domain": 1,
        "peak_tflops": {}, "gpu_tdp_w": None, "intra_node_busbw_gb_per_s": None, "inter_node_busbw_gb_per_s": None,
        "source": "", "measured": {}}
    assert machine.gpus == 2


def test_machine_is_frozen_and_keyword_only():
    """A plan shares one Machine between its strategies: it cannot change under them (frozen), and its many numeric
    fields are never given by position (keyword-only, DESIGN.md §5 after torchtitan)."""
    machine = Machine(gpu_name="H100 SXM", gpus_per_node=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        machine.nodes = 2
    with pytest.raises(TypeError):
        Machine("H100 SXM", 8)


def test_the_field_annotations_resolve_to_their_types():
    """`typing.get_type_hints` (what type-driven readers such as facts/nvml.py use) reads the optional figures as
    `X | None`."""
    hints = typing.get_type_hints(Machine)
    assert (hints["memory_bytes_per_gpu"], hints["gpu_tdp_w"], hints["intra_node_busbw_gb_per_s"],
            hints["inter_node_busbw_gb_per_s"]) == (int | None, float | None, float | None, float | None)


# ------------------------------------------------------------------------------------------- descriptions

def test_an_h100_sxm_description_carries_every_dense_peak_of_the_datasheet():
    """NVIDIA H100 datasheet, SXM column, Tensor Core figures printed with sparsity ("Specifications 1/2 lower without
    sparsity"): BF16 and FP16 1,979 → 989, TF32 989 → 494.5, FP8 3,958 → 1,979; FP32 67 (no sparsity) — the dense
    table of stas00/ml-engineering compute/accelerator/README.md: 989, 989, 494.5, 67, 1979. Nothing measured,
    inter-node unknown."""
    machine = machine_from_description("8xH100-SXM")
    assert machine.peak_tflops == {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5, "fp32": 67.0, "fp8": 1979.0}
    assert (machine.source, machine.inter_node_busbw_gb_per_s, machine.measured) == ("description 8xH100-SXM", None,
                                                                                      {})


def test_a_v100_sxm2_named_with_nvidia_smis_hyphens():
    """`Tesla V100-SXM2-32GB` is how nvidia-smi names the board; the description `8xV100-SXM2-32GB` finds the row
    `V100 SXM2 32GB` (hyphens read as spaces). V100 datasheet, SXM2: 32 GB, 125 TFLOPS Tensor (fp16), 15.7 FP32; no bf16,
    tf32 or fp8 on Volta. Its NVLink wiring depends on the server (DGX-1 hybrid cube-mesh), so no NVLink domain is
    assumed: PCIe Gen3 x16, 16 × 0.985 = 15.76 GB/s × 0.75 = 11.82 → 11.8 GB/s."""
    machine = machine_from_description("8xV100-SXM2-32GB")
    assert (machine.gpu_name, machine.memory_bytes_per_gpu, machine.peak_tflops) == (
        "V100 SXM2 32GB", 32_000_000_000, {"fp16": 125.0, "fp32": 15.7})
    assert (machine.nvlink_domain, machine.intra_node_busbw_gb_per_s) == (1, 11.8)


def test_a_description_without_a_count_is_one_gpu():
    machine = machine_from_description("H100-SXM")
    assert (machine.gpus_per_node, machine.nodes, machine.gpus, machine.source) == (1, 1, 1, "description H100-SXM")


@pytest.mark.parametrize("text, shown", [("", "''"), (None, "None")])
def test_an_empty_description_asks_for_count_x_model(text, shown):
    with pytest.raises(MachineError) as raised:
        machine_from_description(text)
    assert str(raised.value) == f"--machine {shown}: give COUNTxMODEL, e.g. 8xH100-SXM or 2xRTX4090"


def test_counts_at_the_limits_are_accepted():
    """options.MAX_GPUS_PER_NODE is 1,024 and MAX_NODES 100,000 (the limits the message states): both are allowed."""
    widest = machine_from_description("1024xH100-SXM")
    assert (widest.gpus_per_node, widest.gpus) == (1024, 1024)
    most_nodes = machine_from_description("8xH100-SXM (100000 nodes)")
    assert (most_nodes.nodes, most_nodes.gpus) == (100_000, 800_000)
    assert machine_from_description("8xH100-SXM", nodes=100_000).nodes == 100_000


def test_a_count_padded_with_zeros_is_read_by_its_value():
    """`000000000008` (12 characters) is 8 GPUs; `(000000000002 nodes)` 2 nodes."""
    machine = machine_from_description("000000000008xH100-SXM (000000000002 nodes)")
    assert (machine.gpus_per_node, machine.nodes, machine.gpus) == (8, 2, 16)
    assert machine_from_description("8xH100-SXM", nodes=2).nodes == 2


@pytest.mark.parametrize("text", ["1025xH100-SXM", "1000000000000xH100-SXM", "9" * 5000 + "xH100-SXM",
                                  "8xH100-SXM (100001 nodes)", "8xH100-SXM (1000000000000 nodes)",
                                  "8xH100-SXM (" + "9" * 5000 + " nodes)"])
def test_counts_past_the_limits_are_refused_in_one_sentence(text):
    """1,025 GPUs and 100,001 nodes are one past the limits; 10^12 (13 digits) and a 5,000-digit count (past Python's
    4,300-digit int() limit) are refused the same way, not read as 1,023 GPUs or 99,999 nodes, nor a ValueError."""
    with pytest.raises(MachineError, match="the GPU count must be from 1 to 1,024 per node and the node count from 1 "
                                           "to 100,000$"):
        machine_from_description(text)


def test_a_long_description_is_cut_to_80_characters_in_the_count_error():
    """`2000x` (5 characters) then `H100-SXM-` nine characters at a time: the first 80 characters are `2000x`, eight
    `H100-SXM-` (72) and `H10` (3); the 81st, `0`, is left out."""
    text = "2000x" + "H100-SXM-" * 10
    with pytest.raises(MachineError) as raised:
        machine_from_description(text)
    shown = "2000x" + "H100-SXM-" * 8 + "H10"
    assert str(raised.value) == (f"--machine '{shown}': the GPU count must be from 1 to 1,024 per node and the node "
                                 "count from 1 to 100,000")


def test_an_unknown_gpu_lists_the_known_models_in_order():
    """The models of knowledge/gpus.toml, sorted and comma-separated; the H100/H200 family sorts NVL < PCIe < SXM
    (ASCII `N` < `P` < `S`), and `A10` comes first."""
    with pytest.raises(MachineError) as raised:
        machine_from_description("8xTPUv5")
    message = str(raised.value)
    assert message.startswith("--machine '8xTPUv5': no GPU of gpuready's table matches 'TPUv5' (known: A10, A100 ")
    assert "H100 NVL, H100 PCIe, H100 SXM, H20, H200 NVL, H200 SXM, H800 PCIe, H800 SXM, L20, L4, L40, L40S" in message


# --------------------------------------------------------------------------------- NVLink domain and busbw

def test_two_h100_sxm_reach_the_nvlink_figure_and_one_has_no_collective():
    """NVSwitch boards: the domain is the count. H100 SXM, NVLink 4: 900 GB/s both directions, 450 per direction:
    0.82 × 450 = 369.0 GB/s for 2 GPUs; one GPU runs no collective (None)."""
    assert _busbw("2xH100-SXM") == (2, 369.0)
    assert _busbw("1xH100-SXM") == (1, None)


def test_bridged_boards_pair_up_and_only_a_pair_reaches_the_bridge():
    """A bridge joins two cards (nvlink_via `bridge`): domain 2 for 2 or more cards, 1 for one.
      2x H100 PCIe: NVLink bridge 600 GB/s, 300 per direction: 0.82 × 300 = 246.0 GB/s;
      4x H100 PCIe: the ring leaves the pair, PCIe Gen5 x16: 16 × 3.938 = 63.0 GB/s × 0.75 = 47.26 → 47.3;
      2x RTX 3090: bridge 112.5 GB/s (GA102 whitepaper), 56.25 per direction: 0.82 × 56.25 = 46.125 → 46.1;
      4x RTX 3090: PCIe Gen4 x16: 16 × 1.969 = 31.5 GB/s × 0.75 = 23.63 → 23.6."""
    assert _busbw("2xH100 PCIe") == (2, 246.0)
    assert _busbw("4xH100 PCIe") == (2, 47.3)
    assert _busbw("2xRTX 3090") == (2, 46.1)
    assert _busbw("4xRTX 3090") == (2, 23.6)
    assert _busbw("1xRTX 3090") == (1, None)


def test_geforce_without_nvlink_rings_over_pcie():
    """RTX 4090: no NVLink, PCIe Gen4 x16: 16 × 1.969 = 31.5 GB/s × 0.75 = 23.63 → 23.6 GB/s."""
    assert _busbw("2x RTX 4090") == (1, 23.6)


# --------------------------------------------------------------------------------------------- facts

def test_machine_from_facts_says_live_unless_told():
    facts = Facts(gpus=[GpuFacts(index=0, bus_id="0000:83:00.0", name="NVIDIA H200")])
    assert machine_from_facts(facts).source == "live"


def test_facts_without_gpus_ask_for_a_description():
    for facts in (Facts(gpus=[]), Facts(gpus=None)):
        with pytest.raises(MachineError) as raised:
            machine_from_facts(facts)
        assert str(raised.value) == "the facts name no GPU: give --machine COUNTxMODEL to plan for a machine described"


def test_the_boards_power_cap_and_memory_beat_the_table(make_bundle):
    """tests/fixtures/public/mixed-models/nvidia-smi.txt: GPU 0 is a GeForce RTX 5090 showing `12W / 600W` and
    `32607MiB` (the table's reference board: 575 W, 32 GB): 600.0 W and 32,607 × 2^20 = 34,190,917,632 bytes. Plain
    nvidia-smi tells nothing of NVLink: domain 1, and the two cards ring over PCIe Gen5 x16:
    16 × 3.938 = 63.0 GB/s × 0.75 = 47.26 → 47.3 GB/s."""
    machine = machine_from_facts(_facts(make_bundle, {"nvidia-smi.txt": PUBLIC / "mixed-models" / "nvidia-smi.txt"}),
                                 source="bundle")
    assert (machine.gpu_name, machine.gpus, machine.gpu_tdp_w, machine.memory_bytes_per_gpu) == (
        "RTX 5090", 2, 600.0, 34_190_917_632)
    assert (machine.nvlink_domain, machine.intra_node_busbw_gb_per_s, machine.source) == (1, 47.3, "bundle")


def test_a_gpu_the_table_does_not_know_keeps_nvidia_smis_name(make_bundle):
    """tests/fixtures/public/gpu-err/nvidia-smi.txt (525 layout) cuts the name to `NVIDIA GeForce ...`: no row
    matches, so the name stays as printed, with the board's `450W` cap and `23028MiB` (23,028 × 2^20 =
    24,146,608,128 bytes), no peaks, and no collective on one GPU."""
    machine = machine_from_facts(_facts(make_bundle, {"nvidia-smi.txt": PUBLIC / "gpu-err" / "nvidia-smi.txt"}))
    assert (machine.gpu_name, machine.gpus, machine.gpu_tdp_w, machine.memory_bytes_per_gpu, machine.peak_tflops,
            machine.intra_node_busbw_gb_per_s) == ("NVIDIA GeForce ...", 1, 450.0, 24_146_608_128, {}, None)


def test_nvidia_smi_alone_of_a_dgx_gives_no_nvlink_domain(make_bundle):
    """tests/fixtures/public/dgx-h100-nvswitch/nvidia-smi-550.90.07.txt: 8 H100 80GB HBM3, nothing about NVLink, so
    domain 1 and the PCIe Gen5 x16 figure: 16 × 3.938 = 63.0 GB/s × 0.75 = 47.26 → 47.3 GB/s (not NVLink's 369)."""
    files = {"nvidia-smi.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-550.90.07.txt"}
    machine = machine_from_facts(_facts(make_bundle, files))
    assert (machine.gpu_name, machine.gpus, machine.nvlink_domain, machine.intra_node_busbw_gb_per_s) == (
        "H100 SXM", 8, 1, 47.3)


def test_nvlink_status_alone_makes_every_gpu_one_domain(make_bundle):
    """tests/fixtures/public/nvlink-status/nvidia-smi-nvlink-s.txt: 8 A100-SXM4-80GB, each with 12 links at 25 GB/s
    (per direction): 12 × 25 = 300 GB/s, × 0.82 = 246.0 GB/s, over a domain of all 8."""
    files = {"nvidia-smi-nvlink-s.txt": PUBLIC / "nvlink-status" / "nvidia-smi-nvlink-s.txt"}
    machine = machine_from_facts(_facts(make_bundle, files))
    assert (machine.gpu_name, machine.gpus, machine.nvlink_domain, machine.intra_node_busbw_gb_per_s) == (
        "A100 SXM4 80GB", 8, 8, 246.0)


def test_the_topology_of_nvlink_pairs_gives_gpu0_a_domain_of_two(make_bundle):
    """tests/fixtures/boards/ac922-v100-nv3-pairs-topo.txt (IBM AC922): GPU0-GPU1 NV3 and GPU2-GPU3 NV3, SYS across:
    GPU 0 reaches itself and GPU 1, domain 2 (the pair GPU2-GPU3 is not GPU 0's). The matrix names no model:
    `unknown GPU`, no table row, no busbw."""
    files = {"nvidia-smi-topo.txt": BOARDS / "ac922-v100-nv3-pairs-topo.txt"}
    machine = machine_from_facts(_facts(make_bundle, files))
    assert (machine.gpu_name, machine.gpus, machine.nvlink_domain, machine.intra_node_busbw_gb_per_s) == (
        "unknown GPU", 4, 2, None)
