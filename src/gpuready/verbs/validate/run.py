"""`gpuready validate`: measure what the links and GPUs really do, on one node or many.

Locally gpuready starts its own ranks (runner/local.py); under torchrun every process is a
rank and rank 0 writes the report. Either way the same workers run, and the same judge turns
their results into measurements and findings.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gpuready import __version__
from gpuready.checks.kernel_judge import nvml_xid_findings
from gpuready.devices import (FACT_FILES, auto_device, blame_sharing, local_facts, resolve_device, selected_indices,
                              sharing_findings, visible_devices)
from gpuready.i18n import choose_language, text_of
from gpuready.measuring import MeasuringRun, Measured, Selection, mark_stopped
from gpuready.model import CPU_RUN, GpuRef, Report, Subject
from gpuready.node import node_name
from gpuready.pipeline import summarize_facts
from gpuready.report.progress_line import ProgressLine, validate_plan, validate_progress
from gpuready.runner.local import RunOutcome
from gpuready.runner.torchrun import run_rank, users_from_results
from gpuready.verbs.validate.judge import Judge
from gpuready.workloads import worker
from gpuready.workloads.collectives import COLLECTIVES, _iterations, message_sizes
from gpuready.workloads.worker import GPU_ONLY

WORKLOADS = ("compute", "transfer", "p2p", "collectives", "ddp")


@dataclass(kw_only=True)
class ValidateOptions:
    device: str = "auto"
    backend: str = "auto"
    """`nccl` on GPUs, `gloo` on CPUs; gloo on GPUs lets several ranks share one GPU (a test of the rank logic)."""
    ranks: int | None = None
    only: tuple[str, ...] = WORKLOADS
    quick: bool = False
    timeout_s: float = 120.0
    startup_timeout_s: float = 300.0
    max_bytes: int | None = None
    gpus: list[str] = field(default_factory=list)
    log_dir: Path | None = None
    oversubscribe: bool = False
    """Allow more CPU ranks than usable CPUs (up to runner.OVERSUBSCRIBE_FACTOR per CPU)."""
    exclusive: bool = False
    """Another compute process on a selected GPU is a fail before anything starts (under torchrun: a fail
    finding, each rank reading its own GPU once every rank is up)."""
    deadline_s: float | None = None
    """The whole run, start-up to the last rank's end; None: `overall_deadline_s` of the plan."""
    progress: bool = False
    """Show the run's progress on stderr (report/progress_line.py): a live line on a terminal, else a line a phase."""
    lang: str | None = None
    """The progress line's language (`--lang`); None: from the environment."""





def _rank_spec(options: ValidateOptions, device: str) -> dict[str, Any]:
    backend = None if options.backend == "auto" else options.backend
    return {"device": device, "backend": backend, "workloads": list(options.only), "startup_timeout_s": options.startup_timeout_s,
            "options": {"quick": options.quick, "timeout_s": options.timeout_s, "max_bytes": options.max_bytes}}


FIXED_S = {"cuda": 6.5, "cpu": 3.5}
"""Start to end without the workloads: the parent (0.9-1.4 s, its own start and end), a rank's start-up (Python,
torch's import, CUDA and NCCL set-up: 4.1-5.3 s on an H200 once its files are cached, 6.8 s on a fresh machine;
1.8-2.1 s on the 2-core VM's CPU ranks) and the end (results, barrier, the rank's exit: 0.7-1.0 s, both processes
ending without torch's teardown: runner.signals.exit_without_teardown). Measured with facts.validate.seconds
(benchmarks/issue23_h200.sh validate, benchmarks/validate_timing.sh)."""
WORKLOAD_S = {("cuda", "compute"): 1.1, ("cuda", "compute", "quick"): 0.7, ("cuda", "transfer"): 4.3,
              ("cuda", "transfer", "quick"): 1.0, ("cuda", "ddp"): 5.0, ("cuda", "ddp", "quick"): 0.3,
              ("cpu", "ddp"): 1.8, ("cpu", "ddp", "quick"): 0.15}
