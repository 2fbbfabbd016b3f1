"""The RDMA NICs as their driver reports them in the kernel log (facts/nic_kernel.py): `network.nic_kernel`.

`check --bundle` (a dmesg in the bundle) and `diagnose` (a pasted log) read the same kernel-log events.
"""

from __future__ import annotations

from gpuready.checks.registry import CheckContext, check, kernel_evidence
from gpuready.facts.types import KernelEvent
from gpuready.i18n import said
from gpuready.model import Finding

NIC_KERNEL = "network.nic_kernel"
REF_HEALTH = ("Linux drivers/net/ethernet/mellanox/mlx5/core/health.c (poll_health: the firmware's health counter "
              "stopped, `Fatal error`, print_health_info's syndrome) and cmd.c (wait_func: a command the firmware never "
              "completed leaks its slot); NVIDIA NVSentinel, NIC Health Monitor: Syslog Detection, event severity "
              "(these are fatal, REPLACE_VM): https://docs.nvidia.com/nvsentinel/components/nic-health-monitor/"
              "syslog-detection-and-correlation")
REF_MODULE = ("Linux drivers/net/ethernet/mellanox/mlx5/core/events.c (port_module: `Cable unplugged`, `Cable error, "
              "<reason>`); NVIDIA NVSentinel, NIC Health Monitor: Syslog Detection (High Temperature, module unplugged: "
              "non-fatal, investigate)")
REF_LINK = "Linux drivers/net/ethernet/mellanox/mlx5/core/en_main.c (mlx5e_update_carrier: `Link up` / `Link down`)"
REF_PCIE = ("Linux drivers/pci/pci.c (pcie_print_link_status: `limited by` names the slower link above the device); "
            "NVIDIA ConnectX user manuals: the adapter's PCIe width and speed")
FLAP_DOWNS = 2
"""`Link down` this many times on one port is a link that flaps (one down at boot or at a cable swap is not)."""


@check(NIC_KERNEL, needs=("kernel_log",), needs_gpus=False)
def nic_kernel(context: CheckContext) -> list[Finding]:
    """No RDMA NIC whose firmware died or stopped answering (fail), no transceiver error, unplugged module, flapping
    link or HCA below its PCIe link (warn)."""
    by_device: dict[str, list[KernelEvent]] = {}
    for event in context.facts.kernel_log or []:
        if event.kind == "nic" and event.bus_id:
            by_device.setdefault(event.bus_id, []).append(event)
    findings: list[Finding] = []
    for device, events in sorted(by_device.items()):
        findings += _firmware(context, device, events) + _modules(context, device, events)
        findings += _flaps(context, device, events) + _pcie(context, device, events)
    return findings


def _firmware(context: CheckContext, device: str, events: list[KernelEvent]) -> list[Finding]:
    findings = []
    for what in ("fatal", "cmd_timeout"):
        found = [event for event in events if event.detail == what]
        if found:
            findings.append(context.fail(said(f"network.nic_kernel.{what}", device=device, count=len(found)),
                                         nic=device, observed={"lines": len(found), "kind": what}, expected="none",
                                         refs=[REF_HEALTH], evidence=kernel_evidence(found)))
    return findings


def _modules(context: CheckContext, device: str, events: list[KernelEvent]) -> list[Finding]:
    by_module: dict[str, list[KernelEvent]] = {}
    for event in events:
        if event.detail.startswith("module_") and event.port:
            by_module.setdefault(event.port, []).append(event)
    findings = []
    for module, found in sorted(by_module.items()):
        reasons = sorted({event.detail.split(" ", 1)[1] for event in found if event.detail.startswith("module_error")})
        text = (said("network.nic_kernel.module_error", device=device, module=module, reasons=", ".join(reasons))
                if reasons else said("network.nic_kernel.module_unplugged", device=device, module=module))
        findings.append(context.warn(text, nic=device, observed={"module": module, "errors": reasons,
                                                                 "lines": len(found)},
                                     expected="no module event but `Cable plugged`", refs=[REF_MODULE],
                                     evidence=kernel_evidence(found)))
    return findings


def _flaps(context: CheckContext, device: str, events: list[KernelEvent]) -> list[Finding]:
    by_port: dict[str, list[KernelEvent]] = {}
    for event in events:
        if event.detail in ("link_down", "link_up") and event.port:
            by_port.setdefault(event.port, []).append(event)
    findings = []
    for port, found in sorted(by_port.items()):
        downs = sum(event.detail == "link_down" for event in found)
        if downs >= FLAP_DOWNS:
            findings.append(context.warn(said("network.nic_kernel.flap", device=device, port=port, downs=downs),
                                         nic=device, observed={"port": port, "link_down": downs},
                                         expected=f"fewer than {FLAP_DOWNS} `Link down`", refs=[REF_LINK],
                                         evidence=kernel_evidence(found)))
    return findings


def _pcie(context: CheckContext, device: str, events: list[KernelEvent]) -> list[Finding]:
    found = [event for event in events if event.detail.startswith("pcie_limited")]
    if not found:
        return []
    text = found[-1].detail.split(" ", 1)[1]
    return [context.warn(said("network.nic_kernel.pcie_limited", device=device, text=text), nic=device,
                         observed=text, expected="the HCA's full PCIe link", refs=[REF_PCIE],
                         evidence=kernel_evidence(found))]
