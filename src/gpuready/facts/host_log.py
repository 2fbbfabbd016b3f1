"""Host-level events as logs show them: the Linux OOM killer, ranks killed by SIGKILL, DataLoader workers that ran out
of shared memory. Parsing only, never judging.

Each `parse_*` function reads ONE line (a kernel timestamp, a syslog prefix or a launcher's `[rank3]:` in front are
fine) and returns a small frozen record, or None where the line is not of its kind. Every pattern is bounded (`{m,n}`,
no `.*`), so a hostile line costs linear time. Line shapes are quoted from published tickets
(tests/fixtures/diagnose/host/README.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKERS = (r"ut of memory: Kill|oom-kill:|invoked oom-killer|Killed process \d|oom_reaper: reaped|received by PID|"
           r"exitcode: -9|"
           r"killed by signal: |Unexpected bus error encountered in worker|unable to write to file </torch_|"
           r"unsatisfied condition: |nvidia-container-cli: initialization error: ")
"""Where to look (ASCII, searched per line): `Out of memory: Killed process` and `Memory cgroup out of memory: Kill
process` both hold `ut of memory: Kill`; CUDA's `CUDA out of memory. Tried to allocate` does not."""

# ------------------------------------------------------------------ the OOM killer

# `Out of memory: Killed process 25315 (python3) total-vm:…`, `Memory cgroup out of memory: Killed process 63214
# (uwsgi) …`, old kernels `Memory cgroup out of memory: Kill process 24984 (palo_be) score 968 or sacrifice child`.
_OOM_KILL = re.compile(r"(?P<scope>Memory cgroup out of memory|Out of memory)(?: \([a-z_]{1,40}\))?: "
                       r"(?P<verb>Killed|Kill) process (?P<pid>\d{1,10}) \((?P<name>[^\n]{1,64}?)\)(?=[ ,]|$)")
# Old kernels print the kill itself on a line of its own: `Killed process 18177 (palo_be), UID 0, total-vm:…`.
_BARE_KILL = re.compile(r"(?<![\w-])Killed process (?P<pid>\d{1,10}) \((?P<name>[^\n]{1,64}?)\)(?=,? (?:UID|total-vm))")
_ANON_RSS = re.compile(r"anon-rss:(?P<kb>\d{1,15})\s{0,200}kB")
_TOTAL_VM = re.compile(r"total-vm:(?P<kb>\d{1,15})\s{0,200}kB")
# `oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=…,task_memcg=/kubepods/…,task=python3,pid=25315,…`
_CONSTRAINT = re.compile(r"oom-kill:constraint=(?P<constraint>CONSTRAINT_[A-Z]{1,20})")
_TASK_MEMCG = re.compile(r"\btask_memcg=(?P<memcg>[^,\s]{1,300})")
_TASK = re.compile(r",task=(?P<name>[^,\s]{1,64}),pid=(?P<pid>\d{1,10})")
_INVOKED = re.compile(r" invoked oom-killer: ")
_NAME_BEFORE = re.compile(r"(?P<name>[^\s\]]{1,64})$")
# `oom_reaper: reaped process 29918 (python), now anon-rss:0kB`: the victim, its memory already freed.
_REAPED = re.compile(r"oom_reaper: reaped process (?P<pid>\d{1,10}) \((?P<name>[^\n]{1,64}?)\)(?=[ ,]|$)")


@dataclass(frozen=True)
class OomKill:
    """One line of the kernel's OOM-killer report."""
    kind: str
    """`killed` (a process was killed), `selected` (old kernels: `Kill process … or sacrifice child`, the kill line
    follows), `constraint` (the `oom-kill:` summary line), `reaped` (the oom_reaper freed a killed process's memory),
    `invoked` (who asked for memory when it ran out: not the victim)."""
    cgroup: bool
    """A memory cgroup (a container's or a Slurm job's limit) ran out, not the whole host."""
    process: str | None = None
    pid: int | None = None
    anon_rss_kb: int | None = None
    """The process's resident anonymous memory when killed (its own heap): what it really used."""
    total_vm_kb: int | None = None
    memcg: str | None = None
    """`task_memcg=`: the cgroup of the killed task (`/kubepods/…`, `/docker/…`, `/user.slice`)."""


