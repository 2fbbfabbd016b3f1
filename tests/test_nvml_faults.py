"""NVML under faults (issue 9), with a fake pynvml: a hung GPU, missing functions and fields, batched reads.

The fake answers every nvml* function from a table, records each call (function name, GPU index), blocks forever
on the calls named in `hang` (an Event the test never sets) and raises NVMLError_NotSupported for those named in
`unsupported`. Timeouts are tiny (TIMEOUT) so the tests stay fast.
"""

import json
import logging
import sys
import threading
import time
from types import SimpleNamespace

import pynvml as real_pynvml
import pytest

from gpuready.facts.nvml import NvmlSession, NvmlWorker, NvmlTimeout, collect_nvml, collect_one_gpu
from gpuready.facts.nvml_json import NvmlDocument
from gpuready.telemetry import Sampler

TIMEOUT = 0.2
NEVER = threading.Event()  # never set: a hung call stays hung


class NVMLError_NotSupported(Exception):
    pass


class NVMLError_FunctionNotFound(Exception):
    pass


class NVMLError_InvalidArgument(Exception):
    pass


class Handle:
    def __init__(self, index):
        self.index = index


def _field(field_id, code, value, value_type):
    union = SimpleNamespace(dVal=float(value), uiVal=int(value), ulVal=int(value), ullVal=int(value),
                            sllVal=int(value), siVal=int(value), usVal=int(value))
    return SimpleNamespace(fieldId=field_id, nvmlReturn=code, valueType=value_type, value=union)


class FakeNvml:
    """A pynvml stand-in: `hang` = {(function, gpu)}, `unsupported` = {(function, gpu)} (gpu None: every GPU),
    `missing_fields` = {field id} answered with NVML_ERROR_NOT_SUPPORTED."""

    def __init__(self, gpus=4, hang=(), unsupported=(), missing_fields=(), nvlinks=18, processes=None):
        for name in dir(real_pynvml):
            if name.startswith("NVML_") or name.startswith("nvmlEventType"):
                setattr(self, name, getattr(real_pynvml, name))
        self.gpus, self.hang, self.unsupported = gpus, set(hang), set(unsupported)
        self.missing_fields, self.nvlinks = set(missing_fields), nvlinks
        self.processes = processes or {}
        self.calls: list[tuple[str, int | None]] = []
        self.field_requests: list[list[int]] = []
        p = real_pynvml
        self.fields = {p.NVML_FI_DEV_NVLINK_LINK_COUNT: (nvlinks, p.NVML_VALUE_TYPE_UNSIGNED_INT),
                       p.NVML_FI_DEV_POWER_AVERAGE: (650_000, p.NVML_VALUE_TYPE_UNSIGNED_INT),
                       p.NVML_FI_DEV_MEMORY_TEMP: (55, p.NVML_VALUE_TYPE_UNSIGNED_INT),
                       p.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: (2, p.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG),
                       p.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: (0, p.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG),
                       p.NVML_FI_DEV_PCIE_REPLAY_COUNTER: (7, p.NVML_VALUE_TYPE_UNSIGNED_INT)}

    def answers(self, name, gpu, args):
        answers = {
            "nvmlSystemGetDriverVersion": "580.159.04", "nvmlSystemGetNVMLVersion": "13.580.159.04",
            "nvmlSystemGetCudaDriverVersion": 13000, "nvmlDeviceGetCount": self.gpus,
            "nvmlDeviceGetHandleByIndex": lambda: Handle(args[0]),
            "nvmlDeviceGetPciInfo": lambda: SimpleNamespace(busId=f"00000000:{gpu + 0x10:02X}:00.0".encode()),
            "nvmlDeviceGetName": "NVIDIA H200", "nvmlDeviceGetUUID": lambda: f"GPU-{gpu:04d}",
            "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=150 * 2**30, used=2**20),
            "nvmlDeviceGetBAR1MemoryInfo": SimpleNamespace(bar1Total=2**37),
            "nvmlDeviceGetCudaComputeCapability": (9, 0), "nvmlDeviceGetMigMode": (0, 0),
            "nvmlDeviceGetEccMode": (1, 1), "nvmlDeviceGetPowerUsage": 640_000,
            "nvmlDeviceGetEnforcedPowerLimit": 700_000, "nvmlDeviceGetPowerManagementDefaultLimit": 700_000,
            "nvmlDeviceGetPowerManagementLimitConstraints": (200_000, 700_000), "nvmlDeviceGetTemperature": 40,
            "nvmlDeviceGetTemperatureThreshold": 90, "nvmlDeviceGetClockInfo": 1980, "nvmlDeviceGetMaxClockInfo": 1980,
            "nvmlDeviceGetUtilizationRates": SimpleNamespace(gpu=0, memory=0), "nvmlDeviceGetCurrPcieLinkWidth": 16,
            "nvmlDeviceGetMaxPcieLinkWidth": 16, "nvmlDeviceGetCurrPcieLinkGeneration": 5,
            "nvmlDeviceGetMaxPcieLinkGeneration": 5, "nvmlDeviceGetGpuMaxPcieLinkGeneration": 5,
            "nvmlDeviceGetRetiredPages": [], "nvmlDeviceGetRemappedRows": (0, 0, 0, 0),
            "nvmlDeviceGetComputeRunningProcesses": lambda: self.processes.get(gpu, []),
            "nvmlDeviceGetCpuAffinity": [0xFF], "nvmlDeviceGetIndex": gpu,
            "nvmlDeviceGetNumaNodeId": 0, "nvmlDeviceGetP2PStatus": 0, "nvmlDeviceGetSerial": "1650000000000",
            "nvmlDeviceGetVbiosVersion": "96.00.AF.00.01",
        }
        if name == "nvmlDeviceGetNvLinkState":
            if args[1] >= self.nvlinks:
                raise NVMLError_NotSupported("Not Supported")
            return 1
        if name == "nvmlDeviceGetFieldValues":
            self.field_requests.append(list(args[1]))
            return [_field(field_id, 3, 0, 1) if field_id in self.missing_fields or field_id not in self.fields
                    else _field(field_id, 0, *self.fields[field_id]) for field_id in args[1]]
        value = answers.get(name, 0)
        return value() if callable(value) else value

    def __getattr__(self, name):
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def function(*args):
            gpu = args[0].index if args and isinstance(args[0], Handle) else None
            if name == "nvmlDeviceGetHandleByIndex":
                gpu = args[0]
            if name.startswith("nvmlDeviceGetHandleByPciBusId"):  # "0000:12:00.0" is GPU 2 (buses from 0x10)
                gpu = int(args[0].decode().split(":")[1], 16) - 0x10
                if not 0 <= gpu < self.gpus:
                    raise NVMLError_InvalidArgument("Not Found")
                self.calls.append((name, gpu))
                return Handle(gpu)
            self.calls.append((name, gpu))
            if (name, gpu) in self.hang:
                NEVER.wait()
            if (name, gpu) in self.unsupported or (name, None) in self.unsupported:
                raise NVMLError_NotSupported("Not Supported")
            return self.answers(name, gpu, args)
        function.__name__ = name
        return function


