"""What NVML says about the GPUs, typed, in one vocabulary with the unit in each name: collect, check, telemetry and
monitor share these (facts/nvml.py reads them; nothing here imports pynvml).

`GpuIdentity` names a GPU; `GpuSample` is one reading of the figures that move (what telemetry samples every second,
monitor watches and collect reads once); `GpuState` the settings and counters collect reads besides; `GpuRecord` one
GPU of a collection and `NvmlCollection` the whole of it, which `to_json` writes as nvml.json:

  {"format": "gpuready-nvml", "version": 2,
   "init_error": str | null,          # NVML could not start (no driver, version mismatch …)
   "driver_version": str, "cuda_driver_version": "13.0", "nvml_version": str, "device_count": int,
   "gpus": [{<GpuIdentity, GpuSample and GpuState fields>, "processes": [...], "nvlinks": [...],
             "errors": {<field>: "NVMLError_…" | "timeout: …" | "skipped: …"}, "lost": bool}],
   "p2p_read": {"0,1": "OK" | "CNS" | "GNS" | "TNS" | "DNS" | "NS" | "U"},
   "p2p_not_probed": {"0,1": "not probed: GPU 1 timed out earlier"},
   "errors": {<system field>: "NVMLError_…"}}

Version 1 (gpuready before issue 30) named a GPU's fields as facts.types.GpuFacts does (`power_draw_w`,
`pcie_replay_count`, `utilization_gpu_pct` …) and listed the clock-event reasons by name; facts/nvml_json.py reads both.
A report's telemetry series are named by GpuSample's fields (`power_w`, `pcie_replay` …), as they always were.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gpuready.facts.types import GpuProcess, NvLink

NVML_FORMAT = "gpuready-nvml"
NVML_FORMAT_VERSION = 2
"""The version collect writes; facts/nvml_json.py reads this and version 1."""


@dataclass(kw_only=True)
class GpuIdentity:
    index: int
    """NVML index: the order of PCI bus ids."""
    bus_id: str | None = None
    """`0000:3b:00.0`: 4-hex domain, lower case."""
    uuid: str | None = None
    """`GPU-8f3a…`."""
    name: str | None = None
    """The product name, `NVIDIA H200`."""
    serial: str | None = None
    """The board's serial number."""
    vbios: str | None = None
    """The VBIOS version, `96.00.AF.00.01`."""
    memory_total_bytes: int | None = None
    """Framebuffer memory."""
    bar1_total_bytes: int | None = None
    """The BAR1 aperture the host (and peers) map GPU memory through."""
    compute_capability: str | None = None
    """`9.0`."""
    numa_node: int | None = None
    """The NUMA node nearest the GPU; None where NVML names none."""
    cpu_affinity: str | None = None
    """The CPUs nearest the GPU, as Linux prints a CPU list: `0-15,32-47`."""


def _unit(unit: str) -> Any:
    """A sample's figure: None until read; `unit` is the unit of its telemetry series."""
    return field(default=None, metadata={"unit": unit})


@dataclass(kw_only=True)
class GpuSample:
    """The figures that move, read in one go: telemetry's series are these fields, by name and unit, in this order."""
    power_w: float | None = _unit("watts")
    """Board power draw (NVML averages it over 1 s on Ampere and newer)."""
    temperature_c: float | None = _unit("celsius")
    """GPU die temperature."""
    memory_temperature_c: float | None = _unit("celsius")
    """HBM temperature; read from NVML's field values only (None where the GPU or driver has none)."""
    sm_clock_mhz: float | None = _unit("mhz")
    """Current SM clock."""
    memory_clock_mhz: float | None = _unit("mhz")
    """Current memory clock."""
    utilization_pct: float | None = _unit("percent")
    """Share of the last sample period in which a kernel ran."""
    clock_event_reasons: int | None = _unit("bitmask")
    """Active clock-event (throttle) reasons as NVML's bit mask; facts/clock_reasons.py names the bits."""
    ecc_corrected: int | None = _unit("count")
    """Corrected ECC errors since the driver loaded (volatile)."""
    ecc_uncorrected: int | None = _unit("count")
    """Uncorrected ECC errors since the driver loaded (volatile)."""
    pcie_replay: int | None = _unit("count")
    """PCIe replays since the driver loaded."""
    pcie_width: int | None = _unit("lanes")
    """Current PCIe link width."""
    power_limit_w: float | None = _unit("watts")
    """The power limit in force (enforced)."""

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> "GpuSample":
        """A sample from its figures by name (a report's series at one time, a monitor JSON line's sample); names that
        are not a figure are left out."""
        return cls(**{name: values[name] for name in SAMPLE_UNITS if name in values})


SAMPLE_UNITS: dict[str, str] = {item.name: item.metadata["unit"] for item in dataclasses.fields(GpuSample)}
"""Telemetry's series: each figure of a sample and its unit."""


