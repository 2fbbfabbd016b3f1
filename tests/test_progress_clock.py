"""Stall detection times silence on the reader's clock (time of receipt), never on a remote host's clock."""

import json
import time
from dataclasses import asdict

from gpuready.runner import progress
from gpuready.runner.progress import Progress, ProgressWatch, stalled_ranks
from helpers import FakeStore


def _post(store, rank, sequence, started_at, timeout_s=10.0, phase="collectives"):
    post = Progress(rank=rank, phase=phase, operation="all_reduce", sequence=sequence, started_at=started_at,
                    timeout_s=timeout_s)
    store.set(progress.PROGRESS_KEY.format(rank=rank), json.dumps(asdict(post)))


def test_a_remote_clock_an_hour_behind_does_not_make_a_live_rank_look_hung(monkeypatch):
    store, clock = FakeStore(), [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    watch = ProgressWatch(store, 2)
    _post(store, 0, 5, started_at=time.time())
    _post(store, 1, 5, started_at=time.time() - 3600)  # that host's wall clock is an hour behind
    assert stalled_ranks(watch.read(), clock[0]) == []


def test_a_rank_silent_past_its_timeout_on_the_readers_clock_is_named(monkeypatch):
    store, clock = FakeStore(), [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    watch = ProgressWatch(store, 2)
    _post(store, 0, 5, started_at=time.time() + 3600)  # a clock an hour ahead must not hide the hang either
    _post(store, 1, 5, started_at=time.time() + 3600)
    watch.read()
    clock[0] += 9.0
    _post(store, 0, 6, started_at=time.time() + 3600)  # rank 0 advances, rank 1 does not
    assert stalled_ranks(watch.read(), clock[0]) == []  # nobody is past the 10 s timeout yet
    clock[0] += 2.0
    posts = watch.read()
    assert posts[1].overdue_s(clock[0]) == 1.0 and posts[0].overdue_s(clock[0]) == -8.0
    assert stalled_ranks(posts, clock[0]) == [1]


def test_equal_sequences_blame_the_rank_silent_the_longest(monkeypatch):
    store, clock = FakeStore(), [50.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    watch = ProgressWatch(store, 2)
    _post(store, 0, 3, started_at=0.0, timeout_s=5.0)
    watch.read()
    clock[0] += 4.0
    _post(store, 1, 3, started_at=0.0, timeout_s=5.0)  # same sequence, seen 4 s later
    watch.read()
    clock[0] += 2.0
    assert stalled_ranks(watch.read(), clock[0]) == [0]


def test_the_users_variables_that_the_ranks_run_with_another_value_are_listed():
    from gpuready.runner.local import overridden_variables
    user = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0", "NCCL_DEBUG": "INFO",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}
    ranks = {**user, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "WORLD_SIZE": "2"}
    assert overridden_variables(user, ranks) == {
        "CUDA_DEVICE_ORDER": {"user": "FASTEST_FIRST", "used": "PCI_BUS_ID"},
        "TORCH_NCCL_DUMP_ON_TIMEOUT": {"user": "0", "used": "1"}}


def test_a_validate_run_says_which_of_the_users_variables_it_overrode(tmp_path):
    import json
    import os
    import subprocess
    import sys
    out = tmp_path / "report.json"
    env = {**os.environ, "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    subprocess.run([sys.executable, "-m", "gpuready", "validate", "--device", "cpu", "--ranks", "2", "--quick",
                    "--only", "collectives", "--json", "--out", str(out), "--log-dir", str(tmp_path / "logs")],
                   env=env, capture_output=True, timeout=300)
    overridden = json.loads(out.read_text())["facts"]["validate"]["overridden_env"]
    assert overridden["CUDA_DEVICE_ORDER"] == {"user": "FASTEST_FIRST", "used": "PCI_BUS_ID"}
