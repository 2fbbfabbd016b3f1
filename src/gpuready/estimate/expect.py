"""What this hardware should reach: physical figures from knowledge/ times measured efficiencies."""

from __future__ import annotations

from typing import Any

import re
from dataclasses import dataclass

from gpuready.facts.types import Facts, GpuFacts
from gpuready.knowledge import gpu_spec, load_table, thresholds


@dataclass(frozen=True)
class Expected:
    value: float
    source: str


def gpu_by_bus(facts: Facts | None, bus_id: str | None) -> GpuFacts | None:
    if facts is None or not bus_id:
        return None
    return next((gpu for gpu in facts.gpus or [] if gpu.bus_id == bus_id), None)


def efficiency(spec, key: str) -> tuple[float, str] | None:
    """(measured/peak ratio, its source) for this GPU's architecture: Hopper from [compute_efficiency]
    (measured on an H200), others from [compute_efficiency_arch.<arch>] where published measurements
    exist, else the conservative [compute_efficiency_unmeasured] default, marked `unmeasured`."""
    arch = spec.get("arch") if spec else None
    hopper = thresholds("compute_efficiency")
    if arch == hopper.get("arch") and key in hopper:
        return hopper[key], f"{arch}: {hopper['source']}"
    table = thresholds("compute_efficiency_arch").get(arch or "", {})
    if key in table:
        return table[key], f"{arch}: {table['source']}"
    default = thresholds("compute_efficiency_unmeasured")
    if key not in default:
        return None
    return default[key], f"unmeasured for {arch or 'this architecture'} {key}: {default['source']}"


def matmul_tflops(gpu_name: str | None, dtype: str) -> Expected | None:
    spec = gpu_spec(gpu_name)
    key = "peak_tflops_fp32" if dtype == "fp32" else f"peak_tflops_{dtype}_dense"
    peak = spec.get(key) if spec else None
    ratio = efficiency(spec, dtype) if peak else None
    if not peak or ratio is None:
        return None
    return Expected(peak * ratio[0], f"{spec.model} {key} {peak} × {ratio[0]} ({ratio[1]}; specs: {spec.source})")


def memory_copy(gpu_name: str | None) -> Expected | None:
    spec = gpu_spec(gpu_name)
    bandwidth = spec.get("memory_bw_gb_per_s") if spec else None
    ratio = efficiency(spec, "memory_copy") if bandwidth else None
    if not bandwidth or ratio is None:
        return None
    return Expected(bandwidth * ratio[0], f"{spec.model} memory {bandwidth} GB/s × {ratio[0]} ({ratio[1]})")


def pcie_link(gpu: GpuFacts | None, gpu_name: str | None) -> tuple[int, int] | None:
    """(generation, width) of the GPU's link at its best: what a busy link should run at."""
    spec = gpu_spec(gpu_name)
    generation = (gpu.pcie_gen_max if gpu else None) or (spec.get("pcie_gen") if spec else None)
    width = (gpu.pcie_width_max if gpu else None) or (spec.get("pcie_width") if spec else None)
    return (int(generation), int(width)) if generation and width else None


def pcie_rate_gb_per_s(link: tuple[int, int]) -> float:
    return thresholds("transfer")["gb_per_s_per_lane"][str(link[0])] * link[1]


def host_transfer(gpu: GpuFacts | None, gpu_name: str | None) -> Expected | None:
    link = pcie_link(gpu, gpu_name)
    if link is None:
        return None
    table = thresholds("transfer")
    return Expected(pcie_rate_gb_per_s(link) * table["efficiency"],
                    f"PCIe Gen{link[0]} x{link[1]} {pcie_rate_gb_per_s(link):.1f} GB/s × {table['efficiency']} "
                    f"({table['source']})")


def _nvlink_per_link_gb_per_s(gpu_name: str | None) -> float | None:
    spec = gpu_spec(gpu_name)
    if not spec or not spec.get("nvlink_gb_per_s") or not spec.get("nvlink_links"):
        return None
    return spec.get("nvlink_gb_per_s") / 2 / spec.get("nvlink_links")  # per direction


def pair_link(facts: Facts | None, first: GpuFacts | None, second: GpuFacts | None) -> str | None:
    if facts is None or facts.topology is None or first is None or second is None:
        return None
    return facts.topology.links.get((first.index, second.index))


def p2p_copy(facts: Facts | None, first: GpuFacts | None, second: GpuFacts | None,
             gpu_name: str | None) -> Expected | None:
    link = pair_link(facts, first, second)
    table = thresholds("p2p")
    if link and (match := re.fullmatch(r"NV(\d+)", link)):
        per_link = _nvlink_per_link_gb_per_s(gpu_name)
        if per_link:
            rate = int(match.group(1)) * per_link
            return Expected(rate * table["nvlink_efficiency"],
                            f"{link}: {rate:.0f} GB/s per direction × {table['nvlink_efficiency']} ({table['source']})")
        return None
    links = [pcie_link(gpu, gpu_name) for gpu in (first, second)]
    if all(links):
        slowest = min(pcie_rate_gb_per_s(link) for link in links)
        blocked = host_path_pairs(facts, [first, second])
        if blocked:
            host = thresholds("p2p_host_path")
            return Expected(slowest * host["pcie_efficiency"],
                            f"copy staged through host memory ({blocked}) {slowest:.1f} GB/s × "
                            f"{host['pcie_efficiency']} ({host['source']})")
        return Expected(slowest * table["pcie_efficiency"],
                        f"PCIe {slowest:.1f} GB/s × {table['pcie_efficiency']} ({table['source']})")
    return None


