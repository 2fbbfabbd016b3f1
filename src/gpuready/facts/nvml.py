"""NVML through nvidia-ml-py: the only module that imports `pynvml`.

`collect_nvml()` asks NVML everything `check` needs and returns the `nvml.json` document
(layout below, versioned); `parse_nvml_json()` turns that document into facts. A query that
fails is kept as an error string in the GPU's `errors` map, never raised; every call runs under
a timeout because a GPU that has fallen off the bus can block NVML.

nvml.json, format "gpuready-nvml" version 1:
  {"format": "gpuready-nvml", "version": 1,
   "init_error": str | null,          # NVML could not start (no driver, version mismatch …)
   "driver_version": str, "cuda_driver_version": "13.0", "nvml_version": str,
   "device_count": int,
   "gpus": [{<GpuFacts field>: value, …, "errors": {<field>: "NVMLError_…"}}],
   "p2p_read": {"0,1": "OK" | "CNS" | "GNS" | "TNS" | "DNS" | "NS" | "U"}}
GPU fields carry the names and units of `facts.types.GpuFacts`.
"""

from __future__ import annotations

import json
import re
import threading
import typing
from typing import Any, Callable

from gpuready.facts.clock_reasons import reasons_from_mask
from gpuready.facts.types import GpuFacts, GpuProcess, NvLink
from gpuready.facts.units import bounded, cpu_ranges, finite, normalize_bus_id, whole

NVML_FORMAT = "gpuready-nvml"
NVML_FORMAT_VERSION = 1
CALL_TIMEOUT_S = 5.0
_P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DNS", 5: "NS", 6: "U"}
_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
_FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}


class NvmlTimeout(Exception):
    pass


