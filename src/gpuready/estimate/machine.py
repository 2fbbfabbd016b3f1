"""The machine a plan is for: this one (live facts), a bundle, or a description such as `8xH100-SXM`.

Everything plan and launch need to know about it, with where each figure came from: GPU model and count,
memory, the NVLink domain (how many GPUs talk over NVLink/NVSwitch), peak dense TFLOP/s, board power, and the
bus bandwidth collectives should reach inside a node (validate's expectation, or a measured figure).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from gpuready.i18n import sentence
from gpuready.knowledge import GpuSpec, gpu_spec, load_table
from gpuready.estimate import expect
from gpuready.options import MAX_GPUS_PER_NODE, MAX_NODES

DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8")
# gpus.toml `nvlink_via` values whose links all reach every GPU of the node (HGX NVSwitch, Grace Blackwell trays)
_SWITCHED = ("nvswitch", "nvlink_switch_system")


class MachineError(ValueError):
    """A description that names no known GPU, or a count that makes no sense (a usage error)."""


@dataclass(frozen=True, kw_only=True)
class Machine:
    gpu_name: str
    """The table's model name (`H100 SXM`), or the name nvidia-smi gave where the table does not know it."""
    gpus_per_node: int
    nodes: int = 1
    memory_bytes_per_gpu: int | None = None
    nvlink_domain: int = 1
    """GPUs each GPU reaches over NVLink/NVSwitch, itself included (1: PCIe only)."""
    peak_tflops: dict[str, float] = field(default_factory=dict)
    """Dense peak by dtype (`bf16`, `fp16`, `tf32`, `fp32`, `fp8`), from knowledge/gpus.toml."""
    gpu_tdp_w: float | None = None
    intra_node_busbw_gb_per_s: float | None = None
    """all_reduce busbw collectives should reach inside a node (validate's expectation for this topology)."""
    inter_node_busbw_gb_per_s: float | None = None
    """Between nodes, where known (a measured figure, or --inter-node-gbps); None: unknown."""
    source: str = ""
    """`live`, `bundle PATH` or `description TEXT`: where the facts came from."""
    measured: dict[str, Any] = field(default_factory=dict)
    """Figures from a validate/bench report given to plan (`matmul_tflops_bf16`, `all_reduce_busbw_gb_per_s`)."""

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


_DESCRIPTION = re.compile(r"^\s*(?:(?P<count>\d+)\s*[x×*]\s*)?(?P<model>.+?)\s*(?:\(\s*(?P<nodes>\d+)\s*nodes?\s*\))?\s*$",
                          re.IGNORECASE)


def machine_from_description(text: str, nodes: int = 1) -> Machine:
    """`8xH100-SXM`, `2x RTX 4090`, `8xH200 (2 nodes)`: the count is per node; MachineError for an unknown GPU."""
    match = _DESCRIPTION.match(text or "")
    if not match:
        raise MachineError(sentence("error.machine.format", text=repr(text)))
    count_text, nodes_text = match.group("count") or "1", match.group("nodes") or str(nodes)
    count = int(count_text) if len(count_text) <= 12 else MAX_GPUS_PER_NODE + 1
    nodes = int(nodes_text) if len(nodes_text) <= 12 else MAX_NODES + 1
    if not (1 <= count <= MAX_GPUS_PER_NODE and 1 <= nodes <= MAX_NODES):
        raise MachineError(sentence("error.machine.counts", text=repr(text[:80]), gpus=MAX_GPUS_PER_NODE,
                                    nodes=MAX_NODES))
    row = _row_for(match.group("model"))
    if isinstance(row, list):
        raise MachineError(sentence("error.machine.ambiguous", text=repr(text), model=repr(match.group("model")),
                                    matches=", ".join(candidate["model"] for candidate in row),
                                    example=f"{count_text}x{row[0]['model'].replace(' ', '-')}"))
    if row is None:
        known = ", ".join(sorted({r["model"] for r in load_table("gpus")["gpu"]}))
        raise MachineError(sentence("error.machine.unknown_gpu", text=repr(text), model=repr(match.group("model")),
                                    known=known))
    return _from_row(row, row["model"], count, nodes, f"description {text.strip()}",
                     nvlink_domain=count if row.get("nvlink_via") in _SWITCHED else
                     (2 if row.get("nvlink_via") == "bridge" and count >= 2 else 1))