@dataclass(kw_only=True)
class GpuState:
    """What collect reads of a GPU besides its identity and a sample: modes, limits, maxima and health counters."""
    memory_used_bytes: int | None = None
    """Framebuffer memory in use when read."""
    persistence_mode: bool | None = None
    mig_enabled: bool | None = None
    mig_pending: bool | None = None
    """MIG mode set, waiting for a GPU reset."""
    compute_mode: str | None = None
    """`Default`, `Exclusive_Thread`, `Prohibited` or `Exclusive_Process`."""
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None
    """The ECC mode after the next reset."""
    power_default_limit_w: float | None = None
    power_max_limit_w: float | None = None
    """The highest limit the board allows."""
    slowdown_temperature_c: float | None = None
    shutdown_temperature_c: float | None = None
    max_operating_temperature_c: float | None = None
    sm_clock_max_mhz: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    """The link's maximum: the lower of what the GPU and the host port support."""
    pcie_gen_device_max: int | None = None
    """What the GPU alone supports."""
    pcie_width_max: int | None = None
    ecc_corrected_aggregate: int | None = None
    """Corrected ECC errors over the board's life."""
    ecc_uncorrected_aggregate: int | None = None
    retired_pages_sbe: int | None = None
    """Pages retired for repeated single-bit errors."""
    retired_pages_dbe: int | None = None
    """Pages retired for a double-bit error."""
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    """A row remap waits for a GPU reset."""
    remap_failure: bool | None = None
    inforom_valid: bool | None = None
    """False where NVML says the infoROM is corrupted."""
    fabric_state: str | None = None
    """NVSwitch fabric registration: `Completed`, `In Progress`, `Not Started`, `Not Supported`."""
    fabric_status: str | None = None
    """The registration's outcome once `Completed`: `Success`, `Insufficient Resources`, … (NVML's error string)."""
    fabric_clique_id: int | None = None
    fabric_cluster_uuid: str | None = None
    fabric_health: str | None = None
    """The health mask decoded as nvidia-smi -q prints it: `bandwidth=Full; route_recovery=False; …`."""


@dataclass(kw_only=True)
class GpuRecord:
    """One GPU of a collection: what NVML answered and, per field, why it did not."""
    identity: GpuIdentity
    sample: GpuSample | None = None
    """None where the GPU was not asked (no handle)."""
    state: GpuState | None = None
    processes: list[GpuProcess] | None = None
    """Compute processes; None where NVML could not say (not: nobody)."""
    nvlinks: list[NvLink] | None = None
    """The links NVML knows; None once the GPU has stopped answering."""
    errors: dict[str, str] = field(default_factory=dict)
    """Field → why it could not be read (`NVMLError_NotSupported: …`, `timeout: …`, `skipped: …`)."""
    lost: bool = False
    """The GPU stopped answering (a call timed out, NVML said GPU_IS_LOST, or it has no handle)."""

    def to_json(self) -> dict[str, Any]:
        """The GPU's entry of nvml.json: every field of its identity, sample and state by name, then the rest."""
        entry = dataclasses.asdict(self.identity)
        for part in (self.sample, self.state):
            if part is not None:
                entry.update(dataclasses.asdict(part))
        entry["processes"] = [dataclasses.asdict(process) for process in self.processes] \
            if self.processes is not None else None
        entry["nvlinks"] = [dataclasses.asdict(link) for link in self.nvlinks] if self.nvlinks is not None else None
        entry["errors"] = dict(self.errors)
        entry["lost"] = self.lost
        return entry


@dataclass(kw_only=True)
class NvmlCollection:
    """Everything collect asked NVML (nvml.json)."""
    init_error: str | None = None
    """Why NVML could not start (no driver, library version mismatch, nvidia-ml-py missing)."""
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    """The highest CUDA the driver supports, `13.0`."""
    device_count: int | None = None
    """The GPUs NVML counts, answering or not."""
    gpus: list[GpuRecord] = field(default_factory=list)
    p2p_read: dict[str, str] = field(default_factory=dict)
    """`"i,j"` → NVML's P2P read status of the pair, by its nvidia-smi code."""
    p2p_not_probed: dict[str, str] = field(default_factory=dict)
    """`"i,j"` → why the pair was not asked (a GPU that had timed out, a P2P query that had)."""
    errors: dict[str, str] = field(default_factory=dict)
    """System field (`driver`, `nvml`, `cuda`, `count`) → why it could not be read."""

    def to_json(self) -> dict[str, Any]:
        document = {"format": NVML_FORMAT, "version": NVML_FORMAT_VERSION, "init_error": self.init_error,
                    "driver_version": self.driver_version, "nvml_version": self.nvml_version,
                    "cuda_driver_version": self.cuda_driver_version, "device_count": self.device_count,
                    "gpus": [gpu.to_json() for gpu in self.gpus], "p2p_read": dict(self.p2p_read),
                    "errors": dict(self.errors)}
        if self.p2p_not_probed:
            document["p2p_not_probed"] = dict(self.p2p_not_probed)
        return document
