"""Small host files: /proc/meminfo, /proc/cpuinfo, `df`, `ulimit -a`, /proc/uptime, env, modules,
and `head`-style multi-file captures (`==> /sys/fs/cgroup/memory.max <==`)."""

from __future__ import annotations

import re

from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.types import DiskUsage, HostFacts, container_of, most_specific_runtime
from gpuready.facts.units import parse_cpu_count, strip_ansi

_SECTION = re.compile(r"^==> (.+) <==$")
_HUMAN_SIZE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def split_sections(text: str) -> dict[str, str]:
    """`head -n 100 FILE…` output → {path: content}."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in strip_ansi(text).splitlines():
        match = _SECTION.match(line.strip())
        if match:
            current = sections.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line)
    return {path: "\n".join(lines).strip() for path, lines in sections.items()}


def parse_meminfo(text: str) -> dict[str, int]:
    """`/proc/meminfo` → {field: bytes}."""
    values = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s*kB)?", line.strip())
        if match:
            multiplier = 1024 if line.strip().endswith("kB") else 1
            values[match.group(1)] = int(match.group(2)) * multiplier
    if "MemTotal" not in values:
        raise ParseFailure("parse.meminfo.none")
    return values


def parse_cpuinfo(text: str) -> tuple[int, str | None, int | None]:
    """`/proc/cpuinfo` → (logical CPUs, model name, sockets)."""
    processors = len(re.findall(r"^processor\s*:", text, flags=re.MULTILINE))
    if processors == 0:
        raise ParseFailure("parse.cpuinfo.none")
    model = re.search(r"^model name\s*:\s*(.+)$", text, flags=re.MULTILINE)
    sockets = set(re.findall(r"^physical id\s*:\s*(\d+)", text, flags=re.MULTILINE))
    return processors, model.group(1).strip() if model else None, len(sockets) or None


def parse_df(text: str) -> list[DiskUsage]:
    """`df -P -B1`, `df -k` or `df -h` output."""
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    if not lines or not lines[0].startswith("Filesystem"):
        raise ParseFailure("parse.df.none")
    header = lines[0]
    block = re.search(r"(\d+)([KMG]?)B?-blocks", header)
    multiplier = int(block.group(1)) * _HUMAN_SIZE[block.group(2)] if block else None
    disks = []
    for line in lines[1:]:
        tokens = line.split()
        if len(tokens) < 6:
            continue
        filesystem, size, _used, available = tokens[0], tokens[1], tokens[2], tokens[3]
        mount = " ".join(tokens[5:])
        size_bytes, available_bytes = _df_size(size, multiplier), _df_size(available, multiplier)
        if size_bytes is None or available_bytes is None:
            continue
        disks.append(DiskUsage(mount=mount, size_bytes=size_bytes, available_bytes=available_bytes,
                               filesystem=filesystem))
    return disks


def _df_size(token: str, multiplier: int | None) -> int | None:
    if multiplier is not None and token.isdigit():
        return int(token) * multiplier
    match = re.fullmatch(r"([\d.]+)([KMGTP]?)i?", token)
    if not match:
        return None
    return int(float(match.group(1)) * _HUMAN_SIZE[match.group(2)])


def parse_memlock(text: str) -> int | None:
    """`ulimit -a` (bash or sh), or `ulimit -l` alone → bytes; -1 for unlimited."""
    for line in text.splitlines():
        if "locked" in line.lower() or re.fullmatch(r"\s*(unlimited|\d+)\s*", line):
            value = line.split()[-1]
            if value == "unlimited":
                return -1
            if value.isdigit():
                return int(value) * 1024  # ulimit reports kbytes
    return None


def parse_uptime(text: str) -> float:
    """/proc/uptime: seconds since boot."""
    return float(text.split()[0])


def parse_env(text: str) -> dict[str, str]:
    env = {}
    for line in strip_ansi(text).splitlines():
        line = line.strip()
        if line.startswith("export "):
            line = line[len("export "):]
        name, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            env[name] = value.strip().strip('"').strip("'")
    return env


def parse_modules(text: str) -> set[str]:
    """/proc/modules or `lsmod`: loaded kernel module names."""
    names = set()
    for line in text.splitlines():
        tokens = line.split()
        if tokens and tokens[0] != "Module":
            names.add(tokens[0])
    return names


def parse_cgroup_limits(sections: dict[str, str]) -> tuple[int | None, float | None, str | None]:
    """(memory limit bytes, CPU limit, container runtime) from cgroup v1/v2 files and /proc/1/cgroup."""
    memory_limit: int | None = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        value = sections.get(path, "").strip()
        # cgroup v1 prints a huge number (page-rounded 2^63) for "no limit".
        if value.isdigit() and int(value) < 2**60:
            memory_limit = int(value)
    cpu_limit: float | None = None
    cpu_max = sections.get("/sys/fs/cgroup/cpu.max", "").split()
    if len(cpu_max) == 2 and cpu_max[0].isdigit() and cpu_max[1].isdigit() and int(cpu_max[1]) > 0:
        cpu_limit = int(cpu_max[0]) / int(cpu_max[1])
    quota = sections.get("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "").strip()
    period = sections.get("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "").strip()
    if quota.lstrip("-").isdigit() and int(quota) > 0 and period.isdigit() and int(period) > 0:
        cpu_limit = int(quota) / int(period)
    runtime, _evidence = container_from_cgroup(sections)
    return memory_limit, cpu_limit, runtime


# The cpuset files, most specific first: cgroup v2, then v1 (effective, then configured).
CPUSET_PATHS = ("/sys/fs/cgroup/cpuset.cpus.effective", "/sys/fs/cgroup/cpuset/cpuset.effective_cpus",
                "/sys/fs/cgroup/cpuset/cpuset.cpus")


def parse_cpuset(sections: dict[str, str]) -> tuple[str | None, int | None]:
    """(CPU list, count) of the container's cpuset, from the first cpuset file that has one."""
    for path in CPUSET_PATHS:
        value = sections.get(path, "").strip()
        if value:
            return value, parse_cpu_count(value)
    return None, None


