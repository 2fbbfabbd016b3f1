"""nvml.json → facts: what collect wrote through NVML (facts/nvml_records.py, version 2) or an older gpuready wrote
(version 1), as GpuFacts, the names every source of GPU facts shares.

Version 1 named a GPU's fields as GpuFacts does; version 2 names the sample's figures as telemetry does (`power_w`,
`pcie_replay` …) and gives the clock-event reasons as NVML's bit mask: its entries are put in GpuFacts' names first
(`_V2_AS_FACTS`), so one reader judges both, and the same machine's two files give the same facts.
"""

from __future__ import annotations

import json
import re
import typing
from collections import Counter
from typing import Any

from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.clock_reasons import reasons_from_mask
from gpuready.facts.nvml_records import NVML_FORMAT
from gpuready.facts.types import GpuFacts, GpuProcess, NvLink
from gpuready.facts.units import bounded, cpu_ranges, finite, normalize_bus_id, whole
from gpuready.i18n import said

READABLE_VERSIONS = (1, 2)
# A version-2 GPU field → the GpuFacts field it is (version 1 wrote these names); figures GpuFacts has no field for
# are left out, with their errors.
_V2_AS_FACTS = {"power_w": "power_draw_w", "memory_temperature_c": "temperature_memory_c",
                "utilization_pct": "utilization_gpu_pct", "ecc_corrected": "ecc_corrected_volatile",
                "ecc_uncorrected": "ecc_uncorrected_volatile", "pcie_replay": "pcie_replay_count",
                "pcie_width": "pcie_width_current"}
_V2_NOT_FACTS = frozenset({"memory_clock_mhz"})


def _as_facts_names(entry: dict[str, Any]) -> dict[str, Any]:
    """A version-2 GPU entry in GpuFacts' names: the sample's figures renamed (their errors too), the clock-event mask
    as the reasons it sets (a value that is no mask stays as it is: the reader names it unreadable)."""
    renamed = {_V2_AS_FACTS.get(key, key): value for key, value in entry.items() if key not in _V2_NOT_FACTS}
    mask = entry.get("clock_event_reasons")
    if isinstance(mask, int) and not isinstance(mask, bool) and mask >= 0:
        renamed["clock_event_reasons"] = sorted(reasons_from_mask(mask))
    if isinstance(entry.get("errors"), dict):
        renamed["errors"] = {_V2_AS_FACTS.get(key, key): text for key, text in entry["errors"].items()
                             if key not in _V2_NOT_FACTS}
    return renamed


class ForeignNvmlJson(ParseFailure):
    """Valid JSON written by some other tool: ignored, not an error."""


class NvmlDocument:
    """A parsed nvml.json.

    A value of the wrong JSON type, NaN, ±inf, a negative count or an absurd magnitude is that field's None (and the
    field is named in the GPU's `error_fields`); a count, index, CPU list or size beyond what a real machine has
    (units.LIMITS), or a document whose shape is wrong (`gpus` not a list of objects, a GPU without an index), raises
    ValueError: the file is unreadable.
    """

    def __init__(self, text: str):
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != NVML_FORMAT:
            raise ForeignNvmlJson("parse.nvml.foreign", format=NVML_FORMAT)
        version = data.get("version")
        if version not in READABLE_VERSIONS:
            raise ParseFailure("parse.nvml.version", version=str(version)[:20],
                               wanted=", ".join(map(str, READABLE_VERSIONS)))
        self.init_error: str | None = _string(data.get("init_error"))
        self.driver_version: str | None = _string(data.get("driver_version"))
        self.cuda_driver_version: str | None = _string(data.get("cuda_driver_version"))
        count = whole(data.get("device_count"))
        self.device_count: int | None = bounded(count, "gpus", "device_count") if count is not None else None
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list) or not all(isinstance(gpu, dict) for gpu in gpus):
            raise ParseFailure("parse.nvml.gpus_not_list")
        bounded(len(gpus), "gpus", said("parse.what.gpu_entries"))
        self.gpus = [_gpu_facts_from_json(position, gpu if version == 1 else _as_facts_names(gpu))
                     for position, gpu in enumerate(gpus)]
        self.duplicates: list[str] = repeated_identities(self.gpus)
        """Bus ids (or UUIDs) listed more than once: NVML lists each GPU once, so the file was edited or put
        together; the bundle reader names them and judges the worst reading of each."""
        self.p2p_read = _p2p_from_json(data.get("p2p_read"))


# GpuFacts fields read as they are (by their annotated type), and the rules beyond the type.
_PLAIN_FIELDS = {field for field in GpuFacts.__dataclass_fields__} - {
    "index", "bus_id", "processes", "nvlinks", "clock_event_reasons", "error_fields", "lost", "source",
    "cpu_affinity"}
_FIELD_TYPES = {name: hint for name, hint in typing.get_type_hints(GpuFacts).items() if name in _PLAIN_FIELDS}
_FIELD_LIMITS = {"memory_total_bytes": "bytes", "memory_used_bytes": "bytes", "memory_reserved_bytes": "bytes",
                 "bar1_total_bytes": "bytes", "numa_node": "numa_nodes", "pcie_gen_current": "pcie_gen",
                 "pcie_gen_max": "pcie_gen", "pcie_gen_device_max": "pcie_gen", "pcie_gen_host_max": "pcie_gen",
                 "pcie_width_current": "pcie_width", "pcie_width_max": "pcie_width"}
_SIGNED_FIELDS = frozenset(name for name in _PLAIN_FIELDS if name.startswith("temperature") or name.endswith("_c"))
_CAPABILITY = re.compile(r"\d{1,3}\.\d{1,3}")
_UNREADABLE = object()


