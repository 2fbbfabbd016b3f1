"""The one watchdog (runner/watchdog.py) with a fake store and a fake clock: heartbeats timed on the reader's clock,
what rank 0 names when torchrun stops the group, and the sharing check each torchrun rank makes of its own GPU."""

import json
from dataclasses import asdict

import pytest

from gpuready.runner import progress, watchdog
from gpuready.runner.progress import HEARTBEAT_KEY, PROGRESS_KEY, Progress
from gpuready.runner.watchdog import Watchdog
from helpers import FakeStore

GIB = 2**30


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    for module in (progress.time, watchdog.time):
        monkeypatch.setattr(module, "monotonic", lambda: now[0])
    return now


def _post(store, rank, sequence, phase="collectives", timeout_s=100.0):
    post = Progress(rank=rank, phase=phase, operation="all_reduce", sequence=sequence, timeout_s=timeout_s)
    store.set(PROGRESS_KEY.format(rank=rank), json.dumps(asdict(post)))


def _beat(store, rank, count):
    store.set(HEARTBEAT_KEY.format(rank=rank), str(count))


def _running(store, ranks, sequence):
    """Every rank has posted operation `sequence` and beaten once."""
    for rank in range(ranks):
        _post(store, rank, sequence)
        _beat(store, rank, 1)


def test_under_torchrun_a_rank_whose_heartbeat_stops_is_named_exit(clock):
    store = FakeStore()
    dog = Watchdog(store, 2, startup_timeout_s=300, heartbeat_lost_s=20)
    _running(store, 2, 5)
    assert dog.poll() is False
    for second in range(1, 22):  # rank 0 keeps beating, rank 1 stopped at count 1
        clock[0] += 1.0
        _beat(store, 0, 1 + second)
        over = dog.poll()
        if second <= 20:
            assert over is False and not dog.failures, second
    assert over is True
    assert [(f.rank, f.kind) for f in dog.failures.values()] == [(1, "exit")]
    assert "sent no heartbeat for 21 s" in dog.failures[1].detail


def test_a_finished_rank_that_stops_beating_is_not_blamed(clock):
    store = FakeStore()
    dog = Watchdog(store, 2, startup_timeout_s=300, heartbeat_lost_s=5)
    _post(store, 0, 9, phase="done")
    _post(store, 1, 9, phase="done")
    _beat(store, 0, 1)
    _beat(store, 1, 1)
    dog.poll()
    clock[0] += 60
    assert dog.poll() is True and not dog.failures  # every rank done: over, no failure


def test_on_sigterm_rank_0_names_the_rank_that_ended_without_a_word(clock):
    store = FakeStore()
    dog = Watchdog(store, 3, startup_timeout_s=300)
    _running(store, 3, 7)
    dog.poll()
    clock[0] += 3.0
    _beat(store, 0, 4)
    _post(store, 2, 8, phase="terminated")  # torchrun's SIGTERM reached rank 2: it said so
    dog.poll()
    named = dog.ended_without_a_word(2.5)
    assert [(f.rank, f.kind) for f in named] == [(1, "exit")]  # rank 1 died first (no heartbeat, no word)


def test_the_deadline_names_every_open_rank(clock):
    store = FakeStore()
    dog = Watchdog(store, 2, startup_timeout_s=300, deadline_s=50)
    _running(store, 2, 3)
    dog.poll()
    for step in range(1, 6):  # both ranks advance and beat, but the run takes too long
        clock[0] += 11.0
        for rank in (0, 1):
            _post(store, rank, 3 + step)
            _beat(store, rank, 1 + step)
        over = dog.poll()
    assert over is True
    assert sorted(dog.failures) == [0, 1] and all(f.kind == "hang" for f in dog.failures.values())
    assert "overall deadline of 50 s" in dog.failures[0].detail