def call_with_timeout(function: Callable[..., Any], *args: Any, timeout_s: float = CALL_TIMEOUT_S) -> Any:
    """Run one NVML call in a daemon thread; a call that never returns is abandoned, not awaited."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise NvmlTimeout(f"{getattr(function, '__name__', 'NVML call')} did not return within {timeout_s:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _decode(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def collect_nvml(timeout_s: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    document: dict[str, Any] = {"format": NVML_FORMAT, "version": NVML_FORMAT_VERSION, "init_error": None,
                                "gpus": [], "p2p_read": {}}
    try:
        import pynvml
    except ImportError as error:
        document["init_error"] = f"nvidia-ml-py is not installed ({error})"
        return document
    try:
        call_with_timeout(pynvml.nvmlInit, timeout_s=timeout_s)
    except Exception as error:  # NVMLError_DriverNotLoaded, LibraryNotFound, LibRmVersionMismatch …
        document["init_error"] = _error_text(error)
        return document
    try:
        system = _Querier(pynvml, timeout_s)
        document["driver_version"] = _decode(system.ask(pynvml.nvmlSystemGetDriverVersion, field="driver"))
        document["nvml_version"] = _decode(system.ask(pynvml.nvmlSystemGetNVMLVersion, field="nvml"))
        cuda = system.ask(pynvml.nvmlSystemGetCudaDriverVersion, field="cuda")
        document["cuda_driver_version"] = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None
        count = system.ask(pynvml.nvmlDeviceGetCount, field="count")
        document["device_count"] = count if isinstance(count, int) else None
        handles = []
        for index in range(count if isinstance(count, int) else 0):
            querier = _Querier(pynvml, timeout_s)
            handle = querier.ask(pynvml.nvmlDeviceGetHandleByIndex, index, field="handle")
            document["gpus"].append(_query_gpu(pynvml, querier, index, handle))
            handles.append(handle if "handle" not in querier.errors else None)
        document["p2p_read"] = _query_p2p(pynvml, handles, timeout_s)
        document["errors"] = system.errors
    finally:
        try:
            call_with_timeout(pynvml.nvmlShutdown, timeout_s=timeout_s)
        except Exception:
            pass
    return document


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class _Querier:
    """Asks NVML and files each failure under the field it was for."""

    def __init__(self, pynvml: Any, timeout_s: float):
        self.pynvml = pynvml
        self.timeout_s = timeout_s
        self.errors: dict[str, str] = {}
        self.timed_out = False

    def ask(self, function: Callable[..., Any], *args: Any, field: str) -> Any:
        if self.timed_out:  # one hung call: the GPU is not answering, stop asking it
            self.errors[field] = "skipped: an earlier NVML call on this GPU timed out"
            return None
        try:
            return call_with_timeout(function, *args, timeout_s=self.timeout_s)
        except NvmlTimeout as error:
            self.timed_out = True
            self.errors[field] = f"timeout: {error}"
        except Exception as error:
            self.errors[field] = _error_text(error)
        return None


def _query_gpu(pynvml: Any, q: _Querier, index: int, handle: Any) -> dict[str, Any]:
    gpu: dict[str, Any] = {"index": index}
    if handle is None:
        gpu["errors"] = q.errors
        gpu["lost"] = True
        return gpu
    pci = q.ask(pynvml.nvmlDeviceGetPciInfo, handle, field="bus_id")
    gpu["bus_id"] = normalize_bus_id(_decode(pci.busId)) if pci is not None else None
    gpu["name"] = _decode(q.ask(pynvml.nvmlDeviceGetName, handle, field="name"))
    gpu["uuid"] = _decode(q.ask(pynvml.nvmlDeviceGetUUID, handle, field="uuid"))
    gpu["serial"] = _decode(q.ask(pynvml.nvmlDeviceGetSerial, handle, field="serial"))
    gpu["vbios"] = _decode(q.ask(pynvml.nvmlDeviceGetVbiosVersion, handle, field="vbios"))
    memory = q.ask(pynvml.nvmlDeviceGetMemoryInfo, handle, field="memory_total_bytes")
    if memory is not None:
        gpu["memory_total_bytes"], gpu["memory_used_bytes"] = int(memory.total), int(memory.used)
    bar1 = q.ask(pynvml.nvmlDeviceGetBAR1MemoryInfo, handle, field="bar1_total_bytes")
    gpu["bar1_total_bytes"] = int(bar1.bar1Total) if bar1 is not None else None
    capability = q.ask(pynvml.nvmlDeviceGetCudaComputeCapability, handle, field="compute_capability")
    gpu["compute_capability"] = f"{capability[0]}.{capability[1]}" if capability else None
    persistence = q.ask(pynvml.nvmlDeviceGetPersistenceMode, handle, field="persistence_mode")
    gpu["persistence_mode"] = bool(persistence) if persistence is not None else None
    mig = q.ask(pynvml.nvmlDeviceGetMigMode, handle, field="mig_enabled")
    if mig is not None:
        gpu["mig_enabled"], gpu["mig_pending"] = bool(mig[0]), bool(mig[1])
    mode = q.ask(pynvml.nvmlDeviceGetComputeMode, handle, field="compute_mode")
    gpu["compute_mode"] = _COMPUTE_MODES.get(mode) if mode is not None else None
    ecc = q.ask(pynvml.nvmlDeviceGetEccMode, handle, field="ecc_enabled")
    if ecc is not None:
        gpu["ecc_enabled"], gpu["ecc_pending"] = bool(ecc[0]), bool(ecc[1])
    gpu["power_draw_w"] = _milli(q.ask(pynvml.nvmlDeviceGetPowerUsage, handle, field="power_draw_w"))
    gpu["power_limit_w"] = _milli(q.ask(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle, field="power_limit_w"))
    gpu["power_default_limit_w"] = _milli(
        q.ask(pynvml.nvmlDeviceGetPowerManagementDefaultLimit, handle, field="power_default_limit_w"))
    constraints = q.ask(pynvml.nvmlDeviceGetPowerManagementLimitConstraints, handle, field="power_max_limit_w")
    gpu["power_max_limit_w"] = _milli(constraints[1]) if constraints else None
    gpu["temperature_c"] = q.ask(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU,
                                 field="temperature_c")
    for field_name, threshold in (("slowdown_temperature_c", pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
                                  ("shutdown_temperature_c", pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
                                  ("max_operating_temperature_c", pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX)):
        gpu[field_name] = q.ask(pynvml.nvmlDeviceGetTemperatureThreshold, handle, threshold, field=field_name)
    reasons_function = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) \
        or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = q.ask(reasons_function, handle, field="clock_event_reasons")
    gpu["clock_event_reasons"] = sorted(reasons_from_mask(mask)) if mask is not None else None
    gpu["sm_clock_mhz"] = q.ask(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM, field="sm_clock_mhz")
    gpu["sm_clock_max_mhz"] = q.ask(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM,
                                    field="sm_clock_max_mhz")
    utilization = q.ask(pynvml.nvmlDeviceGetUtilizationRates, handle, field="utilization_gpu_pct")
    gpu["utilization_gpu_pct"] = utilization.gpu if utilization is not None else None
    gpu["pcie_gen_current"] = q.ask(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle, field="pcie_gen_current")
    gpu["pcie_gen_max"] = q.ask(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle, field="pcie_gen_max")
    gpu["pcie_gen_device_max"] = q.ask(pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration, handle,
                                       field="pcie_gen_device_max")
    gpu["pcie_width_current"] = q.ask(pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle, field="pcie_width_current")
    gpu["pcie_width_max"] = q.ask(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle, field="pcie_width_max")
    gpu["pcie_replay_count"] = q.ask(pynvml.nvmlDeviceGetPcieReplayCounter, handle, field="pcie_replay_count")
    for kind, error_type in (("corrected", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                             ("uncorrected", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
        for scope, counter in (("volatile", pynvml.NVML_VOLATILE_ECC), ("aggregate", pynvml.NVML_AGGREGATE_ECC)):
            field_name = f"ecc_{kind}_{scope}"
            gpu[field_name] = q.ask(pynvml.nvmlDeviceGetTotalEccErrors, handle, error_type, counter, field=field_name)
    for field_name, cause in (("retired_pages_sbe", pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
                              ("retired_pages_dbe", pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)):
        pages = q.ask(pynvml.nvmlDeviceGetRetiredPages, handle, cause, field=field_name)
        gpu[field_name] = len(pages) if pages is not None else None
    pending = q.ask(pynvml.nvmlDeviceGetRetiredPagesPendingStatus, handle, field="retired_pages_pending")
    gpu["retired_pages_pending"] = bool(pending) if pending is not None else None
    rows = q.ask(pynvml.nvmlDeviceGetRemappedRows, handle, field="remapped_rows")
    if rows is not None:
        (gpu["remapped_rows_correctable"], gpu["remapped_rows_uncorrectable"],
         gpu["remap_pending"], gpu["remap_failure"]) = rows[0], rows[1], bool(rows[2]), bool(rows[3])
    gpu["inforom_valid"] = _inforom_valid(pynvml, q, handle)
    gpu["fabric_state"] = _fabric_state(pynvml, q, handle)
    gpu["processes"] = _processes(pynvml, q, handle)
    gpu["nvlinks"] = _nvlinks(pynvml, q, handle)
    numa = q.ask(pynvml.nvmlDeviceGetNumaNodeId, handle, field="numa_node")
    gpu["numa_node"] = numa if isinstance(numa, int) and numa >= 0 else None
    affinity = q.ask(pynvml.nvmlDeviceGetCpuAffinity, handle, 16, field="cpu_affinity")
    gpu["cpu_affinity"] = _cpu_list_from_mask(list(affinity)) if affinity is not None else None
    gpu["errors"] = q.errors
    gpu["lost"] = q.timed_out or any("GpuIsLost" in error for error in q.errors.values())
    return gpu


def _milli(value: Any) -> float | None:
    return value / 1000.0 if isinstance(value, (int, float)) else None


def _inforom_valid(pynvml: Any, q: _Querier, handle: Any) -> bool | None:
    try:
        call_with_timeout(pynvml.nvmlDeviceValidateInforom, handle, timeout_s=q.timeout_s)
        return True
    except Exception as error:
        if "Corrupted" in type(error).__name__ or "corrupt" in str(error).lower():
            return False
        q.errors["inforom_valid"] = _error_text(error)
        return None


def _fabric_state(pynvml: Any, q: _Querier, handle: Any) -> str | None:
    info_class = getattr(pynvml, "c_nvmlGpuFabricInfo_t", None)
    if info_class is None:
        return None
    info = info_class()
    if q.ask(pynvml.nvmlDeviceGetGpuFabricInfo, handle, info, field="fabric_state") is None:
        return None
    return _FABRIC_STATES.get(int(info.state))


def _processes(pynvml: Any, q: _Querier, handle: Any) -> list[dict[str, Any]] | None:
    running = q.ask(pynvml.nvmlDeviceGetComputeRunningProcesses, handle, field="processes")
    if running is None:
        return None
    processes = []
    for process in running:
        used = getattr(process, "usedGpuMemory", None)
        processes.append({"pid": process.pid, "name": _process_name(process.pid), "kind": "C",
                          "used_memory_bytes": used if isinstance(used, int) else None})
    return processes


def _process_name(pid: int) -> str | None:
    try:
        import psutil
        return psutil.Process(pid).name()
    except Exception:  # another container's PID, or gone already
        return None


def _nvlinks(pynvml: Any, q: _Querier, handle: Any) -> list[dict[str, Any]]:
    links = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):  # the library's bound over all architectures
        try:
            state = call_with_timeout(pynvml.nvmlDeviceGetNvLinkState, handle, link, timeout_s=q.timeout_s)
        except Exception:  # NotSupported / InvalidArgument past the last link: no such link
            continue
        links.append({"link": link, "active": bool(state), "speed_gb_per_s": None})
    return links


def _cpu_list_from_mask(words: list[int]) -> str:
    cpus = [word_index * 64 + bit for word_index, word in enumerate(words) for bit in range(64) if word >> bit & 1]
    ranges: list[str] = []
    for cpu in cpus:
        if ranges and "-" in ranges[-1] and int(ranges[-1].split("-")[1]) == cpu - 1:
            ranges[-1] = f"{ranges[-1].split('-')[0]}-{cpu}"
        elif ranges and "-" not in ranges[-1] and int(ranges[-1]) == cpu - 1:
            ranges[-1] = f"{ranges[-1]}-{cpu}"
        else:
            ranges.append(str(cpu))
    return ",".join(ranges)


def _query_p2p(pynvml: Any, handles: list[Any], timeout_s: float) -> dict[str, str]:
    status: dict[str, str] = {}
    for i, first in enumerate(handles):
        for j, second in enumerate(handles):
            if i == j or first is None or second is None:
                continue
            try:
                code = call_with_timeout(pynvml.nvmlDeviceGetP2PStatus, first, second,
                                         pynvml.NVML_P2P_CAPS_INDEX_READ, timeout_s=timeout_s)
                status[f"{i},{j}"] = _P2P_STATUS.get(code, "U")
            except Exception:
                status[f"{i},{j}"] = "U"
    return status


class ForeignNvmlJson(ValueError):
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
            raise ForeignNvmlJson(f"not written by gpuready (no `format: {NVML_FORMAT}`)")
        if data.get("version") != NVML_FORMAT_VERSION:
            raise ValueError(f"nvml.json version {str(data.get('version'))[:20]} is not the {NVML_FORMAT_VERSION} "
                             "this tool reads")
        self.init_error: str | None = _string(data.get("init_error"))
        self.driver_version: str | None = _string(data.get("driver_version"))
        self.cuda_driver_version: str | None = _string(data.get("cuda_driver_version"))
        count = whole(data.get("device_count"))
        self.device_count: int | None = bounded(count, "gpus", "device_count") if count is not None else None
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list) or not all(isinstance(gpu, dict) for gpu in gpus):
            raise ValueError("`gpus` is not a list of GPU objects")
        bounded(len(gpus), "gpus", "the number of GPU entries")
        self.gpus = [_gpu_facts_from_json(position, gpu) for position, gpu in enumerate(gpus)]
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
        raise ValueError(f"GPU entry {position} has no valid index ({json.dumps(data.get('index'))[:40]})")
    bounded(index, "gpus", f"GPU entry {position}'s index")
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
                                 used_memory_bytes=bounded(used, "bytes", "a process's used_memory_bytes")
                                 if used is not None else None))
    return result


def _nvlinks_from_json(index: int, links: Any) -> list[NvLink] | object:
    if not isinstance(links, list) or not all(isinstance(link, dict) for link in links):
        return _UNREADABLE
    bounded(len(links), "nvlinks", f"GPU {index}'s number of NVLink entries")
    result = []
    for link in links:
        number = whole(link.get("link"))
        if number is None:
            return _UNREADABLE
        active = link.get("active")
        result.append(NvLink(link=bounded(number, "nvlinks", f"GPU {index}'s NVLink number"),
                             active=active if isinstance(active, bool) else None,
                             speed_gb_per_s=finite(link.get("speed_gb_per_s"), non_negative=True)))
    return result


def _p2p_from_json(p2p: Any) -> dict[tuple[int, int], str]:
    """{"0,1": "OK"} → {(0, 1): "OK"}; entries that are not a pair of GPU indices and a status are left out."""
    status: dict[tuple[int, int], str] = {}
    for key, value in (p2p.items() if isinstance(p2p, dict) else ()):
        match = re.fullmatch(r"(\d{1,30}),(\d{1,30})", key)
        if match and isinstance(value, str):
            pair = tuple(bounded(part, "gpus", f"the p2p_read pair {key!r}") for part in match.groups())
            status[pair] = value
    return status


class NvmlSession:
    """A live NVML connection for sampling (telemetry, monitor). Every call under a timeout; a GPU whose
    call times out is marked lost and not asked again."""

    def __init__(self, timeout_s: float = CALL_TIMEOUT_S):
        import pynvml
        self.pynvml, self.timeout_s = pynvml, timeout_s
        call_with_timeout(pynvml.nvmlInit, timeout_s=timeout_s)
        count = call_with_timeout(pynvml.nvmlDeviceGetCount, timeout_s=timeout_s)
        self.handles = [call_with_timeout(pynvml.nvmlDeviceGetHandleByIndex, i, timeout_s=timeout_s)
                        for i in range(count)]
        self.lost: set[int] = set()
        self.identity = [self._identity(handle) for handle in self.handles]
        self._events = None

    def _identity(self, handle: Any) -> dict[str, Any]:
        ask = lambda function: _decode(call_with_timeout(function, handle, timeout_s=self.timeout_s))
        pci = call_with_timeout(self.pynvml.nvmlDeviceGetPciInfo, handle, timeout_s=self.timeout_s)
        return {"bus_id": normalize_bus_id(_decode(pci.busId)), "uuid": ask(self.pynvml.nvmlDeviceGetUUID),
                "name": ask(self.pynvml.nvmlDeviceGetName)}

    def _ask(self, index: int, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return call_with_timeout(function, self.handles[index], *args, timeout_s=self.timeout_s)
        except NvmlTimeout:
            self.lost.add(index)
        except Exception as error:
            if "GpuIsLost" in type(error).__name__:
                self.lost.add(index)
        return None

    def sample(self, index: int) -> dict[str, Any] | None:
        """One reading of the figures telemetry follows; None for a GPU that no longer answers."""
        if index in self.lost:
            return None
        p = self.pynvml
        power = self._ask(index, p.nvmlDeviceGetPowerUsage)
        if index in self.lost:
            return None
        reasons_function = getattr(p, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or p.nvmlDeviceGetCurrentClocksThrottleReasons
        utilization = self._ask(index, p.nvmlDeviceGetUtilizationRates)
        memory_temperature = self._ask(index, p.nvmlDeviceGetFieldValues, [p.NVML_FI_DEV_MEMORY_TEMP])
        memory_value = None
        if memory_temperature and memory_temperature[0].nvmlReturn == 0:
            memory_value = float(memory_temperature[0].value.uiVal)
        return {
            "power_w": power / 1000.0 if power is not None else None,
            "power_limit_w": _milli(self._ask(index, p.nvmlDeviceGetEnforcedPowerLimit)),
            "temperature_c": self._ask(index, p.nvmlDeviceGetTemperature, p.NVML_TEMPERATURE_GPU),
            "memory_temperature_c": memory_value,
            "sm_clock_mhz": self._ask(index, p.nvmlDeviceGetClockInfo, p.NVML_CLOCK_SM),
            "memory_clock_mhz": self._ask(index, p.nvmlDeviceGetClockInfo, p.NVML_CLOCK_MEM),
            "utilization_pct": utilization.gpu if utilization is not None else None,
            "clock_event_reasons": self._ask(index, reasons_function),
            "ecc_corrected": self._ask(index, p.nvmlDeviceGetTotalEccErrors, p.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                       p.NVML_VOLATILE_ECC),
            "ecc_uncorrected": self._ask(index, p.nvmlDeviceGetTotalEccErrors,
                                         p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, p.NVML_VOLATILE_ECC),
            "pcie_replay": self._ask(index, p.nvmlDeviceGetPcieReplayCounter),
            "pcie_width": self._ask(index, p.nvmlDeviceGetCurrPcieLinkWidth),
        }

    def watch_xid(self) -> bool:
        """Register for Xid events (no root needed); False where the driver refuses."""
        p = self.pynvml
        try:
            self._events = call_with_timeout(p.nvmlEventSetCreate, timeout_s=self.timeout_s)
            for handle in self.handles:
                call_with_timeout(p.nvmlDeviceRegisterEvents, handle, p.nvmlEventTypeXidCriticalError, self._events,
                                  timeout_s=self.timeout_s)
            return True
        except Exception:
            self._events = None
            return False

    def wait_xid(self, timeout_ms: int) -> list[tuple[int | None, int]]:
        """(GPU index, Xid) events that arrived within the wait."""
        if self._events is None:
            return []
        try:
            data = call_with_timeout(self.pynvml.nvmlEventSetWait_v2, self._events, timeout_ms,
                                     timeout_s=self.timeout_s + timeout_ms / 1000)
        except Exception:  # NVML_ERROR_TIMEOUT: nothing happened
            return []
        index = next((i for i, handle in enumerate(self.handles)
                      if _same_handle(handle, data.device)), None)
        return [(index, int(data.eventData))]

    def close(self) -> None:
        try:
            if self._events is not None:
                call_with_timeout(self.pynvml.nvmlEventSetFree, self._events, timeout_s=self.timeout_s)
            call_with_timeout(self.pynvml.nvmlShutdown, timeout_s=self.timeout_s)
        except Exception:
            pass


def _same_handle(first: Any, second: Any) -> bool:
    import ctypes
    try:
        return ctypes.cast(first, ctypes.c_void_p).value == ctypes.cast(second, ctypes.c_void_p).value
    except Exception:
        return False