def nccl_busbw(facts: Facts | None, gpus: list[GpuFacts], gpu_name: str | None, *, nodes: int = 1,
               gpus_per_node: int = 0, collective: str | None = None) -> Expected | None:
    """A ring over the slowest link inside one node: NVLink per GPU where every pair has it, else PCIe; across
    `nodes` > 1, the floor the nodes' NICs set (internode_busbw_floor_gb_per_s)."""
    if nodes > 1:
        return internode_busbw_floor_gb_per_s(facts, nodes, gpus_per_node, collective)
    if len(gpus) < 2:
        return None
    table = thresholds("nccl")
    links = [pair_link(facts, a, b) for a in gpus for b in gpus if a is not b]
    spec = gpu_spec(gpu_name)
    if links and all(link and link.startswith("NV") for link in links) and spec and spec.get("nvlink_gb_per_s"):
        return nvlink_ring_busbw(spec, min(int(link[2:]) for link in links))
    pcie = [pcie_link(gpu, gpu_name) for gpu in gpus]
    if all(pcie):
        slowest = min(pcie_rate_gb_per_s(link) for link in pcie)
        blocked = host_path_pairs(facts, gpus)
        if blocked:
            host = thresholds("nccl_host_path")
            return Expected(slowest * host["pcie_efficiency"],
                            f"ring over PCIe through host memory ({blocked}) {slowest:.1f} GB/s × "
                            f"{host['pcie_efficiency']} ({host['source']})")
        return pcie_ring_busbw(slowest)
    return None


def nvlink_ring_busbw(spec: Any, slowest_links: int | None = None) -> Expected:
    """A ring over NVLink: the board's per-direction NVLink rate (scaled where a pair has fewer links) × efficiency."""
    table = thresholds("nccl")
    per_direction = spec.get("nvlink_gb_per_s") / 2
    links = spec.get("nvlink_links") or slowest_links or 1
    rate = per_direction * min(1.0, (slowest_links or links) / links)
    return Expected(rate * table["nvlink_efficiency"], f"NVLink {rate:.0f} GB/s per GPU per direction × "
                                                       f"{table['nvlink_efficiency']} ({table['source']})")


def pcie_ring_busbw(rate_gb_per_s: float) -> Expected:
    """A ring over PCIe with P2P: the slowest link's rate × efficiency."""
    table = thresholds("nccl")
    return Expected(rate_gb_per_s * table["pcie_efficiency"], f"ring over PCIe {rate_gb_per_s:.1f} GB/s × "
                                                              f"{table['pcie_efficiency']} ({table['source']})")


def host_path_pairs(facts: Facts | None, gpus: list[GpuFacts | None]) -> str | None:
    """Why some hop of a ring over these GPUs has no peer-to-peer path and goes through host memory:
    a pair the driver reports without P2P read (`nvidia-smi topo -p2p r` / NVML not OK), or a pair
    across CPU sockets (SYS) that the driver does not report OK. None where every pair has P2P."""
    gpus = [gpu for gpu in gpus if gpu is not None]
    if facts is None:
        return None
    p2p = facts.p2p_read or {}
    no_p2p, sys_pairs = [], []
    for a in gpus:
        for b in gpus:
            if a.index is None or b.index is None or a.index >= b.index:
                continue
            status = p2p.get((a.index, b.index)) or p2p.get((b.index, a.index))
            if status is not None and status != "OK":
                no_p2p.append(f"GPU{a.index}-GPU{b.index} {status}")
            elif status is None and pair_link(facts, a, b) == "SYS":
                sys_pairs.append(f"GPU{a.index}-GPU{b.index}")
    reasons = []
    if no_p2p:
        reasons.append(f"no P2P: {', '.join(no_p2p[:3])}{' …' if len(no_p2p) > 3 else ''}")
    if sys_pairs:
        reasons.append(f"SYS pairs: {', '.join(sys_pairs[:3])}{' …' if len(sys_pairs) > 3 else ''}")
    return "; ".join(reasons) or None


@dataclass(frozen=True)
class NodeNics:
    """The RDMA NICs one node has, as the inputs show them."""
    model: str | None
    """The most common model (knowledge/nics.toml), None where only link rates are known."""
    count: int
    rates_gbit_per_s: tuple[float, ...]
    """Per card or port, fastest first: the link rate where known, else the model's top rate."""
    rate_known: bool
    source: str
    """Where the rates come from (the model's product brief, or `ibstat/ibv_devinfo/sysfs`)."""


@dataclass(frozen=True)
class InternodeExpected(Expected):
    """The floor (`value`) a run across nodes must reach, and how it was derived."""
    nodes: int
    gpus_per_node: int
    nics: NodeNics
    nics_used: int
    ceiling_gb_per_s: float
    fraction: float


