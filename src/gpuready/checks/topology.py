"""How the GPUs are connected: the matrix, NUMA crossings, P2P support, NVSwitch fabric (NVLink state: nvlink.py)."""

from __future__ import annotations

import re

from gpuready.checks.registry import CheckContext, check, kernel_evidence, per_gpu, queried
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


_TP_FIX = "Use tensor parallelism only inside NVLink-connected groups; for DDP, nothing to change."


@check("topology.matrix", "GPU×GPU connection matrix")
def topology_matrix(context: CheckContext) -> list[Finding]:
    topology = context.facts.topology
    if topology is None:
        return [_matrix_from_models(context)]
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
        observed=matrix, expected="NV# between every pair for tensor parallelism", fix=_TP_FIX, refs=[_TOPO_REF])]


def _matrix_from_models(context: CheckContext) -> Finding:
    """Without `topo -m`: a model that has no NVLink at all (`nvlink_via = "none"`) says enough on its own."""
    gpus = context.gpus
    if len(gpus) < 2:
        return context.passed("One GPU: no GPU-to-GPU links to judge.")
    specs = [gpu_spec(gpu.name) for gpu in gpus]
    if any(spec is None or spec.get("nvlink_via") != "none" for spec in specs):
        return context.skip("Not judged: needs topology (nvidia-smi-topo.txt); these GPU models can have NVLink, "
                            "so only the matrix says which pairs are linked.")
    models = sorted({spec.model for spec in specs})
    return context.warn(
        f"No NVLink: {', '.join(models)} {'has' if len(models) == 1 else 'have'} none, so all {len(gpus)} GPUs talk "
        "over PCIe. Data parallel (DDP/FSDP) works; tensor parallelism over PCIe will be slow.",
        observed={f"GPU{gpu.index}": spec.model for gpu, spec in zip(gpus, specs)},
        expected="NV# between GPUs for tensor parallelism", fix=_TP_FIX,
        refs=[_TOPO_REF] + sorted({spec.source for spec in specs}))


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


_FM_REF = "NVIDIA Fabric Manager User Guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"
_FM_FIX = ("Install the nvidia-fabricmanager package of exactly the driver's version (`apt-cache madison "
           "nvidia-fabricmanager-<branch>`, then `apt-mark hold` it), then `sudo systemctl restart nvidia-fabricmanager` "
           "and check `nvidia-smi -q | grep -A2 Fabric` reads Completed; on NVLink5 systems (B200, GB200) NVLSM must run "
           "too (`nvidia-fabricmanager-start.sh`).")


@check("gpu.fabric", "NVSwitch fabric registration complete", needs_gpus=False)
def gpu_fabric(context: CheckContext) -> list[Finding]:
    """The fabric state each GPU reports, and what Fabric Manager and CUDA logged (a version mismatch, CUDA error
    802); Fabric Manager having nothing to do is no finding on a board without NVSwitch."""
    def judge(gpu: GpuFacts) -> Finding | None:
        state = gpu.fabric_state
        if state and state not in ("Completed", "Not Supported"):
            who = f"GPU{gpu.index}'s" if gpu.index >= 0 else "A GPU's (its section's header line was cut from the paste)"
            return context.fail(
                f"{who} NVSwitch fabric state is '{state}'"
                + (f" ({gpu.fabric_status})" if gpu.fabric_status else "")
                + ": CUDA refuses to start until the fabric manager has registered it.",
                gpu=gpu if gpu.index >= 0 else None, observed=state,
                expected="Completed", fix="sudo systemctl restart nvidia-fabricmanager; check "
                "`journalctl -u nvidia-fabricmanager` (its version must equal the driver's).", refs=[_FM_REF])
        return None
    logged = _fabric_log_findings(context) + [finding for gpu in context.facts.unnamed_gpus
                                              if (finding := judge(gpu)) is not None]
    if not context.gpus:
        return logged or [context.skip("Fabric state not in this run (nvml.json or nvidia-smi -q holds it).")]
    if all(gpu.fabric_state is None for gpu in context.gpus):
        if logged:
            return logged
        if not any(queried(gpu) for gpu in context.gpus):
            return [context.skip("Fabric state not in this run (nvml.json or nvidia-smi -q holds it).")]
        return [context.passed("No NVSwitch fabric reported (not an NVSwitch system, or not reported by this driver).")]
    states = per_gpu(context, judge, "NVSwitch fabric registration is complete on all {count} GPU(s).",
                     reported=lambda gpu: gpu.fabric_state is not None, unreported="")
    problems = [finding for finding in logged if finding.status.value != "pass"]
    return problems + [finding for finding in states if finding.status.value != "pass" or not problems]


