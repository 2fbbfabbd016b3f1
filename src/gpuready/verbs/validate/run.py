"""`gpuready validate`: measure what the links and GPUs really do, on one node or many.

Locally gpuready starts its own ranks (runner/local.py); under torchrun every process is a
rank and rank 0 writes the report. Either way the same workers run, and the same judge turns
their results into measurements and findings.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready import __version__
from gpuready.model import Report
from gpuready.runner.local import RunOutcome, check_cpu_ranks
from gpuready.runner.watchdog import RankFailure
from gpuready.verbs.stopped import stopped_finding
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


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "GPUREADY_STORE" not in os.environ


def _rank_spec(options: ValidateOptions, device: str) -> dict[str, Any]:
    backend = None if options.backend == "auto" else options.backend
    return {"device": device, "backend": backend, "workloads": list(options.only), "startup_timeout_s": options.startup_timeout_s,
            "options": {"quick": options.quick, "timeout_s": options.timeout_s, "max_bytes": options.max_bytes}}


def predicted_seconds(options: ValidateOptions, device: str, ranks: int) -> float:
    """A rough plan printed before the run: start-up plus each selected workload."""
    from gpuready.workloads.collectives import message_sizes
    estimate = 15.0
    cuda = device == "cuda"
    sizes = len(message_sizes(is_cuda=cuda, quick=options.quick, max_bytes=options.max_bytes))
    per_size = 0.05 if cuda else 0.15 * ranks
    costs = {"compute": 8.0, "transfer": 3.0 * ranks, "p2p": 3.0 * ranks * (ranks - 1),
             "collectives": sizes * 8 * per_size + (20 if cuda and not options.quick else 0), "ddp": 6.0}
    return estimate + sum(costs[name] for name in options.only if cuda or name not in GPU_ONLY)


def overall_deadline_s(options: ValidateOptions, device: str, ranks: int) -> float:
    """The deadline of the whole run: the start-up timeout, four times the plan (at least two minutes: the plan is
    rough and CPUs may be shared), and one operation timeout for the end. --deadline overrides it."""
    if options.deadline_s is not None:
        return options.deadline_s
    return options.startup_timeout_s + max(4 * predicted_seconds(options, device, ranks), 120.0) + options.timeout_s


class NoGpuError(Exception):
    """`--device auto` (the default) on a machine where torch sees no GPU: exit 3, never a silent CPU run."""


def no_gpu_reason(verb: str = "validate") -> str:
    """One sentence: why torch sees no GPU here, and how to run on CPUs on purpose."""
    import torch
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if getattr(torch.version, "cuda", None) is None:
        why = f"this PyTorch {torch.__version__} is a CPU-only build (torch.version.cuda is None)"
    elif hidden is not None and hidden.strip() in ("", "-1", "none", "NoDevFiles"):
        why = f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU"
    else:
        why = (f"torch (CUDA {torch.version.cuda}) sees no GPU: no NVIDIA driver loaded or no GPU present"
               + (f" (CUDA_VISIBLE_DEVICES={hidden!r})" if hidden is not None else ""))
    return f"{verb} found no GPU: {why}; to run on CPUs on purpose, pass --device cpu"


def auto_device(device: str, verb: str = "validate") -> str:
    """`auto` is `cuda`: without a GPU it raises NoGpuError (the CPU path only with --device cpu)."""
    if device != "auto":
        return device
    import torch
    if not torch.cuda.is_available():
        raise NoGpuError(no_gpu_reason(verb))
    return "cuda"


def resolve_device(options: ValidateOptions, option: str = "--ranks") -> tuple[str, int]:
    """The device and the number of ranks, bounded before anything starts (ValueError: a usage error).

    On GPUs one rank per GPU at most (with --backend gloo ranks may share GPUs: then bounded as CPU ranks);
    on CPUs one rank per usable CPU, or up to runner.OVERSUBSCRIBE_FACTOR per CPU with --oversubscribe.
    """
    import torch
    device = auto_device(options.device)
    if device == "cuda":
        count = torch.cuda.device_count()
        if count == 0:
            raise RuntimeError("--device cuda: torch sees no CUDA GPU")
        ranks = options.ranks or count
        if ranks > count:
            if options.backend != "gloo":
                raise ValueError(f"{option} {ranks} is more than the {count} visible GPU(s): one rank per GPU "
                                 "(--backend gloo lets ranks share a GPU)")
            check_cpu_ranks(ranks, options.oversubscribe, option)
        return device, ranks
    if options.ranks is not None:  # the default, 2, is allowed even on one CPU
        check_cpu_ranks(options.ranks, options.oversubscribe, option)
    return device, options.ranks or 2


def build_report(outcome: RunOutcome, facts: Any, host: str, fail_on_warn: bool = False,
                 users: dict[str, Any] | None = None, exclusive: bool = False) -> Report:
    """`users`: host → {NVML index → GpuUsers} or None where NVML could not say, for the selected GPUs
    (None: sharing not checked, e.g. CPU runs)."""
    from gpuready.facts.gpu_users import blame_sharing, sharing_findings
    from gpuready.verbs.check import summarize_facts
    from gpuready.verbs.validate.judge import Judge
    judge = Judge(outcome, facts, host)
    judge.judge_all()
    for user_host, seen in sorted((users or {}).items()):
        judge.findings[:0] = sharing_findings("validate", user_host, seen, exclusive)
        blame_sharing(judge.findings, seen)
    report = Report(tool_version=__version__, host=host, findings=judge.findings, measurements=judge.measurements,
                    facts=summarize_facts(facts) if facts is not None else {}, fail_on_warn=fail_on_warn)
    report.hung = any(failure.kind != "workload" for failure in outcome.failures) or bool(outcome.unkillable)
    report.interrupted, report.interrupted_by = outcome.interrupted, outcome.interrupted_by
    report.facts["validate"] = {"wall_s": round(outcome.wall_s, 1), "log_dir": str(outcome.log_dir),
                                "ranks": sorted(outcome.results), "deadline_s": outcome.deadline_s}
    if outcome.interrupted:
        report.facts["validate"]["interrupted_by"] = outcome.interrupted_by or "SIGINT"
        report.findings.insert(0, stopped_finding("validate", host, outcome.interrupted_by, outcome.wall_s))
    timeouts = next((result.get("group_timeouts_s") for _, result in sorted(outcome.results.items())), None)
    if timeouts:  # start-up timeout for the group's creation, then the per-operation one (NCCL's included)
        report.facts["validate"]["group_timeouts_s"] = timeouts
    if outcome.store_address:
        report.facts["validate"]["rendezvous_store"] = outcome.store_address
    if outcome.overridden_env:  # the user's own values that the ranks did not run with
        report.facts["validate"]["overridden_env"] = outcome.overridden_env
    return report


def local_facts(device: str):
    """Facts of this node (fast: no torch probe) to derive expected figures; None on CPU runs."""
    if device != "cuda":
        return None
    from gpuready.bundle.collect import collect
    from gpuready.facts.build import build_facts
    files, _ = collect(with_torch=False)
    return build_facts(files, live=True)


def visible_devices(selection: list[str], facts: Any) -> str | None:
    """--gpus NVML indices, bus ids or UUIDs → CUDA_VISIBLE_DEVICES (UUIDs, order-proof)."""
    if not selection:
        return None
    from gpuready.facts.units import normalize_bus_id
    chosen = []
    for item in selection:
        match = None
        for gpu in (facts.gpus or []) if facts else []:
            if item == str(gpu.index) or normalize_bus_id(item) == gpu.bus_id or item == gpu.uuid:
                match = gpu
        if match is None or not match.uuid:
            raise ValueError(f"--gpus {item}: no such GPU (give an NVML index, a bus id or a UUID)")
        chosen.append(match.uuid)
    return ",".join(chosen)


def run_local_validate(options: ValidateOptions, progress_callback=None) -> tuple[Report, RunOutcome]:
    from gpuready.runner.local import run_local
    device, ranks = resolve_device(options)
    facts = local_facts(device)
    extra_env = {}
    if options.gpus:
        extra_env["CUDA_VISIBLE_DEVICES"] = visible_devices(options.gpus, facts)
        ranks = min(ranks, len(options.gpus))
    watch = None
    if device == "cuda":
        from gpuready.facts.gpu_users import UserWatch, shared, sharing_findings
        watch = UserWatch(selected_indices(extra_env.get("CUDA_VISIBLE_DEVICES"), facts, ranks))
        if options.exclusive and shared(watch.before):
            host = socket.gethostname()
            report = Report(tool_version=__version__, host=host,
                            findings=sharing_findings("validate", host, watch.before, exclusive=True, ran=False))
            report.facts["validate"] = {"ranks": [], "exclusive": True, "started": False}
            return report, None
    log_dir = options.log_dir or Path(tempfile.mkdtemp(prefix="gpuready-validate-"))
    try:
        if watch:
            watch.__enter__()
        outcome = run_local(world_size=ranks, spec=_rank_spec(options, device), log_dir=log_dir,
                            startup_timeout_s=options.startup_timeout_s, extra_env=extra_env,
                            on_progress=progress_callback,
                            deadline_s=overall_deadline_s(options, device, ranks))
    finally:
        if watch:
            watch.__exit__(None, None, None)
    host = socket.gethostname()
    users = {host: watch.seen} if watch is not None else None
    return build_report(outcome, facts, host, users=users, exclusive=options.exclusive), outcome


def selected_indices(visible: str | None, facts: Any, ranks: int) -> list[int] | None:
    """NVML indices of the GPUs the ranks use (the first `ranks` visible ones); None: every GPU."""
    gpus = sorted((facts.gpus or []) if facts else [], key=lambda gpu: gpu.bus_id or "")
    if visible:
        by_uuid = {gpu.uuid: gpu.index for gpu in gpus}
        chosen = [by_uuid[uuid] for uuid in visible.split(",") if uuid in by_uuid]
    else:
        chosen = [gpu.index for gpu in gpus]
    return chosen[:ranks] if chosen else None


def run_torchrun_rank(options: ValidateOptions, write_report) -> int:
    """Under torchrun: this process is one rank; rank 0 watches every rank (runner/watchdog.py) and writes the report:
    at the end, when the watchdog names a failure, or when SIGTERM/SIGHUP arrives (torchrun's agent stops the whole
    group when one rank ends: rank 0 then names the rank that ended first)."""
    from gpuready.runner.progress import RESULT_KEY
    from gpuready.runner.signals import exit_code_for
    from gpuready.runner.watchdog import Watchdog
    from gpuready.workloads import worker

    device = auto_device(options.device)
    os.environ[worker.SPEC_VARIABLE] = json.dumps(_rank_spec(options, device))
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    deadline_s = overall_deadline_s(options, device, local_ranks)
    facts = local_facts(device) if rank == 0 else None
    started = time.monotonic()
    state: dict[str, Any] = {"written": False}
    lock = threading.Lock()

    def report_once(store: Any, failures: list[RankFailure], interrupted_by: str | None = None) -> None:
        with lock:
            if state["written"]:
                return
            state["written"] = True
            results = {r: json.loads(store.get(RESULT_KEY.format(rank=r))) for r in range(world_size)
                       if store.check([RESULT_KEY.format(rank=r)])}
            outcome = RunOutcome(results=results, failures=failures, log_dir=options.log_dir,
                                 wall_s=time.monotonic() - started, store_address=state.get("store_address"),
                                 interrupted=interrupted_by is not None, interrupted_by=interrupted_by,
                                 deadline_s=deadline_s)
            code = write_report(build_report(outcome, facts, socket.gethostname(),
                                             users=users_from_results(results), exclusive=options.exclusive))
            store.set(REPORT_WRITTEN_KEY, str(code))  # the node hosting the store exits with it too

    def watch(store: Any, watchdog: Watchdog) -> None:  # rank 0 only; silence is timed on rank 0's clock
        while True:
            with lock:
                over = watchdog.poll()
            if over and watchdog.failures:
                os._exit(report_what_ended(store, None))
            if over:
                return
            time.sleep(0.5)

    def on_ready(store: Any) -> None:
        if rank == 0:
            state["store_address"] = rendezvous_store_address(store)
            state["watchdog"] = Watchdog(store, world_size, startup_timeout_s=options.startup_timeout_s,
                                         deadline_s=deadline_s)
            threading.Thread(target=watch, args=(store, state["watchdog"]), daemon=True).start()

    def on_done(store: Any) -> None:
        if rank == 0:
            report_once(store, [])

    def report_what_ended(store: Any, cause: str | None) -> int:
        """Name the ranks that ended (the watchdog's failures, and those whose heartbeat stopped without a word)
        and write the report; the exit code: 4 where a rank ended, else that of `cause` (a signal) or 1."""
        watchdog = state["watchdog"]
        time.sleep(2 * HEARTBEAT_GRACE_S)  # the other ranks post `failed` / `terminated` meanwhile, the dead do not
        with lock:
            watchdog.poll()
            failures = dict(watchdog.failures)
            for failure in watchdog.ended_without_a_word(HEARTBEAT_GRACE_S):
                failures.setdefault(failure.rank, failure)
        ended = any(failure.kind != "workload" for failure in failures.values())
        # A rank that ended is why torchrun stopped the group (or why this rank's collective failed): that is the
        # finding, not an interruption.
        report_once(store, list(failures.values()), interrupted_by=None if failures or cause is None else cause)
        sys.stdout.flush()
        return 4 if ended else exit_code_for(cause) if cause and not failures else 1

    def on_signal(store: Any, signum: int) -> None:
        if rank == 0 and "watchdog" in state:
            import signal as signals
            os._exit(report_what_ended(store, signals.Signals(signum).name))

    def on_failed(store: Any) -> None:  # this rank's workload raised (its error is stored)
        if rank == 0 and "watchdog" in state:
            os._exit(report_what_ended(store, None))

    return worker.main(on_ready=on_ready, on_done=on_done, on_signal=on_signal, on_failed=on_failed)


REPORT_WRITTEN_KEY = "gpuready/report_written"
HEARTBEAT_GRACE_S = 2.5
RANK0_REPORT_WAIT_S = 90.0
RANK0_SILENT_S = 15.0
"""Rank 0 is taken for dead when its heartbeat (every second) has been silent this long: a loaded machine can delay
a beat by seconds, and taking the report from a rank 0 that is still writing it would blame it wrongly."""
"""How long the node hosting the store keeps it up, after its own torchrun ended, for rank 0 to write the report."""
"""On SIGTERM under torchrun: a rank silent this long (2.5 heartbeats) and not `terminated` ended on its own."""


def users_from_results(results: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """Under torchrun each GPU rank reads who else uses its GPU (worker: `gpu_users`): host → {index → GpuUsers}."""
    from gpuready.facts.gpu_users import GpuUsers
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

    def __init__(self, rendezvous_store: Any, world_size: int, startup_timeout_s: float):
        import torch.distributed as dist

        from gpuready.runner.watchdog import Watchdog
        from gpuready.workloads.worker import run_store_prefix
        self.store = dist.PrefixStore(run_store_prefix(), rendezvous_store)
        self.world_size = world_size
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

    def report_if_rank0_died(self, log_dir: Path | None, interrupted_by: str | None = None) -> Report | None:
        """None where rank 0 wrote the report (or no rank ever reached the store: torchrun said why)."""
        from gpuready.runner.progress import FINAL_PHASES, RESULT_KEY
        from gpuready.runner.watchdog import where
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
            quiet = f"; its heartbeat stopped {silent[rank]:.0f} s before the run ended" if rank in silent else ""
            if post is not None and post.phase == "failed":
                failures.append(RankFailure(rank=rank, kind="workload", progress=post,
                                            detail=f"its workload raised{where(post)}"))
            elif post is None or post.phase not in FINAL_PHASES or (rank == 0 and post.phase != "done"):
                failures.append(RankFailure(rank=rank, kind="exit", progress=post,
                                            detail=("ended before writing the report" if rank == 0 else
                                                    "did not finish") + quiet
                                                   + f" (torchrun's output and the rank logs say why){where(post)}"))
        outcome = RunOutcome(results=results, failures=failures, log_dir=log_dir, interrupted=interrupted_by is not None,
                             interrupted_by=interrupted_by, store_address=rendezvous_store_address(self.store))
        facts = local_facts("cuda" if any((r.get("gpu") or {}).get("bus_id") for r in results.values()) else "cpu")
        report = build_report(outcome, facts, socket.gethostname(), users=users_from_results(results))
        report.facts["validate"]["written_by"] = "the node hosting the rendezvous store (rank 0 wrote no report)"
        return report


def rendezvous_store_address(store: Any) -> str | None:
    """Under `gpuready validate --nnodes`: where the rendezvous store listens, as its host said (None if unknown)."""
    from gpuready.workloads.worker import RDZV_BIND_KEY, RDZV_STORE_VARIABLE
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
    """torchrun's c10d rendezvous flags, as `validate --nnodes` runs them and `launch` prints them."""
    return ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc_per_node), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", endpoint]


def torchrun_command(nnodes: int, nproc_per_node: int, endpoint: str, validate_args: list[str],
                     rdzv_conf: str | None = None) -> list[str]:
    """`rdzv_conf`: torchrun's --rdzv-conf (`is_host=false` where gpuready hosts the store itself)."""
    return [sys.executable, "-m", "torch.distributed.run", *torchrun_flags(nnodes, nproc_per_node, endpoint),
            *(["--rdzv-conf", rdzv_conf] if rdzv_conf else []), "-m", "gpuready", "validate", *validate_args]
