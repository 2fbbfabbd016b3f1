"""PCIe: link width and generation, BAR1, ACS/IOMMU, AER errors."""

from __future__ import annotations

import re

from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.lspci import bridges_above
from gpuready.facts.types import GpuFacts
from gpuready.knowledge import gpu_spec, thresholds
from gpuready.model import Finding

_PCIE_REF = "NVML nvmlDeviceGetCurrPcieLinkWidth/MaxPcieLinkWidth; nvidia-smi --help-query-gpu: 'may be reduced when the GPU is not in use'"
# Below this utilisation an idle GPU lowers its link generation to save power.
_BUSY_UTILIZATION_PCT = 50


@check("pcie.link_degraded", "PCIe link at full width")
def pcie_link_degraded(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        current, maximum = gpu.pcie_width_current, gpu.pcie_width_max
        if current is None or maximum is None:
            return None
        if current < maximum:
            return context.fail(
                f"GPU{gpu.index}'s PCIe link runs at x{current} of x{maximum}: host↔GPU bandwidth is cut to "
                f"{current / maximum:.0%}.", gpu=gpu, observed=f"x{current}", expected=f"x{maximum}",
                fix=f"Reseat GPU{gpu.index} (bus {gpu.bus_id}) or its riser/cable, check the slot's wiring in the "
                    f"board manual and the BIOS bifurcation setting; confirm with `sudo lspci -vv -s {gpu.bus_id}` "
                    "(LnkSta).", refs=[_PCIE_REF])
        return None
    return per_gpu(context, judge, "All {count} GPU(s) run at their full PCIe link width.",
                   reported=lambda gpu: gpu.pcie_width_current is not None,
                   unreported="No PCIe link width reported for any GPU.")


@check("pcie.gen_degraded", "PCIe generation: slot/host and GPU agree")
def pcie_gen_degraded(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        device_max = gpu.pcie_gen_device_max or _spec_gen(gpu)
        link_max = gpu.pcie_gen_host_max or gpu.pcie_gen_max
        if device_max and link_max and link_max < device_max:
            return context.warn(
                f"GPU{gpu.index} supports PCIe Gen{device_max} but its slot/host allows only Gen{link_max}: "
                f"host↔GPU bandwidth is about {2 ** (link_max - device_max):.0%} of what the GPU can do.", gpu=gpu,
                observed=f"Gen{link_max}", expected=f"Gen{device_max}",
                fix="Move the GPU to a slot of the GPU's generation, or set the slot's link speed to Auto/Gen"
                    f"{device_max} in the BIOS; risers and retimers can force a lower generation.", refs=[_PCIE_REF])
        current = gpu.pcie_gen_current
        busy = gpu.utilization_gpu_pct is not None and gpu.utilization_gpu_pct >= _BUSY_UTILIZATION_PCT
        if current and link_max and current < link_max:
            if busy:
                return context.warn(
                    f"GPU{gpu.index} is busy ({gpu.utilization_gpu_pct:.0f}%) yet its link runs at Gen{current} of "
                    f"Gen{link_max}.", gpu=gpu, observed=f"Gen{current}", expected=f"Gen{link_max}",
                    fix="Check the slot, riser and BIOS link-speed setting; confirm under load with "
                        "`gpuready validate --only transfer`.", refs=[_PCIE_REF])
            return context.passed(
                f"GPU{gpu.index} idles at Gen{current} (max Gen{link_max}): idle GPUs lower the link generation to "
                "save power, so it is judged under load by `gpuready validate` (transfer).", gpu=gpu,
                observed=f"Gen{current}", expected=f"Gen{link_max} under load")
        return None
    return per_gpu(context, judge,
                   "All {count} GPU(s) have a slot of their PCIe generation (current generation judged under load "
                   "by `gpuready validate`).")


def _spec_gen(gpu: GpuFacts) -> int | None:
    spec = gpu_spec(gpu.name)
    return spec.get("pcie_gen") if spec else None


@check("pcie.bar1", "BAR1 large enough (Resizable BAR / Above 4G decoding)")
def pcie_bar1(context: CheckContext) -> list[Finding]:
    limit = thresholds("pcie_bar1")

    def judge(gpu: GpuFacts) -> Finding | None:
        if gpu.bar1_total_bytes is None or not gpu.memory_total_bytes:
            return None
        ratio = gpu.bar1_total_bytes / gpu.memory_total_bytes
        if ratio < limit["warn_below_vram_fraction"]:
            return context.warn(
                f"GPU{gpu.index}'s BAR1 is {gpu.bar1_total_bytes / 2**20:,.0f} MiB for "
                f"{gpu.memory_total_bytes / 2**30:,.0f} GiB of VRAM: Resizable BAR / Above 4G Decoding looks off, "
                "which limits GPUDirect RDMA and P2P mappings.", gpu=gpu,
                observed=gpu.bar1_total_bytes, expected=f">= {limit['warn_below_vram_fraction']:.0%} of VRAM",
                fix="Enable 'Above 4G Decoding' and 'Resizable BAR' in the BIOS.", refs=[limit["source"]])
        return None
    return per_gpu(context, judge, "BAR1 covers the VRAM on all {count} GPU(s).",
                   reported=lambda gpu: gpu.bar1_total_bytes is not None,
                   unreported="No BAR1 size reported.")


def _describe_acs(redirecting: dict[str, list[str]]) -> str:
    return ", ".join(address + ": " + " ".join(flag + "+" for flag in flags)
                     for address, flags in list(redirecting.items())[:4])


def _iommu_mode(context: CheckContext) -> tuple[str | None, str]:
    """('translated' | 'passthrough' | 'off' | None, evidence) from the kernel command line and log."""
    cmdline = context.facts.host.kernel_cmdline or ""
    if re.search(r"\biommu=pt\b|\biommu\.passthrough=1\b", cmdline):
        return "passthrough", "kernel command line has iommu=pt"
    if re.search(r"\b(intel_iommu|amd_iommu)=off\b", cmdline):
        return "off", "kernel command line turns the IOMMU off"
    for event in context.facts.kernel_log or []:
        if event.kind == "iommu":
            mode = "passthrough" if "passthrough" in event.detail.lower() else "translated"
            return mode, f"kernel log: {event.detail}"
    if match := re.search(r"\b(?:intel|amd)_iommu=on\b", cmdline):
        return "translated", f"kernel command line has {match.group()}"
    return None, "no IOMMU setting on the kernel command line or in the kernel log"


@check("pcie.acs_iommu", "ACS and IOMMU do not redirect GPU peer traffic")
def pcie_acs_iommu(context: CheckContext) -> list[Finding]:
    gpus = context.gpus
    if len(gpus) < 2:
        return [context.passed("One GPU: no peer-to-peer traffic for ACS or the IOMMU to redirect.")]
    findings = []
    devices = context.facts.pci_devices or []
    redirecting: dict[str, list[str]] = {}
    for device in devices:
        if device.is_nvidia_gpu:
            for bridge in bridges_above(device, devices):
                if bridge.acs_enabled:
                    redirecting[bridge.address] = bridge.acs_enabled
    if redirecting:
        findings.append(context.warn(
            f"ACS redirection is on for {len(redirecting)} PCIe bridge(s) above the GPUs "
            f"({_describe_acs(redirecting)}): "
            "GPU peer traffic detours through the root complex, P2P is slow and NCCL can hang.",
            observed=redirecting, expected="ACSCtl ReqRedir- CmpltRedir-",
            fix="Disable ACS in the BIOS (or per bridge: `sudo setpci -s BDF ECAP_ACS+0x6.w=0000`, lost at reboot); "
                "on bare metal also consider disabling the IOMMU or `iommu=pt`.",
            refs=["NCCL troubleshooting, PCI Access Control Services: "
                  "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs",
                  "NVIDIA/nccl#199"]))
    mode, evidence = _iommu_mode(context)
    if mode == "translated":
        findings.append(context.warn(
            f"The IOMMU translates DMA ({evidence}): PCIe P2P between GPUs may be slow, fail, or be silently "
            "dropped.", observed=evidence, expected="iommu=pt (passthrough) or off on bare metal",
            fix="Add `iommu=pt` to the kernel command line (GRUB_CMDLINE_LINUX), update-grub, reboot.",
            refs=["NCCL troubleshooting, IOMMU: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"]))
    if not findings:
        judged = "lspci shows no ACS redirection above the GPUs" if devices else \
            "ACS not judged (no lspci -vv as root in this run)"
        findings.append(context.passed(f"{judged}; IOMMU: {evidence}."))
    return findings


@check("pcie.aer", "No PCIe AER errors for GPUs", needs=("kernel_log",))
def pcie_aer(context: CheckContext) -> list[Finding]:
    gpu_by_bus = {gpu.bus_id: gpu for gpu in context.gpus}
    findings = []
    counts: dict[str, list[str]] = {}
    for event in context.facts.kernel_log:
        if event.kind == "aer":
            counts.setdefault(event.bus_id or "?", []).append(event.line)
    for bus_id, lines in counts.items():
        gpu = gpu_by_bus.get(bus_id)
        uncorrected = [line for line in lines if re.search(r"Uncorrected|Fatal|Non-Fatal", line, re.IGNORECASE)]
        if gpu is None and not uncorrected:
            continue
        status = context.fail if uncorrected else context.warn
        findings.append(status(
            f"{len(lines)} PCIe AER message(s) for {'GPU' + str(gpu.index) if gpu else 'device'} {bus_id}"
            f"{f', {len(uncorrected)} uncorrected' if uncorrected else ' (corrected)'}; last: {lines[-1][:160]}",
            gpu=gpu, observed=len(lines), expected=0,
            fix="Reseat the GPU/riser, check the slot; persistent corrected errors often mean a marginal link "
                "(try the BIOS link speed one generation lower to confirm).",
            refs=["Linux PCIe AER howto, https://docs.kernel.org/PCI/pcieaer-howto.html"]))
    return findings or [context.passed("No PCIe AER errors for the GPUs in the kernel log.")]
