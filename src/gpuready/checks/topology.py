"""How the GPUs are connected: the matrix, NUMA crossings, P2P support, NVSwitch fabric (NVLink state: nvlink.py)."""

from __future__ import annotations

import re

from gpuready.checks import fabric_logs
from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, check, kernel_evidence, per_gpu, queried
from gpuready.facts.types import GpuFacts
from gpuready.i18n import said
from gpuready.knowledge import gpu_spec
from gpuready.model import Finding

_TOPO_REF = "nvidia-smi topo -m legend; NCCL topology: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-p2p-level"
_P2P_MEANING = {"CNS": "chipset not supported", "GNS": "GPU not supported", "TNS": "topology not supported",
                "NS": "not supported", "DR": "disabled by a driver registry key", "DNS": "disabled by the driver (regkey)",
                "U": "unknown"}
"""The codes' meanings; in the catalogue, topology.p2p.blocked_<code> says one code's in each language."""


def _pairs(links: dict[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    return {(i, j): link for (i, j), link in links.items() if i < j}


def _nvlink_count(link: str) -> int:
    match = re.fullmatch(r"NV(\d+)", link)
    return int(match.group(1)) if match else 0


@check("topology.matrix")
def topology_matrix(context: CheckContext) -> list[Finding]:
    """GPU×GPU connection matrix."""
    topology = context.facts.topology
    if topology is None:
        return [_matrix_from_models(context)]
    pairs = _pairs(topology.links)
    matrix = {f"GPU{i}-GPU{j}": link for (i, j), link in sorted(pairs.items())}
    if not pairs:
        return [context.passed(said("topology.matrix.one_gpu"), observed=matrix)]
    without_nvlink = {pair: link for pair, link in pairs.items() if not link.startswith("NV")}
    if not without_nvlink:
        counts = sorted({_nvlink_count(link) for link in pairs.values()})
        return [context.passed(said("topology.matrix.all_nvlink", links=", ".join(f"NV{c}" for c in counts)),
                               observed=matrix, refs=[_TOPO_REF])]
    kinds = ", ".join(f"{sum(1 for link in without_nvlink.values() if link == kind)} {kind}"
                      for kind in ("PIX", "PXB", "PHB", "NODE", "SYS") if kind in without_nvlink.values())
    example = ", ".join(f"GPU{i}-GPU{j} {link}" for (i, j), link in list(without_nvlink.items())[:4])
    nvlinked = len(pairs) - len(without_nvlink)
    return [context.warn(
        said(f"topology.matrix.some_pcie{'_partly_nvlinked' if nvlinked else ''}", without=len(without_nvlink),
             pairs=len(pairs), kinds=kinds, example=example, nvlinked=nvlinked),
        observed=matrix, expected="NV# between every pair for tensor parallelism", refs=[_TOPO_REF])]


def _matrix_from_models(context: CheckContext) -> Finding:
    """Without `topo -m`: a model that has no NVLink at all (`nvlink_via = "none"`) says enough on its own; so does a
    set of cards of which no two share a bridge model (a bridge joins two cards of one model). Cards that take an
    optional bridge, where nothing shows their links (`-q` does not print NVLink), are PCIe-only unless one is fitted:
    a warning that says how to tell."""
    gpus = context.gpus
    if len(gpus) < 2:
        return context.passed(said("topology.matrix.one_gpu"))
    specs = [gpu_spec(gpu.name) for gpu in gpus]
    wiring = [spec.get("nvlink_via") if spec else None for spec in specs]
    bridged = [spec.model for spec, via in zip(specs, wiring) if via == "bridge"]
    if set(wiring) <= {"none", "bridge"} and len(bridged) != len(set(bridged)) \
            and not any(gpu.nvlinks for gpu in gpus):
        return context.warn(said("topology.matrix.bridge_unseen", models=", ".join(sorted(set(bridged))),
                                 count=len(gpus)),
                            observed={f"GPU{gpu.index}": spec.model for gpu, spec in zip(gpus, specs)},
                            expected="NV# between bridged pairs (nvidia-smi nvlink -s or topo -m)",
                            refs=[_TOPO_REF] + sorted({spec.source for spec in specs}))
    if any(via not in ("none", "bridge") for via in wiring) or len(bridged) != len(set(bridged)):
        return context.skip(said("topology.matrix.unjudged"))
    models = sorted({spec.model for spec in specs})
    if bridged:
        return context.warn(said("topology.matrix.no_bridge_pair", models=", ".join(models), count=len(gpus)),
                            observed={f"GPU{gpu.index}": spec.model for gpu, spec in zip(gpus, specs)},
                            expected="two cards of one bridge-capable model for an NVLink bridge",
                            refs=[_TOPO_REF] + sorted({spec.source for spec in specs}))
    return context.warn(
        said(f"topology.matrix.no_nvlink{'' if len(models) == 1 else '_models'}", models=", ".join(models),
             count=len(gpus)),
        observed={f"GPU{gpu.index}": spec.model for gpu, spec in zip(gpus, specs)},
        expected="NV# between GPUs for tensor parallelism",
        refs=[_TOPO_REF] + sorted({spec.source for spec in specs}))


@check("topology.cross_numa", needs=("topology",))
def topology_cross_numa(context: CheckContext) -> list[Finding]:
    """GPU pairs that cross the CPU interconnect."""
    topology = context.facts.topology
    crossing = [(i, j) for (i, j), link in _pairs(topology.links).items() if link == "SYS"]
    if not crossing:
        return [context.passed(said("topology.cross_numa.pass"))]
    groups = _groups_without_sys(topology.links)
    group_text = "; ".join("{" + ", ".join(f"GPU{i}" for i in group) + "}" for group in groups)
    numa = {f"GPU{i}": node for i, node in topology.numa_affinity.items()}
    return [context.warn(
        said("topology.cross_numa.sys", count=len(crossing), pairs=", ".join(f"GPU{i}-GPU{j}" for i, j in crossing[:4]),
             groups=group_text), observed={"sys_pairs": len(crossing), "numa": numa},
        expected="no SYS pairs inside a tensor-parallel group", refs=[_TOPO_REF])]


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


@check("topology.p2p", needs=("p2p_read",))
def topology_p2p(context: CheckContext) -> list[Finding]:
    """Peer-to-peer access between GPUs."""
    status = {pair: value for pair, value in context.facts.p2p_read.items() if pair[0] != pair[1]}
    if len(context.gpus) < 2 or not status:
        return [context.passed(said("topology.p2p.single"))]
    blocked = {pair: value for pair, value in status.items() if value != "OK" and value != "X"}
    if not blocked:
        return [context.passed(said("topology.p2p.pass", count=len(status) // 2), observed="all OK")]
    kinds = sorted(set(blocked.values()))
    pairs_text = ", ".join(f"GPU{i}-GPU{j} {value}" for (i, j), value in sorted(blocked.items()) if i < j)
    meaning = "; ".join(f"{kind} = {_P2P_MEANING.get(kind, kind)}" for kind in kinds)
    # One known code: its meaning in the catalogue; several (or one nvidia-smi added later): the legend in English.
    variant = f"_{kinds[0]}" if len(kinds) == 1 and kinds[0] in _P2P_MEANING else ""
    return [context.warn(
        said(f"topology.p2p.blocked{variant}", count=len({tuple(sorted(pair)) for pair in blocked}), pairs=pairs_text,
             meaning=meaning),
        observed={f"GPU{i}-GPU{j}": value for (i, j), value in blocked.items() if i < j}, expected="OK",
        refs=["nvidia-smi topo -p2p r legend", "NVML nvmlDeviceGetP2PStatus"])]


_FM_REF = "NVIDIA Fabric Manager User Guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"


def _fabric_in_logs(context: CheckContext) -> list[Finding]:
    """diagnose: CUDA's 802 in a DCGM table, or NCCL's NVLS transport failing on CUDA (checks/fabric_logs.py), where
    the kernel log's own fabric lines (the machine's judgement) say nothing."""
    if any(event.kind in ("fabric_manager", "cuda_not_ready") for event in context.facts.kernel_log or []):
        return []
    if lines := fabric_logs.dcgm_cuda_not_ready_lines(context):
        return [context.fail(said("gpu.fabric.cuda_802"), observed="cudaErrorSystemNotReady",
                             expected="fabric Completed", refs=[_FM_REF], evidence=quote(lines))]
    if lines := fabric_logs.nvls_failure_lines(context):
        return [context.fail(said("gpu.fabric.nvls_failed"), observed=[line.text[:200] for line in lines[:3]],
                             expected="NVLS buffers allocated", refs=[_FM_REF, fabric_logs.NVLS_REF],
                             evidence=quote(lines))]
    return []


@check("gpu.fabric", needs_gpus=False, logs=_fabric_in_logs)
def gpu_fabric(context: CheckContext) -> list[Finding]:
    """NVSwitch fabric registration complete.

    The fabric state each GPU reports, and what Fabric Manager and CUDA logged (a version mismatch, CUDA error
    802); Fabric Manager having nothing to do is no finding on a board without NVSwitch."""
    def judge(gpu: GpuFacts) -> Finding | None:
        state = gpu.fabric_state
        # a Grace Blackwell tray has no host Fabric Manager to restart: its fix names the switch trays and IMEX
        unnamed = "_unnamed" if gpu.index < 0 else "_tray" if _on_switch_tray(gpu) else ""
        if state == "Completed" and gpu.fabric_status not in (None, "", "Success", "N/A"):
            # nvml.h: the status "must be checked only if state returns complete"; then anything but success fails
            return context.fail(said(f"gpu.fabric.completed_error{unnamed}", index=gpu.index,
                                     fabric_status=gpu.fabric_status),
                                gpu=gpu if gpu.index >= 0 else None, observed=gpu.fabric_status, expected="Success",
                                refs=[_FM_REF, "nvml.h nvmlGpuFabricInfo_t"])
        if state and state not in ("Completed", "Not Supported"):
            # `_unnamed`: its section's header line was cut from the paste; `_status`: with the fabric status
            variant = f"{unnamed}{'_status' if gpu.fabric_status else ''}"
            return context.fail(
                said(f"gpu.fabric.state{variant}", index=gpu.index, state=state, fabric_status=gpu.fabric_status),
                gpu=gpu if gpu.index >= 0 else None, observed=state, expected="Completed", refs=[_FM_REF])
        return None
    logged = _fabric_log_findings(context) + [finding for gpu in context.facts.unnamed_gpus
                                              if (finding := judge(gpu)) is not None]
    if not context.gpus:
        return logged or [context.skip(said("gpu.fabric.unreported"))]
    if all(gpu.fabric_state is None for gpu in context.gpus):
        if logged:
            return logged
        if not any(queried(gpu) for gpu in context.gpus):
            return [context.skip(said("gpu.fabric.unreported"))]
        return [context.passed(said("gpu.fabric.none"))]
    states = per_gpu(context, judge, said("gpu.fabric.all_good"),
                     reported=lambda gpu: gpu.fabric_state is not None, unreported=said("gpu.fabric.unreported"))
    problems = [finding for finding in logged if finding.status.value != "pass"]
    return problems + [finding for finding in states if finding.status.value != "pass" or not problems]


def _on_switch_tray(gpu: GpuFacts) -> bool:
    """A GPU of a Grace Blackwell NVL tray (gpus.toml `nvlink_via = "nvlink_switch_system"`): its NVLink fabric is run
    by the rack's NVLink switch trays, not by a Fabric Manager on this host."""
    spec = gpu_spec(gpu.name)
    return bool(spec and spec.get("nvlink_via") == "nvlink_switch_system")


def _nvswitch_board(context: CheckContext) -> bool | None:
    """True where the GPUs' model is wired through NVSwitches on the baseboard, whose host runs Fabric Manager
    (gpus.toml `nvlink_via = "nvswitch"`), False where it is not (a Grace Blackwell tray's `nvlink_switch_system`
    included: its NVLink Switch trays run the fabric manager, not the host), None where no GPU model is known."""
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
            said("gpu.fabric.version_mismatch", fabric_manager=fm_version, driver=driver_version),
            observed={"fabric_manager": fm_version, "driver": driver_version}, expected="the same version",
            refs=[_FM_REF], evidence=evidence)]
    board = _nvswitch_board(context)
    if any(event.kind == "cuda_not_ready" for event in events):
        return [context.fail(said("gpu.fabric.cuda_802"), observed="cudaErrorSystemNotReady",
                             expected="fabric Completed", refs=[_FM_REF], evidence=evidence)]
    nothing = any(event.detail == "nothing_to_do" for event in events)
    if board is True:
        why = "nothing_to_do" if nothing else "failed"  # NV_WARN_NOTHING_TO_DO: on NVLink5, NVLSM is not running
        return [context.fail(said(f"gpu.fabric.{why}_nvswitch"), observed=[event.detail for event in events],
                             expected="Fabric Manager running", refs=[_FM_REF], evidence=evidence)]
    if nothing or board is False:
        return [context.passed(said("gpu.fabric.not_needed"), observed=[event.detail for event in events],
                               refs=[_FM_REF], evidence=evidence)]
    return [context.warn(said("gpu.fabric.failed_unknown_board"), observed=[event.detail for event in events],
                         expected="running on NVSwitch boards", refs=[_FM_REF], evidence=evidence)]
