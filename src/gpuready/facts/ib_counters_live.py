"""The InfiniBand/RoCE port error counters read live from sysfs, and how much each rose over a window. Never judges.

`read_counters` reads the five error counters of the InfiniBand spec (facts/network_files.py IB_ERROR_COUNTERS) of
every `<root>/<device>/ports/<n>/counters/`: one small file each, cheap enough for every monitor interval
(benchmarks/ib_counters_read.py prints how cheap). A reading lower than the one before is a reset (cleared with
`perfquery -R`, the driver reloaded, or a counter that wrapped), never a negative increase: what the counter reads
after it is counted as risen since the reset, from zero.
"""

from __future__ import annotations

import glob
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready.facts.network_files import IB_ERROR_COUNTERS

IB_ROOT = Path("/sys/class/infiniband")
"""The kernel's RDMA devices (Linux ABI sysfs-class-infiniband); tests give a built tree instead."""


def _read_int(path: str) -> int | None:
    try:
        descriptor = os.open(path, os.O_RDONLY)  # os.open/os.read: a third of open()'s cost, read every interval
    except OSError:  # a port gone or a counter the driver does not give: not read
        return None
    try:
        return int(os.read(descriptor, 64).strip())
    except (OSError, ValueError):
        return None
    finally:
        os.close(descriptor)


def read_counters(root: Path = IB_ROOT) -> dict[str, dict[str, int]]:
    """`mlx5_0/1` → {counter: value} for every port under `root` that has any of the five counters; {} without
    `root` (a machine without RDMA devices)."""
    readings: dict[str, dict[str, int]] = {}
    for port_dir in sorted(glob.glob(os.path.join(glob.escape(str(root)), "*", "ports", "*"))):
        device, port = Path(port_dir).parent.parent.name, Path(port_dir).name
        values = {name: value for name in IB_ERROR_COUNTERS
                  if (value := _read_int(os.path.join(port_dir, "counters", name))) is not None}
        if values:
            readings[f"{device}/{port}"] = values
    return readings


@dataclass(frozen=True, kw_only=True)
class CounterChange:
    """One counter of one port that moved between two readings."""

    port: str
    """`mlx5_0/1`: the device and port number, as `ibstat` and NCCL_IB_HCA name them."""
    counter: str
    before: int
    after: int
    increase: int
    """How much it rose: `after - before`, or `after` where it was reset (it counted from zero since)."""
    reset: bool = False
    """The reading was lower than the one before."""


def changes(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> list[CounterChange]:
    """Every counter read in both readings whose value moved (a port or counter seen in one only is left out)."""
    moved = []
    for port, values in after.items():
        for counter, value in values.items():
            old = before.get(port, {}).get(counter)
            if old is not None and value != old:
                reset = value < old
                moved.append(CounterChange(port=port, counter=counter, before=old, after=value,
                                           increase=value if reset else value - old, reset=reset))
    return moved


@dataclass(kw_only=True)
class CounterWindow:
    """The counters over a window: its first reading, the latest, and per port and counter the increase summed over
    consecutive readings (`step`), with the resets seen. Ports that appear later start from their first reading."""

    root: Path = IB_ROOT
    first: dict[str, dict[str, int]] = field(default_factory=dict)
    last: dict[str, dict[str, int]] = field(default_factory=dict)
    increase: dict[str, dict[str, int]] = field(default_factory=dict)
    resets: dict[str, dict[str, int]] = field(default_factory=dict)
    readings: int = 0

    @classmethod
    def start(cls, root: Path = IB_ROOT) -> "CounterWindow":
        """A window whose first reading is now."""
        first = read_counters(root)
        return cls(root=root, first=first, last=first, readings=1)

    def step(self) -> list[CounterChange]:
        """Read again: what moved since the last reading (added to the window's increases)."""
        current = read_counters(self.root)
        moved = changes(self.last, current)
        for change in moved:
            self.increase.setdefault(change.port, {}).setdefault(change.counter, 0)
            self.increase[change.port][change.counter] += change.increase
            if change.reset:
                self.resets.setdefault(change.port, {}).setdefault(change.counter, 0)
                self.resets[change.port][change.counter] += 1
        for port, values in current.items():
            self.first.setdefault(port, values)
        self.last = {**self.last, **current}
        self.readings += 1
        return moved

    def increases(self) -> dict[str, dict[str, int]]:
        """Port → {counter: increase} of the counters that rose over the window (none: {})."""
        return {port: {name: value for name, value in values.items() if value > 0}
                for port, values in self.increase.items() if any(value > 0 for value in values.values())}

    def to_json(self) -> dict[str, Any]:
        """The window as the report's facts keep it: per port, each counter's first and last value and increase."""
        ports = {port: {name: {"start": self.first.get(port, {}).get(name, value), "end": value,
                               "increase": self.increase.get(port, {}).get(name, 0),
                               **({"resets": self.resets[port][name]} if name in self.resets.get(port, {}) else {})}
                        for name, value in values.items()} for port, values in sorted(self.last.items())}
        return {"root": str(self.root), "readings": self.readings, "ports": ports}


class CounterWatch:
    """`with CounterWatch(root, interval_s) as watch:` reads the counters at the start, every `interval_s` in a thread
    of its own, and once more at the end; `watch.window` then holds the window."""

    def __init__(self, root: Path = IB_ROOT, interval_s: float = 1.0):
        self.root, self.interval_s = root, interval_s
        self.window: CounterWindow | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="gpuready-ib-counters")

    def __enter__(self) -> "CounterWatch":
        self.window = CounterWindow.start(self.root)
        if self.window.first:  # no RDMA port: nothing to read again
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval_s + 5)
        if self.window is not None and self.window.first:
            self.window.step()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.window.step()
