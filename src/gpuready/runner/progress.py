"""Out-of-band progress: every rank posts what it is doing to the rendezvous store.

The watchdog reads these posts, not NCCL's state, so a rank that stops (SIGSTOP, a dead GPU,
a Python deadlock) is named as the one that stopped advancing, not merely those that then
waited for it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gpuready.i18n import DEFAULT_LANGUAGE, Said, Sentence, text_in
from gpuready.progress import FINAL_PHASES, RankPost, figures_from_json, operation_fields

PROGRESS_KEY = "gpuready/progress/{rank}"
RESULT_KEY = "gpuready/result/{rank}"
HEARTBEAT_KEY = "gpuready/heartbeat/{rank}"
HEARTBEAT_EVERY_S = 1.0
"""A rank's heartbeat thread bumps its counter this often: a process that is alive beats even while its main
thread waits in a collective; one that ended (a crash, SIGKILL, os._exit) does not."""


@dataclass(kw_only=True)
class Progress(RankPost):
    """A rank's post (gpuready.progress.RankPost: its phase, step, figures, message) with who posted it and when."""

    rank: int
    sequence: int = 0
    """Counts operations this rank has started; a rank behind the others has a lower number."""
    started_at: float = field(default_factory=time.time)
    timeout_s: float = 300.0
    host: str = field(default_factory=socket.gethostname)
    gpu: str | None = None
    """The GPU's bus id, where the rank has one."""
    pid: int = 0
    received_at: float | None = None
    """When the reader first saw this post, on the reader's own monotonic clock (set by ProgressWatch): silence is
    measured from it, never from `started_at`, which is the posting host's wall clock."""

    def overdue_s(self, now: float) -> float:
        """How far past its timeout the operation is; `now` is the reader's `time.monotonic()`."""
        return now - (self.received_at if self.received_at is not None else now) - self.timeout_s

    def age_s(self, now: float) -> float:
        return now - self.received_at if self.received_at is not None else 0.0

    @classmethod
    def from_json(cls, posted: dict[str, Any]) -> "Progress":
        """A post as the store holds it (fields this version does not know are left out), without its receipt time."""
        known = {item.name for item in fields(cls)} - {"received_at"}
        post = cls(**{name: value for name, value in posted.items() if name in known})
        post.figures = figures_from_json(post.figures)
        return post


class ProgressReporter:
    def __init__(self, store: Any, rank: int, gpu: str | None, pid: int):
        self.store, self.rank, self.gpu, self.pid = store, rank, gpu, pid
        self.sequence = 0

    def post(self, phase: str, operation: str | Said = "", timeout_s: float = 300.0, **typed: Any) -> None:
        """`operation`: a name (`init_process_group`) or catalogue text (a `Said`, sent as its id and values: the
        reader renders it). `typed`: RankPost's fields (step, total, warm_up, stage, figures, errors)."""
        self.sequence += 1
        progress = Progress(rank=self.rank, phase=phase, **operation_fields(operation), **typed,
                            sequence=self.sequence, timeout_s=timeout_s, gpu=self.gpu, pid=self.pid)
        self.store.set(PROGRESS_KEY.format(rank=self.rank), json.dumps(asdict(progress)))


class Heartbeat:
    """A daemon thread that bumps this rank's heartbeat counter in the store every HEARTBEAT_EVERY_S."""

    def __init__(self, store: Any, rank: int, every_s: float = HEARTBEAT_EVERY_S):
        self.store, self.key, self.every_s = store, HEARTBEAT_KEY.format(rank=rank), every_s
        self._stop = threading.Event()
        threading.Thread(target=self._beat, daemon=True, name="gpuready-heartbeat").start()

    def _beat(self) -> None:
        count = 0
        while not self._stop.is_set():
            count += 1
            try:
                self.store.set(self.key, str(count))
            except Exception:  # the store is gone: the run is over for this rank anyway
                return
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()


class HeartbeatWatch:
    """When each rank's heartbeat last changed, on this reader's monotonic clock (never the rank's clock)."""

    def __init__(self, store: Any, world_size: int):
        self.store, self.world_size = store, world_size
        self._seen: dict[int, tuple[bytes, float]] = {}

    def silent_s(self, now: float | None = None) -> dict[int, float]:
        """Seconds since each rank's heartbeat last changed, for the ranks that have beaten at least once."""
        now = time.monotonic() if now is None else now
        for rank in range(self.world_size):
            key = HEARTBEAT_KEY.format(rank=rank)
            if not self.store.check([key]):
                continue
            value = self.store.get(key)
            if rank not in self._seen or self._seen[rank][0] != value:
                self._seen[rank] = (value, now)
        return {rank: now - seen_at for rank, (_, seen_at) in self._seen.items()}


def read_progress(store: Any, world_size: int) -> dict[int, Progress]:
    """The latest post of every rank that has posted (non-blocking), without receipt times."""
    posts = {}
    for rank in range(world_size):
        key = PROGRESS_KEY.format(rank=rank)
        if store.check([key]):
            posts[rank] = post = Progress.from_json(json.loads(store.get(key)))
            text = post.text()
            if isinstance(text, Said) and text_in(DEFAULT_LANGUAGE, text.msg_id, text.values) is not None:
                post.operation = Sentence(text)
    return posts


class ProgressWatch:
    """Reads the posts and times each on this process's monotonic clock: when its sequence number was first seen.

    Ranks on other hosts post their own wall-clock `started_at`; a skewed clock there must not make a rank look
    hung (or alive) here, so silence is the time since a rank's post last changed, as this reader saw it.
    """

    def __init__(self, store: Any, world_size: int):
        self.store, self.world_size = store, world_size
        self._seen: dict[int, tuple[tuple[int, str], float]] = {}

    def read(self) -> dict[int, Progress]:
        posts = read_progress(self.store, self.world_size)
        now = time.monotonic()
        for rank, post in posts.items():
            key = (post.sequence, post.phase)
            if rank not in self._seen or self._seen[rank][0] != key:
                self._seen[rank] = (key, now)
            post.received_at = self._seen[rank][1]
        return posts


def stalled_ranks(posts: dict[int, Progress], now: float) -> list[int]:
    """Ranks to blame for a hang: those behind the others, or else those silent the longest.

    `posts` come from ProgressWatch.read() and `now` is `time.monotonic()` of the same process."""
    active = {rank: post for rank, post in posts.items() if post.phase not in FINAL_PHASES}
    if not active or not any(post.overdue_s(now) > 0 for post in active.values()):
        return []
    lowest = min(post.sequence for post in active.values())
    behind = [rank for rank, post in active.items() if post.sequence == lowest]
    if len(behind) < len(active):
        return sorted(behind)
    oldest = max(post.age_s(now) for post in active.values())
    return sorted(rank for rank, post in active.items() if post.age_s(now) == oldest)


SPEC_VARIABLE = "GPUREADY_VALIDATE_SPEC"


STORE_VARIABLE = "GPUREADY_STORE"  # host:port of the runner's TCPStore (local runs only)


# host:port of the rendezvous store of a `gpuready validate --nnodes` run: the ranks build their process group
# on it rather than on a second store that torchrun's rank-0 agent (or rank 0) would listen with on every interface.
RDZV_STORE_VARIABLE = "GPUREADY_RDZV_STORE"


# The key under which the gpuready process hosting that store says what address it listens on.
RDZV_BIND_KEY = "gpuready/store_bind"


def run_store_prefix(run_id: str = "none", restart: str = "0") -> str:
    """This run's part of the rendezvous store (torchrun's --rdzv-id defaults to `none`; gpuready never restarts)."""
    return f"gpuready/{run_id}/{restart}"
