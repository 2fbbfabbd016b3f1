"""Bundle files → Facts. Live and offline both come through here.

Each file has one parser; a file that fails to parse becomes an input error naming it, and
the other files are still used. GPU facts from several files are merged by PCI bus id, the
richest source first (nvml.json, then `nvidia-smi -q -x`, then `-q` text, then plain `nvidia-smi`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from gpuready.facts import host_files, network_files, software_files
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.lspci import parse_lspci
from gpuready.facts.nvidia_smi_plain import parse_nvidia_smi_plain
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_text, parse_nvidia_smi_q_xml
from gpuready.facts.nvml import ForeignNvmlJson, NvmlDocument
from gpuready.facts.topology import parse_nvlink_status, parse_topo_matrix, parse_topo_p2p
from gpuready.facts.types import Facts, GpuFacts


def build_facts(files: dict[str, str], *, live: bool = False) -> Facts:
    facts = Facts(live=live)
    gpu_sources: list[tuple[str, list[GpuFacts]]] = []

    def use(name: str, apply: Callable[[str], None]) -> None:
        text = files.get(name)
        if text is None:
            facts.sources[name] = "missing"
            return
        try:
            apply(text)
            facts.sources[name] = "parsed"
        except ForeignNvmlJson as error:
            facts.sources[name] = f"ignored: {error}"
        except Exception as error:  # any parser failure is about the file, reported, not raised
            reason = str(error) or type(error).__name__
            facts.sources[name] = f"unreadable: {reason}"
            facts.input_errors.append((name, f"{name} could not be parsed: {reason}"))

    def from_nvml(text: str) -> None:
        document = NvmlDocument(text)
        if document.init_error:
            facts.gpu_probe_error = document.init_error
            return
        facts.driver_version = facts.driver_version or document.driver_version
        facts.cuda_driver_version = facts.cuda_driver_version or document.cuda_driver_version
        facts.gpus_announced = document.device_count
        gpu_sources.append(("nvml.json", document.gpus))
        if document.p2p_read:
            facts.p2p_read = facts.p2p_read or document.p2p_read

    def from_smi_query(parse: Callable[[str], Any], name: str) -> Callable[[str], None]:
        def apply(text: str) -> None:
            query = parse(text)
            facts.driver_version = facts.driver_version or query.driver_version
            facts.cuda_driver_version = facts.cuda_driver_version or query.cuda_version
            for gpu in query.gpus:
                gpu.source = name
            if query.attached_gpus is not None:
                facts.gpus_announced = max(facts.gpus_announced or 0, query.attached_gpus)
            gpu_sources.append((name, query.gpus))
        return apply

    def from_plain(text: str) -> None:
        plain = parse_nvidia_smi_plain(text)
        if plain.error_kind:
            facts.gpu_probe_error = facts.gpu_probe_error or plain.error_line
        facts.driver_version = facts.driver_version or plain.driver_version
        facts.cuda_driver_version = facts.cuda_driver_version or plain.cuda_version
        for gpu in plain.gpus:
            if gpu.bus_id in plain.corrupted_inforom_bus_ids:
                gpu.inforom_valid = False
        if not plain.gpus and not plain.error_kind and not plain.driver_version:
            raise ValueError("neither a GPU table nor a driver message found")
        gpu_sources.append(("nvidia-smi.txt", plain.gpus))

    use("nvml.json", from_nvml)
    use("nvidia-smi-q.xml", from_smi_query(parse_nvidia_smi_q_xml, "nvidia-smi-q.xml"))
    if "nvidia-smi-q.xml" not in files or facts.sources.get("nvidia-smi-q.xml") != "parsed":
        use("nvidia-smi-q.txt", from_smi_query(parse_nvidia_smi_q_text, "nvidia-smi-q.txt"))
    use("nvidia-smi.txt", from_plain)
    facts.gpus = merge_gpu_sources(gpu_sources, facts.gpu_probe_error)

    use("nvidia-smi-topo.txt", lambda text: setattr(facts, "topology", parse_topo_matrix(text)))
    use("nvidia-smi-topo-p2p.txt", lambda text: setattr(facts, "p2p_read", parse_topo_p2p(text)))
    use("nvidia-smi-nvlink-s.txt", lambda text: _apply_nvlink_status(facts, parse_nvlink_status(text)))
    use("dmesg.txt", lambda text: _apply_kernel_log(facts, text))
    use("lspci-vv.txt", lambda text: setattr(facts, "pci_devices", parse_lspci(text)))
    _use_host_files(facts, use)
    use("torch.json", lambda text: setattr(facts, "torch", software_files.parse_torch_json(text)))
    use("pip-freeze.txt", lambda text: setattr(facts, "pip_packages", software_files.parse_pip_freeze(text)))
    use("ldconfig.txt", lambda text: setattr(facts, "system_libraries", software_files.parse_ldconfig(text)))
    use("env.txt", lambda text: setattr(facts, "env", host_files.parse_env(text)))
    _use_network_files(facts, use)
    use("manifest.json", lambda text: _apply_manifest(facts, text))
    return facts


def _apply_kernel_log(facts: Facts, text: str) -> None:
    facts.kernel_log = parse_kernel_log(text)
    facts.kernel_log_readable = True


def _apply_nvlink_status(facts: Facts, links: dict) -> None:
    for gpu in facts.gpus or []:
        if gpu.nvlinks is None:
            gpu.nvlinks = links.get(gpu.index, [])


def _apply_manifest(facts: Facts, text: str) -> None:
    manifest = json.loads(text)
    if not isinstance(manifest, dict):
        raise ValueError("manifest.json is not a JSON object")
    facts.host.hostname = facts.host.hostname or manifest.get("host")
    dmesg = manifest.get("files", {}).get("dmesg.txt", {})
    if dmesg and not dmesg.get("collected"):
        facts.kernel_log_readable = False


def _use_host_files(facts: Facts, use: Callable) -> None:
    host = facts.host

    def meminfo(text: str) -> None:
        host.memory_total_bytes = host_files.parse_meminfo(text)["MemTotal"]

    def cpuinfo(text: str) -> None:
        host.cpu_count, host.cpu_model, host.sockets = host_files.parse_cpuinfo(text)

    def df(text: str) -> None:
        host.disks = host_files.parse_df(text)
        shm = next((disk for disk in host.disks if disk.mount == "/dev/shm"), None)
        host.shm_total_bytes = shm.size_bytes if shm else host.shm_total_bytes

    def cgroup(text: str) -> None:
        sections = host_files.split_sections(text)
        host.cgroup_memory_limit_bytes, host.cgroup_cpu_limit, host.container = \
            host_files.parse_cgroup_limits(sections)

    use("meminfo.txt", meminfo)
    use("cpuinfo.txt", cpuinfo)
    use("df.txt", df)
    use("cgroup.txt", cgroup)
    use("ulimit.txt", lambda text: setattr(host, "memlock_limit_bytes", host_files.parse_memlock(text)))
    use("uptime.txt", lambda text: setattr(host, "uptime_s", host_files.parse_uptime(text)))
    use("cmdline.txt", lambda text: setattr(host, "kernel_cmdline", text.strip()))
    use("modules.txt", lambda text: setattr(host, "kernel_modules", host_files.parse_modules(text)))


def _use_network_files(facts: Facts, use: Callable) -> None:
    def sysfs(text: str) -> None:
        sections = host_files.split_sections(text)
        ports = network_files.parse_ib_sysfs(sections)
        if ports:
            facts.ib_ports = ports
        facts.net_interfaces = network_files.parse_net_sysfs(sections)

    def ibv(text: str) -> None:
        ports = network_files.parse_ibv_devinfo(text)
        if facts.ib_ports is None:
            facts.ib_ports = ports

    def ip_addr(text: str) -> None:
        addresses = network_files.parse_ip_addr(text)
        for interface in facts.net_interfaces or []:
            interface.addresses = addresses.get(interface.name, [])

    use("sysfs.txt", sysfs)
    use("ibv_devinfo.txt", ibv)
    use("ip-addr.txt", ip_addr)


def merge_gpu_sources(sources: list[tuple[str, list[GpuFacts]]], probe_error: str | None) -> list[GpuFacts] | None:
    """One GpuFacts per bus id; the first source's value wins, later ones fill what it lacks."""
    if not sources:
        return [] if probe_error else None
    merged: dict[str, GpuFacts] = {}
    for name, gpus in sources:
        for gpu in gpus:
            existing = merged.get(gpu.bus_id)
            if existing is None:
                merged[gpu.bus_id] = dataclasses.replace(gpu)
                continue
            for field in dataclasses.fields(GpuFacts):
                if field.name in ("index", "bus_id", "error_fields", "lost", "source"):
                    continue
                if getattr(existing, field.name) is None and getattr(gpu, field.name) is not None:
                    setattr(existing, field.name, getattr(gpu, field.name))
            existing.lost = existing.lost or gpu.lost
            existing.error_fields = sorted(set(existing.error_fields) | set(gpu.error_fields))
            existing.source = f"{existing.source}, {name}" if name not in existing.source else existing.source
    gpus = sorted(merged.values(), key=lambda gpu: gpu.bus_id)
    for index, gpu in enumerate(gpus):
        gpu.index = index  # NVML's order is PCI bus order
    return gpus
