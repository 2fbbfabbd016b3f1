"""The one watchdog, for ranks gpuready started itself and for ranks under torchrun alike.

It reads what the ranks post to the store (progress, heartbeats) and, where this process started the ranks,
their exit codes and process states. Every silence is timed on this process's own clock. It names:
- `workload`: a rank's workload raised (its error is in its results; a `failed` post or exit code 3);
- `exit`: a rank ended with an error, or (under torchrun, with no process to poll) stopped sending heartbeats;
- `start`: a rank did not get past start-up within the start-up timeout;
- `hang`: an operation ran past its timeout, or the run passed its overall deadline; including the end
  (final barrier, destroy_process_group), so a rank stuck there is named like any other.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable

from gpuready.i18n import DEFAULT_LANGUAGE, Said, catalogue, said, said_of
from gpuready.progress import FINAL_PHASES
from gpuready.runner.progress import HeartbeatWatch, Progress, ProgressWatch, stalled_ranks

HEARTBEAT_LOST_S = 20.0
"""Under torchrun: a rank whose heartbeat has not changed for this long is gone (its process ended or froze)."""
FROZEN_STATES = ("stopped", "zombie", "disk-sleep", "tracing-stop")
WORKLOAD_FAILED_EXIT = 3
"""A rank's exit code when a workload raised (its error is stored, and the rank leaves rather than desynchronise
its peers); defined here, beside the other ways a rank can end, and imported by the worker."""


@dataclass
class RankFailure:
    rank: int
    kind: str
    """`hang` (stopped advancing, or the overall deadline passed), `exit` (ended with an error, or its heartbeat
    stopped), `start` (failed before every rank was up) or `workload` (a workload raised; its error is in the
    rank's results)."""
    detail: str
    """In English (what the report's `observed` and older readers take)."""
    progress: Progress | None = None
    said: Said | None = None
    """`detail` by catalogue id, said in the reader's language (the watchdog's own failures carry it)."""

    @property
    def text(self) -> Said | str:
        """What the findings say of the failure: the catalogue text where there is one, else the English."""
        return self.said if self.said is not None else self.detail


def failure(rank: int, kind: str, text: Said, progress: Progress | None = None) -> RankFailure:
    """A RankFailure whose detail is catalogue text (`runner.failure.*`): its English, and itself."""
    return RankFailure(rank=rank, kind=kind, detail=text.english(), progress=progress, said=text)


def phase_text(phase: str) -> Said | str:
    """A rank's phase in words (`progress.phase.<name>`), or as it was posted (a workload's name)."""
    msg_id = f"progress.phase.{phase}"
    return said(msg_id) if msg_id in catalogue(DEFAULT_LANGUAGE) else phase


def process_state(pid: int) -> str | None:
    try:
        import psutil  # optional: without it the state is unknown
        return psutil.Process(pid).status()
    except Exception:
        return None


def where(progress: Progress | None, now: float | None = None) -> Said:
    """`; its last report: …` for a rank's failure message (`runner.where.*`, a part of `runner.failure.*`)."""
    if progress is None:
        return said("runner.where.nothing")
    now = time.monotonic() if now is None else now
    return said("runner.where.last", phase=phase_text(progress.phase), operation=said_of(progress.operation),
                sequence=progress.sequence, age_s=round(progress.age_s(now)))


def state_text(state: str | None) -> Said:
    """` (stopped)`: a process state as psutil names it, in words where the catalogue has it."""
    if state is None:
        return said("runner.state", state=said("runner.state.unknown"))
    msg_id = f"runner.state.{state}"
    return said("runner.state", state=said(msg_id) if msg_id in catalogue(DEFAULT_LANGUAGE) else state)


class Watchdog:
    """Looks at a run, one `poll()` at a time.

    `processes`: the ranks' processes where this process started them (None under torchrun: posts and heartbeats
    only). `independent`: ranks share nothing (burn), so a failed rank is stopped alone (`stop_rank`) and the
    others go on. `deadline_s`: the whole run, start to end, on this process's clock.
    """

    def __init__(self, store: Any, world_size: int, *, startup_timeout_s: float, deadline_s: float | None = None,
                 processes: list[subprocess.Popen] | None = None, independent: bool = False,
                 stop_rank: Callable[[int], None] | None = None, heartbeat_lost_s: float = HEARTBEAT_LOST_S):
        self.world_size, self.processes, self.independent = world_size, processes, independent
        self.startup_timeout_s, self.deadline_s, self.heartbeat_lost_s = startup_timeout_s, deadline_s, heartbeat_lost_s
        self.stop_rank = stop_rank
        self.started = time.monotonic()
        self.progress = ProgressWatch(store, world_size)
        self.heartbeats = HeartbeatWatch(store, world_size)
        self.posts: dict[int, Progress] = {}
        self.failures: dict[int, RankFailure] = {}

    def poll(self) -> bool:
        """Read the posts once; True when the run is over: every rank finished, or a failure ends the run."""
        # exit codes first: a rank seen gone has made its last post by then (a rank ends right after it)
        codes = [process.poll() for process in self.processes] if self.processes is not None else None
        self.posts = self.progress.read()
        now = time.monotonic()
        # Every poll reads the heartbeats, also one that finds another failure first: a silence is timed from when a
        # beat was first seen, so a beat left unread until later would make a rank that died look as if it just beat.
        silent = self.heartbeats.silent_s(now) if self.processes is None else {}
        new = self._exits(codes) or self._lost_heartbeats(now, silent) or self._late_starts(now) \
            or self._stalls(now, codes) or self._past_deadline(now)
        for failure in new:
            self.failures.setdefault(failure.rank, failure)
            if self.independent and self.stop_rank is not None:
                self.stop_rank(failure.rank)
        if self.failures and not self.independent:
            return True
        if codes is not None:
            return all(code is not None for code in codes) if self.independent else all(code == 0 for code in codes)
        return all(self.posts.get(rank) is not None and self.posts[rank].phase in FINAL_PHASES
                   for rank in range(self.world_size))

    def unsettled(self, silent_s: float, reporter: int) -> list[int]:
        """Ranks (other than `reporter`) that have neither finished, failed, been named nor said `terminated`, and
        whose heartbeat has changed within `silent_s`: still alive, about to say what became of them, or just ended
        and not yet silent long enough to tell. A rank that never beat is not waited for."""
        silent = self.heartbeats.silent_s()
        return [rank for rank, seconds in sorted(silent.items())
                if rank != reporter and seconds <= silent_s and rank not in self.failures
                and not (rank in self.posts and self.posts[rank].phase in FINAL_PHASES)]

    def ended_without_a_word(self, silent_s: float) -> list[RankFailure]:
        """Ranks neither finished, failed nor `terminated` whose heartbeat has been silent for `silent_s`: when
        torchrun stops the group, or a collective fails, these are the ones that ended first."""
        now = time.monotonic()
        return [failure(rank, "exit", said("runner.failure.no_word", seconds=round(seconds),
                                           where=where(self.posts.get(rank), now)), self.posts.get(rank))
                for rank, seconds in sorted(self.heartbeats.silent_s(now).items())
                if seconds > silent_s and rank not in self.failures
                and not (rank in self.posts and self.posts[rank].phase in FINAL_PHASES)]

    def _open(self, codes: list[int | None] | None) -> list[int]:
        """Ranks still running and not yet blamed."""
        return [rank for rank in range(self.world_size) if rank not in self.failures
                and (codes is None or codes[rank] is None)]

    def _in_startup(self) -> bool:
        return all(post.phase == "startup" for post in self.posts.values())  # nobody passed the first barrier

    def _exits(self, codes: list[int | None] | None) -> list[RankFailure]:
        failures = []
        for rank in range(self.world_size):
            post, code = self.posts.get(rank), codes[rank] if codes is not None else None
            if rank in self.failures:
                continue
            if code == WORKLOAD_FAILED_EXIT or (post is not None and post.phase == "failed"):
                failures.append(failure(rank, "workload", said("runner.failure.raised", where=where(post))
                                        if code is None else exited(code, post), post))
            elif code not in (None, 0):
                failures.append(failure(rank, "start" if self._in_startup() and not self.independent else "exit",
                                        exited(code, post), post))
        return failures

    def _lost_heartbeats(self, now: float, silent: dict[int, float]) -> list[RankFailure]:
        """`silent`: rank → seconds since its heartbeat changed (none where exit codes and process states say more)."""
        return [failure(rank, "exit", said("runner.failure.no_heartbeat", seconds=round(seconds),
                                           where=where(self.posts.get(rank), now)), self.posts.get(rank))
                for rank, seconds in sorted(silent.items())
                if seconds > self.heartbeat_lost_s and rank not in self.failures
                and not (rank in self.posts and self.posts[rank].phase in FINAL_PHASES)]

    def _late_starts(self, now: float) -> list[RankFailure]:
        if now - self.started <= self.startup_timeout_s:
            return []
        return [failure(rank, "start", said("runner.failure.not_started", seconds=round(self.startup_timeout_s)))
                for rank in range(self.world_size) if rank not in self.posts and rank not in self.failures]

    def _stalls(self, now: float, codes: list[int | None] | None) -> list[RankFailure]:
        open_ranks = self._open(codes)
        if self.independent:
            blamed = [rank for rank in open_ranks if rank in self.posts and self.posts[rank].overdue_s(now) > 0]
        else:
            blamed = stalled_ranks({rank: self.posts[rank] for rank in open_ranks if rank in self.posts}, now)
            if blamed and self.processes is not None:
                # Prefer ranks whose process is visibly not running (stopped, zombie, uninterruptible).
                frozen = [rank for rank in open_ranks if process_state(self.processes[rank].pid) in FROZEN_STATES]
                blamed = [rank for rank in blamed if rank in frozen] or frozen or blamed
        kind = "start" if self._in_startup() else "hang"
        return [failure(rank, kind, said("runner.failure.stalled", where=where(self.posts.get(rank), now),
                                         state=self._state(rank)), self.posts.get(rank))
                for rank in blamed]

    def _past_deadline(self, now: float) -> list[RankFailure]:
        if self.deadline_s is None or now - self.started <= self.deadline_s:
            return []
        codes = [process.poll() for process in self.processes] if self.processes is not None else None
        return [failure(rank, "hang", said("runner.failure.past_deadline", deadline_s=round(self.deadline_s),
                                           where=where(self.posts.get(rank), now), state=self._state(rank)),
                        self.posts.get(rank))
                for rank in self._open(codes)
                if not (rank in self.posts and self.posts[rank].phase in FINAL_PHASES and codes is None)]

    def _state(self, rank: int) -> Said | str:
        if self.processes is None:
            return ""
        return state_text(process_state(self.processes[rank].pid))


def exited(code: int, progress: Progress | None) -> Said:
    return said("runner.failure.exited", code=code, where=where(progress))