@pytest.fixture
def fake(monkeypatch):
    def install(**options):
        module = FakeNvml(**options)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module
    return install


def _calls_on(module, gpu, name=None):
    return [call for call in module.calls if call[1] == gpu and (name is None or call[0] == name)]


# --- collect_nvml (the nvml.json of `check`) -------------------------------------------------------------------

def test_a_rank_asks_about_its_own_gpu_only(fake):
    """Under torchrun each rank reads who uses its GPU: one GPU's calls, no other GPU, no P2P probe."""
    other = SimpleNamespace(pid=4242, usedGpuMemory=30 * 2**30)
    module = fake(gpus=8, processes={2: [other]})
    gpu = collect_one_gpu("0000:12:00.0", timeout_s=TIMEOUT)
    assert gpu["index"] == 2 and gpu["bus_id"] == "0000:12:00.0" and gpu["uuid"] == "GPU-0002"
    assert [(p["pid"], p["used_memory_bytes"]) for p in gpu["processes"]] == [(4242, 30 * 2**30)]
    assert {index for _, index in module.calls if index is not None} == {2}
    assert not [name for name, _ in module.calls if "P2P" in name or name == "nvmlDeviceGetHandleByIndex"]
    assert collect_one_gpu("0000:99:00.0", timeout_s=TIMEOUT) is None  # not a GPU NVML knows


def test_a_rank_whose_gpu_hangs_in_nvml_hears_unknown_in_time(fake):
    fake(gpus=2, hang={("nvmlDeviceGetComputeRunningProcesses", 1)})
    started = time.monotonic()
    gpu = collect_one_gpu("0000:11:00.0", timeout_s=TIMEOUT)
    assert time.monotonic() - started < 10 * TIMEOUT
    assert gpu["index"] == 1 and gpu["processes"] is None  # the processes could not be read: not "nobody"


