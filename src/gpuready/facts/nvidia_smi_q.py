"""`nvidia-smi -q` (XML or text) → GpuFacts, across driver generations.

Each field lists the paths where some driver generation prints it, XML tags and text labels
alike (both normalised by `smi_tree.normalize_key`); the first path that holds a value wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gpuready.facts.clock_reasons import reason_from_label
from gpuready.facts.smi_tree import Node, SmiParseError, parse_text, parse_xml
from gpuready.facts.types import GpuFacts, GpuProcess
from gpuready.facts.units import (bounded, clean, first_number, is_read_error, normalize_bus_id,
                                  to_bool, to_bytes, to_int)
from gpuready.i18n import said


@dataclass
class SmiQuery:
    driver_version: str | None
    cuda_version: str | None
    gpus: list[GpuFacts]
    attached_gpus: int | None = None
    """The count nvidia-smi announces; more than `len(gpus)` means sections are missing."""
    headless: list[GpuFacts] = field(default_factory=list)
    """A GPU section whose header line (and bus id) the paste cut: its fields, not tied to any GPU."""


def _text(value: str | None) -> str | None:
    return clean(value)


def _bounded_int(limit: str, what: str) -> Callable[[str | None], int | None]:
    """A converter: `to_int`, then ValueError where the count is beyond what a real machine has (LIMITS); `what`: the
    catalogue id that names the value."""
    def convert(value: str | None) -> int | None:
        number = to_int(value)
        return bounded(number, limit, said(what, value=repr(value))) if number is not None else None
    return convert


_pcie_gen = _bounded_int("pcie_gen", "parse.what.pcie_gen")
_pcie_width = _bounded_int("pcie_width", "parse.what.pcie_width")


# field → (converter, candidate paths). XML tags first, then text labels (normalised).
_FIELDS: dict[str, tuple[Callable[[str | None], object], list[tuple[str, ...]]]] = {
    "name": (_text, [("product_name",)]),
    "uuid": (_text, [("uuid",), ("gpu_uuid",)]),
    "serial": (_text, [("serial",), ("serial_number",)]),
    "vbios": (_text, [("vbios_version",)]),
    "memory_total_bytes": (to_bytes, [("fb_memory_usage", "total")]),
    "memory_used_bytes": (to_bytes, [("fb_memory_usage", "used")]),
    "memory_reserved_bytes": (to_bytes, [("fb_memory_usage", "reserved")]),
    "bar1_total_bytes": (to_bytes, [("bar1_memory_usage", "total")]),
    "persistence_mode": (to_bool, [("persistence_mode",)]),
    "mig_enabled": (to_bool, [("mig_mode", "current_mig"), ("mig_mode", "current")]),
    "mig_pending": (to_bool, [("mig_mode", "pending_mig"), ("mig_mode", "pending")]),
    "compute_mode": (_text, [("compute_mode",)]),
    "ecc_enabled": (to_bool, [("ecc_mode", "current_ecc"), ("ecc_mode", "current")]),
    "ecc_pending": (to_bool, [("ecc_mode", "pending_ecc"), ("ecc_mode", "pending")]),
    "power_draw_w": (first_number, [
        ("gpu_power_readings", "average_power_draw"), ("gpu_power_readings", "power_draw"),
        ("gpu_power_readings", "instant_power_draw"), ("gpu_power_readings", "instantaneous_power_draw"),
        ("power_readings", "power_draw"), ("power_readings", "average_power_draw")]),
    "power_limit_w": (first_number, [
        ("gpu_power_readings", "enforced_power_limit"), ("power_readings", "enforced_power_limit"),
        ("gpu_power_readings", "current_power_limit"), ("power_readings", "current_power_limit"),
        ("power_readings", "power_limit"), ("gpu_power_readings", "power_limit")]),
    "power_default_limit_w": (first_number, [
        ("gpu_power_readings", "default_power_limit"), ("power_readings", "default_power_limit")]),
    "power_max_limit_w": (first_number, [
        ("gpu_power_readings", "max_power_limit"), ("power_readings", "max_power_limit")]),
    "temperature_c": (first_number, [("temperature", "gpu_temp"), ("temperature", "gpu_current_temp")]),
    "temperature_memory_c": (first_number, [("temperature", "memory_temp"), ("temperature", "memory_current_temp")]),
    "sm_clock_mhz": (first_number, [("clocks", "sm_clock"), ("clocks", "sm")]),
    "sm_clock_max_mhz": (first_number, [("max_clocks", "sm_clock"), ("max_clocks", "sm")]),
    "utilization_gpu_pct": (first_number, [("utilization", "gpu_util"), ("utilization", "gpu")]),
    "pcie_gen_max": (_pcie_gen, [
        ("pci", "pci_gpu_link_info", "pcie_gen", "max_link_gen"),
        ("pci", "gpu_link_info", "pcie_generation", "max")]),
    "pcie_gen_current": (_pcie_gen, [
        ("pci", "pci_gpu_link_info", "pcie_gen", "current_link_gen"),
        ("pci", "gpu_link_info", "pcie_generation", "current")]),
    "pcie_gen_device_max": (_pcie_gen, [
        ("pci", "pci_gpu_link_info", "pcie_gen", "max_device_link_gen"),
        ("pci", "gpu_link_info", "pcie_generation", "device_max")]),
    "pcie_gen_host_max": (_pcie_gen, [
        ("pci", "pci_gpu_link_info", "pcie_gen", "max_host_link_gen"),
        ("pci", "gpu_link_info", "pcie_generation", "host_max")]),
    "pcie_width_max": (_pcie_width, [
        ("pci", "pci_gpu_link_info", "link_widths", "max_link_width"),
        ("pci", "gpu_link_info", "link_width", "max")]),
    "pcie_width_current": (_pcie_width, [
        ("pci", "pci_gpu_link_info", "link_widths", "current_link_width"),
        ("pci", "gpu_link_info", "link_width", "current")]),
    "pcie_replay_count": (to_int, [("pci", "replay_counter"), ("pci", "replays_since_reset")]),
    "retired_pages_sbe": (to_int, [
        ("retired_pages", "multiple_single_bit_retirement", "retired_count"),
        ("retired_pages", "single_bit_ecc")]),
    "retired_pages_dbe": (to_int, [
        ("retired_pages", "double_bit_retirement", "retired_count"), ("retired_pages", "double_bit_ecc")]),
    "retired_pages_pending": (to_bool, [
        ("retired_pages", "pending_blacklist"), ("retired_pages", "pending_retirement"),
        ("retired_pages", "pending_page_blacklist"), ("retired_pages", "pending_page_retirement")]),
    "remapped_rows_correctable": (to_int, [("remapped_rows", "remapped_row_corr"),
                                           ("remapped_rows", "correctable_error")]),
    "remapped_rows_uncorrectable": (to_int, [("remapped_rows", "remapped_row_unc"),
                                             ("remapped_rows", "uncorrectable_error")]),
    "remap_pending": (to_bool, [("remapped_rows", "remapped_row_pending"), ("remapped_rows", "pending")]),
    "remap_failure": (to_bool, [("remapped_rows", "remapped_row_failure"),
                                ("remapped_rows", "remapping_failure_occurred")]),
    "fabric_state": (_text, [("fabric", "state")]),
    "fabric_status": (_text, [("fabric", "status")]),
    "fabric_clique_id": (to_int, [("fabric", "cliqueid"), ("fabric", "clique_id")]),
    "fabric_cluster_uuid": (_text, [("fabric", "clusteruuid"), ("fabric", "cluster_uuid")]),
}

# The Fabric block's Health rows (driver 560 and later; `Summary` and `Incorrect Configuration` from 575) → the
# canonical keys of GpuFacts.fabric_health, in the order nvidia-smi prints them.
HEALTH_KEYS = {"summary": "summary", "bandwidth": "bandwidth", "route_recovery_in_progress": "route_recovery",
               "route_unhealthy": "route_unhealthy", "access_timeout_recovery": "access_timeout_recovery",
               "incorrect_configuration": "incorrect_configuration"}

# Paths whose `ERR!` means the GPU could not be read, reported as `error_fields`.
_READ_ERROR_WATCH = ("name", "uuid", "memory_total_bytes", "temperature_c", "power_draw_w",
                     "pcie_width_current", "sm_clock_mhz", "utilization_gpu_pct", "persistence_mode")


def parse_nvidia_smi_q_xml(text: str) -> SmiQuery:
    return _from_tree(parse_xml(text))


def parse_nvidia_smi_q_text(text: str) -> SmiQuery:
    return _from_tree(parse_text(text))


def _from_tree(root: Node) -> SmiQuery:
    gpu_nodes = root.find_all("gpu")
    bounded(len(gpu_nodes), "gpus", said("parse.what.gpu_sections"))
    headless = [node for node in gpu_nodes if node.value is None]  # the paste began inside this GPU's section
    gpus = [_gpu_from_node(index, node) for index, node in enumerate(gpu_nodes) if node.value is not None]
    attached = _bounded_int("gpus", "parse.what.attached_gpus")(root.get("attached_gpus"))
    # NVML numbers GPUs in PCI bus order; nvidia-smi prints them in the same order.
    gpus.sort(key=lambda gpu: gpu.bus_id)
    for index, gpu in enumerate(gpus):
        gpu.index = index
    return SmiQuery(driver_version=clean(root.get("driver_version")),
                    cuda_version=clean(root.get("cuda_version")), gpus=gpus, attached_gpus=attached,
                    headless=[_gpu_from_node(-1, node, headless=True) for node in headless])


def _first_path_value(node: Node, paths: list[tuple[str, ...]]) -> str | None:
    for path in paths:
        value = node.get(*path)
        if value is not None and clean(value) is not None:
            return value
    for path in paths:  # nothing usable: return what was printed (N/A, ERR!) so errors show
        value = node.get(*path)
        if value is not None:
            return value
    return None


def _gpu_from_node(index: int, node: Node, headless: bool = False) -> GpuFacts:
    bus_id = normalize_bus_id(node.value) or normalize_bus_id(node.get("pci", "pci_bus_id")) \
        or normalize_bus_id(node.get("pci", "bus_id"))
    if bus_id is None and not headless:
        raise SmiParseError("parse.smi_q.no_bus_id", index=index, value=repr(node.value))
    gpu = GpuFacts(index=index, bus_id=bus_id)
    read_errors: list[str] = []
    for field_name, (convert, paths) in _FIELDS.items():
        raw = _first_path_value(node, paths)
        if is_read_error(raw):
            if field_name in _READ_ERROR_WATCH:
                read_errors.append(field_name)
            continue
        setattr(gpu, field_name, convert(raw))
    if gpu.compute_mode:
        gpu.compute_mode = gpu.compute_mode.replace(" ", "_")
    _fill_temperatures(gpu, node)
    _fill_clock_reasons(gpu, node)
    _fill_ecc_counts(gpu, node)
    gpu.fabric_health = fabric_health_text(node.find("fabric", "health"))
    gpu.processes = _processes(node)
    gpu.error_fields = read_errors
    gpu.lost = _looks_lost(node, read_errors)
    return gpu


def fabric_health_text(health: Node | None) -> str | None:
    """`bandwidth=Full; route_recovery=False; …`: the Health rows that hold a value; None where none does."""
    if health is None:
        return None
    pairs = [(HEALTH_KEYS[child.key], value) for child in health.children
             if child.key in HEALTH_KEYS and (value := clean(child.value)) is not None]
    return "; ".join(f"{key}={value}" for key, value in pairs) or None


def _fill_temperatures(gpu: GpuFacts, node: Node) -> None:
    """Older drivers print absolute limits; newer ones print them relative to T.Limit."""
    temperature = node.find("temperature")
    if temperature is None:
        return
    absolute = {
        "shutdown_temperature_c": ("gpu_temp_max_threshold", "gpu_shutdown_temp"),
        "slowdown_temperature_c": ("gpu_temp_slow_threshold", "gpu_slowdown_temp"),
        "max_operating_temperature_c": ("gpu_temp_max_gpu_threshold", "gpu_max_operating_temp"),
    }
    for field_name, keys in absolute.items():
        value = next((first_number(temperature.get(key)) for key in keys
                      if first_number(temperature.get(key)) is not None), None)
        setattr(gpu, field_name, value)
    # Relative form: "GPU T.Limit Temp" is the margin below the max operating temperature,
    # and each threshold is printed as how far the margin may go (negative = above max operating).
    margin = first_number(temperature.get("gpu_temp_tlimit")) \
        if temperature.get("gpu_temp_tlimit") is not None else first_number(temperature.get("gpu_t_limit_temp"))
    if margin is None or gpu.temperature_c is None:
        return
    max_operating = gpu.temperature_c + margin
    relative = {
        "shutdown_temperature_c": ("gpu_temp_max_tlimit_threshold", "gpu_shutdown_t_limit_temp"),
        "slowdown_temperature_c": ("gpu_temp_slow_tlimit_threshold", "gpu_slowdown_t_limit_temp"),
        "max_operating_temperature_c": ("gpu_temp_max_gpu_tlimit_threshold", "gpu_max_operating_t_limit_temp"),
    }
    for field_name, keys in relative.items():
        if getattr(gpu, field_name) is not None:
            continue
        offset = next((first_number(temperature.get(key)) for key in keys
                       if first_number(temperature.get(key)) is not None), None)
        if offset is not None:
            setattr(gpu, field_name, max_operating - offset)


def _fill_clock_reasons(gpu: GpuFacts, node: Node) -> None:
    section = next((node.find(key) for key in ("clocks_event_reasons", "clocks_throttle_reasons")
                    if node.find(key) is not None), None)
    if section is None:
        return
    active: set[str] = set()
    for child in _walk(section):
        reason = reason_from_label(child.key)
        if reason and to_bool(child.value):
            active.add(reason)
    gpu.clock_event_reasons = frozenset(active)


def _walk(node: Node):
    for child in node.children:
        yield child
        yield from _walk(child)


def _fill_ecc_counts(gpu: GpuFacts, node: Node) -> None:
    errors = node.find("ecc_errors")
    if errors is None:
        return
    for scope in ("volatile", "aggregate"):
        section = errors.find(scope)
        if section is None:
            continue
        corrected, uncorrected = _sum_ecc(section)
        setattr(gpu, f"ecc_corrected_{scope}", corrected)
        setattr(gpu, f"ecc_uncorrected_{scope}", uncorrected)


def _sum_ecc(section: Node) -> tuple[int | None, int | None]:
    """Sum every counter; old drivers split by single/double bit with a `total` each."""
    corrected = uncorrected = None
    for child in section.children:
        if child.key in ("single_bit", "double_bit"):
            value = to_int(child.get("total"))
            is_uncorrected = child.key == "double_bit"
        elif child.key.endswith("correctable") or "uncorrectable" in child.key:
            value = to_int(child.value)
            is_uncorrected = "uncorrectable" in child.key
        else:
            continue
        if value is None:
            continue
        if is_uncorrected:
            uncorrected = (uncorrected or 0) + value
        else:
            corrected = (corrected or 0) + value
    return corrected, uncorrected


def _processes(node: Node) -> list[GpuProcess] | None:
    section = node.find("processes")
    if section is None:
        return None
    processes = []
    for info in section.find_all("process_info"):  # XML
        processes.append(GpuProcess(pid=to_int(info.get("pid")), name=clean(info.get("process_name")),
                                    kind=clean(info.get("type")),
                                    used_memory_bytes=to_bytes(info.get("used_memory"))))
    for info in section.find_all("process_id"):  # text: details nested under "Process ID"
        processes.append(GpuProcess(pid=to_int(info.value), name=clean(info.get("name")),
                                    kind=clean(info.get("type")),
                                    used_memory_bytes=to_bytes(info.get("used_gpu_memory"))))
    return processes


def _looks_lost(node: Node, read_errors: list[str]) -> bool:
    """`GPU is lost` anywhere, or most of the key fields unreadable (one ERR! is transient)."""
    if any(child.value and "gpu is lost" in child.value.lower() for child in _walk(node)):
        return True
    return len(read_errors) >= 3
