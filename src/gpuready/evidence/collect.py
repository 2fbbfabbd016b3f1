"""Collect a support bundle from the live machine: run each standard tool under a timeout.

Live `check` uses the same function and parses the result in memory, so live and offline
share every parser.
"""

from __future__ import annotations

import functools
import glob
import io
import importlib.metadata
import json
import os
import platform
import re
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from gpuready import __version__
from gpuready.evidence import prestart
from gpuready.evidence.layout import BUNDLE_FILES, ENV_PREFIXES
from gpuready.i18n import sentence
from gpuready.facts import torch_probe
from gpuready.facts.network_files import IB_ERROR_COUNTERS, IB_HW_COUNTERS
from gpuready.facts.imex import CHANNEL_DEVICE, CHANNEL_FOLDER
from gpuready.facts.nvml import collect_nvml

COMMAND_TIMEOUT_S = 10.0
TORCH_TIMEOUT_S = 60.0


@dataclass
class Collected:
    text: str | None
    command: str
    exit_code: int | None = None
    duration_s: float = 0.0
    error: str | None = None


def run_command(argv: list[str] | tuple[str, ...], timeout_s: float = COMMAND_TIMEOUT_S) -> Collected:
    """Run a tool (or take the one prestart.py started for it); its absence, failure or hang is recorded, never
    raised."""
    command = " ".join(argv)
    running = prestart.take(argv)
    if running is None and shutil.which(argv[0]) is None:
        return Collected(text=None, command=command, error=f"{argv[0]} not found")
    try:
        process, started = running or (prestart.launch(argv), time.monotonic())
    except OSError as error:
        return Collected(text=None, command=command, error=str(error))
    try:
        stdout, stderr = process.communicate(timeout=max(0.0, started + timeout_s - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return Collected(text=None, command=command, duration_s=time.monotonic() - started,
                         error=f"timed out after {timeout_s:.0f} s")
    output = stdout + (stderr if process.returncode != 0 else "")
    return Collected(text=output, command=command, exit_code=process.returncode,
                     duration_s=time.monotonic() - started)


def read_file(path: str) -> Collected:
    try:
        return Collected(text=Path(path).read_text(errors="replace"), command=f"read {path}")
    except OSError as error:
        return Collected(text=None, command=f"read {path}", error=str(error))


def head_sections(paths: list[str]) -> str:
    """The files as `head` prints several: `==> path <==` then the content."""
    parts = []
    for path in paths:
        try:
            parts.append(f"==> {path} <==\n{Path(path).read_text(errors='replace').strip()}\n")
        except OSError:
            continue
    return "\n".join(parts)


def _dmesg() -> Collected:
    collected = run_command(["dmesg"])
    if collected.exit_code == 0 and collected.text:
        return collected
    journal = run_command(["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"])
    if journal.exit_code == 0 and journal.text:
        return journal
    reason = collected.error or (collected.text or "").strip() or "empty"
    return Collected(text=None, command="dmesg", exit_code=collected.exit_code,
                     error=f"kernel log not readable ({reason}); run as root or add the user to group adm")


# The container's limits (cgroup v2, then v1), its cpuset, and the cgroup paths that say whether this is a
# container (PID 1's and our own: a Slurm job step shares PID 1 with the host, only /proc/self shows the job).
CGROUP_FILES = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpuset.cpus.effective",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "/sys/fs/cgroup/cpuset/cpuset.effective_cpus",
                "/sys/fs/cgroup/cpuset/cpuset.cpus", "/proc/1/cgroup", "/proc/self/cgroup"]
# Files whose mere presence is the evidence (Docker, Podman); their content is not needed.
CONTAINER_MARKER_FILES = ["/.dockerenv", "/run/.containerenv"]


def _cgroup() -> Collected:
    text = head_sections(CGROUP_FILES)
    for marker in CONTAINER_MARKER_FILES:
        if os.path.exists(marker):
            text += f"==> {marker} <==\n\n"
    return Collected(text=text, command="read cgroup files")


def _ulimit() -> Collected:
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    files, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    memlock = "unlimited" if soft == resource.RLIM_INFINITY else str(soft // 1024)
    text = f"max locked memory           (kbytes, -l) {memlock}\nopen files                          (-n) {files}\n"
    return Collected(text=text, command="getrlimit (ulimit -a form)")


def _env() -> Collected:
    lines = [f"{name}={value}" for name, value in sorted(os.environ.items()) if name.startswith(ENV_PREFIXES)]
    return Collected(text="\n".join(lines) + "\n", command="environment (filtered)")


def _pip_freeze() -> Collected:
    names = sorted({f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
                    if dist.metadata["Name"]}, key=str.lower)
    return Collected(text="\n".join(names) + "\n", command="importlib.metadata.distributions()")


def _ldconfig() -> Collected:
    collected = run_command(["ldconfig", "-p"]) if shutil.which("ldconfig") else run_command(["/sbin/ldconfig", "-p"])
    if collected.text:
        keep = ("nccl", "cuda", "cudnn", "cublas", "ibverbs", "rdmacm", "nvidia-ml")
        lines = [line for line in collected.text.splitlines() if any(k in line for k in keep)]
        # libnccl.so.2 is a symlink: the file it points to carries the full version.
        collected.text = "\n".join(_with_real_path(line) for line in lines) + "\n"
    return collected


def _with_real_path(line: str) -> str:
    if "=>" not in line or "nccl" not in line:
        return line
    path = line.split("=>", 1)[1].strip()
    real = os.path.realpath(path)
    return line if real == path else f"{line} (real {real})"


def _sysfs() -> Collected:
    port_files = ("state", "phys_state", "rate", "link_layer") + tuple(f"counters/{name}" for name in IB_ERROR_COUNTERS)
    port_files += tuple(f"hw_counters/{name}" for name in IB_HW_COUNTERS)
    patterns = ([f"/sys/class/infiniband/*/ports/*/{name}" for name in port_files]
                + ["/sys/class/infiniband/*/hca_type", "/sys/class/infiniband/*/device/numa_node",
                   "/sys/class/net/*/speed", "/sys/class/net/*/operstate"])
    paths = sorted(path for pattern in patterns for path in glob.glob(pattern))
    return Collected(text=head_sections(paths), command="read /sys/class/{infiniband,net}")


# `nvidia-imex-ctl -N` asks every peer of the IMEX domain: a short limit, so that one unreachable peer cannot hold the
# whole collection.
IMEX_CTL_TIMEOUT_S = 5.0


def _imex_ctl() -> Collected:
    """The domain as this node's IMEX daemon sees it; the tool's own error (no daemon running here) goes to the
    manifest, not to a parser."""
    collected = run_command(["nvidia-imex-ctl", "-N", "-j"], timeout_s=IMEX_CTL_TIMEOUT_S)
    if collected.exit_code in (None, 0):
        return collected
    reason = (collected.text or "").strip()[-300:] or f"exit code {collected.exit_code}"
    return Collected(text=None, command=collected.command, exit_code=collected.exit_code,
                     duration_s=collected.duration_s, error=reason)


def _imex_service() -> Collected:
    """`systemctl is-active nvidia-imex` where systemd runs (sd_booted(3): /run/systemd/system exists); a container
    without systemd records nothing."""
    if not os.path.isdir("/run/systemd/system"):
        return Collected(text=None, command="systemctl is-active nvidia-imex", error="systemd is not running here")
    return run_command(["systemctl", "is-active", "nvidia-imex"])


def _imex_channels() -> Collected:
    """The IMEX channel devices this process sees (NVIDIA IMEX guide, "IMEX channels") and the driver's major for
    them in /proc/devices, as `==> path <==` sections; the folder's section only where the folder exists."""
    try:
        devices = [line for line in Path("/proc/devices").read_text().splitlines()
                   if line.strip().endswith(f" {CHANNEL_DEVICE}")]
    except OSError:
        devices = []
    text = "==> /proc/devices <==\n" + "".join(f"{line}\n" for line in devices)
    if os.path.isdir(CHANNEL_FOLDER):
        text += f"\n==> {CHANNEL_FOLDER} <==\n"
        for path in sorted(glob.glob(f"{CHANNEL_FOLDER}/channel*"))[:4096]:
            try:
                device = os.stat(path)
            except OSError:
                continue
            kind = "c" if stat.S_ISCHR(device.st_mode) else "-"
            text += f"{Path(path).name} {kind} {os.major(device.st_rdev)}:{os.minor(device.st_rdev)}\n"
    return Collected(text=text, command=f"read /proc/devices and {CHANNEL_FOLDER}")


def _nvml() -> Collected:
    started = time.monotonic()
    collection = collect_nvml()
    return Collected(text=json.dumps(collection.to_json(), indent=1), command="NVML (nvidia-ml-py)",
                     duration_s=time.monotonic() - started, error=collection.init_error)


def _torch_metadata() -> Collected:
    return Collected(text=json.dumps(torch_probe.metadata_only()), command="torch package metadata")


# file → how to collect it. Each runs in its own thread; every outside program has a timeout.
COLLECTORS: dict[str, Callable[[], Collected]] = {
    "nvml.json": _nvml,
    **{name: functools.partial(run_command, argv) for name, argv in prestart.TOOLS.items()},
    "dmesg.txt": _dmesg,
    "meminfo.txt": lambda: read_file("/proc/meminfo"),
    "cpuinfo.txt": lambda: read_file("/proc/cpuinfo"),
    "uptime.txt": lambda: read_file("/proc/uptime"),
    "cmdline.txt": lambda: read_file("/proc/cmdline"),
    "modules.txt": lambda: read_file("/proc/modules"),
    "cgroup.txt": _cgroup,
    "ulimit.txt": _ulimit,
    "env.txt": _env,
    "pip-freeze.txt": _pip_freeze,
    "ldconfig.txt": _ldconfig,
    "sysfs.txt": _sysfs,
    "nvidia-imex-ctl.txt": _imex_ctl,
    "imex-service.txt": _imex_service,
    "imex-channels.txt": _imex_channels,
}


def _start_torch_probe() -> subprocess.Popen[str] | None:
    running = prestart.take(prestart.TORCH_PROBE)
    if running is not None:
        return running[0]
    try:
        return prestart.launch(prestart.TORCH_PROBE, c_locale=False)
    except OSError:
        return None


def _finish_torch_probe(process: subprocess.Popen[str] | None, started: float) -> Collected:
    command = f"{Path(sys.executable).name} -m gpuready.facts.torch_probe"
    if process is None:
        return Collected(text=None, command=command, error="could not start the torch probe")
    try:
        stdout, stderr = process.communicate(timeout=max(0.1, TORCH_TIMEOUT_S - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        info = {**torch_probe.metadata_only(), "error": f"torch did not answer within {TORCH_TIMEOUT_S:.0f} s"}
        return Collected(text=json.dumps(info), command=command, duration_s=time.monotonic() - started)
    if process.returncode != 0 or not stdout.strip():
        info = {**torch_probe.metadata_only(),
                "error": f"the torch probe exited with {process.returncode}: {stderr.strip()[-300:]}"}
        return Collected(text=json.dumps(info), command=command, exit_code=process.returncode,
                         duration_s=time.monotonic() - started)
    return Collected(text=stdout, command=command, exit_code=0, duration_s=time.monotonic() - started)


_EARLY: dict[bool, Future] = {}
"""A whole collection started before the rest of gpuready was imported (`start_early`), by `with_torch`."""


def start_early(with_torch: bool) -> None:
    """Start the whole collection now, in the background: a live `check` calls this before importing its checks and
    readers, so the tools (nvidia-smi and NVML take 0.2-0.5 s each on a GPU machine, the torch probe seconds) run
    while Python imports. `collect` with the same `with_torch` then takes this result instead of starting again."""
    if with_torch not in _EARLY:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuready-early-collect")
        _EARLY[with_torch] = pool.submit(_collect_now, with_torch, None)
        pool.shutdown(wait=False)


def collect(with_torch: bool = True, only: Iterable[str] | None = None) -> tuple[dict[str, str], dict]:
    """Every bundle file this machine can give (or those `only` names), and the manifest saying how each was
    obtained."""
    early = _EARLY.pop(with_torch, None) if only is None else None
    return early.result() if early is not None else _collect_now(with_torch, only)


def _collect_now(with_torch: bool, only: Iterable[str] | None) -> tuple[dict[str, str], dict]:
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.monotonic()
    torch_process = _start_torch_probe() if with_torch else None  # the slow one goes first
    wanted = set(only) if only is not None else None
    collectors = {name: function for name, function in COLLECTORS.items() if wanted is None or name in wanted}
    if not with_torch:
        collectors["torch.json"] = _torch_metadata
    with ThreadPoolExecutor(max_workers=len(collectors)) as pool:
        futures = {name: pool.submit(function) for name, function in collectors.items()}
        results = {name: future.result() for name, future in futures.items()}
    if with_torch:
        results["torch.json"] = _finish_torch_probe(torch_process, started)
    files = {name: result.text for name, result in results.items() if result.text is not None}
    manifest = {
        "format": "gpuready-bundle", "version": 1, "tool_version": __version__,
        "host": socket.gethostname(), "collected_at": started_at, "platform": platform.platform(),
        "duration_s": round(time.monotonic() - started, 3),
        "files": {name: {"command": result.command, "collected": result.text is not None,
                         "exit_code": result.exit_code, "duration_s": round(result.duration_s, 3),
                         "error": result.error} for name, result in sorted(results.items())},
    }
    files["manifest.json"] = json.dumps(manifest, indent=1)
    return files, manifest


ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


class OutputError(Exception):
    """--out cannot be used as asked: one sentence for the user (exit 2)."""


@dataclass(frozen=True)
class Output:
    path: Path
    as_tar: bool


def plan_output(out: str | os.PathLike[str], as_tar: bool, force: bool = False) -> Output:
    """Where the bundle goes, checked before anything is collected or written; raises OutputError.

    A folder: a new one (its parent must exist) or an empty one; a non-empty one only with `force`, and only when
    every entry is a bundle file (a plain file under a bundle name), so that --force never empties a folder that
    holds anything else. An archive (--tar, or --out ending in .tar.gz/.tgz): exactly the path given, with
    `.tar.gz` appended where it lacks the suffix; never a folder, and an existing archive only with `force`.
    """
    try:
        return _plan_output(os.fspath(out), as_tar, force)
    except OSError as error:  # a path that cannot even be looked at (permissions, a name too long)
        raise OutputError(sentence("error.collect.out.unusable", path=os.fspath(out), reason=str(error.strerror or error))
                          ) from None


def _plan_output(text: str, as_tar: bool, force: bool) -> Output:
    if not text.strip():
        raise OutputError(sentence("error.collect.out.empty"))
    path = Path(text)
    if as_tar or text.lower().endswith(ARCHIVE_SUFFIXES):
        if text.endswith(("/", os.sep)) or path.name in ("", ".", "..") or path.is_dir():
            raise OutputError(sentence("error.collect.out.tar_folder", path=text, example=str(path / "bundle.tar.gz")))
        target = path if text.lower().endswith(ARCHIVE_SUFFIXES) else Path(text + ".tar.gz")
        _require_parent(target)
        if target.is_symlink() or target.exists():
            if target.is_symlink() or not target.is_file():
                raise OutputError(sentence("error.collect.out.not_plain", path=str(target)))
            if not force:
                raise OutputError(sentence("error.collect.out.exists", path=str(target)))
        return Output(target, True)
    if path.is_symlink() and not path.exists() or path.exists() and not path.is_dir():
        raise OutputError(sentence("error.collect.out.not_folder", path=text))
    if not path.exists():
        _require_parent(path)
        return Output(path, False)
    entries = sorted(path.iterdir())
    if entries and not force:
        raise OutputError(sentence("error.collect.out.not_empty", path=text))
    strangers = [entry.name for entry in entries if not _is_bundle_entry(entry)]
    if strangers:
        raise OutputError(sentence("error.collect.out.stranger", path=text, name=repr(strangers[0]))
                          if len(strangers) == 1 else
                          sentence("error.collect.out.strangers", path=text, name=repr(strangers[0]),
                                   more=len(strangers) - 1))
    return Output(path, False)


def _require_parent(path: Path) -> None:
    parent = path.parent
    if not parent.is_dir():
        raise OutputError(sentence("error.collect.out.no_parent", parent=str(parent)))


def _is_bundle_entry(entry: Path) -> bool:
    return entry.name in BUNDLE_FILES and not entry.is_symlink() and entry.is_file()


def _safe_name(name: str) -> str:
    if not name or name != Path(name).name or name.startswith(".") or "\\" in name:
        raise ValueError(f"{name!r} is not a bundle file name")
    return name


def _ordered(files: dict[str, str]) -> list[tuple[str, bytes]]:
    """Every file as UTF-8, manifest.json last: a bundle with a manifest was written whole."""
    names = sorted(files, key=lambda name: (name == "manifest.json", name))
    return [(_safe_name(name), files[name].encode("utf-8", errors="replace")) for name in names]


def write_bundle(files: dict[str, str], out: str | os.PathLike[str], as_tar: bool, force: bool = False) -> Path:
    """Write the files into a folder, or into one .tar.gz whose members sit in one folder (plan_output's rules).

    Raises OutputError when --out cannot be used, OSError when writing fails.
    """
    output = plan_output(out, as_tar, force)
    contents = _ordered(files)
    if output.as_tar:
        _write_archive(contents, output.path)
        return output.path
    if output.path.exists():
        for entry in output.path.iterdir():  # plan_output checked: only bundle files, and force was given
            entry.unlink()
    else:
        output.path.mkdir()
    for name, data in contents:
        with open(output.path / name, "xb") as handle:
            handle.write(data)
    return output.path


def _write_archive(contents: list[tuple[str, bytes]], target: Path) -> None:
    """Written beside the target under a hidden name, then renamed: an old archive stays whole until then."""
    folder = re.sub(r"(?i)\.(tar\.gz|tgz)$", "", target.name).strip(".") or "bundle"
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with tarfile.open(partial, "w:gz") as archive:
            for name, data in contents:
                info = tarfile.TarInfo(f"{folder}/{name}")
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
                archive.addfile(info, io.BytesIO(data))
        os.replace(partial, target)
    finally:
        if partial.exists():
            partial.unlink()