def _kb(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return int(match.group("kb")) if match else None


def parse_oom_kill(text: str) -> OomKill | None:
    if match := _OOM_KILL.search(text):
        rest = text[match.end():]
        return OomKill(kind="killed" if match.group("verb") == "Killed" else "selected",
                       cgroup=match.group("scope").startswith("Memory cgroup"), process=match.group("name"),
                       pid=int(match.group("pid")), anon_rss_kb=_kb(_ANON_RSS, rest), total_vm_kb=_kb(_TOTAL_VM, rest))
    if match := _CONSTRAINT.search(text):
        rest = text[match.end():]
        task, memcg = _TASK.search(rest), _TASK_MEMCG.search(rest)
        return OomKill(kind="constraint", cgroup=match.group("constraint") == "CONSTRAINT_MEMCG",
                       process=task.group("name") if task else None, pid=int(task.group("pid")) if task else None,
                       memcg=memcg.group("memcg") if memcg else None)
    if match := _BARE_KILL.search(text):
        rest = text[match.end():]
        return OomKill(kind="killed", cgroup=False, process=match.group("name"), pid=int(match.group("pid")),
                       anon_rss_kb=_kb(_ANON_RSS, rest), total_vm_kb=_kb(_TOTAL_VM, rest))
    if match := _REAPED.search(text):
        return OomKill(kind="reaped", cgroup=False, process=match.group("name"), pid=int(match.group("pid")))
    if match := _INVOKED.search(text):
        name = _NAME_BEFORE.search(text[max(0, match.start() - 64):match.start()])
        return OomKill(kind="invoked", cgroup=False, process=name.group("name") if name else None)
    return None


# ------------------------------------------------------------------ SIGKILL seen from the launcher

# torchrun's ChildFailedError block (`traceback : Signal 9 (SIGKILL) received by PID 14750`, `exitcode  : -9 (pid:
# 14750)`), its one-line form (`failed (exitcode: -9) local_rank: 3 (pid: 812)`), a DataLoader worker
# (`DataLoader worker (pid 2991) is killed by signal: Killed.`).
_SIGKILL = (
    re.compile(r"Signal 9 \(SIGKILL\) received by PID (?P<pid>\d{1,10})"),
    re.compile(r"exitcode\s{0,8}:\s{0,8}-9 \(pid: (?P<pid>\d{1,10})\)"),
    re.compile(r"failed \(exitcode: -9\) local_rank: \d{1,6} \(pid: (?P<pid>\d{1,10})\)"),
    re.compile(r"DataLoader worker \(pid(?:\(s\))? (?P<pid>\d{1,10})\) is killed by signal: Killed"),
)


@dataclass(frozen=True)
class SigKill:
    """A process killed by SIGKILL, as the launcher or the DataLoader saw it (the kernel's own line says why)."""
    pid: int
    source: str
    """`torchrun` or `dataloader`."""


def parse_sigkill(text: str) -> SigKill | None:
    for index, pattern in enumerate(_SIGKILL):
        if match := pattern.search(text):
            return SigKill(pid=int(match.group("pid")), source="dataloader" if index == 3 else "torchrun")
    return None


# ------------------------------------------------------------------ shared memory (/dev/shm) in DataLoader workers

_BUS_ERROR_WORKER = re.compile(r"Unexpected bus error encountered in worker\. This might be caused by insufficient "
                               r"shared memory")
_BUS_ERROR_KILLED = re.compile(r"DataLoader worker \(pid(?:\(s\))? (?P<pid>\d{1,10})\) is killed by signal: Bus error")
_WRITE_FAILED = re.compile(r"unable to write to file <(?P<path>/torch_[\w]{1,80})>(?::? (?P<error>No space left on "
                           r"device))?")


@dataclass(frozen=True)
class ShmError:
    """A DataLoader worker (or torch.multiprocessing) that could not use /dev/shm."""
    kind: str
    """`bus_error` (a worker died writing to a full /dev/shm), `no_space` (torch could not write its shared-memory
    file: `No space left on device`), `write_failed` (the same without the reason: older torch)."""
    pid: int | None = None
    path: str | None = None
    """The shared-memory file (`/torch_31911_952036340_6686`, under /dev/shm)."""


def parse_shm_error(text: str) -> ShmError | None:
    if _BUS_ERROR_WORKER.search(text):
        return ShmError(kind="bus_error")
    if match := _BUS_ERROR_KILLED.search(text):
        return ShmError(kind="bus_error", pid=int(match.group("pid")))
    if match := _WRITE_FAILED.search(text):
        return ShmError(kind="no_space" if match.group("error") else "write_failed", path=match.group("path"))
    return None


# ------------------------------------------------------------------ the container toolkit's requirement check

# The NVIDIA container runtime hook checks an image's NVIDIA_REQUIRE_* against the host before the container starts:
# libnvidia-container (src/nvc_info.c / cli: `error_setx(err, "unsatisfied condition: %s", …)`, printed by the CLI as
# `nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a newer
# version, or use an earlier cuda container`) and nvidia-container-toolkit's Go port
# (internal/requirements/constraints/binary.go: `unsatisfied condition: %v (%v)`, e.g. `cuda>=12.8 (cuda=12.4)`).
_REQUIREMENT = re.compile(r"unsatisfied condition: (?P<key>cuda|driver)\s{0,2}(?P<op>>=|>|=)\s{0,2}"
                          r"(?P<need>\d{1,4}(?:\.\d{1,4}){0,3})(?: \((?:cuda|driver)=(?P<have>\d{1,4}(?:\.\d{1,4}){0,3})\))?")


@dataclass(frozen=True)
class ContainerRequirement:
    """An image's requirement the host's driver does not meet: the container was refused before it started."""
    key: str
    """`cuda` (the CUDA version the driver supports) or `driver` (the driver version)."""
    need: str
    """The version the image requires (`12.8`)."""
    have: str | None = None
    """The host's version where the message gives it (the Go toolkit's `(cuda=12.4)`)."""


def parse_container_requirement(text: str) -> ContainerRequirement | None:
    if match := _REQUIREMENT.search(text):
        return ContainerRequirement(key=match.group("key"), need=match.group("need"), have=match.group("have"))
    return None


# `nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.`, `… initialization error: load
# library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or directory: unknown.` (libnvidia-
# container's CLI, src/cli: `initialization error: %s`): the hook could not reach the host's driver through NVML.
_TOOLKIT_INIT = re.compile(r"nvidia-container-cli: initialization error: (?P<detail>[^\n]{1,200}?)(?:: unknown\.?)?\s{0,4}$")


def parse_toolkit_init_error(text: str) -> str | None:
    """The reason libnvidia-container gives for not reaching the host's driver, or None."""
    match = _TOOLKIT_INIT.search(text)
    return match.group("detail").strip() if match else None
