"""plan's inputs: model shapes (parameter counts against the published ones) and the machine (a description, or the
facts of a recorded bundle)."""

import json

import pytest

from gpuready.evidence.reader import read_bundle
from gpuready.evidence.build import build_facts
from gpuready.shapes import PRESETS, ModelShape, ShapeError, shape_from_hf_config
from gpuready.estimate.machine import MachineError, machine_from_description, machine_from_facts

from conftest import FIXTURES, PUBLIC

# Parameter counts as the Hugging Face checkpoints report them (safetensors metadata on each model page:
# openai-community/gpt2, gpt2-medium, gpt2-large, gpt2-xl; meta-llama/Llama-2-7b-hf, Llama-2-13b-hf,
# Llama-3.1-8B, Llama-3.1-70B).
PUBLISHED = {"gpt2-small": 124_439_808, "gpt2-medium": 354_823_168, "gpt2-large": 774_030_080,
             "gpt2-xl": 1_557_611_200, "llama2-7b": 6_738_415_616, "llama2-13b": 13_015_864_320,
             "llama3-8b": 8_030_261_248, "llama3-70b": 70_553_706_496}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameter_counts_match_the_published_checkpoints(name):
    assert PRESETS[name].parameters() == PUBLISHED[name]


def test_hf_config_json_of_both_families(tmp_path):
    gpt2 = tmp_path / "gpt2" / "config.json"
    gpt2.parent.mkdir()
    # openai-community/gpt2 config.json (the keys that matter, values as published)
    gpt2.write_text(json.dumps({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
                                "vocab_size": 50257, "n_positions": 1024, "n_inner": None}))
    assert shape_from_hf_config(gpt2).parameters() == PUBLISHED["gpt2-small"]
    llama = tmp_path / "llama" / "config.json"
    llama.parent.mkdir()
    # meta-llama/Llama-3.1-8B config.json
    llama.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
                                 "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                                 "intermediate_size": 14336, "max_position_embeddings": 131072,
                                 "tie_word_embeddings": False}))
    assert shape_from_hf_config(llama).parameters() == PUBLISHED["llama3-8b"]
    (tmp_path / "bad.json").write_text('{"model_type": "bert", "num_layers": 2}')
    with pytest.raises(ShapeError, match="neither a GPT-2"):
        shape_from_hf_config(tmp_path / "bad.json")
    with pytest.raises(ShapeError, match="not a multiple"):
        ModelShape(layers=2, hidden=100, heads=3, vocab=10)


def test_machine_descriptions():
    h100 = machine_from_description("8xH100-SXM")
    assert (h100.gpu_name, h100.gpus, h100.nvlink_domain, h100.memory_bytes_per_gpu) == ("H100 SXM", 8, 8, 80 * 10**9)
    assert h100.peak_tflops["bf16"] == 989.0 and h100.gpu_tdp_w == 700
    pair = machine_from_description("2x RTX 4090")
    assert (pair.gpu_name, pair.nvlink_domain) == ("RTX 4090", 1)
    two_nodes = machine_from_description("8xH200 (2 nodes)")
    assert (two_nodes.gpus_per_node, two_nodes.nodes, two_nodes.gpus) == (8, 2, 16)
    with pytest.raises(MachineError, match="no GPU of gpuready's table matches"):
        machine_from_description("8xTPUv5")
    with pytest.raises(MachineError, match="from 1 to"):
        machine_from_description("0xH100-SXM")


def test_machines_from_recorded_bundles(tmp_path):
    h200 = machine_from_facts(build_facts(read_bundle(FIXTURES / "h200-docker-collect")), source="bundle")
    assert (h200.gpu_name, h200.gpus, h200.nvlink_domain) == ("H200 SXM", 1, 1)
    assert h200.memory_bytes_per_gpu == 143771 * 2**20  # what the board reports (nvidia-smi FB total), not 141 GB
    # one DGX H100's `nvidia-smi` and `topo -m` (the public folder also holds outputs of other machines)
    for name in ("nvidia-smi-topo.txt", "nvidia-smi-550.90.07.txt"):
        (tmp_path / name).write_text((PUBLIC / "dgx-h100-nvswitch" / name).read_text())
    dgx = machine_from_facts(build_facts(read_bundle(tmp_path)), source="bundle")
    assert (dgx.gpu_name, dgx.gpus, dgx.nvlink_domain, dgx.gpu_tdp_w) == ("H100 SXM", 8, 8, 700.0)


def _machine_from_nvlink_status(make_bundle, text: str):
    return machine_from_facts(build_facts(read_bundle(make_bundle({"nvidia-smi-nvlink-s.txt": text}))))


def test_nvlink_status_without_a_matrix_counts_active_links_and_bridged_pairs(make_bundle):
    """`nvidia-smi nvlink -s` names no peer per link, so without `topo -m` only an NVSwitch board makes one node-wide
    domain (the 8 A100 SXM4 case is test_mutants_plan_machine's). tests/fixtures/boards/rtx3090-4gpu-one-bridge-nvlink-s.txt:
    GPU0/GPU1 bridged (4 active links each), GPU2/GPU3 every link <inactive>: GPU 0's domain is its pair, 2 of 4 GPUs,
    so the 4-GPU ring runs over PCIe Gen4 x16: 16 × 1.969 GB/s = 31.5 × 0.75 = 23.6 GB/s (was a domain of 4 and the
    bridge's 46.1 GB/s). The two unbridged cards alone (every link inactive): no NVLink at all, domain 1, the same PCIe
    figure. Four H100 NVL (tests/fixtures/boards/h100-nvl-4gpu-nvlink-s.txt, every link active): bridges join pairs,
    domain 2, the ring over PCIe Gen5 x16: 16 × 3.938 = 63.0 × 0.75 = 47.3 GB/s (was 4 and 246.0)."""
    bridged = (FIXTURES / "boards" / "rtx3090-4gpu-one-bridge-nvlink-s.txt").read_text()
    machine = _machine_from_nvlink_status(make_bundle, bridged)
    assert (machine.gpus, machine.nvlink_domain, machine.intra_node_busbw_gb_per_s) == (4, 2, 23.6)
    unbridged = bridged[bridged.index("GPU 2:"):]
    machine = _machine_from_nvlink_status(make_bundle, unbridged)
    assert (machine.gpus, machine.nvlink_domain, machine.intra_node_busbw_gb_per_s) == (2, 1, 23.6)
    nvl = (FIXTURES / "boards" / "h100-nvl-4gpu-nvlink-s.txt").read_text()
    machine = _machine_from_nvlink_status(make_bundle, nvl)
    assert (machine.gpu_name, machine.gpus, machine.nvlink_domain, machine.intra_node_busbw_gb_per_s) == (
        "H100 NVL", 4, 2, 47.3)
