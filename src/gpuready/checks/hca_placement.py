"""Where each RDMA rail sits against the GPUs: a GPU whose nearest rail is across the CPU interconnect (`SYS` in
`nvidia-smi topo -m`, or no rail on its NUMA node). Judged for multi-node only (a `network.*` id).

NCCL pairs each GPU with its nearest NIC and uses GPUDirect RDMA only up to a distance (NCCL_NET_GDR_LEVEL); a GPU
whose nearest NIC is across the socket sends through the other CPU, or through host memory."""

from __future__ import annotations

from gpuready.checks.ib_rails import is_active, rails
from gpuready.checks.registry import CheckContext, check
from gpuready.facts.types import GpuFacts, Topology
from gpuready.i18n import said
from gpuready.model import Finding

_GDR_REF = ("NCCL environment variables, NCCL_NET_GDR_LEVEL (the maximum GPU–NIC distance for GPUDirect RDMA: PIX, PXB, "
            "PHB, SYS; NCCL picks one by default): "
            "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net-gdr-level")
_TOPO_REF = "nvidia-smi topo -m (GPU–NIC links and the NIC Legend)"
_SYSFS_NUMA_REF = "Linux sysfs: /sys/class/infiniband/<dev>/device/numa_node (-1: the platform does not say)"
_NEAREST_FIRST = ("PIX", "PXB", "PHB", "NODE", "SYS")
"""nvidia-smi's PCIe distances, nearest first; SYS crosses the SMP interconnect between NUMA nodes (QPI/UPI)."""
_ACROSS = "SYS"


def _rail_devices(context: CheckContext) -> list[str]:
    """The HCAs with an Active rail, in name order."""
    return sorted({port.device for port in rails(context.facts.ib_ports) if is_active(port)})


@check("network.hca_placement", needs=("ib_ports",))
def hca_placement(context: CheckContext) -> list[Finding]:
    """A GPU whose nearest RDMA rail is across the CPU interconnect, on a machine with at least two rails."""
    devices = _rail_devices(context)
    if len(devices) < 2:
        active = {port.device for port in context.facts.ib_ports or [] if is_active(port)}
        return [context.skip(said("network.hca_placement.few_rails", count=len(active)))]
    nearest = _nearest_by_topology(context.facts.topology, devices)
    if nearest:
        return _judge_topology(context, nearest)
    return _judge_numa(context, devices)


def _nearest_by_topology(topology: Topology | None, devices: list[str]) -> dict[int, tuple[str, str]]:
    """GPU index → (nearest rail, its link) for the GPUs the matrix shows; {} where it names none of the rails."""
    if topology is None:
        return {}
    columns = {topology.nic_names.get(label, label): links for label, links in topology.nics.items()}
    railed = {device: columns[device] for device in devices if device in columns}
    nearest: dict[int, tuple[str, str]] = {}
    for device, links in railed.items():
        for gpu, link in links.items():
            if link in _NEAREST_FIRST and (gpu not in nearest or _rank(link) < _rank(nearest[gpu][1])):
                nearest[gpu] = (device, link)
    return nearest


def _rank(link: str) -> int:
    return _NEAREST_FIRST.index(link)


def _gpu(context: CheckContext, index: int) -> GpuFacts | None:
    return next((gpu for gpu in context.gpus if gpu.index == index), None)


def _judge_topology(context: CheckContext, nearest: dict[int, tuple[str, str]]) -> list[Finding]:
    across = [(gpu, device, link) for gpu, (device, link) in sorted(nearest.items()) if link == _ACROSS]
    refs = [_GDR_REF, _TOPO_REF]
    if across:
        return [context.warn(said("network.hca_placement.across_socket", gpu=f"GPU{gpu}", nic=device, link=link),
                             gpu=_gpu(context, gpu), nic=device, observed=f"GPU{gpu} → {device}: {link}",
                             expected="PIX, PXB, PHB or NODE", refs=refs)
                for gpu, device, link in across]
    placement = ", ".join(f"GPU{gpu} → {device} {link}" for gpu, (device, link) in sorted(nearest.items()))
    return [context.passed(said("network.hca_placement.near", placement=placement), observed=placement, refs=refs)]


def _gpu_numa(context: CheckContext) -> dict[int, int]:
    """GPU index → NUMA node, from the driver (nvidia-smi -q / NVML) or topo -m's NUMA Affinity column."""
    topology = context.facts.topology
    nodes: dict[int, int] = {}
    for gpu in context.gpus:
        node = gpu.numa_node
        if node is None and topology is not None:
            column = (topology.numa_affinity.get(gpu.index) or "").strip()
            node = int(column) if column.isdigit() else None
        if node is not None and node >= 0:
            nodes[gpu.index] = node
    return nodes


def _judge_numa(context: CheckContext, devices: list[str]) -> list[Finding]:
    rail_nodes = sorted({port.numa_node for port in context.facts.ib_ports or []
                         if port.device in devices and port.numa_node is not None})
    gpu_nodes = _gpu_numa(context)
    if not rail_nodes or not gpu_nodes:
        return [context.skip(said("network.hca_placement.unplaced"))]
    refs = [_GDR_REF, _SYSFS_NUMA_REF]
    nodes = ", ".join(map(str, rail_nodes))
    far = [(index, node) for index, node in sorted(gpu_nodes.items()) if node not in rail_nodes]
    if far:
        return [context.warn(said("network.hca_placement.numa_no_rail", gpu=f"GPU{index}", node=node, nodes=nodes),
                             gpu=_gpu(context, index), observed=f"GPU{index}: NUMA {node}; rails: NUMA {nodes}",
                             expected=f"a rail on NUMA node {node}", refs=refs)
                for index, node in far]
    placement = ", ".join(f"GPU{index} NUMA {node}" for index, node in sorted(gpu_nodes.items()))
    return [context.passed(said("network.hca_placement.near_numa", placement=placement, nodes=nodes),
                           observed=placement, refs=refs)]
