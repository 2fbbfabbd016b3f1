"""Between nodes: RDMA devices, NIC speed, GPUDirect RDMA, the rendezvous port. Judged for multi-node only."""

from __future__ import annotations

from gpuready.checks.ib_rails import rails_down
from gpuready.checks.registry import CheckContext, check
from gpuready.i18n import said
from gpuready.knowledge import thresholds
from gpuready.model import Finding

_NCCL_NET_REF = "NCCL environment and networking: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


@check("network.rdma", needs=("ib_ports",), needs_gpus=False)
def network_rdma(context: CheckContext) -> list[Finding]:
    """InfiniBand/RoCE for multi-node."""
    limit = thresholds("network")
    ports = context.facts.ib_ports
    if not ports:
        return [context.warn(said("network.rdma.none"), observed="none",
                             expected=f">= {limit['rdma_min_gbit_per_s']} Gb/s RDMA per node", refs=[limit["source"]])]
    active = [port for port in ports if (port.state or "").upper() == "ACTIVE"]
    lost = rails_down(ports)  # a whole adapter off among its model's rails is network.rail_down's failure
    down = [port for port in ports if port not in active and port not in lost]
    total = sum(port.rate_gbit_per_s or 0 for port in active)
    described = ", ".join(f"{port.device}/{port.port} {port.state} {port.rate_gbit_per_s or '?'} Gb/s "
                          f"{port.link_layer or ''}".strip() for port in ports)
    findings = []
    if down:
        findings.append(context.warn(said("network.rdma.ports_down", count=len(down),
                                          ports=", ".join(f"{p.device}/{p.port} {p.state}" for p in down)),
                                     nic=down[0].device, observed=described, expected="ACTIVE", refs=[_NCCL_NET_REF]))
    if total < limit["rdma_min_gbit_per_s"]:
        findings.append(context.warn(said("network.rdma.slow", total_gbit_per_s=total,
                                          minimum_gbit_per_s=limit["rdma_min_gbit_per_s"]), observed=described,
                                     expected=f">= {limit['rdma_min_gbit_per_s']} Gb/s", refs=[limit["source"]]))
    return findings or [context.passed(said("network.rdma.pass", ports=described, total_gbit_per_s=total),
                                       observed=described, refs=[limit["source"]])]


@check("network.nic_speed", needs=("net_interfaces",), needs_gpus=False)
def network_nic_speed(context: CheckContext) -> list[Finding]:
    """Ethernet fast enough for multi-node."""
    limit = thresholds("network")
    physical = [nic for nic in context.facts.net_interfaces if not nic.is_virtual and nic.operstate != "down"]
    speeds = {nic.name: nic.speed_mbit_per_s for nic in physical}
    known = {name: speed for name, speed in speeds.items() if speed}
    if not known:
        return [context.skip(said("network.nic_speed.unknown"), observed=speeds)]
    fastest = max(known.values()) / 1000
    described = ", ".join(f"{name} {speed / 1000:g} Gb/s" for name, speed in known.items())
    if fastest < limit["ethernet_min_gbit_per_s"] and not context.facts.ib_ports:
        return [context.fail(said("network.nic_speed.slow", fastest_gbit_per_s=fastest, nics=described),
                             observed=described, expected=f">= {limit['ethernet_min_gbit_per_s']} Gb/s, ideally RDMA",
                             refs=[limit["source"]])]
    return [context.passed(said("network.nic_speed.pass", nics=described), observed=described, refs=[limit["source"]])]


@check("network.gdr", needs=("host.kernel_modules",), needs_gpus=False)
def network_gdr(context: CheckContext) -> list[Finding]:
    """GPUDirect RDMA module."""
    modules = context.facts.host.kernel_modules
    if not context.facts.ib_ports:
        return [context.passed(said("network.gdr.no_rdma"))]
    loaded = sorted(modules & {"nvidia_peermem", "nv_peer_mem"})
    if loaded:
        return [context.passed(said("network.gdr.loaded", modules=", ".join(loaded)))]
    if "dmabuf" in " ".join(modules) or "ib_uverbs" in modules:
        return [context.warn(said("network.gdr.dmabuf_maybe"), observed="no nvidia_peermem",
                             expected="nvidia_peermem loaded or DMA-BUF in NCCL logs",
                             refs=["https://docs.nvidia.com/cuda/gpudirect-rdma/", _NCCL_NET_REF])]
    return [context.warn(said("network.gdr.missing"), observed="no nvidia_peermem",
                         refs=["https://docs.nvidia.com/cuda/gpudirect-rdma/"])]


@check("network.port", needs=("rendezvous_port_free",), needs_gpus=False)
def network_port(context: CheckContext) -> list[Finding]:
    """Rendezvous port free."""
    port = thresholds("rendezvous")["port"]
    if context.facts.rendezvous_port_free:
        return [context.passed(said("network.port.free", port=port))]
    return [context.warn(said("network.port.in_use", port=port), observed="in use", expected="free",
                         refs=[thresholds("rendezvous")["source"]])]