"""Seconds of one rank's workload, measured as FIXED_S (H200: compute 0.9-1.3, 0.68-0.73 with --quick's shorter fp32
window; transfer 3.6-4.4 with 1 GiB host copies and 0.74-1.11 with --quick's 256 MiB; ddp 3.8-7.1 with or without
its FSDP2 step: DistributedDataParallel's constructor imports torch._dynamo, 4.1 s on that machine; importing it on a
thread beside the measurements cost them 75 % of the bf16 matmul rate, so it stays where DDP needs it; --quick
averages the gradients by hand without importing it: 0.20-0.33 s on the H200, 0.11-0.14 s on the VM's two gloo
ranks)."""
COLLECTIVE_CALL_S = {"cuda": 0.0035, "cpu": 0.02}
"""One (operation, size) of the sweep beyond its bytes: Python, launch and synchronisation (H200, one rank: 0.5 s for
28 sizes × 5 operations; the VM's gloo: 1.1 s for 7 × 6 with --quick)."""
COLLECTIVE_BUS_BYTES_PER_S = {"cuda": 100e9, "cpu": 0.4e9}
"""Bus bandwidth the estimate assumes: gloo on the 2-core VM moved 10.5 GB in 27 s (2 ranks); 100 GB/s for NCCL is an
assumption between PCIe (~20 GB/s) and NVLink (~400 GB/s busbw), not a measurement."""
BETWEEN_NODES_S = 15.0
"""validate --between-nodes: the pair tests' rounds. Measured on the 2-core VM (gloo, all simulated nodes on one host,
so every pair runs one after another): 4.7-5.2 s for 4 nodes, 8.2 s for 8 (facts.validate.seconds.between_nodes);
not measured on GPUs or real clusters, where pairs of distinct hosts run at once."""
P2P_PAIR_S = 1.0
"""One ordered GPU pair's copies (512 MiB × 16 × 3 samples, both directions, and latencies): an assumption, not
measured here (one GPU lent)."""


def predicted_seconds(options: ValidateOptions, device: str, ranks: int) -> float:
    """The estimate printed before the run: start-up and end, plus each selected workload (its measured seconds on
    one H200 or the 2-core VM's CPU ranks, the collectives and P2P by their size and the ranks)."""
    cuda = device == "cuda"
    kind = "cuda" if cuda else "cpu"
    quick = options.quick
    sizes = message_sizes(is_cuda=cuda, quick=quick, max_bytes=options.max_bytes)
    operations = len(COLLECTIVES) - (1 if ranks < 2 else 0)  # send_recv needs a peer
    bus_bytes = sum(sum(_iterations(size, cuda, quick)) * size for size in sizes) * operations
    share = 2 * (ranks - 1) / ranks if ranks > 1 else 0.0  # nccl-tests' all_reduce bus factor: 2(n-1)/n
    costs = {"collectives": len(sizes) * operations * COLLECTIVE_CALL_S[kind]
                            + bus_bytes * max(share, 1.0 if not cuda else 0.0) / COLLECTIVE_BUS_BYTES_PER_S[kind],
             "p2p": P2P_PAIR_S * ranks * (ranks - 1), "between_nodes": BETWEEN_NODES_S}
    for name in ("compute", "transfer", "ddp"):
        costs[name] = WORKLOAD_S.get((kind, name, "quick") if quick else (kind, name),
                                     WORKLOAD_S.get((kind, name), 0.0))
    return FIXED_S[kind] + sum(costs[name] for name in options.only if cuda or name not in GPU_ONLY)


def overall_deadline_s(options: ValidateOptions, device: str, ranks: int) -> float:
    """The deadline of the whole run: the start-up timeout, four times the plan (at least two minutes: the plan is
    rough and CPUs may be shared), and one operation timeout for the end. --deadline overrides it."""
    if options.deadline_s is not None:
        return options.deadline_s
    return options.startup_timeout_s + max(4 * predicted_seconds(options, device, ranks), 120.0) + options.timeout_s


