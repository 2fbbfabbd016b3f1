"""Out-of-band progress: every rank posts what it is doing to the rendezvous store.

The watchdog reads these posts, not NCCL's state, so a rank that stops (SIGSTOP, a dead GPU,
a Python deadlock) is named as the one that stopped advancing, not merely those that then
waited for it.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any

PROGRESS_KEY = "gpuready/progress/{rank}"
RESULT_KEY = "gpuready/result/{rank}"


@dataclass
class Progress:
    rank: int
    phase: str
    """`startup`, a workload name, `done` or `failed`."""
    operation: str = ""
    sequence: int = 0
    """Counts operations this rank has started; a rank behind the others has a lower number."""
    started_at: float = field(default_factory=time.time)
    timeout_s: float = 300.0
    host: str = field(default_factory=socket.gethostname)
    gpu: str | None = None
    """The GPU's bus id, where the rank has one."""
    pid: int = 0

    def overdue_s(self, now: float) -> float:
        return now - self.started_at - self.timeout_s


class ProgressReporter:
    def __init__(self, store: Any, rank: int, gpu: str | None, pid: int):
        self.store, self.rank, self.gpu, self.pid = store, rank, gpu, pid
        self.sequence = 0

    def post(self, phase: str, operation: str = "", timeout_s: float = 300.0) -> None:
        self.sequence += 1
        progress = Progress(rank=self.rank, phase=phase, operation=operation, sequence=self.sequence,
                            timeout_s=timeout_s, gpu=self.gpu, pid=self.pid)
        self.store.set(PROGRESS_KEY.format(rank=self.rank), json.dumps(asdict(progress)))


def read_progress(store: Any, world_size: int) -> dict[int, Progress]:
    """The latest post of every rank that has posted (non-blocking)."""
    posts = {}
    for rank in range(world_size):
        key = PROGRESS_KEY.format(rank=rank)
        if store.check([key]):
            posts[rank] = Progress(**json.loads(store.get(key)))
    return posts


def stalled_ranks(posts: dict[int, Progress], now: float) -> list[int]:
    """Ranks to blame for a hang: those behind the others, or else those overdue the longest."""
    active = {rank: post for rank, post in posts.items() if post.phase not in ("done", "failed")}
    if not active or not any(post.overdue_s(now) > 0 for post in active.values()):
        return []
    lowest = min(post.sequence for post in active.values())
    behind = [rank for rank, post in active.items() if post.sequence == lowest]
    if len(behind) < len(active):
        return sorted(behind)
    oldest = min(post.started_at for post in active.values())
    return sorted(rank for rank, post in active.items() if post.started_at == oldest)