def repeated_identities(gpus: list[GpuFacts]) -> list[str]:
    """The bus ids, and the UUIDs, that more than one entry of `gpus` carries (in their first order)."""
    counts = Counter(identity for gpu in gpus
                     for identity in {gpu.bus_id if not gpu.bus_id.startswith("unknown:") else None,
                                      gpu.uuid.lower() if gpu.uuid else None} if identity)
    return [identity for identity, count in counts.items() if count > 1]


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _plain_value(name: str, value: Any) -> Any:
    """The value for GpuFacts.<name>, None for JSON null, `_UNREADABLE` for a value that does not fit the field."""
    if value is None:
        return None
    hint = _FIELD_TYPES[name]
    if hint == (bool | None):
        return value if isinstance(value, bool) else _UNREADABLE
    if hint == (str | None):
        if not isinstance(value, str) or (name == "compute_capability" and not _CAPABILITY.fullmatch(value)):
            return _UNREADABLE
        return value
    if hint == (int | None):
        number = whole(value)
        if number is None:
            return _UNREADABLE
        return bounded(number, _FIELD_LIMITS[name], name) if name in _FIELD_LIMITS else number
    number = finite(value, non_negative=name not in _SIGNED_FIELDS)
    return _UNREADABLE if number is None else number


def _gpu_facts_from_json(position: int, data: dict[str, Any]) -> GpuFacts:
    index = whole(data.get("index"))
    if index is None:
        raise ParseFailure("parse.nvml.no_index", position=position, value=json.dumps(data.get("index"))[:40])
    bounded(index, "gpus", said("parse.what.gpu_entry_index", position=position))
    errors = data.get("errors") if isinstance(data.get("errors"), dict) else {}
    bus_id = normalize_bus_id(data["bus_id"]) if isinstance(data.get("bus_id"), str) else None
    gpu = GpuFacts(index=index, bus_id=bus_id or f"unknown:{index}")
    unreadable: list[str] = []

    def keep(name: str, value: Any) -> Any:
        if value is _UNREADABLE:
            unreadable.append(f"{name}={json.dumps(data.get(name))[:40]}")
            return None
        return value

    for field_name in _PLAIN_FIELDS:
        if field_name in data:
            setattr(gpu, field_name, keep(field_name, _plain_value(field_name, data[field_name])))
    reasons = data.get("clock_event_reasons")
    if reasons is not None:
        valid = isinstance(reasons, list) and all(isinstance(reason, str) for reason in reasons)
        gpu.clock_event_reasons = keep("clock_event_reasons", frozenset(reasons) if valid else _UNREADABLE)
    if data.get("processes") is not None:
        gpu.processes = keep("processes", _processes_from_json(data["processes"]))
    if data.get("nvlinks") is not None:
        gpu.nvlinks = keep("nvlinks", _nvlinks_from_json(index, data["nvlinks"]))
    affinity = data.get("cpu_affinity")
    if isinstance(affinity, str) and affinity.strip():
        cpu_ranges(affinity)  # ValueError for a CPU list no machine has: the file is wrong
        gpu.cpu_affinity = affinity.strip()
    elif affinity is not None and not isinstance(affinity, str):
        keep("cpu_affinity", _UNREADABLE)
    # Not-supported answers are facts about the GPU; other errors mean a field could not be read.
    gpu.error_fields = sorted({str(field) for field, error in errors.items()
                               if not any(word in str(error) for word in ("NotSupported", "Not Supported",
                                                                          "NoPermission"))
                               and field not in ("fabric_state", "inforom_valid")} | set(unreadable))
    gpu.lost = data.get("lost") is True
    gpu.source = "nvml.json"
    return gpu


def _processes_from_json(processes: Any) -> list[GpuProcess] | object:
    if not isinstance(processes, list) or not all(isinstance(process, dict) for process in processes):
        return _UNREADABLE
    result = []
    for process in processes:
        used = whole(process.get("used_memory_bytes"))
        result.append(GpuProcess(pid=whole(process.get("pid")), name=_string(process.get("name")),
                                 kind=_string(process.get("kind")),
                                 used_memory_bytes=bounded(used, "bytes", said("parse.what.process_memory"))
                                 if used is not None else None))
    return result


def _nvlinks_from_json(index: int, links: Any) -> list[NvLink] | object:
    if not isinstance(links, list) or not all(isinstance(link, dict) for link in links):
        return _UNREADABLE
    bounded(len(links), "nvlinks", said("parse.what.gpu_nvlink_entries", index=index))
    result = []
    for link in links:
        number = whole(link.get("link"))
        if number is None:
            return _UNREADABLE
        active = link.get("active")
        result.append(NvLink(link=bounded(number, "nvlinks", said("parse.what.gpu_nvlink_number", index=index)),
                             active=active if isinstance(active, bool) else None,
                             speed_gb_per_s=finite(link.get("speed_gb_per_s"), non_negative=True)))
    return result


def _p2p_from_json(p2p: Any) -> dict[tuple[int, int], str]:
    """{"0,1": "OK"} → {(0, 1): "OK"}; entries that are not a pair of GPU indices and a status are left out."""
    status: dict[tuple[int, int], str] = {}
    for key, value in (p2p.items() if isinstance(p2p, dict) else ()):
        match = re.fullmatch(r"(\d{1,30}),(\d{1,30})", key)
        if match and isinstance(value, str):
            pair = tuple(bounded(part, "gpus", said("parse.what.p2p_pair", pair=repr(key))) for part in match.groups())
            status[pair] = value
    return status