def test_a_hung_gpu_is_asked_nothing_more_in_the_collection(fake):
    module = fake(gpus=4, hang={("nvmlDeviceGetPowerUsage", 1)})
    started = time.monotonic()
    collection = collect_nvml(timeout_s=TIMEOUT)
    elapsed = time.monotonic() - started
    hung_at = module.calls.index(("nvmlDeviceGetPowerUsage", 1))
    before = len(_calls_on(module, 1, None)) - 1  # GPU 1's calls before the hang
    assert before >= 10 and TIMEOUT <= elapsed < (before + 1) * TIMEOUT
    # After the hang not one call names GPU 1: not its later fields, NVLinks, infoROM, nor any P2P pair.
    assert [call for call in module.calls[hung_at + 1:] if call[1] == 1] == []
    assert not [call for call in module.calls if call[0] == "nvmlDeviceGetP2PStatus" and call[1] == 1]
    gpu1 = collection.gpus[1]
    assert gpu1.lost is True and gpu1.errors["power_w"].startswith("timeout: nvmlDeviceGetPowerUsage")
    assert gpu1.errors["inforom_valid"].startswith("skipped") and gpu1.nvlinks is None
    assert gpu1.errors["nvlinks"].startswith("skipped")
    for index in (0, 2, 3):
        gpu = collection.gpus[index]
        assert gpu.errors == {} and gpu.lost is False and gpu.sample.power_w == 640.0
        assert gpu.state.inforom_valid is True and len(gpu.nvlinks) == 18
    pairs_with_1 = {f"{i},{j}" for i in range(4) for j in range(4) if i != j and 1 in (i, j)}
    assert set(collection.p2p_not_probed) == pairs_with_1
    assert all(reason == "not probed: GPU 1 timed out earlier" for reason in collection.p2p_not_probed.values())
    assert set(collection.p2p_read) == {f"{i},{j}" for i in (0, 2, 3) for j in (0, 2, 3) if i != j}
    assert set(collection.p2p_read.values()) == {"OK"}
    # The document still parses: GPU 1 lost, its unanswered fields named (in the facts' names).
    parsed = NvmlDocument(json.dumps(collection.to_json()))
    assert parsed.gpus[1].lost and "power_draw_w" in parsed.gpus[1].error_fields
    assert (parsed.gpus[0].power_draw_w, parsed.gpus[0].pcie_width_current, parsed.gpus[0].inforom_valid) == (
        640.0, 16, True)  # collect writes version 2 (GpuSample's names); the facts keep theirs
    assert (0, 1) not in parsed.p2p_read and parsed.p2p_read[(0, 2)] == "OK"


def test_a_hung_p2p_query_stops_p2p_probing(fake):
    module = fake(gpus=3, hang={("nvmlDeviceGetP2PStatus", 1)})
    started = time.monotonic()
    collection = collect_nvml(timeout_s=TIMEOUT)
    assert time.monotonic() - started < 3 * TIMEOUT
    p2p_calls = [call for call in module.calls if call[0] == "nvmlDeviceGetP2PStatus"]
    assert p2p_calls == [("nvmlDeviceGetP2PStatus", 0), ("nvmlDeviceGetP2PStatus", 0), ("nvmlDeviceGetP2PStatus", 1)]
    assert collection.p2p_read == {"0,1": "OK", "0,2": "OK"}
    assert collection.p2p_not_probed["1,0"].startswith("timeout:")
    assert set(collection.p2p_not_probed) == {"1,0", "1,2", "2,0", "2,1"}


def test_nvlink_count_comes_from_the_field_value(fake):
    module = fake(gpus=2, nvlinks=18)
    collection = collect_nvml(timeout_s=TIMEOUT)
    for index in (0, 1):
        assert len(_calls_on(module, index, "nvmlDeviceGetNvLinkState")) == 18
        assert [link.link for link in collection.gpus[index].nvlinks] == list(range(18))


def test_nvlink_probing_without_the_link_count_field(fake):
    module = fake(gpus=2, nvlinks=18, missing_fields={real_pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT})
    collection = collect_nvml(timeout_s=TIMEOUT)
    for index in (0, 1):  # every index up to the library's bound, links past the last one left out
        assert len(_calls_on(module, index, "nvmlDeviceGetNvLinkState")) == real_pynvml.NVML_NVLINK_MAX_LINKS
        assert len(collection.gpus[index].nvlinks) == 18 and "nvlinks" not in collection.gpus[index].errors


def test_nvlink_probing_when_field_values_are_missing(fake):
    module = fake(gpus=1, nvlinks=4, unsupported={("nvmlDeviceGetFieldValues", None)})
    collection = collect_nvml(timeout_s=TIMEOUT)
    assert len(_calls_on(module, 0, "nvmlDeviceGetNvLinkState")) == real_pynvml.NVML_NVLINK_MAX_LINKS
    assert len(collection.gpus[0].nvlinks) == 4


# --- the worker ------------------------------------------------------------------------------------------------

