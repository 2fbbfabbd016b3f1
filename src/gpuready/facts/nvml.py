"""NVML through nvidia-ml-py: the only module that imports `pynvml`.

`collect_nvml()` asks NVML everything `check` needs and returns the `nvml.json` document
(layout below, versioned); `parse_nvml_json()` turns that document into facts. A query that
fails is kept as an error string in the GPU's `errors` map, never raised; every call runs under
a timeout because a GPU that has fallen off the bus can block NVML. Once one call on a GPU times
out, nothing more is asked of that GPU in that collection (fields, NVLinks, infoROM, P2P pairs):
its later fields read "skipped: …", so one hung GPU costs one timeout, not one per probe.

nvml.json, format "gpuready-nvml" version 1:
  {"format": "gpuready-nvml", "version": 1,
   "init_error": str | null,          # NVML could not start (no driver, version mismatch …)
   "driver_version": str, "cuda_driver_version": "13.0", "nvml_version": str,
   "device_count": int,
   "gpus": [{<GpuFacts field>: value, …, "errors": {<field>: "NVMLError_…"}}],
   "p2p_read": {"0,1": "OK" | "CNS" | "GNS" | "TNS" | "DNS" | "NS" | "U"},
   "p2p_not_probed": {"0,1": "not probed: GPU 1 timed out earlier"}}  # only when some pair was not asked
GPU fields carry the names and units of `facts.types.GpuFacts`.
"""

from __future__ import annotations

import ctypes
import json
import logging
import queue
import re
import threading
import typing
from typing import Any, Callable

from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.clock_reasons import reasons_from_mask
from gpuready.facts.types import GpuFacts, GpuProcess, NvLink
from gpuready.facts.units import bounded, cpu_ranges, finite, normalize_bus_id, whole
from gpuready.i18n import said

NVML_FORMAT = "gpuready-nvml"
NVML_FORMAT_VERSION = 1
CALL_TIMEOUT_S = 5.0
_P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DNS", 5: "NS", 6: "U"}
_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
_FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}


log = logging.getLogger("gpuready.nvml")
_SKIPPED = "skipped: an earlier NVML call on this GPU timed out"
# Errors that say the driver or GPU lacks the function: a fact, asked once, never again.
_UNSUPPORTED_ERRORS = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")


class NvmlTimeout(Exception):
    pass


class _Skipped(Exception):
    """Not asked: an earlier call on this GPU timed out."""


