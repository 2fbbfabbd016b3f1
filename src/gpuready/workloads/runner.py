"""Start the local ranks, watch them, and stop them: the watchdog.

The runner hosts the rendezvous store, starts one worker process per rank (each in its own
session so that its children die with it), and polls every rank's progress posts. A rank that
exits with an error, or a step that runs past its timeout, ends the run: every rank is sent
SIGTERM, then SIGKILL; a process that survives even that (a GPU gone after Xid 79 leaves
processes in uninterruptible sleep) is reported, never waited for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from gpuready.workloads.progress import RESULT_KEY, Progress, read_progress, stalled_ranks
from gpuready.workloads.worker import SPEC_VARIABLE, STORE_VARIABLE, WORKLOAD_FAILED_EXIT

POLL_S = 0.25
TERMINATE_GRACE_S = 5.0


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
class RankFailure:
    rank: int
    kind: str
    """`hang` (stopped advancing), `exit` (ended with an error), `start` (failed before every rank was up) or
    `workload` (a workload raised; its error is in the rank's results)."""
    detail: str
    progress: Progress | None = None


@dataclass
class RunOutcome:
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    failures: list[RankFailure] = field(default_factory=list)
    unkillable: list[int] = field(default_factory=list)
    """PIDs still alive after SIGKILL."""
    interrupted: bool = False
    log_dir: Path | None = None
    wall_s: float = 0.0


def _process_state(pid: int) -> str | None:
    try:
        import psutil
        return psutil.Process(pid).status()
    except Exception:
        return None


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
              independent: bool = False) -> RunOutcome:
    """`independent`: ranks share nothing (burn), so a failed rank is stopped alone and the others go on."""
    import torch
    import torch.distributed as dist

    started = time.monotonic()
    log_dir.mkdir(parents=True, exist_ok=True)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=startup_timeout_s))
    base_env = {**os.environ, **flight_recorder_env(log_dir, torch.__version__), **(extra_env or {}),
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID", SPEC_VARIABLE: json.dumps(spec),
                STORE_VARIABLE: f"127.0.0.1:{store.port}", "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0", "PYTHONUNBUFFERED": "1"}
    processes = []
    for rank in range(world_size):
        env = {**base_env, "RANK": str(rank), "LOCAL_RANK": str(rank)}
        log = open(log_dir / f"rank{rank}.log", "w")
        processes.append(subprocess.Popen([sys.executable, "-m", "gpuready.workloads.worker"], env=env,
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    outcome = RunOutcome(log_dir=log_dir)
    try:
        outcome.failures = _watch(processes, store, world_size, startup_timeout_s, started, on_progress,
                                  independent)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        outcome.unkillable = _stop(processes)
    for rank in range(world_size):
        key = RESULT_KEY.format(rank=rank)
        if store.check([key]):
            outcome.results[rank] = json.loads(store.get(key))
    outcome.wall_s = time.monotonic() - started
    return outcome


def _watch(processes: list[subprocess.Popen], store: Any, world_size: int, startup_timeout_s: float,
           started: float, on_progress: Callable | None, independent: bool = False) -> list[RankFailure]:
    if independent:
        return _watch_independent(processes, store, world_size, startup_timeout_s, started, on_progress)
    while True:
        posts = read_progress(store, world_size)
        if on_progress:
            on_progress(posts)
        codes = [process.poll() for process in processes]
        if all(code == 0 for code in codes):
            return []
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
        in_startup = all(post.phase == "startup" for post in posts.values())  # nobody passed the first barrier
        if failed:
            return [RankFailure(rank=rank, progress=posts.get(rank),
                                kind="workload" if codes[rank] == WORKLOAD_FAILED_EXIT else
                                "start" if in_startup else "exit",
                                detail=f"exited with code {codes[rank]}"
                                       + _where(posts.get(rank))) for rank in failed]
        now = time.time()
        silent = [rank for rank in range(world_size) if rank not in posts]
        if silent and time.monotonic() - started > startup_timeout_s:
            return [RankFailure(rank=rank, kind="start", detail=f"did not start within {startup_timeout_s:.0f} s")
                    for rank in silent]
        blamed = stalled_ranks(posts, now)
        if blamed:
            # Prefer ranks whose process is visibly not running (stopped, zombie, uninterruptible).
            frozen = [rank for rank in blamed
                      if _process_state(processes[rank].pid) in ("stopped", "zombie", "disk-sleep", "tracing-stop")]
            frozen_all = [rank for rank, process in enumerate(processes)
                          if _process_state(process.pid) in ("stopped", "zombie", "disk-sleep", "tracing-stop")]
            names = frozen or frozen_all or blamed
            return [RankFailure(rank=rank, kind="start" if in_startup else "hang", progress=posts.get(rank),
                                detail=f"stopped advancing{_where(posts.get(rank))} "
                                       f"({_process_state(processes[rank].pid) or 'state unknown'})")
                    for rank in names]
        time.sleep(POLL_S)


def _watch_independent(processes: list[subprocess.Popen], store: Any, world_size: int, startup_timeout_s: float,
                       started: float, on_progress: Callable | None) -> list[RankFailure]:
    """Each rank on its own: one that dies or stops advancing is recorded and stopped; the rest go on."""
    failures: dict[int, RankFailure] = {}
    while True:
        posts = read_progress(store, world_size)
        if on_progress:
            on_progress(posts)
        now = time.time()
        running = 0
        for rank, process in enumerate(processes):
            if rank in failures:
                continue
            code = process.poll()
            post = posts.get(rank)
            if code is None:
                running += 1
                overdue = post.overdue_s(now) > 0 if post else time.monotonic() - started > startup_timeout_s
                if overdue:
                    failures[rank] = RankFailure(rank=rank, kind="hang", progress=post,
                                                 detail=f"stopped advancing{_where(post)} "
                                                        f"({_process_state(process.pid) or 'state unknown'})")
                    _stop([process])
            elif code != 0:
                kind = "workload" if code == WORKLOAD_FAILED_EXIT else "exit"
                failures[rank] = RankFailure(rank=rank, kind=kind, progress=post,
                                             detail=f"exited with code {code}{_where(post)}")
        if not running:
            return list(failures.values())
        time.sleep(POLL_S)


def _where(progress: Progress | None) -> str:
    if progress is None:
        return " before reporting any progress"
    return (f"; its last report: {progress.phase}: {progress.operation} (operation #{progress.sequence}, "
            f"{time.time() - progress.started_at:.0f} s ago)")