def build_report(outcome: RunOutcome, facts: Any, host: str, fail_on_warn: bool = False,
                 users: dict[str, Any] | None = None, exclusive: bool = False, device: str | None = None) -> Report:
    """`users`: host → {NVML index → GpuUsers} or None where NVML could not say, for the selected GPUs
    (None: sharing not checked, e.g. CPU runs). `device`: what the ranks ran on (None: `cuda` where a rank names its
    GPU); a run on CPU ranks is no verdict on a machine."""
    judge = Judge(outcome, facts, host)
    judge.judge_all()
    by_index = {gpu.index: gpu for gpu in (facts.gpus or [])} if facts is not None else {}
    judge.findings += nvml_xid_findings(
        "validate.xid", outcome.xid_events,
        lambda index: Subject(host=host, gpu=GpuRef(index=index, bus_id=by_index[index].bus_id,
                                                    uuid=by_index[index].uuid) if index in by_index else None),
        "validate")
    for user_host, seen in sorted((users or {}).items()):
        judge.findings[:0] = sharing_findings("validate", user_host, seen, exclusive)
        blame_sharing(judge.findings, seen)
    report = Report(tool_version=__version__, host=host, findings=judge.findings, measurements=judge.measurements,
                    facts=summarize_facts(facts) if facts is not None else {}, fail_on_warn=fail_on_warn)
    report.hung = any(failure.kind != "workload" for failure in outcome.failures) or bool(outcome.unkillable)
    ran_on = device or ("cpu" if facts is None and _ran_on(outcome) == "cpu" else "cuda")
    report.no_verdict_reason = CPU_RUN if ran_on == "cpu" else None
    report.facts["validate"] = {"wall_s": round(outcome.wall_s, 1), "log_dir": str(outcome.log_dir),
                                "ranks": sorted(outcome.results), "deadline_s": outcome.deadline_s}
    first = outcome.results.get(min(outcome.results)) if outcome.results else None
    if first and isinstance(first.get("workload_s"), dict):  # where a run's time goes (the plan's estimate is held to it)
        report.facts["validate"]["seconds"] = {"startup": first.get("startup_s"), **first["workload_s"]}
    if outcome.interrupted:
        report.facts["validate"]["interrupted_by"] = outcome.interrupted_by or "SIGINT"
        mark_stopped(report, "validate", host, outcome.interrupted_by, outcome.wall_s)
    timeouts = next((result.get("group_timeouts_s") for _, result in sorted(outcome.results.items())), None)
    if timeouts:  # start-up timeout for the group's creation, then the per-operation one (NCCL's included)
        report.facts["validate"]["group_timeouts_s"] = timeouts
    if outcome.store_address:
        report.facts["validate"]["rendezvous_store"] = outcome.store_address
    if judge.transport_facts is not None:  # across nodes on NCCL: the transport per communicator (issue 33)
        report.facts["validate"]["nccl_transport"] = judge.transport_facts
    if judge.between_nodes is not None:  # validate --between-nodes (issue 34)
        report.facts["between_nodes"] = judge.between_nodes
    if outcome.overridden_env:  # the user's own values that the ranks did not run with
        report.facts["validate"]["overridden_env"] = outcome.overridden_env
    return report


def _ran_on(outcome: RunOutcome) -> str:
    """`cuda` where a rank names its GPU, else `cpu`."""
    return "cuda" if any((r.get("gpu") or {}).get("bus_id") for r in outcome.results.values()) else "cpu"


def run_local_validate(options: ValidateOptions) -> tuple[Report, RunOutcome | None]:
    """validate's local ranks, judged: the report, and the runner's outcome (None: `--exclusive` refused the run)."""
    run = ValidateRun(options)
    return run.measure(), run.outcome


