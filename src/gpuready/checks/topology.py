"""How the GPUs are connected: the matrix, NUMA crossings, P2P support, NVLink state, NVSwitch fabric."""

from __future__ import annotations

import re

from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.types import GpuFacts
from gpuready.knowledge import gpu_spec
from gpuready.model import Finding

_TOPO_REF = "nvidia-smi topo -m legend; NCCL topology: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-p2p-level"
_P2P_MEANING = {"CNS": "chipset not supported", "GNS": "GPU not supported", "TNS": "topology not supported",
                "NS": "not supported", "DNS": "disabled by the driver (regkey)", "U": "unknown"}


def _gpu_by_index(context: CheckContext, index: int) -> GpuFacts | None:
    return next((gpu for gpu in context.gpus if gpu.index == index), None)


def _pairs(links: dict[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    return {(i, j): link for (i, j), link in links.items() if i < j}


def _nvlink_count(link: str) -> int:
    match = re.fullmatch(r"NV(\d+)", link)
    return int(match.group(1)) if match else 0


@check("topology.matrix", "GPU×GPU connection matrix", needs=("topology",))
def topology_matrix(context: CheckContext) -> list[Finding]:
    topology = context.facts.topology
    pairs = _pairs(topology.links)
    matrix = {f"GPU{i}-GPU{j}": link for (i, j), link in sorted(pairs.items())}
    if not pairs:
        return [context.passed("One GPU: no GPU-to-GPU links to judge.", observed=matrix)]
    without_nvlink = {pair: link for pair, link in pairs.items() if not link.startswith("NV")}
    if not without_nvlink:
        counts = sorted({_nvlink_count(link) for link in pairs.values()})
        return [context.passed(f"Every GPU pair is joined by NVLink ({', '.join(f'NV{c}' for c in counts)}): good for "
                               "data, tensor and pipeline parallelism.", observed=matrix, refs=[_TOPO_REF])]
    kinds = ", ".join(f"{sum(1 for link in without_nvlink.values() if link == kind)} {kind}"
                      for kind in ("PIX", "PXB", "PHB", "NODE", "SYS") if kind in without_nvlink.values())
    example = ", ".join(f"GPU{i}-GPU{j} {link}" for (i, j), link in list(without_nvlink.items())[:4])
    nvlinked = len(pairs) - len(without_nvlink)
    return [context.warn(
        f"{len(without_nvlink)} of {len(pairs)} GPU pairs have no NVLink ({kinds}; e.g. {example}). Data parallel "
        "(DDP/FSDP) works over PCIe; tensor parallel across these pairs will be slow."
        + (f" {nvlinked} pair(s) are NVLinked: keep tensor-parallel groups inside them." if nvlinked else ""),
        observed=matrix, expected="NV# between every pair for tensor parallelism",
        fix="Use tensor parallelism only inside NVLink-connected groups; for DDP, nothing to change.",
        refs=[_TOPO_REF])]


@check("topology.cross_numa", "GPU pairs that cross the CPU interconnect", needs=("topology",))
def topology_cross_numa(context: CheckContext) -> list[Finding]:
    topology = context.facts.topology
    crossing = [(i, j) for (i, j), link in _pairs(topology.links).items() if link == "SYS"]
    if not crossing:
        return [context.passed("No GPU pair crosses the inter-socket link (no SYS in the matrix).")]
    groups = _groups_without_sys(topology.links)
    group_text = "; ".join("{" + ", ".join(f"GPU{i}" for i in group) + "}" for group in groups)
    numa = {f"GPU{i}": node for i, node in topology.numa_affinity.items()}
    return [context.warn(
        f"{len(crossing)} GPU pair(s) communicate across the CPU sockets' interconnect (SYS), e.g. "
        f"{', '.join(f'GPU{i}-GPU{j}' for i, j in crossing[:4])}: P2P is slower or off there. Groups that stay "
        f"within one socket: {group_text}.", observed={"sys_pairs": len(crossing), "numa": numa},
        expected="no SYS pairs inside a tensor-parallel group",
        fix="Keep tensor/pipeline-parallel groups inside one group above; pin each rank to its GPU's NUMA node "
            "(`numactl --cpunodebind=N --membind=N` or torchrun `--numa-binding`).", refs=[_TOPO_REF])]


def _groups_without_sys(links: dict[tuple[int, int], str]) -> list[list[int]]:
    gpus = sorted({i for i, _ in links})
    groups: list[list[int]] = []
    for gpu in gpus:
        for group in groups:
            if all(links.get((gpu, other), "SYS") != "SYS" for other in group):
                group.append(gpu)
                break
        else:
            groups.append([gpu])
    return groups


@check("topology.p2p", "Peer-to-peer access between GPUs", needs=("p2p_read",))
def topology_p2p(context: CheckContext) -> list[Finding]:
    status = {pair: value for pair, value in context.facts.p2p_read.items() if pair[0] != pair[1]}
    if len(context.gpus) < 2 or not status:
        return [context.passed("Fewer than two GPUs: no peer-to-peer pairs to judge.")]
    blocked = {pair: value for pair, value in status.items() if value != "OK" and value != "X"}
    if not blocked:
        return [context.passed(f"P2P reads are supported between all {len(status) // 2} GPU pairs.",
                               observed="all OK")]
    kinds = sorted(set(blocked.values()))
    pairs_text = ", ".join(f"GPU{i}-GPU{j} {value}" for (i, j), value in sorted(blocked.items()) if i < j)
    meaning = "; ".join(f"{kind} = {_P2P_MEANING.get(kind, kind)}" for kind in kinds)
    return [context.warn(
        f"P2P is not available between {len({tuple(sorted(pair)) for pair in blocked})} GPU pair(s) ({pairs_text}; "
        f"{meaning}): NCCL falls back to copies through host memory, which is slower.",
        observed={f"GPU{i}-GPU{j}": value for (i, j), value in blocked.items() if i < j}, expected="OK",
        fix="For CNS/TNS: check ACS and IOMMU (see pcie.acs_iommu) and the BIOS; GNS is a property of consumer GPUs "
            "(no fix but NVLink bridges where the board has them).",
        refs=["nvidia-smi topo -p2p r legend", "NVML nvmlDeviceGetP2PStatus"])]


@check("nvlink.link_down", "NVLink links up")
def nvlink_link_down(context: CheckContext) -> list[Finding]:
    gpus = context.gpus
    if len(gpus) < 2:
        return [context.passed("One GPU visible: no NVLink to judge.")]
    if all(gpu.nvlinks is None for gpu in gpus) and context.facts.topology is None:
        return [context.skip("No NVLink state in this run (nvml.json, nvidia-smi-nvlink-s.txt or "
                             "nvidia-smi-topo.txt holds it).")]
    topology_counts = _topology_nvlink_counts(context)

    def judge(gpu: GpuFacts) -> Finding | None:
        spec = gpu_spec(gpu.name)
        links = gpu.nvlinks or []
        active = [link for link in links if link.active]
        inactive = [link for link in links if link.active is False]
        wired_by_switch = spec is not None and spec.get("nvlink_via") == "nvswitch"
        expected_links = spec.get("nvlink_links") if spec else None
        if active and inactive:
            return context.fail(
                f"GPU{gpu.index} has {len(inactive)} NVLink link(s) down ({', '.join(str(l.link) for l in inactive)}) "
                f"while {len(active)} are up: bandwidth to its peers drops and NCCL may route around it.", gpu=gpu,
                observed={"up": len(active), "down": len(inactive)}, expected="all links up",
                fix="Reboot or reset the GPU (`nvidia-smi -r -i N` when idle); check `nvidia-smi nvlink -e` error "
                    "counters; if the link stays down, reseat/RMA (Xid 74 in dmesg confirms).",
                refs=["nvidia-smi nvlink -s", "Xid 74 NVLINK_ERROR"])
        if wired_by_switch and links and not active:
            return context.fail(
                f"GPU{gpu.index} ({gpu.name}) is an NVSwitch board but reports no active NVLink.", gpu=gpu,
                observed=0, expected=expected_links, fix="Check the fabric manager (`systemctl status "
                "nvidia-fabricmanager`) and `nvidia-smi nvlink -s`; reboot; RMA if it persists.", refs=[spec.source])
        if wired_by_switch and expected_links and gpu.index in topology_counts and \
                0 < topology_counts[gpu.index] < expected_links:
            return context.fail(
                f"GPU{gpu.index} reaches its peers over NV{topology_counts[gpu.index]}, fewer than the "
                f"{expected_links} links a {spec.model} has.", gpu=gpu, observed=topology_counts[gpu.index],
                expected=expected_links, fix="Check `nvidia-smi nvlink -s -i N` for inactive links; reset or RMA.",
                refs=[spec.source])
        return None

    findings = per_gpu(context, judge, "No NVLink link is down on any of {count} GPU(s).")
    if all(not gpu.nvlinks for gpu in gpus) and not topology_counts:
        boards = {gpu_spec(gpu.name).get("nvlink_via") if gpu_spec(gpu.name) else None for gpu in gpus}
        if boards & {"bridge", "none"} or boards == {None}:
            return [context.passed("No NVLink reported: these boards are PCIe cards (links unused by design "
                                   "unless bridged).")]
    return findings


def _topology_nvlink_counts(context: CheckContext) -> dict[int, int]:
    """Per GPU, the smallest NV# towards a peer (a healthy NVSwitch box shows one value everywhere)."""
    topology = context.facts.topology
    if topology is None:
        return {}
    counts: dict[int, int] = {}
    for (i, j), link in topology.links.items():
        if i != j and link.startswith("NV"):
            counts[i] = min(counts.get(i, 1 << 30), _nvlink_count(link))
    return counts


@check("gpu.fabric", "NVSwitch fabric registration complete")
def gpu_fabric(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        state = gpu.fabric_state
        if state and state not in ("Completed", "Not Supported"):
            return context.fail(
                f"GPU{gpu.index}'s NVSwitch fabric state is '{state}'"
                + (f" ({gpu.fabric_status})" if gpu.fabric_status else "")
                + ": CUDA refuses to start until the fabric manager has registered it.", gpu=gpu, observed=state,
                expected="Completed", fix="sudo systemctl restart nvidia-fabricmanager; check "
                "`journalctl -u nvidia-fabricmanager` (its version must equal the driver's).",
                refs=["NVIDIA Fabric Manager User Guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"])
        return None
    if all(gpu.fabric_state is None for gpu in context.gpus):
        return [context.passed("No NVSwitch fabric reported (not an NVSwitch system, or not reported by this driver).")]
    return per_gpu(context, judge, "NVSwitch fabric registration is complete on all {count} GPU(s).")
