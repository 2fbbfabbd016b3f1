"""The NVLink fabric across trays (GB200/GB300 NVL, multi-node NVLink) and its IMEX domain.

`gpu.fabric` (topology.py) judges the registration's state and status on every board; here: the clique and cluster
a Grace Blackwell tray's GPUs registered in, the fabric's health conditions, and the IMEX domain between the trays.
"""

from __future__ import annotations

from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.types import GpuFacts, ImexDomain
from gpuready.i18n import said
from gpuready.knowledge import gpu_spec
from gpuready.model import Evidence, Finding

FABRIC_REF = "NVML nvmlGpuFabricInfo_v3_t (cliqueId, clusterUuid, healthMask): https://docs.nvidia.com/deploy/nvml-api/"
AZHPC_REF = "Azure/azhpc-images#506: Status 'Insufficient Resources', CliqueId 0 and a zero ClusterUUID fail a node"
IMEX_REF = "NVIDIA IMEX guide, nvidia-imex-ctl: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/"
CHANNEL_REF = ("NVIDIA IMEX guide, IMEX channels (/dev/nvidia-caps-imex-channels, NVreg_CreateImexChannel0): "
               "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/imexchannels.html")
CONTAINER_CHANNEL_REF = ("NVIDIA Container Toolkit NVIDIA_IMEX_CHANNELS; NVIDIA DRA driver for GPUs (ComputeDomain "
                         "resource claims): https://github.com/NVIDIA/k8s-dra-driver-gpu")
SERVICE_REF = "NVIDIA IMEX guide, the nvidia-imex service: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/"
SINGLE_NODE_REF = "NVIDIA/NVSentinel#1471: IMEX findings on a single-node NVSwitch box are a false alarm"
_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# Health conditions that hold the fabric at reduced bandwidth (warn) and those that break it (fail); values as
# nvidia-smi -q prints them, `None`/`Not Supported` absent.
_HEALTHY = {"summary": {"Healthy"}, "bandwidth": {"Full"}, "route_recovery": {"False"},
            "route_unhealthy": {"False"}, "access_timeout_recovery": {"False"}, "incorrect_configuration": {"None"}}
_REDUCED = {("bandwidth", "Degraded"), ("summary", "Limited Capacity"), ("route_recovery", "True")}
_NOT_SUPPORTED = {"Not Supported", "N/A"}


def switch_system_tray(gpu: GpuFacts) -> bool:
    """The GPU's model is a Grace Blackwell tray whose NVLinks run to NVLink Switch trays (gpus.toml
    `nvlink_via = "nvlink_switch_system"`): the boards that must register in a clique of a cluster."""
    spec = gpu_spec(gpu.name)
    return spec is not None and spec.row.get("nvlink_via") == "nvlink_switch_system"


def in_a_clique(clique_id: int | None, cluster_uuid: str | None) -> bool:
    """Registered in a clique (id not 0) of a cluster (UUID reported, not zero): what a tray's GPU must show."""
    return clique_id != 0 and cluster_uuid not in (_ZERO_UUID, None)


@check("nvlink.fabric_clique")
def fabric_clique(context: CheckContext) -> list[Finding]:
    """A Grace Blackwell tray's GPU registered in a clique (id not 0) of a cluster (UUID not zero)."""
    if not any(switch_system_tray(gpu) for gpu in context.gpus):
        return [context.skip(said("nvlink.fabric_clique.not_mnnvl"))]

    def judge(gpu: GpuFacts) -> Finding | None:
        if in_a_clique(gpu.fabric_clique_id, gpu.fabric_cluster_uuid):
            return None
        return context.fail(said("nvlink.fabric_clique.zero", index=gpu.index, clique=gpu.fabric_clique_id,
                                 uuid=gpu.fabric_cluster_uuid or "-"),
                            gpu=gpu, observed={"clique_id": gpu.fabric_clique_id,
                                               "cluster_uuid": gpu.fabric_cluster_uuid},
                            expected="clique id > 0 and a cluster UUID", refs=[FABRIC_REF, AZHPC_REF])
    return per_gpu(context, judge, said("nvlink.fabric_clique.all_good"),
                   reported=lambda gpu: switch_system_tray(gpu) and gpu.fabric_state == "Completed"
                   and (gpu.fabric_clique_id is not None or gpu.fabric_cluster_uuid is not None),
                   unreported=said("nvlink.fabric_clique.unreported"))