class NvmlWorker:
    """One long-lived daemon thread that runs NVML calls in turn, each awaited at most `timeout_s`.

    A call that does not return is abandoned with its thread (stuck in the driver; told to exit if it ever
    comes back) and the next call starts a fresh thread: no thread per call, and never a blocked caller.
    """

    def __init__(self, name: str = "gpuready-nvml"):
        self.name = name
        self.threads_started = 0
        self._jobs: queue.SimpleQueue | None = None
        self._lock = threading.Lock()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            function, args, outcome, done = job
            try:
                outcome["value"] = function(*args)
            except BaseException as error:  # re-raised in the caller's thread
                outcome["error"] = error
            done.set()

    def call(self, function: Callable[..., Any], *args: Any, timeout_s: float = CALL_TIMEOUT_S) -> Any:
        with self._lock:
            if self._jobs is None:
                self._jobs = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self._jobs,), daemon=True, name=self.name).start()
                self.threads_started += 1
            outcome: dict[str, Any] = {}
            done = threading.Event()
            self._jobs.put((function, args, outcome, done))
            if not done.wait(timeout_s):
                self._jobs.put(None)  # the stuck thread exits if its call ever returns
                self._jobs = None
                raise NvmlTimeout(f"{getattr(function, '__name__', 'NVML call')} did not return within "
                                  f"{timeout_s:g} s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    def close(self) -> None:
        with self._lock:
            if self._jobs is not None:
                self._jobs.put(None)
                self._jobs = None


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
        raise NvmlTimeout(f"{getattr(function, '__name__', 'NVML call')} did not return within {timeout_s:g} s")
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
        handles, queriers = [], []
        for index in range(count if isinstance(count, int) else 0):
            querier = _Querier(pynvml, timeout_s)
            handle = querier.ask(pynvml.nvmlDeviceGetHandleByIndex, index, field="handle")
            document["gpus"].append(_query_gpu(pynvml, querier, index, handle))
            handles.append(handle if "handle" not in querier.errors else None)
            queriers.append(querier)
        document["p2p_read"], not_probed = _query_p2p(pynvml, handles, queriers, timeout_s)
        if not_probed:
            document["p2p_not_probed"] = not_probed
        document["errors"] = system.errors
    finally:
        try:
            call_with_timeout(pynvml.nvmlShutdown, timeout_s=timeout_s)
        except Exception:
            pass
    return document


def collect_one_gpu(bus_id: str, timeout_s: float = CALL_TIMEOUT_S) -> dict[str, Any] | None:
    """One GPU's identity, memory and compute processes, found by its PCI bus id: what a rank asks about its own GPU
    (a whole-node collection, P2P probes included, on every rank of an 8-GPU node would be eight times the work).
    The gpus[] entry shape of collect_nvml; None where NVML cannot say."""
    try:
        import pynvml
        call_with_timeout(pynvml.nvmlInit, timeout_s=timeout_s)
    except Exception:
        return None
    try:
        querier = _Querier(pynvml, timeout_s)
        getter = getattr(pynvml, "nvmlDeviceGetHandleByPciBusId_v2", None) or pynvml.nvmlDeviceGetHandleByPciBusId
        handle = querier.ask(getter, bus_id.encode(), field="handle")
        if handle is None:
            return None
        index = querier.ask(pynvml.nvmlDeviceGetIndex, handle, field="index")
        gpu: dict[str, Any] = {"index": index, "bus_id": normalize_bus_id(bus_id),
                               "uuid": _decode(querier.ask(pynvml.nvmlDeviceGetUUID, handle, field="uuid"))}
        memory = querier.ask(pynvml.nvmlDeviceGetMemoryInfo, handle, field="memory_total_bytes")
        if memory is not None:
            gpu["memory_total_bytes"], gpu["memory_used_bytes"] = int(memory.total), int(memory.used)
        gpu["processes"] = _processes(pynvml, querier, handle)
        return gpu if isinstance(index, int) else None
    finally:
        try:
            call_with_timeout(pynvml.nvmlShutdown, timeout_s=timeout_s)
        except Exception:
            pass


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
        try:
            return self.call(function, *args, field=field)
        except _Skipped:
            pass
        except Exception as error:
            self.errors[field] = _error_text(error)
        return None

    def call(self, function: Callable[..., Any], *args: Any, field: str) -> Any:
        """As `ask`, but NVML's own errors are raised for the caller to read; a timeout (or a GPU that has
        timed out before) files the error under `field` and raises _Skipped."""
        if self.timed_out:  # one hung call: the GPU is not answering, stop asking it
            self.errors.setdefault(field, _SKIPPED)
            raise _Skipped
        try:
            return call_with_timeout(function, *args, timeout_s=self.timeout_s)
        except NvmlTimeout as error:
            self.timed_out = True
            self.errors[field] = f"timeout: {error}"
            raise _Skipped from error


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
        q.call(pynvml.nvmlDeviceValidateInforom, handle, field="inforom_valid")
        return True
    except _Skipped:
        return None
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
    # NVML takes a pointer; nvidia-ml-py passes the argument through untyped, and a Structure passed
    # that way goes by value: NVML then writes through garbage (a segfault, seen on an H200 in a thread).
    if q.ask(pynvml.nvmlDeviceGetGpuFabricInfo, handle, ctypes.byref(info), field="fabric_state") is None:
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


def _nvlink_count(pynvml: Any, q: _Querier, handle: Any) -> int | None:
    """The GPU's NVLink count from NVML_FI_DEV_NVLINK_LINK_COUNT; None where the driver lacks the field."""
    field_id = getattr(pynvml, "NVML_FI_DEV_NVLINK_LINK_COUNT", None)
    if field_id is None:
        return None
    try:
        values = q.call(pynvml.nvmlDeviceGetFieldValues, handle, [field_id], field="nvlinks")
    except _Skipped:
        raise
    except Exception:  # the function itself missing or refused: probe instead
        return None
    if not values or getattr(values[0], "nvmlReturn", 1) != 0:
        return None
    count = _field_value(values[0])
    return count if isinstance(count, int) and 0 <= count <= pynvml.NVML_NVLINK_MAX_LINKS else None


def _nvlinks(pynvml: Any, q: _Querier, handle: Any) -> list[dict[str, Any]] | None:
    """Links 0 … count-1 (the field value), or every index up to the library's bound where the field is missing;
    None once the GPU has timed out."""
    links = []
    try:
        count = _nvlink_count(pynvml, q, handle)
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS if count is None else count):
            try:
                state = q.call(pynvml.nvmlDeviceGetNvLinkState, handle, link, field="nvlinks")
            except _Skipped:
                raise
            except Exception:  # NotSupported / InvalidArgument past the last link: no such link
                continue
            links.append({"link": link, "active": bool(state), "speed_gb_per_s": None})
    except _Skipped:
        return None
    return links


