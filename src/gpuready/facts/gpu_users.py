"""Who else computes on the GPUs: NVML compute processes and the memory they hold, per GPU.

Read through `facts.nvml` (collect_nvml's per-GPU `processes`, a rank's collect_one_gpu), as nvml.json entries (the
form a rank's result carries), so that `facts/nvml.py` stays the only module that imports pynvml and every NVML
call keeps its timeout. Our own processes (this one and its
children: the ranks) are left out. Caveat: inside a container with its own PID namespace NVML may report
host PIDs, which cannot be matched to ours; the snapshot taken before any rank starts is exact either way.
What sharing means for a run (findings, the --exclusive refusal) is judged in verbs/sharing.py.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable

from gpuready.facts.nvml import collect_nvml, collect_one_gpu


@dataclass(kw_only=True)
class GpuUsers:
    """One GPU's foreign compute processes."""
    index: int
    """NVML index."""
    bus_id: str | None
    uuid: str | None
    processes: list[dict[str, Any]] = field(default_factory=list)
    """nvml.json's process entries: pid, name, kind, used_memory_bytes."""
    free_bytes: int | None = None
    """Framebuffer memory nobody held when read."""

    @property
    def held_bytes(self) -> int:
        return sum(p.get("used_memory_bytes") or 0 for p in self.processes)

    def describe(self) -> str:
        parts = []
        for process in self.processes:
            used = process.get("used_memory_bytes")
            held = f"{used / 2**30:,.1f} GiB" if isinstance(used, int) else "memory unknown"
            parts.append(f"pid {process.get('pid')}" + (f" ({process['name']})" if process.get("name") else "")
                         + f" holding {held}")
        return ", ".join(parts)


def own_pids() -> set[int]:
    """This process and all its descendants (the ranks)."""
    pids = {os.getpid()}
    try:
        import psutil  # optional: without it, only this process is ours
        pids.update(child.pid for child in psutil.Process().children(recursive=True))
    except Exception:
        pass
    return pids


def read_nvml() -> dict[str, Any]:
    """The nvml.json document of this machine, now (monkeypatched in tests)."""
    return collect_nvml().to_json()


def gpu_users(indices: Iterable[int] | None = None, ignore: set[int] | None = None) -> dict[int, GpuUsers] | None:
    """NVML index → foreign processes on that GPU, for `indices` (None: every GPU); None when NVML cannot say."""
    document = read_nvml()
    if document.get("init_error"):
        return None
    ignore = own_pids() if ignore is None else ignore
    wanted = set(indices) if indices is not None else None
    return {gpu.get("index"): users_from_record(gpu, ignore) for gpu in document.get("gpus") or []
            if wanted is None or gpu.get("index") in wanted}


def own_gpu_users(bus_id: str | None) -> GpuUsers | None:
    """Who computes on the GPU at `bus_id` (a rank's own, asked before the rank makes its context there, so every
    process counts); None where NVML cannot say."""
    gpu = collect_one_gpu(bus_id) if bus_id else None
    if gpu is None or gpu.get("processes") is None:  # processes unread is not "nobody"
        return None
    return users_from_record(gpu, set())


def users_from_record(gpu: dict[str, Any], ignore: set[int]) -> GpuUsers:
    """One gpus[] entry of the NVML document → its users, leaving out the pids in `ignore`."""
    total, used = gpu.get("memory_total_bytes"), gpu.get("memory_used_bytes")
    free = total - used if isinstance(total, int) and isinstance(used, int) else None
    processes = [dict(p) for p in gpu.get("processes") or [] if p.get("pid") not in ignore]
    return GpuUsers(index=gpu.get("index"), bus_id=gpu.get("bus_id"), uuid=gpu.get("uuid"), processes=processes,
                    free_bytes=free)


def shared(users: dict[int, GpuUsers] | None) -> dict[int, GpuUsers]:
    """Only the GPUs that another process uses."""
    return {index: entry for index, entry in (users or {}).items() if entry.processes}


def merge(into: dict[int, GpuUsers], more: dict[int, GpuUsers] | None) -> None:
    """Add the processes seen in a later snapshot (a pid once, with the most memory seen)."""
    for index, entry in (more or {}).items():
        if index not in into:
            into[index] = entry
            continue
        known = {p.get("pid"): p for p in into[index].processes}
        for process in entry.processes:
            old = known.get(process.get("pid"))
            if old is None:
                into[index].processes.append(process)
            elif (process.get("used_memory_bytes") or 0) > (old.get("used_memory_bytes") or 0):
                old["used_memory_bytes"] = process["used_memory_bytes"]


class UserWatch:
    """Snapshot before the ranks start, then a re-read every `interval_s` while they run (merged: anyone seen)."""

    def __init__(self, indices: Iterable[int] | None, interval_s: float = 15.0):
        self.indices = list(indices) if indices is not None else None
        self.interval_s = interval_s
        self.before = gpu_users(self.indices)
        self.seen: dict[int, GpuUsers] | None = None
        if self.before is not None:
            self.seen = {index: GpuUsers(index=e.index, bus_id=e.bus_id, uuid=e.uuid,
                                         processes=[dict(p) for p in e.processes], free_bytes=e.free_bytes)
                         for index, e in self.before.items()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                later = gpu_users(self.indices)
            except Exception:
                continue
            if later is not None:
                if self.seen is None:
                    self.seen = later
                else:
                    merge(self.seen, later)

    def __enter__(self) -> "UserWatch":
        if self.before is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