def health_faults(text: str | None) -> list[tuple[str, str]]:
    """The conditions of GpuFacts.fabric_health that are not healthy, as (key, value)."""
    pairs = [part.strip().partition("=") for part in (text or "").split(";") if "=" in part]
    return [(key, value) for key, _sep, value in pairs
            if key in _HEALTHY and value not in _HEALTHY[key] and value not in _NOT_SUPPORTED]


@check("nvlink.fabric_health")
def fabric_health(context: CheckContext) -> list[Finding]:
    """The fabric's health conditions (NVML's health mask, nvidia-smi -q's Fabric Health rows) on any board."""
    def judge(gpu: GpuFacts) -> Finding | None:
        faults = health_faults(gpu.fabric_health)
        if not faults:
            return None
        conditions = ", ".join(f"{key}={value}" for key, value in faults)
        reduced = all(fault in _REDUCED for fault in faults)
        verdict = context.warn if reduced else context.fail
        return verdict(said(f"nvlink.fabric_health.{'reduced' if reduced else 'faulty'}", index=gpu.index,
                            conditions=conditions),
                       gpu=gpu, observed=dict(faults), expected="Healthy, bandwidth Full", refs=[FABRIC_REF])
    return per_gpu(context, judge, said("nvlink.fabric_health.all_good"),
                   reported=lambda gpu: bool(gpu.fabric_health), unreported=said("nvlink.fabric_health.unreported"))


@check("nvlink.imex_domain", needs_gpus=False)
def imex_domain(context: CheckContext) -> list[Finding]:
    """The IMEX domain `nvidia-imex-ctl -N` shows: UP, every node READY, every pair of nodes CONNECTED both ways."""
    domain = context.facts.imex
    if domain is None:
        return [context.skip(said("nvlink.imex_domain.absent"))]
    if len(domain.nodes) <= 1 and context.gpus and not any(switch_system_tray(gpu) for gpu in context.gpus):
        # a single-node NVSwitch box (HGX, DGX) shares memory over its own NVLink: IMEX is not used there
        return [context.skip(said("nvlink.imex_domain.single_node"))]
    evidence = _evidence(domain)
    findings = []
    if domain.state is not None and domain.state != "UP":
        findings.append(context.fail(said("nvlink.imex_domain.down", state=domain.state), observed=domain.state,
                                     expected="UP", refs=[IMEX_REF], evidence=evidence))
    not_ready = [node for node in domain.nodes if node.status != "READY"]
    if not_ready:
        names = ", ".join(f"#{node.index} {node.host} ({node.status})" for node in not_ready)
        findings.append(context.fail(said("nvlink.imex_domain.not_ready", count=len(not_ready), nodes=names),
                                     observed={node.host: node.status for node in not_ready}, expected="READY",
                                     refs=[IMEX_REF], evidence=evidence))
    pairs = _broken_pairs(domain)
    if pairs:
        text = ", ".join(f"#{source}→#{target} {state}" for source, target, state in pairs[:12])
        findings.append(context.fail(said("nvlink.imex_domain.pairs", count=len(pairs), pairs=text),
                                     observed={f"{source}->{target}": state for source, target, state in pairs},
                                     expected="CONNECTED", refs=[IMEX_REF], evidence=evidence))
    return findings or [context.passed(said("nvlink.imex_domain.up", count=len(domain.nodes)), refs=[IMEX_REF])]


def _broken_pairs(domain: ImexDomain) -> list[tuple[int, int, str]]:
    """Each connection between two different nodes that is not CONNECTED, from each node's own map (so a one-way
    fault shows), among the nodes that are READY (a node that is down is already named)."""
    ready = {node.index for node in domain.nodes if node.status == "READY"}
    return [(node.index, peer, state) for node in domain.nodes if node.index in ready
            for peer, state in sorted(node.connections.items())
            if peer != node.index and peer in ready and state != "CONNECTED"]


