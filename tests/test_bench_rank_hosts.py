"""`bench --nnodes` (torchrun): each rank's step times are recorded with the node it ran on (the rank's node.py
node_name(), which the worker stores in its result), so that `bench.straggler` names the rank and its node, not the
node of rank 0 that wrote the report (issue 34)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpuready.runner.local import RunOutcome
from gpuready.verbs.bench.judge import BenchJudge
from gpuready.verbs.bench.torchrun import rank_host, runs_from_outcome

BENCH = Path(__file__).parent / "fixtures" / "cpu-bench" / "bench-tiny-2ranks-per-rank.json"
NODES = {0: "node-a", 1: "node-b"}


def _outcome(slow: float) -> RunOutcome:
    """The recorded 2-rank CPU bench's per-rank step times as the two ranks' stored results under torchrun, each rank
    on its own node (both on one machine, as simulated nodes are: the same host name); rank 1's times × `slow`."""
    report = json.loads(BENCH.read_text())
    results: dict[int, dict] = {rank: {"rank": rank, "host": "one-machine", "node": node, "workloads": {}}
                                for rank, node in NODES.items()}
    for m in report["measurements"]:
        if m["name"] != "rank_step_time_s":
            continue
        rank, method = m["subject"]["rank"], m["method"]
        results[rank]["workloads"][f"train.{method['strategy']}"] = {
            "step_times_s": [t * (slow if rank == 1 else 1.0) for t in m["samples"]],
            "tokens_per_step": method["tokens_per_step"], "seq": method["seq"], "device_type": "cpu"}
    return RunOutcome(results=results)


def _judged(slow: float) -> BenchJudge:
    judge = BenchJudge("node-a", runs_from_outcome(_outcome(slow), ["single", "ddp", "fsdp2"], 2))
    judge.judge()
    return judge


def test_a_straggler_across_nodes_is_named_with_its_own_node():
    judge = _judged(1.3)
    named = [f for f in judge.findings if f.check_id == "bench.straggler"]
    assert [(f.subject.rank, f.subject.host) for f in named] == [(1, "node-b"), (1, "node-b")]
    assert all("rank 1 (" in f.message and ") on node-b took" in f.message for f in named)


def test_every_rank_step_time_carries_its_node():
    judge = _judged(1.0)
    per_rank = [(m.method["strategy"], m.subject.rank, m.subject.host) for m in judge.measurements
                if m.name == "rank_step_time_s"]
    assert per_rank == [("ddp", 0, "node-a"), ("ddp", 1, "node-b"), ("fsdp2", 0, "node-a"), ("fsdp2", 1, "node-b")]
    assert not [f for f in judge.findings if f.check_id == "bench.straggler"]


def test_a_rank_result_without_a_node_name_falls_back_to_its_host_name():
    assert rank_host({"host": "gpu17", "node": "slurm-node-17"}) == "slurm-node-17"
    assert rank_host({"host": "gpu17"}) == "gpu17"  # a result stored before the worker recorded node names
    assert rank_host({}) is None


def test_bench_on_two_named_nodes_records_each_ranks_node(tmp_path):
    """End to end: two torchrun 'nodes' on this machine, each named by GPUREADY_NODE_NAME as a scheduler would name
    it; every rank's step times in the report carry the name of the node that rank ran on."""
    pytest.importorskip("torch")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{probe.getsockname()[1]}"
    out = tmp_path / "bench.json"
    nodes = [subprocess.Popen([sys.executable, "-m", "gpuready", "bench", "--device", "cpu", "--nnodes", "2",
                               "--nproc-per-node", "1", "--rdzv-endpoint", endpoint, "--preset", "tiny",
                               "--strategies", "ddp", "--json", "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "GPUREADY_NODE_NAME": name}) for name in NODES.values()]
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert out.exists(), [err[-1500:] for _, err in outputs]
    report = json.loads(out.read_text())
    hosts = {m["subject"]["rank"]: m["subject"]["host"] for m in report["measurements"]
             if m["name"] == "rank_step_time_s"}
    assert sorted(hosts) == [0, 1] and sorted(hosts.values()) == ["node-a", "node-b"]
