"""A real CPU quota for one process tree, outside the product code: a cgroup with a CFS bandwidth limit and weight.

`cpu_quota(fraction)` creates a cgroup named gpuready-test-<pid>-<n> holding its members to `fraction` of one CPU
(cgroup v2: `cpu.max` = "<quota> <period>"; cgroup v1: `cpu.cfs_quota_us` / `cpu.cfs_period_us` under the `cpu`
hierarchy) and to `fraction` of the default CPU weight (v2 `cpu.weight` 100 → 100 × fraction; v1 `cpu.shares` 1024 →
1024 × fraction). Both, because a quota alone is a cap: on a host whose other work already leaves each process less
than `fraction` of a CPU (a load of 16 on 2 cores: about 12 %), the quota never binds and the node is not slowed
(measured: its pairs then fall inside the healthy ones' spread); the weight gives it `fraction` of a healthy
process's share under contention, the quota `fraction` of a CPU when the host is idle. It yields a `Quota`, whose
`enter` is a `preexec_fn` for `subprocess.Popen` (the child writes its own pid into `cgroup.procs` before it runs the
program, so every process it starts is held too: no window where the child runs free), and removes the cgroup afterwards (a cgroup is removed only once empty: its members are waited for, bounded).

Where neither hierarchy can be written here (not root, a read-only /sys/fs/cgroup, v2 without the cpu controller
delegated), `QuotaUnavailable` says why; the tests skip with that reason.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
"""The CFS period: the kernel's default (100 ms)."""
_COUNTER = itertools.count()


class QuotaUnavailable(Exception):
    """No cgroup with a CPU quota can be made here; the message says why."""


@dataclass(frozen=True)
class Quota:
    path: Path
    """The cgroup's folder."""
    version: int
    """2 (cpu.max) or 1 (cpu.cfs_quota_us)."""
    fraction: float

    def enter(self) -> None:
        """For `Popen(preexec_fn=…)`: move the calling process (the child, before exec) into the cgroup."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def throttling(self) -> dict[str, int]:
        """The cgroup's `cpu.stat` (nr_periods, nr_throttled, throttled_time ns in v1 / throttled_usec in v2)."""
        try:
            return {key: int(value) for key, value in (line.split() for line in
                                                        (self.path / "cpu.stat").read_text().splitlines())}
        except (OSError, ValueError):
            return {}

    def members(self) -> list[int]:
        try:
            return [int(line) for line in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []


def _v2_parent() -> Path | None:
    """The cgroup v2 folder new cgroups go under: this process's own cgroup's parent where it is a v2 mount with the
    cpu controller, else None."""
    if not (ROOT / "cgroup.controllers").exists():
        return None
    if "cpu" not in (ROOT / "cgroup.controllers").read_text().split():
        raise QuotaUnavailable(f"cgroup v2 at {ROOT} offers no cpu controller")
    return ROOT


def _make_v2(name: str, quota_us: int) -> Path:
    parent = _v2_parent()
    assert parent is not None
    if "cpu" not in (parent / "cgroup.subtree_control").read_text().split():
        try:
            (parent / "cgroup.subtree_control").write_text("+cpu")
        except OSError as error:
            raise QuotaUnavailable(f"cannot enable the cpu controller in {parent}/cgroup.subtree_control: "
                                   f"{error.strerror or error}") from error
    path = parent / name
    path.mkdir()
    try:
        (path / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
        (path / "cpu.weight").write_text(str(max(1, round(100 * quota_us / PERIOD_US))))
    except OSError as error:
        path.rmdir()
        raise QuotaUnavailable(f"cannot write {path}/cpu.max or cpu.weight: {error.strerror or error}") from error
    return path


def _make_v1(name: str, quota_us: int) -> Path:
    hierarchy = next((ROOT / entry for entry in ("cpu", "cpu,cpuacct")
                      if (ROOT / entry / "cpu.cfs_quota_us").exists()), None)
    if hierarchy is None:
        raise QuotaUnavailable(f"neither cgroup v2 ({ROOT}/cgroup.controllers) nor the v1 cpu hierarchy "
                               f"({ROOT}/cpu/cpu.cfs_quota_us) is mounted here")
    path = hierarchy / name
    path.mkdir()
    try:
        (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (path / "cpu.cfs_quota_us").write_text(str(quota_us))
        (path / "cpu.shares").write_text(str(max(2, round(1024 * quota_us / PERIOD_US))))
    except OSError as error:
        path.rmdir()
        raise QuotaUnavailable(f"cannot write {path}/cpu.cfs_quota_us or cpu.shares: {error.strerror or error}") \
            from error
    return path


@contextlib.contextmanager
def cpu_quota(fraction: float, wait_s: float = 30.0) -> Iterator[Quota]:
    """A cgroup holding its members to `fraction` of one CPU (module docstring); removed on exit."""
    name = f"gpuready-test-{os.getpid()}-{next(_COUNTER)}"
    quota_us = max(1000, int(PERIOD_US * fraction))  # the kernel's smallest quota is 1 ms
    try:
        version = 2 if _v2_parent() is not None else 1
        path = _make_v2(name, quota_us) if version == 2 else _make_v1(name, quota_us)
    except OSError as error:  # a read-only /sys/fs/cgroup, not root
        raise QuotaUnavailable(f"cannot create a cgroup under {ROOT}: {error.strerror or error}") from error
    quota = Quota(path=path, version=version, fraction=quota_us / PERIOD_US)
    try:
        yield quota
    finally:
        deadline = time.monotonic() + wait_s
        while quota.members() and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            path.rmdir()