def machine_from_facts(facts: Any, nodes: int = 1, source: str = "live") -> Machine:
    """From facts.types.Facts (live or a bundle); MachineError where the facts name no GPU."""
    gpus = list(getattr(facts, "gpus", None) or [])
    if not gpus:
        raise MachineError(sentence("error.machine.no_gpu"))
    first = gpus[0]
    spec = gpu_spec(first.name)
    row = spec.row if spec else {}
    domain = _nvlink_domain(facts, row.get("nvlink_via"))
    machine = _from_row(row, spec.model if spec else (first.name or "unknown GPU"), len(gpus), nodes, source,
                        nvlink_domain=domain)
    if first.memory_total_bytes:  # what the board reports beats the marketing figure
        machine = dataclasses.replace(machine, memory_bytes_per_gpu=first.memory_total_bytes)
    if getattr(first, "power_limit_w", None):
        machine = dataclasses.replace(machine, gpu_tdp_w=first.power_limit_w)
    return machine


def _row_for(model: str) -> dict[str, Any] | list[dict[str, Any]] | None:
    """The gpus.toml row for a loose model name (`H100-SXM`, `h100 sxm`, `RTX4090`, `H200` as nvidia-smi names the
    SXM board): the row whose model is that name, else the row whose nvidia-smi pattern matches it, else the only
    row whose model holds every word of it (`4090`). Several such rows (`H100`: SXM, PCIe, NVL) come back as a
    list, for the caller to name; None where nothing matches."""
    wanted = re.sub(r"[\s_-]+", " ", model).strip()
    candidates = [wanted, wanted.replace("RTX", "RTX "), f"NVIDIA {wanted}"]
    rows = load_table("gpus")["gpu"]
    for row in rows:
        if re.sub(r"[\s_-]+", " ", row["model"]).lower() == wanted.lower():
            return row
    for name in candidates:
        spec = gpu_spec(name)
        if spec is not None:
            return spec.row
    words = set(wanted.lower().split())
    holding = [row for row in rows if words and words <= set(re.sub(r"[\s_-]+", " ", row["model"]).lower().split())]
    if len(holding) == 1:
        return holding[0]
    return sorted(holding, key=lambda row: row["model"]) or None


def _from_row(row: dict[str, Any], name: str, count: int, nodes: int, source: str, nvlink_domain: int) -> Machine:
    peaks = {}
    for dtype in DTYPES:
        value = row.get(f"peak_tflops_{dtype}_dense", row.get(f"peak_tflops_{dtype}"))
        if isinstance(value, (int, float)):
            peaks[dtype] = float(value)
    memory = row.get("memory_gb")
    return Machine(gpu_name=name, gpus_per_node=count, nodes=nodes,
                   memory_bytes_per_gpu=int(memory * 1e9) if isinstance(memory, (int, float)) else None,
                   nvlink_domain=max(1, min(nvlink_domain, count)), peak_tflops=peaks,
                   gpu_tdp_w=row.get("tdp_w"), intra_node_busbw_gb_per_s=_intra_busbw(row, count, nvlink_domain),
                   source=source)


def _intra_busbw(row: dict[str, Any], count: int, nvlink_domain: int) -> float | None:
    """validate's expected all_reduce busbw inside one node of this board (None where it cannot say)."""
    if count < 2 or not row:
        return None
    if nvlink_domain >= count and row.get("nvlink_gb_per_s"):
        return round(expect.nvlink_ring_busbw(GpuSpec(model=row["model"], row=row)).value, 1)
    if row.get("pcie_gen") and row.get("pcie_width"):
        rate = expect.pcie_rate_gb_per_s((row["pcie_gen"], row["pcie_width"]))
        return round(expect.pcie_ring_busbw(rate).value, 1)
    return None


def _nvlink_domain(facts: Any, nvlink_via: str | None) -> int:
    """GPUs reachable over NVLink from GPU 0, itself included: from the topology matrix, else from `nvlink -s`'s
    active links. Those do not name the peer a link reaches, so they make one node-wide domain only on boards wired
    through NVSwitch (gpus.toml nvlink_via); a bridge joins pairs (H100 NVL, RTX NVLink bridges; H200 NVL's 4-way
    bridge cannot be told from its 2-way one), and an SXM2 cube-mesh links some pairs only: 2, the domain a bridge
    or a direct link is sure of."""
    topology = getattr(facts, "topology", None)
    links = getattr(topology, "links", None) if topology is not None else None
    if links:
        first = min(a for a, _ in links)
        return 1 + len({b for (a, b), kind in links.items() if a == first and str(kind).startswith("NV")})
    gpus = list(getattr(facts, "gpus", None) or [])

    def on_nvlink(gpu: Any) -> bool:  # links listed `<inactive>` are no NVLink at all
        return any(link.active for link in getattr(gpu, "nvlinks", None) or [])

    if not gpus or not on_nvlink(gpus[0]):
        return 1
    linked = sum(map(on_nvlink, gpus))
    return linked if nvlink_via in _SWITCHED else min(2, linked)

