"""NVML through nvidia-ml-py: the only module that imports `pynvml`, and one query path for every reader of it.

`NvmlQuery.query(fn, *args, default=NA)` is the choke point every NVML call goes through: an NVML error, or a call
that does not return within its timeout, becomes "not available" (`NA`, or the default asked for) and is filed under
the field it was for; a hung GPU can block NVML, so once one call on a GPU times out nothing more is asked of it in
that collection (its later fields read "skipped: …"): one hung GPU costs one timeout, not one per probe. The answers
become the typed records of facts/nvml_records.py, read by the same functions wherever they are read:

- `collect_nvml()`: everything `check` needs, an NvmlCollection (written as nvml.json; facts/nvml_json.py parses it);
- `collect_one_gpu()`: what a rank asks about its own GPU (identity, memory, processes), as its nvml.json entry;
- `NvmlSession`: the live source of telemetry and monitor: each GPU's GpuIdentity, then a GpuSample per call.
"""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
from typing import Any, Callable

from gpuready.facts.clock_reasons import reasons_from_mask
from gpuready.facts.nvml_records import GpuIdentity, GpuRecord, GpuSample, GpuState, NvmlCollection
from gpuready.facts.types import GpuProcess, NvLink
from gpuready.facts.units import normalize_bus_id

CALL_TIMEOUT_S = 5.0
_P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DNS", 5: "NS", 6: "U"}
_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
_FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
# nvmlReturn_t values a fabric probe reports, as nvmlErrorString (and nvidia-smi -q's Status row) words them.
_FABRIC_STATUS = {0: "Success", 2: "Invalid Argument", 3: "Not Supported", 10: "Timeout",
                  23: "Insufficient Resources", 27: "Not Ready", 999: "Unknown Error"}
_TRUE_FALSE = {1: "True", 2: "False"}
# (key, shift, width mask, value → word): nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*; 0 is "not supported" (left out).
_HEALTH_FIELDS = (
    ("bandwidth", 0, 0x3, {1: "Degraded", 2: "Full"}),
    ("route_recovery", 2, 0x3, _TRUE_FALSE),
    ("route_unhealthy", 4, 0x3, _TRUE_FALSE),
    ("access_timeout_recovery", 6, 0x3, _TRUE_FALSE),
    ("incorrect_configuration", 8, 0xF, {1: "None", 2: "Incorrect SysGuid", 3: "Incorrect Chassis SN",
                                         4: "No Partition", 5: "Insufficient NVLinks", 6: "Incompatible GPU Firmware",
                                         7: "Invalid Location", 8: "GPU State Invalid"}),
)

log = logging.getLogger("gpuready.nvml")
_SKIPPED = "skipped: an earlier NVML call on this GPU timed out"
# Errors that say the driver or GPU lacks the function: a fact, asked once, never again.
_UNSUPPORTED_ERRORS = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")
_UNSUPPORTED_RETURNS = (3, 13)  # a field value's NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND


class NvmlTimeout(Exception):
    pass


class NvmlUnavailable(Exception):
    """NVML could not start (no driver, library mismatch …): no session."""


