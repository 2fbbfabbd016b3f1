"""Start the local ranks, watch them, and stop them: the watchdog.

The runner hosts the rendezvous store, starts one worker process per rank (each in its own
session so that its children die with it, and each dying with this process: PR_SET_PDEATHSIG),
and polls the watchdog (runner/watchdog.py). A rank that exits with an error, a step that runs
past its timeout, or a run past its overall deadline ends the run: every rank is sent SIGTERM,
then SIGKILL; a process that survives even that (a GPU gone after Xid 79 leaves processes in
uninterruptible sleep) is reported, never waited for. Ctrl-C, SIGTERM and SIGHUP (runner/signals.py)
stop the ranks the same way and keep what was measured.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable

from gpuready.i18n import sentence
from gpuready.runner.progress import RESULT_KEY, Progress
from gpuready.signals import PARENT_PID_VARIABLE, Stopped
from gpuready.runner.watchdog import RankFailure, Watchdog
from gpuready.runner.progress import SPEC_VARIABLE, STORE_VARIABLE

POLL_S = 0.25
TERMINATE_GRACE_S = 5.0


class SpawnError(RuntimeError):
    """A rank could not be started; the ranks already started were stopped."""


def loopback_interface() -> str:
    """The name of the interface holding 127.0.0.1 (`lo` on Linux)."""
    try:
        import psutil  # optional: without it, `lo`
        for name, addresses in psutil.net_if_addrs().items():
            if any(address.family == socket.AF_INET and address.address == "127.0.0.1" for address in addresses):
                return name
    except Exception:
        pass
    return "lo"


def listening_store(host: str, port: int, timeout_s: float, **store_options: Any) -> Any:
    """A TCPStore server that listens on `host`'s address only.

    `TCPStore(host, port, is_master=True)` listens on every interface (`::`, dual stack) whatever `host` says
    (torch 2.4 to 2.13 at least, libuv and classic backends alike), and the store has no authentication. So
    the listening socket is made and bound here and handed over through `master_listen_fd`, which both
    backends accept. `port` 0 picks a free port; the store's `.port` says which. OSError if the address
    cannot be bound (EADDRINUSE: someone listens there already; EADDRNOTAVAIL: not an address of this host).
    """
    return store_on(bound_listener(host, port), timeout_s, **store_options)


def bound_listener(host: str, port: int) -> socket.socket:
    """A socket bound to `host`'s address and listening (no torch needed: the ranks can be started before the
    parent imports torch, and connect as soon as the store takes the socket over)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch does: rebind after TIME_WAIT
        listener.bind(address)
        listener.listen(2048)
    except BaseException:
        listener.close()
        raise
    return listener


def store_on(listener: socket.socket, timeout_s: float, **store_options: Any) -> Any:
    """The TCPStore server on an already listening socket (bound_listener), which it takes over."""
    import torch.distributed as dist  # torch (seconds): the ranks start before the parent imports it

    family, kind, proto = listener.family, listener.type, listener.proto
    host, bound_port = listener.getsockname()[:2]
    last_error: Exception | None = None
    for backend in ({}, {"use_libuv": False}):  # the classic backend if this torch's libuv one refuses the fd
        if listener is None:  # the refused attempt closed it: the same address again
            listener = socket.socket(family, kind, proto)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, bound_port))
            listener.listen(2048)
        fd = listener.detach()  # the store owns it from here (and closes it when it is destroyed)
        listener = None
        try:
            return dist.TCPStore(host, bound_port, is_master=True, timeout=timedelta(seconds=timeout_s),
                                 master_listen_fd=fd, **{"wait_for_workers": False, **store_options, **backend})
        except (RuntimeError, TypeError, ValueError) as error:
            last_error = error
            try:
                os.close(fd)
            except OSError:
                pass
    raise RuntimeError(f"this torch cannot host a store on {host} only: {last_error}")