def test_a_torchrun_rank_reads_its_own_gpu_before_making_a_context(monkeypatch):
    from gpuready.workloads.worker import own_gpu_users
    import gpuready.facts.gpu_users as nvml_module  # where the rank's reader looks collect_one_gpu up
    gpus = [
        {"index": 0, "bus_id": "0000:18:00.0", "uuid": "GPU-a", "memory_total_bytes": 80 * GIB,
         "memory_used_bytes": 30 * GIB, "processes": [{"pid": 777, "name": "python", "used_memory_bytes": 30 * GIB}]},
        {"index": 1, "bus_id": "0000:2a:00.0", "uuid": "GPU-b", "memory_total_bytes": 80 * GIB,
         "memory_used_bytes": 0, "processes": []}]
    monkeypatch.setattr(nvml_module, "collect_one_gpu",
                        lambda bus_id: next((gpu for gpu in gpus if gpu["bus_id"] == bus_id), None))
    mine = own_gpu_users("0000:2a:00.0")
    assert mine["index"] == 1 and mine["processes"] == []
    other = own_gpu_users("0000:18:00.0")
    assert other["processes"] == [{"pid": 777, "name": "python", "used_memory_bytes": 30 * GIB}]
    assert own_gpu_users("0000:99:00.0") == {"unknown": True}
    monkeypatch.setattr(nvml_module, "collect_one_gpu", lambda bus_id: None)  # NVML cannot say
    assert own_gpu_users("0000:2a:00.0") == {"unknown": True}


def test_rank_0_turns_the_ranks_readings_into_per_host_sharing_findings():
    from gpuready.runner.local import RunOutcome
    from gpuready.runner.torchrun import users_from_results
    from gpuready.verbs.validate.run import build_report
    results = {
        0: {"rank": 0, "host": "node-a", "gpu": {"bus_id": "0000:18:00.0"}, "workloads": {},
            "gpu_users": {"index": 0, "bus_id": "0000:18:00.0", "uuid": "GPU-a", "free_bytes": 50 * GIB,
                          "processes": [{"pid": 777, "name": "python", "used_memory_bytes": 30 * GIB}]}},
        1: {"rank": 1, "host": "node-b", "gpu": {"bus_id": "0000:18:00.0"}, "workloads": {},
            "gpu_users": {"index": 0, "bus_id": "0000:18:00.0", "uuid": "GPU-c", "processes": []}},
        2: {"rank": 2, "host": "node-c", "gpu": {"bus_id": "0000:18:00.0"}, "workloads": {},
            "gpu_users": {"unknown": True}},
    }
    users = users_from_results(results)
    assert set(users) == {"node-a", "node-b", "node-c"} and users["node-c"] is None
    report = build_report(RunOutcome(results=results), None, "node-a", users=users)
    shared = {(f.subject.host, f.status.value): f.message for f in report.findings
              if f.check_id == "validate.gpu_shared"}
    assert set(shared) == {("node-a", "warn"), ("node-b", "pass"), ("node-c", "skip")}
    assert "pid 777 (python) holding 30.0 GiB" in shared[("node-a", "warn")]
    assert users_from_results({0: {"rank": 0, "workloads": {}}}) is None  # CPU ranks: sharing not checked


def test_a_peer_lost_error_is_named_as_the_consequence_of_the_rank_that_failed_first():
    from gpuready.runner.local import RunOutcome
    from gpuready.verbs.validate.judge import Judge
    lost = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
            "[127.0.0.1]:12177. This is typically caused by a remote worker crashing.")  # gloo, seen on rank 0
    own = "RuntimeError: CUDA error: an illegal memory access was encountered"
    results = {0: {"rank": 0, "host": "n", "gpu": {}, "workloads": {"ddp": {"error": lost}}},
               1: {"rank": 1, "host": "n", "gpu": {}, "workloads": {"ddp": {"error": own}}}}
    judge = Judge(RunOutcome(results=results), None, "n")
    judge.judge_all()
    messages = {f.subject.rank: f.message for f in judge.findings if f.check_id == "ddp.init_failed"}
    assert messages[0].endswith("Likely a consequence of rank 1 failing, ending or hanging first.")
    assert messages[1] == f"ddp failed on rank 1: {own}"