class ValidateRun(MeasuringRun):
    """validate's measuring run (measuring.py): the workloads on one process group, the Xids NVML reports beside
    them, Judge's findings."""

    verb = "validate"
    sample_interval_s = None  # the Xids NVML reports while the workloads run; no samples

    def __init__(self, options: ValidateOptions):
        super().__init__(exclusive=options.exclusive)
        self.options = options

    def select(self) -> Selection:
        try:
            device, ranks = resolve_device(self.options)
        except RuntimeError as error:  # CUDA shows no GPU: a usage error (exit 2), as too many --ranks is
            raise ValueError(text_of(error)) from None
        return Selection(device=device, ranks=ranks)

    def prepares_early(self) -> bool:
        # --gpus (and --exclusive) decide before any rank starts; otherwise the facts (a second or so of nvidia-smi)
        # and the watchers are made while the ranks import torch
        return bool(self.options.gpus)

    def prepare(self, selection: Selection) -> None:
        facts = selection.facts = local_facts(selection.device)
        if self.options.gpus:
            selection.env["CUDA_VISIBLE_DEVICES"] = visible_devices(self.options.gpus, facts)
            selection.ranks = min(selection.ranks, len(self.options.gpus))
        if selection.device == "cuda":
            selection.gpus = selected_indices(selection.env.get("CUDA_VISIBLE_DEVICES"), facts, selection.ranks)

    def refused_facts(self, selection: Selection) -> dict[str, Any]:
        return {"ranks": []}

    def open_display(self, selection: Selection) -> Any:
        if not self.options.progress:
            return None
        predicted_s = predicted_seconds(self.options, selection.device, selection.ranks)
        running = [name for name in self.options.only if selection.device == "cuda" or name not in GPU_ONLY]
        return ProgressLine("validate", validate_plan(selection.ranks, selection.device, running, self.options.quick,
                                                      predicted_s),
                            validate_progress(predicted_s, running), lang=choose_language(self.options.lang))

    def run(self, selection: Selection) -> RunOutcome:
        options = self.options
        return self.start_ranks(spec=_rank_spec(options, selection.device),
                                log_dir=options.log_dir or Path(tempfile.mkdtemp(prefix="gpuready-validate-")),
                                startup_timeout_s=options.startup_timeout_s,
                                deadline_s=overall_deadline_s(options, selection.device, selection.ranks))

    def judge(self, measured: Measured) -> Report:
        outcome = measured.outcome
        outcome.xid_events = list(measured.telemetry.xid_events) if measured.telemetry is not None else []
        return build_report(outcome, measured.selection.facts, measured.host, exclusive=self.options.exclusive,
                            users={measured.host: measured.users} if measured.checked_sharing else None,
                            device=measured.selection.device)


def run_torchrun_rank(options: ValidateOptions, write_report: Callable[[Report], int]) -> int:
    """Under torchrun: this process is one validate rank (runner/torchrun.py); rank 0 writes the report."""
    device = auto_device(options.device)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    # across nodes, rank 0 reads its node's IB/RoCE ports too (sysfs): the NIC floor and nccl.transport use them
    files = FACT_FILES + (("sysfs.txt",) if world_size > local_ranks else ())
    facts = local_facts(device, files) if rank == 0 else None
    return run_rank(_rank_spec(options, device), rank_main=worker.main, deadline_s=overall_deadline_s(options, device, local_ranks),
                    log_dir=options.log_dir, write_report=write_report,
                    make_report=lambda outcome: torchrun_report(outcome, facts, options.exclusive, device))


def torchrun_report(outcome: RunOutcome, facts: Any = None, exclusive: bool = False,
                    device: str | None = None) -> Report:
    """validate's report of a torchrun run (rank 0's, or the store node's where rank 0 died: facts of that node)."""
    device = device or _ran_on(outcome)
    if facts is None:
        facts = local_facts(device)
    return build_report(outcome, facts, node_name(), users=users_from_results(outcome.results),
                        exclusive=exclusive, device=device)
