"""Between nodes: RDMA devices, NIC speed, GPUDirect RDMA, the rendezvous port. Judged for multi-node only."""

from __future__ import annotations

from gpuready.checks.registry import CheckContext, check
from gpuready.knowledge import thresholds
from gpuready.model import Finding

_NCCL_NET_REF = "NCCL environment and networking: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


@check("network.rdma", "InfiniBand/RoCE for multi-node", needs=("ib_ports",), needs_gpus=False)
def network_rdma(context: CheckContext) -> list[Finding]:
    limit = thresholds("network")
    ports = context.facts.ib_ports
    if not ports:
        return [context.warn("No InfiniBand/RoCE device: multi-node NCCL will use TCP sockets, far slower than RDMA.",
                             observed="none", expected=f">= {limit['rdma_min_gbit_per_s']} Gb/s RDMA per node",
                             fix="Single node: nothing to do. Multi-node: add RDMA NICs (one per GPU is common on "
                                 "H100/H200 systems) or expect socket-bound all-reduce.", refs=[limit["source"]])]
    active = [port for port in ports if (port.state or "").upper() == "ACTIVE"]
    down = [port for port in ports if port not in active]
    total = sum(port.rate_gbit_per_s or 0 for port in active)
    described = ", ".join(f"{port.device}/{port.port} {port.state} {port.rate_gbit_per_s or '?'} Gb/s "
                          f"{port.link_layer or ''}".strip() for port in ports)
    findings = []
    if down:
        findings.append(context.warn(f"{len(down)} RDMA port(s) not active: "
                                     f"{', '.join(f'{p.device}/{p.port} {p.state}' for p in down)}.",
                                     nic=down[0].device, observed=described, expected="ACTIVE",
                                     fix="Check cables and the subnet manager (`ibstat`, `sminfo`); for RoCE, the "
                                         "Ethernet link (`ip link`).", refs=[_NCCL_NET_REF]))
    if total < limit["rdma_min_gbit_per_s"]:
        findings.append(context.warn(f"Active RDMA bandwidth is {total:g} Gb/s per node, below "
                                     f"{limit['rdma_min_gbit_per_s']} Gb/s.", observed=described,
                                     expected=f">= {limit['rdma_min_gbit_per_s']} Gb/s", refs=[limit["source"]]))
    return findings or [context.passed(f"RDMA: {described}; {total:g} Gb/s active.", observed=described,
                                       refs=[limit["source"]])]


@check("network.nic_speed", "Ethernet fast enough for multi-node", needs=("net_interfaces",), needs_gpus=False)
def network_nic_speed(context: CheckContext) -> list[Finding]:
    limit = thresholds("network")
    physical = [nic for nic in context.facts.net_interfaces if not nic.is_virtual and nic.operstate != "down"]
    speeds = {nic.name: nic.speed_mbit_per_s for nic in physical}
    known = {name: speed for name, speed in speeds.items() if speed}
    if not known:
        return [context.skip("No NIC reports a link speed (virtual NICs often do not).", observed=speeds)]
    fastest = max(known.values()) / 1000
    described = ", ".join(f"{name} {speed / 1000:g} Gb/s" for name, speed in known.items())
    if fastest < limit["ethernet_min_gbit_per_s"] and not context.facts.ib_ports:
        return [context.fail(f"The fastest NIC runs at {fastest:g} Gb/s ({described}): too slow for multi-node "
                             "training (gradients of a 1B-parameter model take seconds per step).", observed=described,
                             expected=f">= {limit['ethernet_min_gbit_per_s']} Gb/s, ideally RDMA",
                             fix="Use this machine for single-node jobs, or add 100+ Gb/s RDMA NICs.",
                             refs=[limit["source"]])]
    return [context.passed(f"NICs: {described}.", observed=described, refs=[limit["source"]])]


@check("network.gdr", "GPUDirect RDMA module", needs=("host.kernel_modules",), needs_gpus=False)
def network_gdr(context: CheckContext) -> list[Finding]:
    modules = context.facts.host.kernel_modules
    if not context.facts.ib_ports:
        return [context.passed("No RDMA device, so GPUDirect RDMA does not apply.")]
    loaded = sorted(modules & {"nvidia_peermem", "nv_peer_mem"})
    if loaded:
        return [context.passed(f"GPUDirect RDMA module loaded: {', '.join(loaded)}.")]
    if "dmabuf" in " ".join(modules) or "ib_uverbs" in modules:
        return [context.warn("RDMA devices are present but nvidia_peermem is not loaded: NCCL can use DMA-BUF on "
                             "recent kernels/drivers, otherwise GPU↔NIC traffic is staged through host memory.",
                             observed="no nvidia_peermem", expected="nvidia_peermem loaded or DMA-BUF in NCCL logs",
                             fix="sudo modprobe nvidia_peermem (and add it to /etc/modules-load.d); confirm with "
                                 "NCCL_DEBUG=INFO showing 'GDRDMA'.",
                             refs=["https://docs.nvidia.com/cuda/gpudirect-rdma/", _NCCL_NET_REF])]
    return [context.warn("RDMA devices are present but no GPUDirect RDMA module is loaded.",
                         observed="no nvidia_peermem", fix="sudo modprobe nvidia_peermem",
                         refs=["https://docs.nvidia.com/cuda/gpudirect-rdma/"])]


@check("network.port", "Rendezvous port free", needs=("rendezvous_port_free",), needs_gpus=False)
def network_port(context: CheckContext) -> list[Finding]:
    port = thresholds("rendezvous")["port"]
    if context.facts.rendezvous_port_free:
        return [context.passed(f"TCP port {port} (torchrun's default rendezvous port) is free to bind.")]
    return [context.warn(f"TCP port {port} is already in use: torchrun's default rendezvous would fail with "
                         "'address already in use'.", observed="in use", expected="free",
                         fix=f"Find the holder with `ss -ltnp 'sport = :{port}'`, or pass --master-port / "
                             "--rdzv-endpoint with another port.", refs=[thresholds("rendezvous")["source"]])]