_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _field_value(value: Any) -> Any:
    """The number in one c_nvmlFieldValue_t, by its valueType (NVML_VALUE_TYPE_*)."""
    member = _VALUE_MEMBERS.get(int(getattr(value, "valueType", 1)), "uiVal")
    number = getattr(value.value, member, None)
    if member == "dVal":
        return float(number) if number is not None else None
    return int(number) if number is not None else None


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


def _query_p2p(pynvml: Any, handles: list[Any], queriers: list[_Querier], timeout_s: float,
               ) -> tuple[dict[str, str], dict[str, str]]:
    """(p2p_read, p2p_not_probed): pairs with a GPU that has no handle or has timed out are not asked (the reason
    is in p2p_not_probed); after one P2P call times out, no further pair is asked."""
    status: dict[str, str] = {}
    not_probed: dict[str, str] = {}
    stopped: str | None = None
    for i, first in enumerate(handles):
        for j, second in enumerate(handles):
            if i == j:
                continue
            pair = f"{i},{j}"
            silent = next((k for k in (i, j) if handles[k] is None or queriers[k].timed_out), None)
            if silent is not None:
                not_probed[pair] = (f"not probed: GPU {silent} timed out earlier" if queriers[silent].timed_out
                                    else f"not probed: GPU {silent} has no NVML handle")
                continue
            if stopped:
                not_probed[pair] = stopped
                continue
            try:
                code = call_with_timeout(pynvml.nvmlDeviceGetP2PStatus, first, second,
                                         pynvml.NVML_P2P_CAPS_INDEX_READ, timeout_s=timeout_s)
                status[pair] = _P2P_STATUS.get(code, "U")
            except NvmlTimeout as error:
                stopped = f"not probed: the P2P query for GPUs {pair} timed out ({error})"
                not_probed[pair] = f"timeout: {error}"
            except Exception:
                status[pair] = "U"
    return status, not_probed


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
        if data.get("version") != NVML_FORMAT_VERSION:
            raise ParseFailure("parse.nvml.version", version=str(data.get("version"))[:20],
                               wanted=NVML_FORMAT_VERSION)
        self.init_error: str | None = _string(data.get("init_error"))
        self.driver_version: str | None = _string(data.get("driver_version"))
        self.cuda_driver_version: str | None = _string(data.get("cuda_driver_version"))
        count = whole(data.get("device_count"))
        self.device_count: int | None = bounded(count, "gpus", "device_count") if count is not None else None
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list) or not all(isinstance(gpu, dict) for gpu in gpus):
            raise ParseFailure("parse.nvml.gpus_not_list")
        bounded(len(gpus), "gpus", said("parse.what.gpu_entries"))
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