def _evidence(domain: ImexDomain) -> list[Evidence]:
    lines = [Evidence(file="nvidia-imex-ctl", line=node.line, text=f"Node #{node.index} - {node.host} - {node.status}")
             for node in domain.nodes if node.line is not None][:8]
    if domain.state_line is not None:
        lines.append(Evidence(file="nvidia-imex-ctl", line=domain.state_line, text=f"Domain State: {domain.state}"))
    return lines


def nvlink_domain_gpu(gpu: GpuFacts) -> bool:
    """A GPU of a multi-node NVLink domain: a non-zero cluster UUID (any board), or a Grace Blackwell tray that did
    not report one. An HGX/DGX board's zero UUID (single-node NVSwitch) is not; nor is a tray whose registration
    ended with a zero UUID (nvlink.fabric_clique fails that)."""
    uuid = gpu.fabric_cluster_uuid
    return uuid != _ZERO_UUID if uuid is not None else switch_system_tray(gpu)


@check("nvlink.imex_channel")
def imex_channel(context: CheckContext) -> list[Finding]:
    """On a multi-node NVLink machine, this node's way into IMEX: a channel device the process (or container) sees,
    and, on the host, the nvidia-imex service active."""
    if not any(nvlink_domain_gpu(gpu) for gpu in context.gpus):
        unregistered = any(switch_system_tray(gpu) for gpu in context.gpus)
        return [context.skip(said("nvlink.imex_channel.no_cluster" if unregistered else "nvlink.imex_channel.not_mnnvl"),
                             refs=[FABRIC_REF] if unregistered else [SINGLE_NODE_REF])]
    runtime, evidence = context.facts.container()
    container = runtime if runtime not in (None, "none", "slurm") else None  # a Slurm job sees the host's /dev
    findings = [_channel_finding(context, container, evidence)]
    if container is None and (service := _service_finding(context)) is not None:
        findings.append(service)
    return findings


def _channel_finding(context: CheckContext, container: str | None, evidence: list[str]) -> Finding:
    channels = context.facts.imex_channels
    if channels is None:
        return context.skip(said("nvlink.imex_channel.unrecorded"), refs=[CHANNEL_REF])
    observed = {"channels": [f"channel{number}" for number in channels.channels], "folder": channels.folder,
                "major": channels.major, "container": container}
    if channels.channels:
        return context.passed(said("nvlink.imex_channel.visible", channels=", ".join(observed["channels"])),
                              observed=observed, refs=[CHANNEL_REF])
    major = "-" if channels.major is None else channels.major
    if container is not None:
        return context.fail(said("nvlink.imex_channel.container_none", runtime=container,
                                 evidence="; ".join(evidence[:3]) or "-"),
                            observed=observed, expected="an IMEX channel device (channel0)",
                            refs=[CHANNEL_REF, CONTAINER_CHANNEL_REF])
    return context.warn(said("nvlink.imex_channel.host_none", major=major), observed=observed,
                        expected="an IMEX channel device (channel0)", refs=[CHANNEL_REF])


def _service_finding(context: CheckContext) -> Finding | None:
    """The host's nvidia-imex unit; not active while `nvidia-imex-ctl` shows the domain UP is no fault (the daemon
    answered: it runs outside systemd, a DRA driver's ComputeDomain daemon for one)."""
    state, domain = context.facts.imex_service, context.facts.imex
    if state is None:
        return None
    if state == "active":
        return context.passed(said("nvlink.imex_channel.service_active"), observed=state, refs=[SERVICE_REF])
    if domain is not None and domain.state == "UP":
        return context.passed(said("nvlink.imex_channel.service_outside", state=state), observed=state,
                              refs=[SERVICE_REF, IMEX_REF])
    return context.fail(said("nvlink.imex_channel.service_down", state=state), observed=state, expected="active",
                        refs=[SERVICE_REF])