class _NotAvailable:
    """What a query answers where NVML could not: falsy, and never a real answer (None is one: a call that succeeds
    without a value, as nvmlInit or nvmlDeviceValidateInforom)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NA"


NA: Any = _NotAvailable()


def known(value: Any) -> Any:
    """The answer, or None where it is not available."""
    return None if value is NA else value


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
                raise NvmlTimeout(f"{_name(function)} did not return within {timeout_s:g} s")
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
        raise NvmlTimeout(f"{_name(function)} did not return within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__name__", "NVML call")


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class NvmlQuery:
    """The one choke point: every NVML call of collect, the sampler and monitor goes through `query`.

    `timeout_s`: each call's limit (on `worker` where given, else a thread of its own); None where the caller awaits
    a whole batch of calls under one limit (a sample). `stop_after_timeout`: after one call times out, ask nothing
    more (a GPU's collection). `remember_unsupported`: a field whose function the driver lacks is logged once and not
    asked again (the sampler, every second)."""

    def __init__(self, label: str, *, timeout_s: float | None = CALL_TIMEOUT_S, worker: NvmlWorker | None = None,
                 stop_after_timeout: bool = True, remember_unsupported: bool = False):
        self.label, self.timeout_s, self.worker = label, timeout_s, worker
        self.stop_after_timeout, self.remember_unsupported = stop_after_timeout, remember_unsupported
        self.errors: dict[str, str] = {}
        """Field → why it is not available."""
        self.unsupported: set[str] = set()
        """Fields not asked again: the driver or GPU lacks them."""
        self.timed_out = False
        self.last_timeout: str | None = None
        self.lost = False
        """NVML said GPU_IS_LOST."""
        self.calls = 0

    def query(self, fn: Callable[..., Any], *args: Any, default: Any = NA, field: str | None = None,
              expected_errors: bool = False, timeout_s: float | None = None) -> Any:
        """fn(*args), or `default` where NVML cannot answer. `field`: what the answer is for (errors are filed under
        it; the function's name by default); `expected_errors`: an error is an answer (no such link), not filed."""
        name = field or _name(fn)
        if self.timed_out and self.stop_after_timeout:
            self.errors.setdefault(name, _SKIPPED)
            return default
        if name in self.unsupported:
            return default
        self.calls += 1
        try:
            return self._run(fn, args, timeout_s or self.timeout_s)
        except NvmlTimeout as error:
            self.timed_out, self.last_timeout = True, str(error)
            self.errors[name] = f"timeout: {error}"
        except Exception as error:  # every NVMLError_*, and an answer of a shape the binding did not expect
            if not expected_errors:
                self._file(name, fn, error)
        return default

    def _run(self, fn: Callable[..., Any], args: tuple, timeout_s: float | None) -> Any:
        if self.worker is not None:
            return self.worker.call(fn, *args, timeout_s=timeout_s or CALL_TIMEOUT_S)
        if timeout_s is None:
            return fn(*args)  # inside a batch the caller awaits under one timeout
        return call_with_timeout(fn, *args, timeout_s=timeout_s)

    def _file(self, name: str, fn: Callable[..., Any], error: Exception) -> None:
        kind = type(error).__name__
        self.errors[name] = _error_text(error)
        if "GpuIsLost" in kind:
            self.lost = True
        elif self.remember_unsupported and kind in _UNSUPPORTED_ERRORS:
            self.mark_unsupported(name, _name(fn), kind)

    def mark_unsupported(self, name: str, what: str, why: str) -> None:
        self.unsupported.add(name)
        log.info("%s: %s is not supported by this driver or GPU (%s); %s is not asked again", self.label, what, why,
                 name)


def _text(value: Any) -> Any:
    """NVML's bytes as text (older bindings answer bytes); None where not available."""
    value = known(value)
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _milli(value: Any) -> float | None:
    return value / 1000.0 if isinstance(value, (int, float)) else None


def _got(value: Any) -> bool:
    """NVML answered (with a value)."""
    return value is not NA and value is not None


def _flag(value: Any) -> bool | None:
    return bool(value) if _got(value) else None


# --- reading one GPU: the same functions for collect, a rank and the sampler -------------------------------------

def memory_info(q: NvmlQuery, p: Any, handle: Any) -> tuple[int | None, int | None]:
    """(total, used) framebuffer bytes."""
    memory = q.query(p.nvmlDeviceGetMemoryInfo, handle, field="memory_total_bytes")
    return (int(memory.total), int(memory.used)) if _got(memory) else (None, None)


def read_identity(q: NvmlQuery, p: Any, handle: Any, index: int, memory_total_bytes: int | None) -> GpuIdentity:
    pci = q.query(p.nvmlDeviceGetPciInfo, handle, field="bus_id")
    identity = GpuIdentity(index=index, bus_id=normalize_bus_id(_text(pci.busId)) if _got(pci) else None,
                           name=_text(q.query(p.nvmlDeviceGetName, handle, field="name")),
                           uuid=_text(q.query(p.nvmlDeviceGetUUID, handle, field="uuid")),
                           serial=_text(q.query(p.nvmlDeviceGetSerial, handle, field="serial")),
                           vbios=_text(q.query(p.nvmlDeviceGetVbiosVersion, handle, field="vbios")),
                           memory_total_bytes=memory_total_bytes)
    bar1 = q.query(p.nvmlDeviceGetBAR1MemoryInfo, handle, field="bar1_total_bytes")
    identity.bar1_total_bytes = int(bar1.bar1Total) if _got(bar1) else None
    capability = q.query(p.nvmlDeviceGetCudaComputeCapability, handle, field="compute_capability")
    identity.compute_capability = f"{capability[0]}.{capability[1]}" if capability else None
    numa = q.query(p.nvmlDeviceGetNumaNodeId, handle, field="numa_node")
    identity.numa_node = numa if isinstance(numa, int) and numa >= 0 else None
    affinity = q.query(p.nvmlDeviceGetCpuAffinity, handle, 16, field="cpu_affinity")
    identity.cpu_affinity = _cpu_list_from_mask(list(affinity)) if _got(affinity) else None
    return identity


def read_sample(q: NvmlQuery, p: Any, handle: Any, fields: dict[str, Any] | None = None,
                stop_if_lost: bool = False) -> GpuSample:
    """One reading of the figures that move. `fields`: figures one nvmlDeviceGetFieldValues read already gave (the
    sampler's batch); each figure missing there is asked by its own function. `stop_if_lost`: once NVML calls the GPU
    lost (its first answer), ask it nothing more (the sampler, which then drops the GPU)."""
    fields = fields or {}

    def figure(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        return fields[name] if name in fields else known(q.query(fn, handle, *args, field=name))
    power = fields["power_w"] if "power_w" in fields else \
        _milli(q.query(p.nvmlDeviceGetPowerUsage, handle, field="power_w"))
    if q.lost and stop_if_lost:
        return GpuSample()
    reasons = getattr(p, "nvmlDeviceGetCurrentClocksEventReasons", None) or p.nvmlDeviceGetCurrentClocksThrottleReasons
    limit = _milli(q.query(p.nvmlDeviceGetEnforcedPowerLimit, handle, field="power_limit_w"))
    temperature = figure("temperature_c", p.nvmlDeviceGetTemperature, p.NVML_TEMPERATURE_GPU)
    memory_temperature = fields.get("memory_temperature_c")
    sm_clock = figure("sm_clock_mhz", p.nvmlDeviceGetClockInfo, p.NVML_CLOCK_SM)
    memory_clock = figure("memory_clock_mhz", p.nvmlDeviceGetClockInfo, p.NVML_CLOCK_MEM)
    utilization = q.query(p.nvmlDeviceGetUtilizationRates, handle, field="utilization_pct")
    return GpuSample(
        power_w=power, power_limit_w=limit, temperature_c=temperature,
        memory_temperature_c=float(memory_temperature) if memory_temperature is not None else None,
        sm_clock_mhz=sm_clock, memory_clock_mhz=memory_clock,
        utilization_pct=utilization.gpu if _got(utilization) else None,
        clock_event_reasons=known(q.query(reasons, handle, field="clock_event_reasons")),
        ecc_corrected=figure("ecc_corrected", p.nvmlDeviceGetTotalEccErrors, p.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                             p.NVML_VOLATILE_ECC),
        ecc_uncorrected=figure("ecc_uncorrected", p.nvmlDeviceGetTotalEccErrors,
                               p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, p.NVML_VOLATILE_ECC),
        pcie_replay=figure("pcie_replay", p.nvmlDeviceGetPcieReplayCounter),
        pcie_width=known(q.query(p.nvmlDeviceGetCurrPcieLinkWidth, handle, field="pcie_width")))


def _read_modes(q: NvmlQuery, p: Any, handle: Any, state: GpuState) -> None:
    """Modes and limits: persistence, MIG, compute and ECC modes, power limits, temperature thresholds, maxima."""
    state.persistence_mode = _flag(q.query(p.nvmlDeviceGetPersistenceMode, handle, field="persistence_mode"))
    mig = q.query(p.nvmlDeviceGetMigMode, handle, field="mig_enabled")
    if _got(mig):
        state.mig_enabled, state.mig_pending = bool(mig[0]), bool(mig[1])
    mode = q.query(p.nvmlDeviceGetComputeMode, handle, field="compute_mode")
    state.compute_mode = _COMPUTE_MODES.get(mode) if _got(mode) else None
    ecc = q.query(p.nvmlDeviceGetEccMode, handle, field="ecc_enabled")
    if _got(ecc):
        state.ecc_enabled, state.ecc_pending = bool(ecc[0]), bool(ecc[1])
    state.power_default_limit_w = _milli(
        q.query(p.nvmlDeviceGetPowerManagementDefaultLimit, handle, field="power_default_limit_w"))
    constraints = q.query(p.nvmlDeviceGetPowerManagementLimitConstraints, handle, field="power_max_limit_w")
    state.power_max_limit_w = _milli(constraints[1]) if constraints else None
    for name, threshold in (("slowdown_temperature_c", p.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
                            ("shutdown_temperature_c", p.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
                            ("max_operating_temperature_c", p.NVML_TEMPERATURE_THRESHOLD_GPU_MAX)):
        setattr(state, name, known(q.query(p.nvmlDeviceGetTemperatureThreshold, handle, threshold, field=name)))
    state.sm_clock_max_mhz = known(q.query(p.nvmlDeviceGetMaxClockInfo, handle, p.NVML_CLOCK_SM,
                                           field="sm_clock_max_mhz"))
    for name, function in (("pcie_gen_current", p.nvmlDeviceGetCurrPcieLinkGeneration),
                           ("pcie_gen_max", p.nvmlDeviceGetMaxPcieLinkGeneration),
                           ("pcie_gen_device_max", p.nvmlDeviceGetGpuMaxPcieLinkGeneration),
                           ("pcie_width_max", p.nvmlDeviceGetMaxPcieLinkWidth)):
        setattr(state, name, known(q.query(function, handle, field=name)))


def _read_memory_health(q: NvmlQuery, p: Any, handle: Any, state: GpuState) -> None:
    """Lifetime ECC counts, retired pages and remapped rows."""
    for name, error_type in (("ecc_corrected_aggregate", p.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                             ("ecc_uncorrected_aggregate", p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
        setattr(state, name, known(q.query(p.nvmlDeviceGetTotalEccErrors, handle, error_type, p.NVML_AGGREGATE_ECC,
                                           field=name)))
    for name, cause in (("retired_pages_sbe", p.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
                        ("retired_pages_dbe", p.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)):
        pages = q.query(p.nvmlDeviceGetRetiredPages, handle, cause, field=name)
        setattr(state, name, len(pages) if _got(pages) else None)
    state.retired_pages_pending = _flag(q.query(p.nvmlDeviceGetRetiredPagesPendingStatus, handle,
                                                field="retired_pages_pending"))
    rows = q.query(p.nvmlDeviceGetRemappedRows, handle, field="remapped_rows")
    if _got(rows):
        (state.remapped_rows_correctable, state.remapped_rows_uncorrectable, state.remap_pending,
         state.remap_failure) = rows[0], rows[1], bool(rows[2]), bool(rows[3])


def read_state(q: NvmlQuery, p: Any, handle: Any, memory_used_bytes: int | None) -> GpuState:
    state = GpuState(memory_used_bytes=memory_used_bytes)
    _read_modes(q, p, handle, state)
    _read_memory_health(q, p, handle, state)
    state.inforom_valid = _inforom_valid(q, p, handle)
    _read_fabric(q, p, handle, state)
    return state


def _inforom_valid(q: NvmlQuery, p: Any, handle: Any) -> bool | None:
    if q.query(p.nvmlDeviceValidateInforom, handle, field="inforom_valid") is not NA:
        return True
    error = q.errors.get("inforom_valid", "")
    if "Corrupted" in error.split(":")[0] or "corrupt" in error.lower():
        del q.errors["inforom_valid"]  # an answer: the infoROM is corrupted
        return False
    return None


def _read_fabric(q: NvmlQuery, p: Any, handle: Any, state: GpuState) -> None:
    """nvmlDeviceGetGpuFabricInfoV (state, status, clique, cluster UUID, health), else the older call where the
    binding or the driver lacks it (state, status, clique and cluster: its struct has no health mask)."""
    info, versioned = _fabric_info(q, p, handle)
    if info is None:
        return
    state.fabric_state = _FABRIC_STATES.get(int(info.state))
    if state.fabric_state != "Completed":
        return  # nvml.h: the other fields "must be checked only if state returns complete"
    state.fabric_status = _FABRIC_STATUS.get(int(info.status), f"NVML error {int(info.status)}")
    state.fabric_clique_id = int(info.cliqueId)
    state.fabric_cluster_uuid = fabric_uuid(bytes(info.clusterUuid))
    if versioned:
        state.fabric_health = fabric_health_of_mask(int(info.healthMask))


def _fabric_info(q: NvmlQuery, p: Any, handle: Any) -> tuple[Any, bool]:
    """(the filled struct, whether it is the versioned one), or (None, False) where NVML cannot answer."""
    # NVML takes a pointer; nvidia-ml-py passes the argument through untyped, and a Structure passed
    # that way goes by value: NVML then writes through garbage (a segfault, seen on an H200 in a thread).
    versioned = getattr(p, "c_nvmlGpuFabricInfoV_t", None)
    if versioned is not None and hasattr(p, "nvmlDeviceGetGpuFabricInfoV"):
        info = versioned()  # its constructor sets the `version` field
        # an error here is no answer yet: a driver before 550 lacks the function, the older call follows
        if q.query(p.nvmlDeviceGetGpuFabricInfoV, handle, ctypes.byref(info), field="fabric_state",
                   expected_errors=True) is not NA:
            return info, True
    older = getattr(p, "c_nvmlGpuFabricInfo_t", None)
    if older is None:
        return None, False
    info = older()
    if q.query(p.nvmlDeviceGetGpuFabricInfo, handle, ctypes.byref(info), field="fabric_state") is NA:
        return None, False
    return info, False


def fabric_uuid(raw: bytes) -> str:
    """The 16 bytes of clusterUuid as nvidia-smi prints them: `9c6f5af3-53bf-49b5-a436-b66766c413c3`."""
    text = raw[:16].hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:32]}"


def fabric_health_of_mask(mask: int) -> str:
    """nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_* fields (shift, 2-bit or 4-bit width) in nvidia-smi -q's words."""
    pairs = []
    for key, shift, width, words in _HEALTH_FIELDS:
        word = words.get((mask >> shift) & width)
        if word is not None:
            pairs.append(f"{key}={word}")
    return "; ".join(pairs)


def _processes(q: NvmlQuery, p: Any, handle: Any) -> list[GpuProcess] | None:
    running = q.query(p.nvmlDeviceGetComputeRunningProcesses, handle, field="processes")
    if not _got(running):
        return None
    processes = []
    for process in running:
        used = getattr(process, "usedGpuMemory", None)
        processes.append(GpuProcess(pid=process.pid, name=_process_name(process.pid), kind="C",
                                    used_memory_bytes=used if isinstance(used, int) else None))
    return processes


def _process_name(pid: int) -> str | None:
    try:
        import psutil  # optional: names the processes where it is installed
        return psutil.Process(pid).name()
    except Exception:  # psutil missing, another container's PID, or gone already
        return None


def _nvlink_count(q: NvmlQuery, p: Any, handle: Any) -> int | None:
    """The GPU's NVLink count from NVML_FI_DEV_NVLINK_LINK_COUNT; None where the driver lacks the field (then every
    index up to the library's bound is probed)."""
    field_id = getattr(p, "NVML_FI_DEV_NVLINK_LINK_COUNT", None)
    if field_id is None:
        return None
    values = q.query(p.nvmlDeviceGetFieldValues, handle, [field_id], field="nvlinks", expected_errors=True)
    if not values or getattr(values[0], "nvmlReturn", 1) != 0:
        return None
    count = _field_value(values[0])
    return count if isinstance(count, int) and 0 <= count <= p.NVML_NVLINK_MAX_LINKS else None


def _nvlinks(q: NvmlQuery, p: Any, handle: Any) -> list[NvLink] | None:
    """Links 0 … count-1 (the field value), or every index up to the library's bound where the field is missing;
    None once the GPU has timed out. An index past the last link answers an error: no such link."""
    count = _nvlink_count(q, p, handle)
    links = []
    for link in range(p.NVML_NVLINK_MAX_LINKS if count is None else count):
        if q.timed_out:
            break
        state = q.query(p.nvmlDeviceGetNvLinkState, handle, link, field="nvlinks", expected_errors=True)
        if state is not NA:
            links.append(NvLink(link=link, active=bool(state), speed_gb_per_s=None))
    return None if q.timed_out else links


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


# --- collect: the whole machine, once ------------------------------------------------------------------------------

def _query_gpu(p: Any, q: NvmlQuery, index: int, handle: Any) -> GpuRecord:
    if handle is NA:
        return GpuRecord(identity=GpuIdentity(index=index), errors=q.errors, lost=True)
    total, used = memory_info(q, p, handle)
    identity = read_identity(q, p, handle, index, total)
    sample = read_sample(q, p, handle)
    state = read_state(q, p, handle, used)
    processes, nvlinks = _processes(q, p, handle), _nvlinks(q, p, handle)
    return GpuRecord(identity=identity, sample=sample, state=state, processes=processes, nvlinks=nvlinks,
                     errors=q.errors, lost=q.timed_out or q.lost)


def collect_nvml(timeout_s: float = CALL_TIMEOUT_S) -> NvmlCollection:
    collection = NvmlCollection()
    try:
        import pynvml  # optional (nvidia-ml-py): without it, the collection says why
    except ImportError as error:
        collection.init_error = f"nvidia-ml-py is not installed ({error})"
        return collection
    system = NvmlQuery("NVML", timeout_s=timeout_s)
    if system.query(pynvml.nvmlInit, field="init") is NA:  # DriverNotLoaded, LibraryNotFound, LibRmVersionMismatch …
        collection.init_error = system.errors["init"]
        return collection
    try:
        collection.driver_version = _text(system.query(pynvml.nvmlSystemGetDriverVersion, field="driver"))
        collection.nvml_version = _text(system.query(pynvml.nvmlSystemGetNVMLVersion, field="nvml"))
        cuda = system.query(pynvml.nvmlSystemGetCudaDriverVersion, field="cuda")
        collection.cuda_driver_version = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None
        count = system.query(pynvml.nvmlDeviceGetCount, field="count")
        collection.device_count = count if isinstance(count, int) else None
        handles, queries = [], []
        for index in range(collection.device_count or 0):
            q = NvmlQuery(f"GPU {index}", timeout_s=timeout_s)
            handle = q.query(pynvml.nvmlDeviceGetHandleByIndex, index, field="handle")
            collection.gpus.append(_query_gpu(pynvml, q, index, handle))
            handles.append(None if handle is NA else handle)
            queries.append(q)
        collection.p2p_read, collection.p2p_not_probed = _query_p2p(pynvml, handles, queries, timeout_s)
        collection.errors = dict(system.errors)
    finally:
        NvmlQuery("NVML", timeout_s=timeout_s).query(pynvml.nvmlShutdown)
    return collection


def _query_p2p(p: Any, handles: list[Any], queries: list[NvmlQuery], timeout_s: float,
               ) -> tuple[dict[str, str], dict[str, str]]:
    """(p2p_read, p2p_not_probed): pairs with a GPU that has no handle or has timed out are not asked (the reason
    is in p2p_not_probed); after one P2P call times out, no further pair is asked."""
    status: dict[str, str] = {}
    not_probed: dict[str, str] = {}
    p2p = NvmlQuery("P2P", timeout_s=timeout_s)
    stopped_at = ""  # the pair whose query timed out
    for i, first in enumerate(handles):
        for j, second in enumerate(handles):
            if i == j:
                continue
            pair = f"{i},{j}"
            silent = next((k for k in (i, j) if handles[k] is None or queries[k].timed_out), None)
            if silent is not None:
                not_probed[pair] = (f"not probed: GPU {silent} timed out earlier" if queries[silent].timed_out
                                    else f"not probed: GPU {silent} has no NVML handle")
            elif p2p.timed_out:
                not_probed[pair] = f"not probed: the P2P query for GPUs {stopped_at} timed out ({p2p.last_timeout})"
            else:
                code = p2p.query(p.nvmlDeviceGetP2PStatus, first, second, p.NVML_P2P_CAPS_INDEX_READ, field=pair,
                                 expected_errors=True)
                if p2p.timed_out:
                    stopped_at, not_probed[pair] = pair, p2p.errors[pair]
                else:
                    status[pair] = _P2P_STATUS.get(code, "U")
    return status, not_probed


def collect_one_gpu(bus_id: str, timeout_s: float = CALL_TIMEOUT_S) -> dict[str, Any] | None:
    """One GPU's identity, memory and compute processes, found by its PCI bus id: what a rank asks about its own GPU
    (a whole-node collection, P2P probes included, on every rank of an 8-GPU node would be eight times the work).
    Its nvml.json entry, as the rank's result carries it; None where NVML cannot say."""
    try:
        import pynvml  # optional (nvidia-ml-py): without it, NVML cannot say
    except ImportError:
        return None
    q = NvmlQuery(f"GPU {bus_id}", timeout_s=timeout_s)
    if q.query(pynvml.nvmlInit, field="init") is NA:
        return None
    try:
        getter = getattr(pynvml, "nvmlDeviceGetHandleByPciBusId_v2", None) or pynvml.nvmlDeviceGetHandleByPciBusId
        handle = q.query(getter, bus_id.encode(), field="handle")
        if handle is NA or handle is None:
            return None
        index = q.query(pynvml.nvmlDeviceGetIndex, handle, field="index")
        uuid = _text(q.query(pynvml.nvmlDeviceGetUUID, handle, field="uuid"))
        total, used = memory_info(q, pynvml, handle)
        record = GpuRecord(identity=GpuIdentity(index=index, bus_id=normalize_bus_id(bus_id), uuid=uuid,
                                                memory_total_bytes=total),
                           state=GpuState(memory_used_bytes=used), processes=_processes(q, pynvml, handle),
                           errors=q.errors, lost=q.timed_out or q.lost)
        return record.to_json() if isinstance(index, int) else None
    finally:
        NvmlQuery("NVML", timeout_s=timeout_s).query(pynvml.nvmlShutdown)


# --- the sampler's source: telemetry and monitor -----------------------------------------------------------------

# Figures the sampler reads in one nvmlDeviceGetFieldValues call where the driver has the field:
# sample figure → (NVML_FI_* name, scale to the figure's unit). Each falls back to its own function when the field
# answers with an error.
_SAMPLE_FIELDS = {
    "power_w": ("NVML_FI_DEV_POWER_AVERAGE", 0.001),  # mW averaged over 1 s, as nvmlDeviceGetPowerUsage on Ampere+
    "memory_temperature_c": ("NVML_FI_DEV_MEMORY_TEMP", 1.0),
    "ecc_corrected": ("NVML_FI_DEV_ECC_SBE_VOL_TOTAL", 1),
    "ecc_uncorrected": ("NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 1),
    "pcie_replay": ("NVML_FI_DEV_PCIE_REPLAY_COUNTER", 1),
}


class NvmlSession:
    """A live NVML connection for sampling (telemetry, monitor): `identity` (GpuIdentity by NVML index) and
    `sample(index)` (a GpuSample).

    Every call runs on one long-lived worker thread (NvmlWorker), a GPU's whole sample under one timeout: a sample
    that does not come back in time is missing, the GPU is marked lost and not asked again. The figures NVML has as
    field values are read in one nvmlDeviceGetFieldValues call per sample. A function or field the driver lacks
    (NotSupported, FunctionNotFound) is logged once per GPU and never asked again (`unsupported`)."""

    def __init__(self, timeout_s: float = CALL_TIMEOUT_S):
        import pynvml  # optional (nvidia-ml-py): callers without it catch the ImportError
        self.pynvml, self.timeout_s = pynvml, timeout_s
        self._events = None
        self.worker = NvmlWorker("gpuready-nvml-sampler")
        self._event_worker = NvmlWorker("gpuready-nvml-events")
        self._setup = NvmlQuery("NVML", timeout_s=timeout_s, worker=self.worker, stop_after_timeout=False)
        self._events_query = NvmlQuery("NVML events", timeout_s=timeout_s, worker=self._event_worker,
                                       stop_after_timeout=False)
        started = self._setup.query(pynvml.nvmlInit, field="init") is not NA
        count = self._setup.query(pynvml.nvmlDeviceGetCount, field="count") if started else NA
        if not isinstance(count, int):
            self.close()
            raise NvmlUnavailable("; ".join(self._setup.errors.values()) or "NVML counted no GPU")
        self.handles = [known(self._setup.query(pynvml.nvmlDeviceGetHandleByIndex, index, field=f"handle {index}"))
                        for index in range(count)]
        self.lost: set[int] = {index for index, handle in enumerate(self.handles) if handle is None}
        self._queries = [NvmlQuery(f"GPU {index}", timeout_s=None, stop_after_timeout=False, remember_unsupported=True)
                         for index in range(count)]
        self.identity = [self._identity(index) for index in range(count)]
        self._fields = [(key, getattr(pynvml, name), name, scale) for key, (name, scale) in _SAMPLE_FIELDS.items()
                        if hasattr(pynvml, name)]

    @property
    def unsupported(self) -> dict[int, set[str]]:
        """NVML index → the figures its driver or GPU lacks (not asked again)."""
        return {index: q.unsupported for index, q in enumerate(self._queries)}

    @property
    def calls(self) -> int:
        """NVML calls made by samples (tests and figures)."""
        return sum(q.calls for q in self._queries)

    def _identity(self, index: int) -> GpuIdentity:
        """Read at the start, each call under its own timeout; a GPU that does not answer is lost from the start."""
        if index in self.lost:
            return GpuIdentity(index=index)
        q = NvmlQuery(f"GPU {index}", timeout_s=self.timeout_s, worker=self.worker)
        handle = self.handles[index]
        identity = read_identity(q, self.pynvml, handle, index, memory_info(q, self.pynvml, handle)[0])
        if q.timed_out or q.lost:
            self.lost.add(index)
        return identity

    def _read_fields(self, index: int) -> dict[str, Any]:
        """The field-value figures of one GPU; figures whose field failed are absent (their function is asked)."""
        q, p = self._queries[index], self.pynvml
        wanted = [entry for entry in self._fields if f"field:{entry[0]}" not in q.unsupported]
        values = q.query(p.nvmlDeviceGetFieldValues, self.handles[index], [entry[1] for entry in wanted],
                         field="field_values") if wanted else NA
        result: dict[str, Any] = {}
        for (key, _, name, scale), value in zip(wanted, values or []):
            code = getattr(value, "nvmlReturn", 1)
            if code == 0:
                number = _field_value(value)
                result[key] = number * scale if number is not None else None
            elif code in _UNSUPPORTED_RETURNS:
                q.mark_unsupported(f"field:{key}", f"field value {name}", f"nvmlReturn {code}")
        return result

    def _read(self, index: int) -> GpuSample:
        """One sample, on the worker thread (the whole of it awaited under one timeout)."""
        q = self._queries[index]
        sample = read_sample(q, self.pynvml, self.handles[index], self._read_fields(index), stop_if_lost=True)
        if q.lost:
            self.lost.add(index)
        return sample

    def sample(self, index: int) -> GpuSample | None:
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
        except Exception as error:  # a bug reading an answer of an unexpected shape: this sample is empty
            log.warning("GPU %d: sample failed (%s)", index, _error_text(error))
            return GpuSample()
        return None if index in self.lost else reading

    def watch_xid(self) -> bool:
        """Register for Xid events (no root needed); False where the driver refuses."""
        p, q = self.pynvml, self._events_query
        events = q.query(p.nvmlEventSetCreate, field="event_set")
        if events is NA:
            return False
        for handle in (handle for handle in self.handles if handle is not None):
            if q.query(p.nvmlDeviceRegisterEvents, handle, p.nvmlEventTypeXidCriticalError, events,
                       field="register_events") is NA:
                return False
        self._events = events
        return True

    def wait_xid(self, timeout_ms: int) -> list[tuple[int | None, int]]:
        """(GPU index, Xid) events that arrived within the wait (on its own worker: it never delays samples)."""
        if self._events is None:
            return []
        data = self._events_query.query(self.pynvml.nvmlEventSetWait_v2, self._events, timeout_ms,
                                        expected_errors=True,  # NVML_ERROR_TIMEOUT: nothing happened
                                        timeout_s=self.timeout_s + timeout_ms / 1000)
        if data is NA:
            return []
        index = next((i for i, handle in enumerate(self.handles) if _same_handle(handle, data.device)), None)
        return [(index, int(data.eventData))]

    def close(self) -> None:
        if self._events is not None:
            self._events_query.query(self.pynvml.nvmlEventSetFree, self._events)
        self._setup.query(self.pynvml.nvmlShutdown)
        self.worker.close()
        self._event_worker.close()


def _same_handle(first: Any, second: Any) -> bool:
    try:
        return ctypes.cast(first, ctypes.c_void_p).value == ctypes.cast(second, ctypes.c_void_p).value
    except Exception:  # handles of another shape: not comparable
        return False
