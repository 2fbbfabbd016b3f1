"""An NVML sampler that runs beside any workload and returns time series.

It runs in the parent process, apart from the workers. One sampling thread walks the GPUs each
interval; the NVML source (facts/nvml.py NvmlSession) runs its calls on one long-lived worker
thread, one batched nvmlDeviceGetFieldValues read per GPU where the driver has the fields, and
awaits each GPU's sample under a timeout: a hung GPU's sample is missing, the GPU is marked lost
(`lost_at`) and its series stops, never the loop. Functions and fields the driver lacks are
logged once per GPU and not asked again. Xid events come from NVML's event API in a second
thread (no root needed), on a worker of their own so a wait never delays a sample.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuready.facts.nvml import NvmlSession
from gpuready.facts.nvml_records import SAMPLE_UNITS, GpuIdentity, GpuSample
from gpuready.model import GpuRef, Series, Subject

METRICS = SAMPLE_UNITS
"""Metrics kept as series: a sample's figures (facts/nvml_records.py GpuSample), name → unit."""


class SampleSource(Protocol):
    identity: list[GpuIdentity]
    lost: set[int]

    def sample(self, index: int) -> GpuSample | None: ...
    def wait_xid(self, timeout_ms: int) -> list[tuple[int | None, int]]: ...


@dataclass
class Telemetry:
    started_at: float
    """Wall-clock time (time.time()) of t_s = 0."""
    samples: dict[int, list[tuple[float, GpuSample]]] = field(default_factory=dict)
    """NVML index → (seconds since `started_at`, sample), in time order."""
    xid_events: list[tuple[float, int | None, int]] = field(default_factory=list)
    lost_at: dict[int, float] = field(default_factory=dict)
    interval_s: float = 1.0
    xid_source: str = "none"

    def __post_init__(self) -> None:
        # Samples given as figures by name (a recorded run: a report's series at one time) are read as GpuSample.
        self.samples = {index: [(t, sample if isinstance(sample, GpuSample) else GpuSample.from_values(sample))
                                for t, sample in series] for index, series in self.samples.items()}

    def values(self, index: int, metric: str, start_s: float = 0.0, end_s: float = float("inf")) -> list[float]:
        """The figure `metric` (a GpuSample field) of one GPU's samples between two times, where it was read."""
        return [getattr(sample, metric) for t, sample in self.samples.get(index, [])
                if start_s <= t <= end_s and getattr(sample, metric) is not None]

    def times(self, index: int, metric: str, start_s: float = 0.0, end_s: float = float("inf")) -> list[float]:
        return [t for t, sample in self.samples.get(index, [])
                if start_s <= t <= end_s and getattr(sample, metric) is not None]

    def series(self, host: str, identity: list[GpuIdentity]) -> list[Series]:
        result = []
        for index, samples in sorted(self.samples.items()):
            gpu = identity[index] if index < len(identity) else GpuIdentity(index=index)
            subject = Subject(host=host, gpu=GpuRef(index=index, bus_id=gpu.bus_id, uuid=gpu.uuid))
            for metric, unit in METRICS.items():
                points = [(t, getattr(sample, metric)) for t, sample in samples if getattr(sample, metric) is not None]
                if points:
                    result.append(Series(subject=subject, metric=metric, unit=unit,
                                         t_s=[round(t, 3) for t, _ in points], values=[float(v) for _, v in points]))
        return result


class Sampler:
    """`with Sampler(source, gpus, interval_s) as sampler: ...` then `sampler.telemetry`."""

    def __init__(self, source: SampleSource, gpus: list[int], interval_s: float = 1.0, watch_xid: bool = True):
        self.source, self.gpus, self.interval_s = source, gpus, interval_s
        self.telemetry = Telemetry(started_at=time.time(), interval_s=interval_s,
                                   samples={index: [] for index in gpus})
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._sample_loop, daemon=True, name="gpuready-sampler")]
        if watch_xid and getattr(source, "watch_xid", None) and source.watch_xid():
            self.telemetry.xid_source = "NVML event API"
            self._threads.append(threading.Thread(target=self._xid_loop, daemon=True, name="gpuready-xid"))

    def __enter__(self) -> "Sampler":
        return self.start()

    def start(self) -> "Sampler":
        """Start sampling (and watching Xids); `stop()` ends it."""
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.interval_s + 6)  # a thread stuck in NVML is abandoned, never awaited

    def now_s(self) -> float:
        return time.time() - self.telemetry.started_at

    def _sample_loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            for index in self.gpus:
                if index in self.telemetry.lost_at:
                    continue
                reading = self.source.sample(index)
                if reading is None:
                    self.telemetry.lost_at[index] = self.now_s()
                    continue
                self.telemetry.samples[index].append((self.now_s(), reading))
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _xid_loop(self) -> None:
        while not self._stop.is_set():
            for index, xid in self.source.wait_xid(500):
                self.telemetry.xid_events.append((self.now_s(), index, xid))


def start_telemetry(device: str, gpus: list[int], interval_s: float = 1.0, session: Any = None) -> tuple[Any, Any]:
    """(NVML session, a started Sampler every `interval_s`, Xids watched) over these NVML indices (none: Xids only);
    (None, None) on CPUs or without NVML. `session`: one the caller already opened, else a new one. The caller stops
    the sampler and closes the session."""
    if device != "cuda":
        return None, None
    try:
        session = session or NvmlSession()
        return session, Sampler(session, [index for index in gpus if index < len(session.handles)], interval_s).start()
    except Exception:  # no NVML: no telemetry, the run goes on
        return None, None