def test_worker_keeps_one_thread_and_replaces_a_hung_one():
    worker = NvmlWorker("test-worker")
    assert [worker.call(lambda x: x * 2, i, timeout_s=1) for i in range(50)] == [i * 2 for i in range(50)]
    assert worker.threads_started == 1
    with pytest.raises(ValueError):
        worker.call(int, "not a number", timeout_s=1)
    started = time.monotonic()
    with pytest.raises(NvmlTimeout):
        worker.call(NEVER.wait, timeout_s=TIMEOUT)
    assert time.monotonic() - started < TIMEOUT + 0.5
    assert worker.call(lambda: "after", timeout_s=1) == "after" and worker.threads_started == 2
    worker.close()


# --- NvmlSession (the sampler's source) ------------------------------------------------------------------------

def _session(fake, **options):
    module = fake(**options)
    session = NvmlSession(timeout_s=TIMEOUT)
    module.calls.clear()
    return module, session


def test_sample_batches_field_values_on_one_thread(fake):
    module, session = _session(fake, gpus=3)
    threads_before = threading.active_count()
    samples = [session.sample(index) for _ in range(10) for index in range(3)]
    assert threading.active_count() == threads_before and session.worker.threads_started == 1
    sample = samples[0]
    assert sample.power_w == 650.0 and sample.memory_temperature_c == 55.0
    assert sample.ecc_corrected == 2 and sample.ecc_uncorrected == 0 and sample.pcie_replay == 7
    assert sample.temperature_c == 40 and sample.sm_clock_mhz == 1980 and sample.pcie_width == 16
    names = [name for name, _ in module.calls]
    assert names.count("nvmlDeviceGetFieldValues") == 30  # one batch per GPU per sample
    assert not {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetPcieReplayCounter"} & set(names)
    assert len(module.calls) == 30 * 8  # 12 figures in 8 calls (12 before the batch)
    session.close()


def test_a_missing_field_falls_back_to_its_function_once_decided(fake, caplog):
    power = real_pynvml.NVML_FI_DEV_POWER_AVERAGE
    module, session = _session(fake, gpus=1, missing_fields={power})
    with caplog.at_level(logging.INFO, logger="gpuready.nvml"):
        readings = [session.sample(0) for _ in range(5)]
    assert [reading.power_w for reading in readings] == [640.0] * 5  # nvmlDeviceGetPowerUsage
    assert power in module.field_requests[0] and all(power not in request for request in module.field_requests[1:])
    assert len(_calls_on(module, 0, "nvmlDeviceGetPowerUsage")) == 5
    assert sum("field:power_w" in record.getMessage() for record in caplog.records) == 1


def test_an_unsupported_function_is_asked_once_and_logged_once(fake, caplog):
    module, session = _session(fake, gpus=2, unsupported={("nvmlDeviceGetCurrPcieLinkWidth", 0)})
    with caplog.at_level(logging.INFO, logger="gpuready.nvml"):
        readings = [session.sample(index) for _ in range(5) for index in range(2)]
    assert len(_calls_on(module, 0, "nvmlDeviceGetCurrPcieLinkWidth")) == 1
    assert len(_calls_on(module, 1, "nvmlDeviceGetCurrPcieLinkWidth")) == 5
    assert [reading.pcie_width for reading in readings[::2]] == [None] * 5
    assert [reading.pcie_width for reading in readings[1::2]] == [16] * 5
    assert session.unsupported == {0: {"pcie_width"}, 1: set()} and session.lost == set()
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1 and "GPU 0: nvmlDeviceGetCurrPcieLinkWidth is not supported" in messages[0]


def test_a_hung_sample_is_missing_and_the_others_go_on(fake):
    module, session = _session(fake, gpus=3, hang={("nvmlDeviceGetTemperature", 1)})
    assert session.sample(0).temperature_c == 40
    started = time.monotonic()
    assert session.sample(1) is None
    assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 0.5 and session.lost == {1}
    asked_1 = len(_calls_on(module, 1))
    for _ in range(3):
        assert session.sample(0) is not None and session.sample(1) is None and session.sample(2) is not None
    assert len(_calls_on(module, 1)) == asked_1 and session.worker.threads_started == 2


def test_sampler_loop_with_a_gpu_that_hangs(fake):
    module, session = _session(fake, gpus=3, hang={("nvmlDeviceGetUtilizationRates", 2)})
    with Sampler(session, [0, 1, 2], interval_s=0.02, watch_xid=False) as sampler:
        time.sleep(TIMEOUT + 0.4)
    telemetry = sampler.telemetry
    assert 2 in telemetry.lost_at and telemetry.samples[2] == []
    assert len(telemetry.samples[0]) >= 5 and len(telemetry.samples[0]) == len(telemetry.samples[1])
    assert session.worker.threads_started == 2
