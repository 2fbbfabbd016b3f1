"""What this hardware should reach: physical figures from knowledge/ times measured efficiencies."""

from __future__ import annotations

from typing import Any

import re
from dataclasses import dataclass

from gpuready.facts.types import Facts, GpuFacts
from gpuready.knowledge import gpu_spec, thresholds


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


def nccl_busbw(facts: Facts | None, gpus: list[GpuFacts], gpu_name: str | None) -> Expected | None:
    """A ring over the slowest link inside one node: NVLink per GPU where every pair has it, else PCIe."""
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