def test_a_beat_left_unread_by_a_poll_that_found_a_failure_does_not_hide_a_dead_rank(clock):
    """Issue 34's flaky torchrun test: rank 1 beats once more and dies; rank 0's collective fails ("closed by peer")
    and it posts `failed`. The poll that finds that failure must read the heartbeats too: were rank 1's last beat
    first read seconds later, its silence would count from then (0 s) and the rank that died would go unnamed."""
    store = FakeStore()
    dog = Watchdog(store, 2, startup_timeout_s=300)
    _running(store, 2, 5)
    dog.poll()
    clock[0] += 0.5
    _beat(store, 1, 2)  # rank 1's last beat
    _post(store, 0, 6, phase="failed")
    assert dog.poll() is True and list(dog.failures) == [0]
    clock[0] += 3.0
    dog.poll()
    assert [(f.rank, f.kind) for f in dog.ended_without_a_word(2.5)] == [(1, "exit")]


def _rank_zero(store, world_size, clock, monkeypatch):
    """Rank 0's reporter on a fake store, its sleeps moving the fake clock; the outcome it reports is kept."""
    from gpuready.runner import torchrun

    monkeypatch.setattr(torchrun.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    outcomes = []
    reporter = torchrun.RankZeroReport(rank=0, world_size=world_size, startup_timeout_s=300, deadline_s=None,
                                       log_dir=None, make_report=outcomes.append, write_report=lambda report: 0)
    reporter.watchdog = Watchdog(store, world_size, startup_timeout_s=300)
    return reporter, outcomes


def test_rank_0_names_a_rank_that_died_just_after_beating_whatever_the_timing(clock, monkeypatch):
    """Rank 0's workload failed because rank 1 died; rank 1's last beat came after rank 0's last read of the
    heartbeats. Rank 0 keeps reading while it waits, so rank 1 is named; it waits no longer than rank 1 needs to be
    silent past the grace (2.5 s), not a fixed time."""
    store = FakeStore()
    reporter, outcomes = _rank_zero(store, 2, clock, monkeypatch)
    _running(store, 2, 5)
    reporter.watchdog.poll()
    clock[0] += 0.7
    _beat(store, 1, 2)  # then rank 1 dies
    _post(store, 0, 6, phase="failed")
    started = clock[0]
    assert reporter.report_what_ended(store, None) == 4
    assert 2.5 < clock[0] - started <= 3.0
    assert sorted((f.rank, f.kind) for f in outcomes[0].failures) == [(0, "workload"), (1, "exit")]


def test_rank_0_waits_for_a_live_rank_to_say_it_was_terminated_and_names_only_the_dead_one(clock, monkeypatch):
    """On SIGTERM (torchrun stops the group): rank 2 is alive and beating until it posts `terminated` 4 s later;
    rank 1 died without a word. Rank 0 waits for rank 2's word, then names rank 1 alone."""
    store = FakeStore()
    reporter, outcomes = _rank_zero(store, 3, clock, monkeypatch)
    _running(store, 3, 7)
    reporter.watchdog.poll()
    _post(store, 0, 8, phase="terminated")
    beats = [2]

    def sleep(seconds):
        clock[0] += seconds
        beats[0] += 1
        _beat(store, 2, beats[0])  # alive: a new count at every look
        if clock[0] - started >= 4.0:
            _post(store, 2, 8, phase="terminated")
    from gpuready.runner import torchrun
    monkeypatch.setattr(torchrun.time, "sleep", sleep)
    started = clock[0]
    assert reporter.report_what_ended(store, "SIGTERM") == 4
    assert 4.0 <= clock[0] - started <= 4.5
    assert [(f.rank, f.kind) for f in outcomes[0].failures] == [(1, "exit")]