def nic_model(name: str) -> dict[str, Any] | None:
    """The knowledge/nics.toml row for an lspci device name, or None for a model the table does not know."""
    return next((row for row in load_table("nics")["nic"] if re.search(row["match"], name)), None)


def _cards(devices: list[tuple[str, str | None, int]]) -> list[dict[str, Any]]:
    """The cards among (name, address, function) of one listing: physical functions 0 (a dual-port card shows its
    ports as functions 0 and 1 of one slot), else, in a VM given only SR-IOV functions, those."""
    known = [(row, name, function) for name, _, function in devices if (row := nic_model(name)) is not None]
    physical = [row for row, name, function in known if "Virtual Function" not in name and function == 0]
    return physical or [row for row, name, _ in known if "Virtual Function" in name]


def _listings(facts: Facts) -> list[list[tuple[str, str | None, int]]]:
    """Each input's ConnectX devices as (name, address, function): the lspci bundle file's and any input's lines."""
    listings = []
    if facts.pci_devices:
        listings.append([(device.description, device.address, int(device.address[-1]))
                         for device in facts.pci_devices if device.address[-1:].isdigit()])
    nics = facts.logs.nics if facts.logs is not None else None
    for devices in (nics.by_source.values() if nics is not None else ()):
        listings.append([(device.name, device.address, device.function) for device in devices])
    return listings


def _nccl_ib_devices(facts: Facts) -> int | None:
    """How many IB/RoCE devices NCCL said it uses on a node (`NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB …`)."""
    nccl = facts.logs.nccl if facts.logs is not None else None
    counts = [len(re.findall(r"\[\d+\]\S", line.text.split("Using", 1)[-1]))
              for line in (nccl.ib_hosts.values() if nccl is not None else ())]
    return max((count for count in counts if count), default=None)


def node_nics(facts: Facts | None) -> NodeNics | None:
    """One node's RDMA NICs: the active ports' link rates where ibstat/ibv_devinfo/sysfs show them, else the cards
    lspci lists (the listing with the most) at their model's top rate. None where the inputs show neither."""
    if facts is None:
        return None
    cards = max((_cards(listing) for listing in _listings(facts)), key=len, default=[])
    model = max(((row["model"], sum(1 for each in cards if each is row)) for row in cards),
                key=lambda pair: pair[1], default=(None, 0))[0]
    ports = [port.rate_gbit_per_s for port in facts.ib_ports or []
             if port.rate_gbit_per_s and (port.state or "").upper().endswith("ACTIVE")]
    used_by_nccl = _nccl_ib_devices(facts)
    if ports:
        rates = sorted(ports, reverse=True)[:used_by_nccl or len(ports)]
        return NodeNics(model=model, count=len(rates), rates_gbit_per_s=tuple(rates), rate_known=True,
                        source="link rate of the active ports (ibstat / ibv_devinfo / sysfs)")
    if not cards:
        return None
    rows = sorted(cards, key=lambda row: row["top_gbit_per_s"], reverse=True)[:used_by_nccl or len(cards)]
    sources = "; ".join(dict.fromkeys(row["source"] for row in rows))
    return NodeNics(model=model, count=len(rows), rates_gbit_per_s=tuple(float(row["top_gbit_per_s"]) for row in rows),
                    rate_known=False, source=f"the model's top rate ({sources})")


def internode_busbw_floor_gb_per_s(facts: Facts | None, nodes: int, gpus_per_node: int,
                                   collective: str | None) -> InternodeExpected | None:
    """The busbw (GB/s) a run over `nodes` nodes must reach at large sizes: every ring step crosses each node's NICs,
    so busbw ≤ the node's NICs (one per GPU at most; one for alltoall, which does not aggregate NICs) × their
    large-message rate; the floor is a fraction of that bound ([internode] in knowledge/nics.toml)."""
    nics = node_nics(facts)
    if nics is None or nodes < 2 or gpus_per_node < 1:
        return None
    table = load_table("nics")["internode"]
    used = 1 if collective == "all_to_all" else min(nics.count, gpus_per_node)
    per_nic = [rate / 8 * table["large_message_efficiency"] for rate in nics.rates_gbit_per_s[:used]]
    ceiling = sum(per_nic)
    fraction = table["floor_fraction_known_rate" if nics.rate_known else "floor_fraction_top_rate"]
    rates = "/".join(f"{rate:g}" for rate in dict.fromkeys(nics.rates_gbit_per_s[:used]))
    source = (f"{nodes} nodes × {gpus_per_node} ranks: {used} of {nics.count} {nics.model or 'RDMA'} NIC(s) per node at "
              f"{rates} Gb/s ({nics.source}) × {table['large_message_efficiency']} = {ceiling:.1f} GB/s per node; "
              f"floor {fraction} × that ({table['source']})")
    return InternodeExpected(value=ceiling * fraction, source=source, nodes=nodes, gpus_per_node=gpus_per_node,
                             nics=nics, nics_used=used, ceiling_gb_per_s=ceiling, fraction=fraction)
