"""`gpuready bench --nnodes`: under torchrun one process group runs every strategy in turn, and rank 0 writes the report.

The runs: 1 GPU (rank 0 alone, the others wait on the store), then every rank with each strategy, the same settings
as a local bench. Rank 0 samples its own node's GPUs (NVML); the judge sees the runs as a local bench's, with the
scaling expectation of a run across nodes where the ranks are on more than one host.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Callable

from gpuready.devices import auto_device, sharing_findings
from gpuready.model import Report
from gpuready.runner.local import RunOutcome
from gpuready.runner.torchrun import run_rank, users_from_results
from gpuready.telemetry import start_telemetry
from gpuready.verbs.bench.run import (BenchOptions, bench_report, bench_shape, failure_entry, node_view,
                                      run_deadline_s, run_entry, train_settings)
from gpuready.workloads import worker


def rank_spec(options: BenchOptions, device: str, world_size: int) -> dict[str, Any]:
    """The worker spec: workloads `train.single`, then `train.<strategy>` for each strategy (none on one rank)."""
    shape = bench_shape(options)
    strategies = options.strategies if world_size > 1 else ()
    runs = {"single": train_settings(options, shape, "single", 1),
            **{strategy: train_settings(options, shape, strategy, world_size) for strategy in strategies}}
    return {"device": device, "workloads": [f"train.{strategy}" for strategy in runs],
            "startup_timeout_s": options.startup_timeout_s,
            "options": {"timeout_s": options.timeout_s, "train_runs": runs}}


def runs_from_outcome(outcome: RunOutcome, strategies: list[str], world_size: int,
                      sampler: Any = None) -> list[dict[str, Any]]:
    """The group's rank results → the judge's runs (see judge.py), in order. A rank's failure belongs to the first
    run it has no result for; runs no rank reached are left out. A result a rank published before it stopped
    (`partial`) is kept as what it is."""
    pending = {failure.rank: failure for failure in outcome.failures}
    runs = []
    for strategy in strategies:
        key = f"train.{strategy}"
        ranks = [0] if strategy == "single" else list(range(world_size))
        results = {rank: {**workloads[key], "host": rank_host(outcome.results[rank])} for rank in ranks
                   if key in (workloads := (outcome.results.get(rank) or {}).get("workloads") or {})}
        failures = [pending.pop(rank) for rank in ranks if rank in pending and rank not in results]
        if not results and not failures and runs:
            break
        if not results and not failures:
            continue
        runs.append(run_entry(strategy, 1 if strategy == "single" else world_size, results, failures, sampler))
    if pending and runs:  # a rank that failed after every run it had a result for (the final barrier)
        runs[-1]["failures"] += [failure_entry(failure) for failure in pending.values()]
    return runs


def rank_host(result: dict[str, Any]) -> str | None:
    """The node a rank ran on, as its scheduler names it (the rank's node.py node_name()), else its host name: a
    straggler across nodes is named by it."""
    return result.get("node") or result.get("host")


def group_report(options: BenchOptions, device: str, outcome: RunOutcome, sampler: Any = None,
                 node: Any = None) -> Report:
    """bench's report of a torchrun group: rank 0's (with its node's telemetry), or the store node's."""
    world_size = max([*outcome.results, *(f.rank for f in outcome.failures), 0]) + 1
    world_size = max(world_size, int(os.environ.get("WORLD_SIZE", world_size)))
    strategies = ["single", *(options.strategies if world_size > 1 else ())]
    runs = runs_from_outcome(outcome, strategies, world_size, sampler)
    hosts = sorted({str(result.get("host")) for result in outcome.results.values() if result.get("host")})
    here = socket.gethostname()
    users_by_host = users_from_results(outcome.results)
    report = bench_report(options, bench_shape(options), device, runs,
                          users=(users_by_host or {}).get(here), checked_sharing=users_by_host is not None,
                          interrupted_by=outcome.interrupted_by if outcome.interrupted else None,
                          wall_s=outcome.wall_s, log_dir=outcome.log_dir, node=node,
                          topology="multi_node" if len(hosts) > 1 else None)
    for host, seen in sorted((users_by_host or {}).items()):
        if host != here:  # the other nodes' GPUs, each rank read its own
            report.findings[:0] = sharing_findings("bench", host, seen, False)
    report.hung = report.hung or any(f.kind in ("hang", "exit", "start") for f in outcome.failures)
    report.facts["bench"].update({"hosts": hosts, "world_size": world_size, "launcher": "torchrun",
                                  "telemetry_of": here if sampler is not None else None})
    if outcome.store_address:
        report.facts["bench"]["rendezvous_store"] = outcome.store_address
    return report


def run_torchrun_rank(options: BenchOptions, write_report: Callable[[Report], int]) -> int:
    """This process is one rank of a `bench --nnodes` group (runner/torchrun.py); rank 0 writes the report."""
    device = auto_device(options.device, "bench")
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    spec = rank_spec(options, device, world_size)
    sampler = node = None
    if rank == 0:
        node = node_view(device, local_world)
        _session, sampler = start_telemetry(device, node.gpus)  # sampled until this process ends (os._exit)
    return run_rank(spec, rank_main=worker.main, deadline_s=run_deadline_s(options, runs=len(spec["workloads"])),
                    log_dir=options.log_dir,
                    write_report=write_report,
                    make_report=lambda outcome: group_report(options, device, outcome, sampler, node))


def store_node_report(options: BenchOptions) -> Callable[[RunOutcome], Report]:
    """The report the node hosting the rendezvous store writes where rank 0 died (its own node's facts)."""
    def make(outcome: RunOutcome) -> Report:
        device = "cuda" if any((r.get("gpu") or {}).get("bus_id") for r in outcome.results.values()) else "cpu"
        return group_report(options, device, outcome)
    return make