# Figures the sampler reads in one nvmlDeviceGetFieldValues call where the driver has the field:
# sample key → (NVML_FI_* name, scale to the key's unit). Each falls back to its own function when the field
# answers with an error.
_SAMPLE_FIELDS = {
    "power_w": ("NVML_FI_DEV_POWER_AVERAGE", 0.001),  # mW averaged over 1 s, as nvmlDeviceGetPowerUsage on Ampere+
    "memory_temperature_c": ("NVML_FI_DEV_MEMORY_TEMP", 1.0),
    "ecc_corrected": ("NVML_FI_DEV_ECC_SBE_VOL_TOTAL", 1),
    "ecc_uncorrected": ("NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 1),
    "pcie_replay": ("NVML_FI_DEV_PCIE_REPLAY_COUNTER", 1),
}


class NvmlSession:
    """A live NVML connection for sampling (telemetry, monitor).

    Every call runs on one long-lived worker thread (NvmlWorker), a GPU's whole sample under one timeout: a sample
    that does not come back in time is missing, the GPU is marked lost and not asked again. The figures NVML has as
    field values are read in one nvmlDeviceGetFieldValues call per sample. A function or field the driver lacks
    (NotSupported, FunctionNotFound) is logged once per GPU and never asked again (`unsupported`)."""

    def __init__(self, timeout_s: float = CALL_TIMEOUT_S):
        import pynvml
        self.pynvml, self.timeout_s = pynvml, timeout_s
        self.worker = NvmlWorker("gpuready-nvml-sampler")
        self._event_worker = NvmlWorker("gpuready-nvml-events")
        self.worker.call(pynvml.nvmlInit, timeout_s=timeout_s)
        count = self.worker.call(pynvml.nvmlDeviceGetCount, timeout_s=timeout_s)
        self.handles = [self.worker.call(pynvml.nvmlDeviceGetHandleByIndex, i, timeout_s=timeout_s)
                        for i in range(count)]
        self.lost: set[int] = set()
        self.unsupported: dict[int, set[str]] = {i: set() for i in range(count)}
        self.calls = 0
        """NVML calls made by samples (tests and figures)."""
        self.identity = [self._identity(handle) for handle in self.handles]
        self._events = None
        self._fields = [(key, getattr(pynvml, name), scale) for key, (name, scale) in _SAMPLE_FIELDS.items()
                        if hasattr(pynvml, name)]

    def _identity(self, handle: Any) -> dict[str, Any]:
        ask = lambda function: _decode(self.worker.call(function, handle, timeout_s=self.timeout_s))
        pci = self.worker.call(self.pynvml.nvmlDeviceGetPciInfo, handle, timeout_s=self.timeout_s)
        return {"bus_id": normalize_bus_id(_decode(pci.busId)), "uuid": ask(self.pynvml.nvmlDeviceGetUUID),
                "name": ask(self.pynvml.nvmlDeviceGetName)}

    def _ask(self, index: int, name: str, function: Callable[..., Any], *args: Any) -> Any:
        """One call inside a sample (on the worker thread); None for an error. `name` keys the unsupported set."""
        if name in self.unsupported[index]:
            return None
        self.calls += 1
        try:
            return function(self.handles[index], *args)
        except Exception as error:
            kind = type(error).__name__
            if kind in _UNSUPPORTED_ERRORS:
                self._unsupported(index, name, kind)
            elif "GpuIsLost" in kind:
                self.lost.add(index)
            return None

    def _unsupported(self, index: int, name: str, why: str) -> None:
        self.unsupported[index].add(name)
        log.info("GPU %d: %s is not supported by this driver or GPU (%s); not asked again", index, name, why)

    def _read_fields(self, index: int) -> dict[str, Any]:
        """The field-value figures of one GPU; keys whose field failed are absent (their function is asked)."""
        wanted = [(key, field_id, scale) for key, field_id, scale in self._fields
                  if f"field:{key}" not in self.unsupported[index]]
        if not wanted:
            return {}
        values = self._ask(index, "nvmlDeviceGetFieldValues", self.pynvml.nvmlDeviceGetFieldValues,
                           [field_id for _, field_id, _ in wanted])
        if values is None:
            return {}
        result: dict[str, Any] = {}
        for (key, _, scale), value in zip(wanted, values):
            code = getattr(value, "nvmlReturn", 1)
            if code == 0:
                number = _field_value(value)
                result[key] = number * scale if number is not None else None
            elif code in (3, 13):  # NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND
                self._unsupported(index, f"field:{key}", f"nvmlReturn {code}")
        return result

    def _read(self, index: int) -> dict[str, Any]:
        p = self.pynvml
        fields = self._read_fields(index)

        def figure(key: str, name: str, function: Callable[..., Any], *args: Any) -> Any:
            return fields[key] if key in fields else self._ask(index, name, function, *args)

        power = figure("power_w", "nvmlDeviceGetPowerUsage", p.nvmlDeviceGetPowerUsage)
        if "power_w" not in fields:
            power = _milli(power)
        if index in self.lost:
            return {}
        reasons_function = getattr(p, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or p.nvmlDeviceGetCurrentClocksThrottleReasons
        utilization = self._ask(index, "nvmlDeviceGetUtilizationRates", p.nvmlDeviceGetUtilizationRates)
        memory_temperature = fields.get("memory_temperature_c")
        return {
            "power_w": power,
            "power_limit_w": _milli(self._ask(index, "nvmlDeviceGetEnforcedPowerLimit",
                                              p.nvmlDeviceGetEnforcedPowerLimit)),
            "temperature_c": self._ask(index, "nvmlDeviceGetTemperature", p.nvmlDeviceGetTemperature,
                                       p.NVML_TEMPERATURE_GPU),
            "memory_temperature_c": float(memory_temperature) if memory_temperature is not None else None,
            "sm_clock_mhz": self._ask(index, "nvmlDeviceGetClockInfo:sm", p.nvmlDeviceGetClockInfo, p.NVML_CLOCK_SM),
            "memory_clock_mhz": self._ask(index, "nvmlDeviceGetClockInfo:mem", p.nvmlDeviceGetClockInfo,
                                          p.NVML_CLOCK_MEM),
            "utilization_pct": utilization.gpu if utilization is not None else None,
            "clock_event_reasons": self._ask(index, reasons_function.__name__, reasons_function),
            "ecc_corrected": figure("ecc_corrected", "nvmlDeviceGetTotalEccErrors:corrected",
                                    p.nvmlDeviceGetTotalEccErrors, p.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                    p.NVML_VOLATILE_ECC),
            "ecc_uncorrected": figure("ecc_uncorrected", "nvmlDeviceGetTotalEccErrors:uncorrected",
                                      p.nvmlDeviceGetTotalEccErrors, p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                      p.NVML_VOLATILE_ECC),
            "pcie_replay": figure("pcie_replay", "nvmlDeviceGetPcieReplayCounter", p.nvmlDeviceGetPcieReplayCounter),
            "pcie_width": self._ask(index, "nvmlDeviceGetCurrPcieLinkWidth", p.nvmlDeviceGetCurrPcieLinkWidth),
        }

    def sample(self, index: int) -> dict[str, Any] | None:
        """One reading of the figures telemetry follows; None for a GPU that no longer answers (its sample did not
        come back within the timeout, or NVML said the GPU is lost)."""
        if index in self.lost:
            return None
        try:
            reading = self.worker.call(self._read, index, timeout_s=self.timeout_s)
        except NvmlTimeout as error:
            log.warning("GPU %d: %s; the GPU is not asked again", index, error)
            self.lost.add(index)
            return None
        except Exception as error:  # an answer of an unexpected shape: this sample is empty, the next one is asked
            log.warning("GPU %d: sample failed (%s)", index, _error_text(error))
            return {}
        return None if index in self.lost else reading

    def watch_xid(self) -> bool:
        """Register for Xid events (no root needed); False where the driver refuses."""
        p = self.pynvml
        try:
            self._events = self._event_worker.call(p.nvmlEventSetCreate, timeout_s=self.timeout_s)
            for handle in self.handles:
                self._event_worker.call(p.nvmlDeviceRegisterEvents, handle, p.nvmlEventTypeXidCriticalError,
                                        self._events, timeout_s=self.timeout_s)
            return True
        except Exception:
            self._events = None
            return False

    def wait_xid(self, timeout_ms: int) -> list[tuple[int | None, int]]:
        """(GPU index, Xid) events that arrived within the wait (on its own worker: it never delays samples)."""
        if self._events is None:
            return []
        try:
            data = self._event_worker.call(self.pynvml.nvmlEventSetWait_v2, self._events, timeout_ms,
                                           timeout_s=self.timeout_s + timeout_ms / 1000)
        except Exception:  # NVML_ERROR_TIMEOUT: nothing happened
            return []
        index = next((i for i, handle in enumerate(self.handles)
                      if _same_handle(handle, data.device)), None)
        return [(index, int(data.eventData))]

    def close(self) -> None:
        try:
            if self._events is not None:
                self._event_worker.call(self.pynvml.nvmlEventSetFree, self._events, timeout_s=self.timeout_s)
            self.worker.call(self.pynvml.nvmlShutdown, timeout_s=self.timeout_s)
        except Exception:
            pass
        finally:
            self.worker.close()
            self._event_worker.close()


def _same_handle(first: Any, second: Any) -> bool:
    import ctypes
    try:
        return ctypes.cast(first, ctypes.c_void_p).value == ctypes.cast(second, ctypes.c_void_p).value
    except Exception:
        return False
