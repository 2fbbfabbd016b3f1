"""PCIe: link width and generation, BAR1, ACS/IOMMU, AER errors."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from gpuready.checks.gpu import allocation
from gpuready.checks.nccl_logs import acs_in_nccl_logs
from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.types import GpuFacts, PciDevice
from gpuready.i18n import finding_text, said
from gpuready.knowledge import gpu_spec, thresholds
from gpuready.model import Finding

ACS_OFF = "sudo setpci -s {port} ECAP_ACS+0x6.w=0000"
"""Turns a port's ACS off (its ACS control register to 0) until the next reboot: one command per port, as NCCL's
troubleshooting page loops over the bridges; the command is the same in every language, the catalogue says around it."""
_PCIE_REF = "NVML nvmlDeviceGetCurrPcieLinkWidth/MaxPcieLinkWidth; nvidia-smi --help-query-gpu: 'may be reduced when the GPU is not in use'"


@check("pcie.link_degraded")
def pcie_link_degraded(context: CheckContext) -> list[Finding]:
    """PCIe link at full width."""
    def judge(gpu: GpuFacts) -> Finding | None:
        current, maximum = gpu.pcie_width_current, gpu.pcie_width_max
        if current is None or maximum is None:
            return None
        if current < maximum:
            return context.fail(
                said("pcie.link_degraded.narrow", index=gpu.index, current=current, maximum=maximum,
                     ratio=current / maximum, gpu=_gpu_label(gpu), select=f" -s {gpu.bus_id}" if gpu.bus_id else ""),
                gpu=gpu, observed=f"x{current}", expected=f"x{maximum}", refs=[_PCIE_REF])
        return None
    return per_gpu(context, judge, said("pcie.link_degraded.all_good"),
                   reported=lambda gpu: gpu.pcie_width_current is not None,
                   unreported=said("pcie.link_degraded.unreported"))


@check("pcie.gen_degraded")
def pcie_gen_degraded(context: CheckContext) -> list[Finding]:
    """PCIe generation: slot/host and GPU agree."""
    busy_pct = thresholds("pcie_gen_busy")["busy_utilization_pct"]

    def judge(gpu: GpuFacts) -> Finding | None:
        device_max = gpu.pcie_gen_device_max or _spec_gen(gpu)
        link_max = gpu.pcie_gen_host_max or gpu.pcie_gen_max
        if device_max and link_max and link_max < device_max:
            return context.warn(
                said("pcie.gen_degraded.slot", index=gpu.index, device_max=device_max, link_max=link_max,
                     ratio=2 ** (link_max - device_max)), gpu=gpu,
                observed=f"Gen{link_max}", expected=f"Gen{device_max}", refs=[_PCIE_REF])
        current = gpu.pcie_gen_current
        busy = gpu.utilization_gpu_pct is not None and gpu.utilization_gpu_pct >= busy_pct
        if current and link_max and current < link_max:
            if busy:
                return context.warn(
                    said("pcie.gen_degraded.busy", index=gpu.index, utilization_pct=gpu.utilization_gpu_pct,
                         current=current, link_max=link_max), gpu=gpu, observed=f"Gen{current}",
                    expected=f"Gen{link_max}", refs=[_PCIE_REF, thresholds("pcie_gen_busy")["source"]])
            return context.passed(said("pcie.gen_degraded.idle", index=gpu.index, current=current, link_max=link_max),
                                  gpu=gpu, observed=f"Gen{current}", expected=f"Gen{link_max} under load")
        return None
    return per_gpu(context, judge,
                   said("pcie.gen_degraded.all_good"),
                   reported=lambda gpu: (gpu.pcie_gen_host_max or gpu.pcie_gen_max) is not None,
                   unreported=said("pcie.gen_degraded.unreported"))


def _spec_gen(gpu: GpuFacts) -> int | None:
    spec = gpu_spec(gpu.name)
    return spec.get("pcie_gen") if spec else None


def _gpu_label(gpu: GpuFacts) -> str:
    return f"GPU{gpu.index} ({gpu.bus_id})" if gpu.bus_id else f"GPU{gpu.index}"


# --------------------------------------------------------------------------------------------- BAR1

@check("pcie.bar1")
def pcie_bar1(context: CheckContext) -> list[Finding]:
    """BAR1 as large as the GPU ships with (Resizable BAR / Above 4G decoding)."""
    limit = thresholds("pcie_bar1")
    gpus = context.gpus
    if not any(gpu.bar1_total_bytes is not None for gpu in gpus):
        return [context.skip(said("pcie.bar1.unreported"))]
    findings: list[Finding] = []
    small_by_design: list[tuple[GpuFacts, str]] = []
    for gpu in gpus:
        if gpu.bar1_total_bytes is None:
            continue
        bar1_mib = gpu.bar1_total_bytes / 2**20
        spec = gpu_spec(gpu.name)
        ships_mib = spec.get("bar1_ships_mib") if spec else None
        if ships_mib is not None:
            if bar1_mib < ships_mib:
                findings.append(context.warn(
                    said("pcie.bar1.below_shipped", gpu=_gpu_label(gpu), bar1_mib=bar1_mib, model=spec.model,
                         ships_mib=ships_mib), gpu=gpu, observed=f"{bar1_mib:,.0f} MiB",
                    expected=f">= {ships_mib:,} MiB (as shipped)",
                    refs=[spec.get("bar1_source", ""), limit["source"]]))
            elif gpu.memory_total_bytes and \
                    gpu.bar1_total_bytes < limit["warn_below_vram_fraction"] * gpu.memory_total_bytes:
                small_by_design.append((gpu, spec.get("bar1_source", "")))
            continue
        # Unknown model (or no sourced shipped size): BAR1 against the VRAM.
        if not gpu.memory_total_bytes:
            continue
        if gpu.bar1_total_bytes / gpu.memory_total_bytes < limit["warn_below_vram_fraction"]:
            findings.append(context.warn(
                said("pcie.bar1.small_for_vram", gpu=_gpu_label(gpu), bar1_mib=bar1_mib,
                     vram_gib=gpu.memory_total_bytes / 2**30),
                gpu=gpu, observed=f"{bar1_mib:,.0f} MiB",
                expected=f">= {limit['warn_below_vram_fraction']:.0%} of VRAM (model's shipped BAR1 unknown)",
                refs=[limit["source"]]))
    if small_by_design:
        names = ", ".join(f"{_gpu_label(gpu)} {gpu_spec(gpu.name).model}" for gpu, _ in small_by_design)
        sizes = {f"{gpu.bar1_total_bytes / 2**20:,.0f} MiB" for gpu, _ in small_by_design}
        findings.append(context.passed(
            said("pcie.bar1.as_shipped_size", gpus=names, size=sizes.pop()) if len(sizes) == 1 else
            said("pcie.bar1.as_shipped", gpus=names),
            observed={_gpu_label(gpu): f"{gpu.bar1_total_bytes / 2**20:,.0f} MiB" for gpu, _ in small_by_design},
            expected="BAR1 as shipped", refs=sorted({source for _, source in small_by_design if source})))
    if not findings:
        findings.append(context.passed(said("pcie.bar1.pass", count=len(gpus))))
    return findings


# ---------------------------------------------------------------------------------------- ACS/IOMMU

@dataclass(frozen=True)
class _IommuEvidence:
    """How the IOMMU mode was found: `kind` names the catalogue variant (cmdline_has, cmdline_off, log, none),
    `values` fill it, `text` is the English (the finding's `observed`)."""

    kind: str
    text: str
    values: dict[str, str] = field(default_factory=dict)


def _iommu_mode(context: CheckContext) -> tuple[str | None, _IommuEvidence]:
    """('translated' | 'passthrough' | 'off' | None, evidence) from the kernel command line and log."""
    cmdline = context.facts.host.kernel_cmdline or ""
    if re.search(r"\biommu=pt\b|\biommu\.passthrough=1\b", cmdline):
        return "passthrough", _IommuEvidence("cmdline_has", "kernel command line has iommu=pt", {"option": "iommu=pt"})
    if re.search(r"\b(intel_iommu|amd_iommu)=off\b", cmdline):
        return "off", _IommuEvidence("cmdline_off", "kernel command line turns the IOMMU off")
    for event in context.facts.kernel_log or []:
        if event.kind == "iommu":
            mode = "passthrough" if "passthrough" in event.detail.lower() else "translated"
            return mode, _IommuEvidence("log", f"kernel log: {event.detail}", {"detail": event.detail})
    if match := re.search(r"\b(?:intel|amd)_iommu=on\b", cmdline):
        return "translated", _IommuEvidence("cmdline_has", f"kernel command line has {match.group()}",
                                            {"option": match.group()})
    return None, _IommuEvidence("none", "no IOMMU setting on the kernel command line or in the kernel log")


def _flags(port: PciDevice) -> str:
    return " ".join(flag + "+" for flag in port.acs_enabled)


def _gpus_below(bridge: PciDevice, pci_gpus: list[PciDevice]) -> list[PciDevice]:
    """The GPUs of this lspci list in the bridge's subtree, in lspci's order."""
    return [gpu for gpu in pci_gpus if gpu.address in bridge.gpus_below]


def _switch_upstream(port: PciDevice, devices: list[PciDevice]) -> PciDevice | None:
    """The upstream port of this downstream port's switch, where this lspci list holds it."""
    if port.switch_upstream is None:
        return None
    return next((device for device in devices if device.address == port.switch_upstream), None)


def _name_pci_gpus(context: CheckContext, devices: list[PciDevice]) -> list[str]:
    by_bus = {gpu.bus_id: gpu for gpu in context.gpus if gpu.bus_id}
    return [_gpu_label(by_bus[device.address]) if device.address in by_bus else device.address for device in devices]


@check("pcie.acs_iommu", logs=acs_in_nccl_logs)
def pcie_acs_iommu(context: CheckContext) -> list[Finding]:
    """ACS and IOMMU do not redirect GPU peer traffic."""
    gpus = context.gpus
    if len(gpus) < 2:
        return [context.passed(said("pcie.acs_iommu.one_gpu"))]
    acs_ref = thresholds("pcie_acs")["source"]
    findings = []
    devices = context.facts.pci_devices or []
    pci_gpus = [device for device in devices if device.is_nvidia_gpu]
    # switch (its upstream port, or the redirecting port itself) → redirecting ports in it
    switches: dict[str, tuple[PciDevice, list[PciDevice]]] = {}
    root_ports: list[PciDevice] = []
    for port in devices:
        if not port.is_bridge or not port.acs_enabled:
            continue
        if not _gpus_below(port, pci_gpus):
            continue
        if port.is_root_port:
            root_ports.append(port)
            continue
        # A switch port (or a bridge of unknown type): judged by the GPUs of its switch.
        scope = _switch_upstream(port, devices) or port
        switches.setdefault(scope.address, (scope, []))[1].append(port)
    for scope, ports in switches.values():
        below = _gpus_below(scope, pci_gpus)
        if len(below) < 2:
            continue
        named = _name_pci_gpus(context, below)
        kind = "switch" if scope.port_type in ("Upstream Port", "Downstream Port") else "bridge"  # type unknown
        redirecting = ", ".join(f"{port.address} ({_flags(port)})" for port in ports)
        findings.append(context.warn(
            said(f"pcie.acs_iommu.{kind}", ports=redirecting, count=len(below), gpus=", ".join(named),
                 commands="\n".join(f"`{ACS_OFF.format(port=shlex.quote(port.address))}`" for port in ports)),
            observed={"switch": scope.address, "ports": {port.address: port.acs_enabled for port in ports},
                      "gpus": named},
            expected="ACSCtl ReqRedir- CmpltRedir- on switch ports between GPUs", refs=[acs_ref]))
    mode, evidence = _iommu_mode(context)
    if mode == "translated":
        findings.append(context.warn(
            said(f"pcie.acs_iommu.translated_{evidence.kind}", **evidence.values), observed=evidence.text,
            expected="iommu=pt (passthrough) or off on bare metal",
            refs=["NCCL troubleshooting, IOMMU: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"]))
    if not findings and not devices and mode is None:
        return [context.skip(said("pcie.acs_iommu.unjudged"))]
    if not findings:
        judged = "lspci" if devices else "no_lspci"  # ACS judged from lspci -vv, or not
        findings.append(context.passed(said(f"pcie.acs_iommu.pass_{judged}_{evidence.kind}", **evidence.values),
                                       observed={"root_ports_redirecting": [port.address for port in root_ports]}
                                       if root_ports else None, refs=[acs_ref] if devices else []))
    if root_ports:  # the last finding notes the root ports' ACS, which is by design: its `_root` variant
        last = findings[-1]
        root_list = ", ".join(port.address for port in root_ports[:4]) + (" …" if len(root_ports) > 4 else "")
        findings[-1] = replace(last, **finding_text(said(f"{last.message_id}_root", **last.message_values,
                                                         root_ports=root_list)))
    return findings


# --------------------------------------------------------------------------------------------- AER

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
# Root port headline (kernel aer.c): "AER: Corrected error received: 0000:01:00.0", "Multiple Uncorrected
# (Non-Fatal) error received: …", 6.x: "Correctable error message received from …", old kernels: "id=0018".
_RECEIVED = re.compile(rf"\b(?:Multiple )?(Corrected|Correctable|Uncorrected|Uncorrectable)\b[^:]*? error "
                       rf"(?:message )?received(?: from)?:? (?:({_BDF})|id=([0-9a-fA-F]{{4}}))")
# Per-device line: "PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=…, (Requester ID)"; old: "id=0018(…)".
_BUS_ERROR = re.compile(r"PCIe Bus Error: severity=([^,]+)(?:.*?\bid=([0-9a-fA-F]{4})\()?")
_PRINTER = re.compile(rf"\b([\w.-]+) ({_BDF}):")
_NOT_GPU_CLASSES = ("Ethernet controller", "Infiniband controller", "Non-Volatile memory controller",
                    "Network controller")


def _from_id(domain_of: str, requester_id: str) -> str:
    """Old kernels name the source by its requester id (bus << 8 | devfn) in the reporting port's domain."""
    value = int(requester_id, 16)
    return f"{domain_of.split(':')[0]}:{value >> 8:02x}:{(value & 0xff) >> 3:02x}.{value & 0x7}"


@dataclass
class _AerSource:
    address: str
    received: dict[str, int] = field(default_factory=lambda: {"corrected": 0, "uncorrected": 0})
    """Root-port headlines naming this device, by severity."""
    bus_errors: dict[str, int] = field(default_factory=lambda: {"corrected": 0, "uncorrected": 0})
    """`PCIe Bus Error` lines for this device, by severity (the same errors, printed per device)."""
    reported_by_port: bool = False
    """The kernel's port service driver (`pcieport`) printed it as its own error: the device is a PCIe port."""
    last_line: str = ""

    def errors(self, severity: str) -> int:
        return max(self.received[severity], self.bus_errors[severity])

    @property
    def count(self) -> int:
        return self.errors("corrected") + self.errors("uncorrected")

    @property
    def uncorrected(self) -> bool:
        return self.errors("uncorrected") > 0

    def describe(self) -> tuple[str, dict[str, int | str]]:
        """The catalogue variant that says how many errors (both, uncorrected, corrected), and its values, with the
        last line."""
        corrected, uncorrected = self.errors("corrected"), self.errors("uncorrected")
        what = "both" if corrected and uncorrected else "uncorrected" if uncorrected else "corrected"
        return what, {"count": self.count, "uncorrected": uncorrected, "corrected": corrected,
                      "last_line": self.last_line[:160]}


def _aer_sources(events) -> dict[str, _AerSource]:
    sources: dict[str, _AerSource] = {}
    for event in events:
        if event.kind != "aer" or not event.bus_id:
            continue
        printer = _PRINTER.search(event.line)
        if received := _RECEIVED.search(event.line):
            address = (received.group(2) or _from_id(event.bus_id, received.group(3))).lower()
            source = sources.setdefault(address, _AerSource(address))
            tally, severity = source.received, received.group(1)
            source.reported_by_port |= address == event.bus_id
        elif bus_error := _BUS_ERROR.search(event.line):
            address = _from_id(event.bus_id, bus_error.group(2)) if bus_error.group(2) else event.bus_id
            source = sources.setdefault(address, _AerSource(address))
            tally, severity = source.bus_errors, bus_error.group(1)
            source.reported_by_port |= bool(printer and printer.group(1) == "pcieport" and address == event.bus_id)
        else:  # detail lines ("device [..] error status/mask", "[ 0] RxErr"), "enabled with IRQ", recovery notes
            continue
        tally["uncorrected" if re.search(r"Uncorrect|Fatal", severity) else "corrected"] += 1
        source.last_line = event.line
    return sources


def _severity(source: _AerSource) -> str:
    return "uncorrected" if source.uncorrected else "corrected"


@check("pcie.aer", needs=("kernel_log",), needs_gpus=False)
def pcie_aer(context: CheckContext) -> list[Finding]:
    """No PCIe AER errors on GPUs or the ports above them."""
    ref = thresholds("pcie_aer")["source"]
    gpu_by_bus = {gpu.bus_id: gpu for gpu in context.gpus if gpu.bus_id}
    devices = context.facts.pci_devices or []
    by_address = {device.address: device for device in devices}
    findings: list[Finding] = []
    allocated = allocation(context)
    for source in sorted(_aer_sources(context.facts.kernel_log).values(), key=lambda item: item.address):
        status = context.fail if source.uncorrected else context.warn
        what, counted = source.describe()
        gpu = gpu_by_bus.get(source.address)
        device = by_address.get(source.address)
        if gpu is not None or (device is not None and device.is_nvidia_gpu):
            outside = allocated.outside(source.address)
            # a GPU of the list, or one lspci shows but the list lacks (`_unlisted`); `_outside`: not this container's
            text = said(f"pcie.aer.gpu_{what}{'' if gpu else '_unlisted'}{'_outside' if outside else ''}", **counted,
                        gpu=_gpu_label(gpu) if gpu else None, address=source.address, port=source.address)
            findings.append((context.warn if outside else status)(text, gpu=gpu, observed=source.count, expected=0,
                                                                  refs=[ref]))
            continue
        if device is not None and device.is_bridge:
            below = _gpus_below(device, [found for found in devices if found.is_nvidia_gpu])
            if below:
                kind = device.port_type or "PCIe bridge"
                for pci_gpu in below:
                    gpu_below = gpu_by_bus.get(pci_gpu.address)
                    label = _gpu_label(gpu_below) if gpu_below else f"NVIDIA GPU {pci_gpu.address}"
                    outside = allocated.outside(pci_gpu.address)
                    shared = "_shared" if len(below) > 1 else ""  # the port's errors count for each GPU below it
                    text = said(f"pcie.aer.port_{what}{shared}{'_outside' if outside else ''}", **counted, kind=kind,
                                port=source.address, gpu=label, shared=len(below))
                    findings.append((context.warn if outside else status)(
                        text, gpu=gpu_below, observed={"port": source.address, "errors": source.count}, expected=0,
                        refs=[ref]))
                continue
        if device is not None:
            if source.uncorrected:
                klass = device.device_class
                nic = "_nic" if klass in _NOT_GPU_CLASSES else ""  # says: a NIC or NVMe drive
                product = re.sub(r"\s*\((?:rev [0-9a-f]+|prog-if [^)]*)\)", "", device.description.split(": ", 1)[-1])
                findings.append(context.warn(
                    said(f"pcie.aer.device_{what}{nic}", **counted, device_class=klass, address=source.address,
                         product=product[:80]),
                    observed={"device": source.address, "class": klass, "errors": source.count}, expected=0,
                    refs=[ref]))
            continue
        # Not in lspci (no lspci-vv.txt, or the device is missing from it).
        if source.reported_by_port and not devices:
            findings.append(context.warn(
                said(f"pcie.aer.unlisted_port_{what}", **counted, address=source.address),
                observed={"port": source.address, "errors": source.count, "severity": _severity(source)}, expected=0,
                refs=[ref]))
        elif source.uncorrected or any(gpu.bus_id is None for gpu in context.gpus):
            unknown_bus = any(gpu.bus_id is None for gpu in context.gpus)
            findings.append(context.warn(
                said(f"pcie.aer.unknown_{what}{'_no_bus_id' if unknown_bus else ''}", **counted,
                     address=source.address),
                observed={"device": source.address, "errors": source.count, "severity": _severity(source)},
                expected=0, refs=[ref]))
    return findings or [context.passed(said("pcie.aer.pass"), refs=[ref])]