# Markers in a cgroup path and the runtime each names.
_CGROUP_MARKERS = (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"),
                   ("containerd", "containerd"), ("lxc", "lxc"))
_SLURM_JOB = re.compile(r"slurm\S*/job_?\d+|/job_\d+/step_", re.IGNORECASE)


def container_from_cgroup(sections: dict[str, str]) -> tuple[str | None, list[str]]:
    """(runtime, evidence) from /.dockerenv, /run/.containerenv and the cgroup paths of PID 1 and of this process.

    `none` where a cgroup path was read and names no container (`0::/init.scope`, or `0::/`, which a private
    cgroup namespace also shows: that case needs the environment's evidence); None where nothing was read.
    """
    found: list[str] = []
    evidence: list[str] = []
    if "/.dockerenv" in sections:
        found.append("docker")
        evidence.append("/.dockerenv exists")
    if "/run/.containerenv" in sections:
        found.append("podman")
        evidence.append("/run/.containerenv exists")
    read_any = False
    for path in ("/proc/1/cgroup", "/proc/self/cgroup"):
        text = sections.get(path)
        if text is None:
            continue
        read_any = True
        if match := _SLURM_JOB.search(text):
            found.append("slurm")
            evidence.append(f"{path}: Slurm job cgroup ({match.group(0)})")
            continue
        for marker, name in _CGROUP_MARKERS:
            if marker in text:
                found.append(name)
                evidence.append(f"{path}: {marker} ({_first_line_with(text, marker)})")
                break
    if found:
        return most_specific_runtime(found), evidence
    return ("none" if read_any else None), evidence


def _first_line_with(text: str, marker: str) -> str:
    line = next((line for line in text.splitlines() if marker in line.lower()), text.splitlines()[0] if text else "")
    return line.strip()[:120]