def _nvswitch_board(context: CheckContext) -> bool | None:
    """True where the GPUs' model is wired through NVSwitches (gpus.toml `nvlink_via`), False where it is not, None
    where no GPU model is known."""
    wiring = [spec.row.get("nvlink_via") for gpu in context.gpus if (spec := gpu_spec(gpu.name))]
    if not wiring:
        return None
    return any(via == "nvswitch" for via in wiring)


def _fabric_log_findings(context: CheckContext) -> list[Finding]:
    events = [event for event in context.facts.kernel_log or [] if event.kind in ("fabric_manager", "cuda_not_ready")]
    if not events:
        return []
    evidence = kernel_evidence(events)
    mismatch = next((event for event in events if event.detail.startswith("version_mismatch")), None)
    if mismatch is not None:
        _kind, fm_version, driver_version = mismatch.detail.split()
        return [context.fail(
            f"Fabric Manager {fm_version} does not match the driver {driver_version}: it refuses to start, the NVSwitch "
            "fabric stays uninitialised and CUDA fails with error 802 (system not yet initialized).",
            observed={"fabric_manager": fm_version, "driver": driver_version}, expected="the same version",
            fix=_FM_FIX, refs=[_FM_REF], evidence=evidence)]
    board = _nvswitch_board(context)
    if any(event.kind == "cuda_not_ready" for event in events):
        return [context.fail(
            "CUDA reports error 802 (system not yet initialized): on an NVSwitch system the GPUs are not registered "
            "with the NVLink fabric, because Fabric Manager is not running (or, on NVLink5 systems, NVLSM is not).",
            observed="cudaErrorSystemNotReady", expected="fabric Completed", fix=_FM_FIX, refs=[_FM_REF],
            evidence=evidence)]
    nothing = any(event.detail == "nothing_to_do" for event in events)
    if board is True:
        why = ("found no NVSwitch to manage (NV_WARN_NOTHING_TO_DO): on NVLink5 systems (B200, GB200) NVLSM is not "
               "running" if nothing else "exited with a failure")
        return [context.fail(f"Fabric Manager {why} on a board wired through NVSwitches: the fabric stays "
                             "uninitialised and CUDA will not start.", observed=[event.detail for event in events],
                             expected="Fabric Manager running", fix=_FM_FIX, refs=[_FM_REF], evidence=evidence)]
    if nothing or board is False:
        return [context.passed(
            "Fabric Manager has nothing to manage here (no NVSwitch: PCIe cards, bridged pairs or a single GPU); its "
            "service failing is expected on such a board, not a fault.", observed=[event.detail for event in events],
            fix="Disable the service on boards without NVSwitch: `sudo systemctl disable --now nvidia-fabricmanager`.",
            refs=[_FM_REF], evidence=evidence)]
    return [context.warn(
        "The Fabric Manager service exited with a failure; whether this board needs it (NVSwitch) is not in this "
        "input.", observed=[event.detail for event in events], expected="running on NVSwitch boards",
        fix="Check `journalctl -u nvidia-fabricmanager`; on an NVSwitch board: " + _FM_FIX, refs=[_FM_REF],
        evidence=evidence)]