def flight_recorder_env(log_dir: Path, torch_version: str) -> dict[str, str]:
    """So that a hang leaves evidence in the output folder: PyTorch's flight recorder, dumped on timeout.

    torch 2.8 renamed TORCH_NCCL_TRACE_BUFFER_SIZE / _DEBUG_INFO_TEMP_FILE to TORCH_FR_* and warns on the old names.
    """
    major_minor = tuple(int(part) for part in torch_version.split("+")[0].split(".")[:2])
    new_names = major_minor >= (2, 8)
    return {("TORCH_FR_BUFFER_SIZE" if new_names else "TORCH_NCCL_TRACE_BUFFER_SIZE"): "2000",
            ("TORCH_FR_DUMP_TEMP_FILE" if new_names else "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
                str(log_dir / "nccl_trace_rank_"),
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}


@dataclass
class RunOutcome:
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    failures: list[RankFailure] = field(default_factory=list)
    unkillable: list[int] = field(default_factory=list)
    """PIDs still alive after SIGKILL."""
    xid_events: list[tuple[float, int | None, int]] = field(default_factory=list)
    """(seconds into the run, NVML index, Xid) NVML reported while the ranks ran."""
    interrupted: bool = False
    interrupted_by: str | None = None
    """`SIGINT` (Ctrl-C), `SIGTERM` or `SIGHUP`: what stopped the run (the exit code is 128 + its number)."""
    deadline_s: float | None = None
    """The overall deadline the run was held to (start to end, including the final barrier)."""
    log_dir: Path | None = None
    wall_s: float = 0.0
    store_address: str | None = None
    """Where the rendezvous store listened (loopback only on local runs)."""
    overridden_env: dict[str, dict[str, str]] = field(default_factory=dict)
    """The user's variables the ranks ran with another value: name → {"user": …, "used": …} (said in the report)."""


def overridden_variables(user_env: dict[str, str], rank_env: dict[str, str]) -> dict[str, dict[str, str]]:
    """Variables the user set that the ranks get with a different value (CUDA_DEVICE_ORDER, TORCH_NCCL_*, …)."""
    return {name: {"user": user_env[name], "used": rank_env[name]} for name in sorted(user_env)
            if name in rank_env and rank_env[name] != user_env[name]}


def _stop(processes: list[subprocess.Popen]) -> list[int]:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, sig)
                    if sig == signal.SIGTERM:
                        os.killpg(process.pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + TERMINATE_GRACE_S
        while time.monotonic() < deadline and any(process.poll() is None for process in processes):
            time.sleep(0.05)
    return [process.pid for process in processes if process.poll() is None]


def run_local(*, world_size: int, spec: dict[str, Any], log_dir: Path, startup_timeout_s: float,
              extra_env: dict[str, str] | None = None,
              on_progress: Callable[[dict[int, Progress]], None] | None = None,
              independent: bool = False, deadline_s: float | None = None,
              on_started: Callable[[], None] | None = None) -> RunOutcome:
    """`independent`: ranks share nothing (burn), so a failed rank is stopped alone and the others go on.
    `deadline_s`: the whole run, start-up to the last rank's exit (None: only the per-operation timeouts).
    `on_started`: called once the ranks are started, while they import torch (seconds): the caller's own slow
    preparations (facts, watchers) overlap with theirs."""
    started = time.monotonic()
    log_dir.mkdir(parents=True, exist_ok=True)
    listener = bound_listener("127.0.0.1", 0)
    port = listener.getsockname()[1]
    local_only = {}
    for variable in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):  # one node: the ranks' own sockets on loopback too
        if variable not in os.environ and variable not in (extra_env or {}):
            local_only[variable] = loopback_interface()
    try:  # the installed torch's version without importing it (seconds): the ranks start first
        torch_version = version("torch")
    except PackageNotFoundError:
        import torch  # no package metadata (a source tree): torch itself says
        torch_version = torch.__version__
    base_env = {**os.environ, **flight_recorder_env(log_dir, torch_version), **local_only, **(extra_env or {}),
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID", SPEC_VARIABLE: json.dumps(spec),
                STORE_VARIABLE: f"127.0.0.1:{port}", "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0", "PYTHONUNBUFFERED": "1",
                PARENT_PID_VARIABLE: str(os.getpid())}
    try:
        processes = _spawn_all(world_size, base_env, log_dir)
    except BaseException:
        listener.close()
        raise
    try:  # the ranks connect (their clients retry) once the store takes the socket over
        if on_progress:  # no post yet: the ranks are launching (the store waits for torch's import here, seconds)
            on_progress({})
        store = store_on(listener, startup_timeout_s)
    except BaseException:
        _stop(processes)
        raise
    outcome = RunOutcome(log_dir=log_dir, store_address=f"127.0.0.1:{port}", deadline_s=deadline_s,
                         overridden_env=overridden_variables(dict(os.environ), base_env))
    if on_started is not None:
        try:
            on_started()
        except BaseException:
            _stop(processes)
            raise
    watchdog = Watchdog(store, world_size, startup_timeout_s=startup_timeout_s, deadline_s=deadline_s,
                        processes=processes, independent=independent,
                        stop_rank=lambda rank: _stop([processes[rank]]))
    try:
        while not watchdog.poll():
            if on_progress:
                on_progress(watchdog.posts)
            time.sleep(POLL_S)
        if on_progress:  # the posts of the poll that saw the run end ("done")
            on_progress(watchdog.posts)
    except KeyboardInterrupt:
        outcome.interrupted, outcome.interrupted_by = True, "SIGINT"
    except Stopped as stop:
        outcome.interrupted, outcome.interrupted_by = True, stop.name
    finally:
        outcome.failures = list(watchdog.failures.values())
        outcome.unkillable = _stop(processes)
    for rank in range(world_size):
        key = RESULT_KEY.format(rank=rank)
        if store.check([key]):
            outcome.results[rank] = json.loads(store.get(key))
    outcome.wall_s = time.monotonic() - started
    return outcome


def _spawn_all(world_size: int, base_env: dict[str, str], log_dir: Path) -> list[subprocess.Popen]:
    """Start every rank, or none: if one cannot be started, those already started are stopped (SpawnError)."""
    processes: list[subprocess.Popen] = []
    rank = 0
    try:
        for rank in range(world_size):
            env = {**base_env, "RANK": str(rank), "LOCAL_RANK": str(rank)}
            with open(log_dir / f"rank{rank}.log", "w") as log:  # the child keeps its own copy
                processes.append(subprocess.Popen([sys.executable, "-m", "gpuready.workloads.worker"], env=env,
                                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    except BaseException as error:
        survivors = _stop(processes)
        if not isinstance(error, Exception):  # Ctrl-C while starting: stopped, then passed on
            raise
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise SpawnError(sentence("error.spawn.survivors" if survivors else "error.spawn", rank=rank,
                                  world_size=world_size, reason=reason, started=len(processes),
                                  survivors=str(survivors))) from error
    return processes
