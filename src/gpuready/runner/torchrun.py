"""Under torchrun (`gpuready validate|bench --nnodes`): every process is one rank, rank 0 watches and writes the report.

The node that hosts the rendezvous store also watches the run from the store (RunObserver), so where rank 0 dies
before it reports, the report is written there. What the report says is the verb's: it passes `make_report`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, NoReturn

from gpuready.facts.gpu_users import GpuUsers
from gpuready.i18n import said
from gpuready.model import Report
from gpuready.progress import FINAL_PHASES
from gpuready.runner.local import RunOutcome
from gpuready.runner.nccl_debug import nccl_debug_env, wants_nccl_lines
from gpuready.runner.progress import (RDZV_BIND_KEY, RDZV_STORE_VARIABLE, RESULT_KEY, SPEC_VARIABLE,
                                      run_store_prefix)
from gpuready.runner.watchdog import RankFailure, Watchdog, failure, where
from gpuready.signals import exit_code_for

REPORT_WRITTEN_KEY = "gpuready/report_written"
HEARTBEAT_GRACE_S = 2.5
"""On SIGTERM under torchrun: a rank silent this long (2.5 heartbeats) and not `terminated` ended on its own."""
SETTLE_LIMIT_S = 4 * HEARTBEAT_GRACE_S
"""The longest rank 0 waits, once a rank has failed or SIGTERM came, for the other ranks to say what became of them or
fall silent; a live rank still waiting in a collective holds the report no longer than this."""
SETTLE_POLL_S = 0.25
RANK0_REPORT_WAIT_S = 90.0
"""How long the node hosting the store keeps it up, after its own torchrun ended, for rank 0 to write the report."""
RANK0_SILENT_S = 15.0
"""Rank 0 is taken for dead when its heartbeat (every second) has been silent this long: a loaded machine can delay
a beat by seconds, and taking the report from a rank 0 that is still writing it would blame it wrongly."""
WRITTEN_BY_STORE_NODE = "the node hosting the rendezvous store (rank 0 wrote no report)"


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "GPUREADY_STORE" not in os.environ


def run_rank(spec: dict[str, Any], *, rank_main: Callable[..., int], deadline_s: float, log_dir: Path | None,
             make_report: Callable[[RunOutcome], Report], write_report: Callable[[Report], int]) -> NoReturn:
    """Under torchrun: this process is one rank of `spec`, run by `rank_main` (workloads/worker.py's main, which the
    verb hands over: the runner starts ranks and never imports a workload); rank 0 watches every rank
    (runner/watchdog.py) and writes the report `make_report(outcome)` makes: at the end, when the watchdog names a
    failure, or when SIGTERM/SIGHUP arrives (torchrun's agent stops the whole group when one rank ends: rank 0 then
    names the rank that ended first). `write_report` prints or saves it and returns the exit code."""
    os.environ[SPEC_VARIABLE] = json.dumps(spec)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if wants_nccl_lines(spec, os.environ):  # across nodes: NCCL's INFO lines say which transport it used
        run_dir = log_dir or Path(tempfile.mkdtemp(prefix="gpuready-nccl-"))
        run_dir.mkdir(parents=True, exist_ok=True)
        os.environ.update(nccl_debug_env(os.environ, run_dir))
    reporter = RankZeroReport(rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                              startup_timeout_s=float(spec["startup_timeout_s"]), deadline_s=deadline_s,
                              log_dir=log_dir, make_report=make_report, write_report=write_report)
    code = rank_main(on_ready=reporter.on_ready, on_done=reporter.on_done, on_signal=reporter.on_signal,
                     on_failed=reporter.on_failed)
    # The report is written and the group destroyed: leave without the interpreter's teardown, where the process
    # group's C++ threads can abort the process ("terminate called without an active exception", SIGABRT, seen once
    # on the loaded CI box under a user's torchrun), turning a finished run into a failed one for torchrun.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class RankZeroReport:
    """What a rank under torchrun does for the report: on rank 0, watch every rank from the store and write the report
    once (at the end, when the watchdog names a failure, or on SIGTERM/SIGHUP); on the other ranks, nothing."""

    def __init__(self, *, rank: int, world_size: int, startup_timeout_s: float, deadline_s: float,
                 log_dir: Path | None, make_report: Callable[[RunOutcome], Report],
                 write_report: Callable[[Report], int]):
        self.rank, self.world_size, self.startup_timeout_s, self.deadline_s = rank, world_size, startup_timeout_s, \
            deadline_s
        self.log_dir, self.make_report, self.write_report = log_dir, make_report, write_report
        self.started = time.monotonic()
        self.written = False
        self.lock = threading.Lock()
        self.store_address: str | None = None
        self.watchdog: Watchdog | None = None

    def report_once(self, store: Any, failures: list[RankFailure], interrupted_by: str | None = None) -> None:
        with self.lock:
            if self.written:
                return
            self.written = True
            results = {r: json.loads(store.get(RESULT_KEY.format(rank=r))) for r in range(self.world_size)
                       if store.check([RESULT_KEY.format(rank=r)])}
            outcome = RunOutcome(results=results, failures=failures, log_dir=self.log_dir,
                                 wall_s=time.monotonic() - self.started, store_address=self.store_address,
                                 interrupted=interrupted_by is not None, interrupted_by=interrupted_by,
                                 deadline_s=self.deadline_s)
            code = self.write_report(self.make_report(outcome))
            store.set(REPORT_WRITTEN_KEY, str(code))  # the node hosting the store exits with it too

    def watch(self, store: Any) -> None:  # rank 0 only; silence is timed on rank 0's clock
        while True:
            with self.lock:
                over = self.watchdog.poll()
            if over and self.watchdog.failures:
                os._exit(self.report_what_ended(store, None))
            if over:
                return
            time.sleep(0.5)

    def on_ready(self, store: Any) -> None:
        if self.rank == 0:
            self.store_address = rendezvous_store_address(store)
            self.watchdog = Watchdog(store, self.world_size, startup_timeout_s=self.startup_timeout_s,
                                     deadline_s=self.deadline_s)
            threading.Thread(target=self.watch, args=(store,), daemon=True).start()

    def on_done(self, store: Any) -> None:
        if self.rank == 0:
            self.report_once(store, [])

    def report_what_ended(self, store: Any, cause: str | None) -> int:
        """Name the ranks that ended (the watchdog's failures, and those whose heartbeat stopped without a word)
        and write the report; the exit code: 4 where a rank ended, else that of `cause` (a signal) or 1."""
        self.settle()
        with self.lock:
            self.watchdog.poll()
            failures = dict(self.watchdog.failures)
            for silent in self.watchdog.ended_without_a_word(HEARTBEAT_GRACE_S):
                failures.setdefault(silent.rank, silent)
        ended = any(found.kind != "workload" for found in failures.values())
        # A rank that ended is why torchrun stopped the group (or why this rank's collective failed): that is the
        # finding, not an interruption.
        self.report_once(store, list(failures.values()), interrupted_by=None if failures or cause is None else cause)
        sys.stdout.flush()
        return 4 if ended else exit_code_for(cause) if cause and not failures else 1

    def settle(self) -> None:
        """Until every other rank has said what became of it (`failed`, `terminated`, `done`) or its heartbeat has
        been silent past the grace, for at most SETTLE_LIMIT_S; reading the posts and heartbeats all the while. A
        fixed sleep before one read would time a dead rank's last beat from that read: silent 0 s, never named."""
        deadline = time.monotonic() + SETTLE_LIMIT_S
        while True:
            with self.lock:
                self.watchdog.poll()
                waiting = self.watchdog.unsettled(HEARTBEAT_GRACE_S, reporter=self.rank)
            if not waiting or time.monotonic() >= deadline:
                return
            time.sleep(SETTLE_POLL_S)

    def on_signal(self, store: Any, signum: int) -> None:
        if self.rank == 0 and self.watchdog is not None:
            os._exit(self.report_what_ended(store, signal.Signals(signum).name))

    def on_failed(self, store: Any) -> None:  # this rank's workload raised (its error is stored)
        if self.rank == 0 and self.watchdog is not None:
            os._exit(self.report_what_ended(store, None))


def users_from_results(results: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """Under torchrun each GPU rank reads who else uses its GPU (worker: `gpu_users`): host → {index → GpuUsers}."""
    users: dict[str, Any] = {}
    for result in results.values():
        seen = result.get("gpu_users")
        if seen is None or "gpu_users" not in result:
            continue
        host = result.get("host") or "?"
        if seen.get("unknown"):  # NVML could not say on that rank
            users.setdefault(host, None)
            continue
        entry = GpuUsers(index=seen["index"], bus_id=seen.get("bus_id"), uuid=seen.get("uuid"),
                         processes=list(seen.get("processes") or []), free_bytes=seen.get("free_bytes"))
        if users.get(host) is None:
            users[host] = {}
        users[host][entry.index] = entry
    return users or None


class RunObserver:
    """On the node that hosts the rendezvous store of a `--nnodes` run: watches the run from the store while torchrun
    runs (the same watchdog, acting on nothing), so that where rank 0 dies before writing the report, the report is
    written here from the store, with the ranks that ended named in the order they fell silent."""

    def __init__(self, verb: str, rendezvous_store: Any, world_size: int, startup_timeout_s: float):
        import torch.distributed as dist  # torch's store (seconds to import): only on the node hosting the store

        self.store = dist.PrefixStore(run_store_prefix(), rendezvous_store)
        self.verb, self.world_size = verb, world_size
        self.watchdog = Watchdog(self.store, world_size, startup_timeout_s=startup_timeout_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="gpuready-observer")
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self.watchdog.poll()
            except Exception:  # the store is shutting down with the run
                return

    def _wait_for_rank0(self, limit_s: float = RANK0_REPORT_WAIT_S) -> bool:
        """This node's torchrun may end first (its ranks failed): the store stays up while rank 0, elsewhere, is
        alive and writing the report. True once it has; False when rank 0 has gone silent (or never beat)."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.store.check([REPORT_WRITTEN_KEY]):
                return True
            silent = self.watchdog.heartbeats.silent_s()
            if silent.get(0, float("inf")) > RANK0_SILENT_S:
                return False
            time.sleep(0.5)
        return self.store.check([REPORT_WRITTEN_KEY])

    def rank0_exit_code(self) -> int | None:
        """The exit code of the report rank 0 wrote (None: it wrote none)."""
        if not self.store.check([REPORT_WRITTEN_KEY]):
            return None
        value = self.store.get(REPORT_WRITTEN_KEY).decode()
        return int(value) if value.isdigit() else None

    def report_if_rank0_died(self, log_dir: Path | None, make_report: Callable[[RunOutcome], Report],
                             interrupted_by: str | None = None) -> Report | None:
        """The report `make_report` makes of what the store holds, where rank 0 died before writing one; None where
        rank 0 wrote it (or no rank ever reached the store: torchrun said why). The report's `written_by` says so."""
        self._stop.set()
        self._thread.join(timeout=5)
        if self._wait_for_rank0():
            return None
        self.watchdog.poll()
        posts = self.watchdog.posts
        if not posts:
            return None
        silent = self.watchdog.heartbeats.silent_s()
        results = {r: json.loads(self.store.get(RESULT_KEY.format(rank=r))) for r in range(self.world_size)
                   if self.store.check([RESULT_KEY.format(rank=r)])}
        failures = []
        for rank in sorted(range(self.world_size), key=lambda r: -silent.get(r, float("inf"))):  # first silent first
            post = posts.get(rank)
            quiet = said("runner.failure.quiet", seconds=round(silent[rank])) if rank in silent else ""
            if post is not None and post.phase == "failed":
                failures.append(failure(rank, "workload", said("runner.failure.raised", where=where(post)), post))
            elif post is None or post.phase not in FINAL_PHASES or (rank == 0 and post.phase != "done"):
                failures.append(failure(rank, "exit", said("runner.failure.no_report" if rank == 0 else
                                                           "runner.failure.unfinished", quiet=quiet, where=where(post)),
                                        post))
        outcome = RunOutcome(results=results, failures=failures, log_dir=log_dir, interrupted=interrupted_by is not None,
                             interrupted_by=interrupted_by, store_address=rendezvous_store_address(self.store))
        report = make_report(outcome)
        report.facts.setdefault(self.verb, {})["written_by"] = WRITTEN_BY_STORE_NODE
        return report


def rendezvous_store_address(store: Any) -> str | None:
    """Under `gpuready validate|bench --nnodes`: where the rendezvous store listens, as its host said (None if unknown)."""
    endpoint = os.environ.get(RDZV_STORE_VARIABLE)
    if not endpoint:
        return None
    try:
        raw = getattr(store, "underlying_store", store)
        if raw.check([RDZV_BIND_KEY]):
            return raw.get(RDZV_BIND_KEY).decode()
    except Exception:
        pass
    return f"{endpoint} (hosted by torchrun: every interface)"


def torchrun_flags(nnodes: int, nproc_per_node: int, endpoint: str) -> list[str]:
    """torchrun's c10d rendezvous flags, as `validate|bench --nnodes` run them and `launch` prints them."""
    return ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc_per_node), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", endpoint]


def torchrun_command(nnodes: int, nproc_per_node: int, endpoint: str, verb: str, verb_args: list[str],
                     rdzv_conf: str | None = None) -> list[str]:
    """`rdzv_conf`: torchrun's --rdzv-conf (`is_host=false` where gpuready hosts the store itself)."""
    return [sys.executable, "-m", "torch.distributed.run", *torchrun_flags(nnodes, nproc_per_node, endpoint),
            *(["--rdzv-conf", rdzv_conf] if rdzv_conf else []), "-m", "gpuready", verb, *verb_args]
