"""Training-benchmark rank results → measurements (with method and versions) and findings. Pure: tests feed
constructed rank results.

Input: a list of runs, each `{"strategy": "single" | "ddp" | "fsdp2" | "fsdp2-noreshard", "world_size": N,
"results": {rank: result}, "telemetry": summary | None}`; a rank result is the training workload's dict or
`{"error": "..."}`. Context: the Machine (None on CPU), validate's measured bf16 matmul TFLOP/s, the GPU users seen
during the run (facts/gpu_users.py), the GPU memory per GPU, and what is known about the path between the GPUs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from gpuready.checks.job_logs import STRAGGLER_REFS, straggler_ranks
from gpuready.checks.kernel_judge import nvml_xid_findings
from gpuready.i18n import Said, finding_text, said, said_from, said_json
from gpuready.knowledge import thresholds
from gpuready.model import Finding, Measurement, Status, Subject
from gpuready.devices import add_note, holders, sharing_findings
from gpuready.facts.gpu_users import shared

_SCALING = thresholds("bench_scaling")
SCALING_EXPECTED: dict[str, tuple[float, Said]] = {
    key: (_SCALING[key], said(f"bench.topology.{key}")) for key in ("nvlink", "pcie_p2p", "pcie_host", "multi_node")}
"""Data-parallel scaling efficiency each topology allows, by key (thresholds.toml [bench_scaling] says why), and the
topology in words."""
SCALING_SOURCE = _SCALING["source"]
SCALING_FAIL_MARGIN = _SCALING["fail_margin"]
"""Below expectation − this margin a finding fails (below the expectation it warns)."""

MFU_WARN_BELOW = thresholds("bench_mfu")["warn_below"]
MFU_SOURCE = thresholds("bench_mfu")["source"]
MFU_JUDGED_PRECISIONS = ("bf16", "fp16")

_MEMORY = thresholds("bench_memory")
MEMORY_WARN_ABOVE, MEMORY_ROOM_BELOW, MEMORY_TARGET = _MEMORY["warn_above"], _MEMORY["room_below"], _MEMORY["target"]
MEMORY_SOURCE = _MEMORY["source"]

THROTTLE_WARN_SHARE = thresholds("burn")["throttle_warn_share"]
THROTTLE_SOURCE = ("gpuready default (as burn, thresholds.toml [burn] throttle_warn_share): "
                   f"> {THROTTLE_WARN_SHARE:.0%} of samples throttled")

OOM_PATTERNS = ("out of memory", "outofmemoryerror", "cudaerrormemoryallocation")


def _english(text: str | Said) -> str:
    return text.english() if isinstance(text, Said) else text


def precision_key(precision: str | None) -> str:
    """The workload's precision (`bf16`, `amp-bf16`, `fp16`, `fp32`, `tf32`) → the peak table's dtype."""
    text = (precision or "").lower()
    for key in ("bf16", "fp16", "tf32", "fp8", "fp32"):
        if key in text:
            return key
    return text or "fp32"


def topology_of(machine: Any, world_size: int, host_path: str | None = None, topology: str | None = None) -> str:
    """The SCALING_EXPECTED key for a run of `world_size` ranks on `machine`: `topology` when given; across nodes
    when the run needs more GPUs than a node has; NVLink when every rank's GPU is in one NVLink domain; PCIe through
    host memory where `host_path` (validate.expect.host_path_pairs) names pairs without P2P; else PCIe with P2P."""
    if topology:
        if topology not in SCALING_EXPECTED:
            raise ValueError(f"topology {topology!r}: one of {', '.join(SCALING_EXPECTED)}")
        return topology
    if machine is None:
        return "pcie_p2p"
    if getattr(machine, "nodes", 1) > 1 and world_size > machine.gpus_per_node:
        return "multi_node"
    if machine.nvlink_domain >= world_size > 1:
        return "nvlink"
    return "pcie_host" if host_path else "pcie_p2p"


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


NOISE_SIGMAS = 2.0
"""A figure is beyond the noise where it lies more than this many standard errors away (about 95 %)."""


def median_noise(values: list[float]) -> float:
    """The standard error of the median of `values` relative to it: 1.2533 σ / √n with σ from the interquartile range
    (IQR / 1.349; both for a normal distribution), so one slow outlier does not widen it."""
    if len(values) < 2:
        return math.inf
    median = _median(values)
    sigma = (_percentile(values, 0.75) - _percentile(values, 0.25)) / 1.349
    return 1.2533 * sigma / math.sqrt(len(values)) / median if median > 0 else math.inf


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def _rank_key(rank: Any) -> int:
    try:
        return int(rank)
    except (TypeError, ValueError):
        return 0


@dataclass
class RunFigures:
    """One run reduced: the step time of the slowest rank, throughput, memory, and what went wrong."""
    strategy: str
    world_size: int
    ok: bool
    errors: list[tuple[int, str | Said]] = field(default_factory=list)
    """(rank, what it said or what the judge says of it)."""
    first: dict[str, Any] = field(default_factory=dict)
    """The lowest rank's result (its shape, precision and versions speak for the run)."""
    step_times_s: list[float] = field(default_factory=list)
    """The slowest rank's step times."""
    rank_step_times_s: dict[int, list[float]] = field(default_factory=dict)
    """Every rank's step times (rank → seconds per step): the straggler rule's input."""
    rank_gpus: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Rank → its GPU as the rank saw it (`cuda_index`, `bus_id`; None on a CPU rank): a straggler is named by it."""
    rank_hosts: dict[int, str] = field(default_factory=dict)
    """Rank → its node (bench --nnodes: the rank's node_name()); a rank not in it ran on the judge's host."""
    step_median_s: float = 0.0
    tokens_per_s: float = 0.0
    tokens_per_gpu_step: float = 0.0
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    rss_bytes: int | None = None
    mfu: float | None = None
    telemetry: dict[str, Any] | None = None
    skipped: str | Said | None = None
    """Why this run could not be made here (FSDP2 missing from this torch, …): a skip, not a failure."""
    device_type: str = "cuda"
    """What the ranks ran on (the workload's `device_type`): `cpu` runs are labelled in CPU ranks."""
    too_big: bool = False
    """Skipped because the model states alone exceed one device's memory (a sizing fact, like an OOM)."""

    @property
    def label(self) -> Said:
        """`ddp on 2 GPUs`, `single on 1 CPU rank`: the run in words."""
        unit = "cpu_rank" if self.device_type == "cpu" else "gpu"
        return said(f"bench.run.{unit}{'' if self.world_size == 1 else 's'}", strategy=self.strategy,
                    count=self.world_size)

    @property
    def oom(self) -> bool:
        return any(any(p in _english(error).lower() for p in OOM_PATTERNS) for _, error in self.errors)


class BenchJudge:
    """Judge the training benchmark. Call `judge()`, then read `measurements` and `findings`."""

    def __init__(self, host: str, runs: list[dict[str, Any]], *, machine: Any = None,
                 validate_tflops: float | None = None, users: dict[int, Any] | None = None,
                 checked_sharing: bool = False, exclusive: bool = False,
                 gpu_memory_bytes: int | dict[Any, int] | None = None, host_path: str | None = None,
                 topology: str | None = None, dataloader_ok: bool | None = None,
                 telemetry: dict[tuple[str, int], dict[str, Any] | None] | None = None):
        self.host, self.runs, self.machine = host, runs, machine
        self.validate_tflops = validate_tflops
        """validate's measured bf16 matmul TFLOP/s per GPU (the slowest GPU's), or None."""
        self.users = users
        """NVML index → GpuUsers seen during the runs; None with checked_sharing: NVML could not say."""
        self.checked_sharing = checked_sharing or users is not None
        self.exclusive = exclusive
        if isinstance(gpu_memory_bytes, dict):
            gpu_memory_bytes = min(gpu_memory_bytes.values()) if gpu_memory_bytes else None
        self.gpu_memory_bytes = gpu_memory_bytes or (getattr(machine, "memory_bytes_per_gpu", None)
                                                     if machine is not None else None)
        self.host_path = host_path
        """Why some GPU pair has no P2P path (validate.expect.host_path_pairs), or None."""
        self.topology = topology
        """Override of the topology key (SCALING_EXPECTED), e.g. from a multi-node launch."""
        self.dataloader_ok = dataloader_ok
        """False where data-path evidence says the input pipeline starves the GPUs; None: not measured."""
        self.telemetry = telemetry or {}
        """(strategy, world_size) → telemetry summary; a run's own `telemetry` key wins."""
        self.findings: list[Finding] = []
        self.xids_seen: set[tuple] = set()
        """(seconds, NVML index, Xid) already reported by an earlier run."""
        self.measurements: list[Measurement] = []
        self.figures: list[RunFigures] = []
        self.scaling: dict[tuple[str, int], dict[str, Any]] = {}
        self.headroom: dict[tuple[str, int], float] = {}

    # -- helpers ------------------------------------------------------------------------------
    @property
    def on_cpu(self) -> bool:
        if self.machine is None:
            return True
        return any(run.ok and run.reserved_bytes is None for run in self.figures) and \
            not any(run.ok and run.reserved_bytes is not None for run in self.figures)

    def subject(self, rank: int | None = None, host: str | None = None) -> Subject:
        return Subject(host=host or self.host, rank=rank)

    def add(self, check_id: str, status: Status, text: Said, rank: int | None = None, host: str | None = None,
            **kwargs: Any) -> Finding:
        """`kwargs` may override the catalogue's fix (`fix=None`: a pass needs no next step)."""
        finding = Finding(check_id=check_id, status=status, subject=self.subject(rank, host),
                          **{**finding_text(text), **kwargs})
        self.findings.append(finding)
        return finding

    def method(self, run: RunFigures, **extra: Any) -> dict[str, Any]:
        first = run.first
        return {"strategy": run.strategy, "world_size": run.world_size, "precision": first.get("precision"),
                **({"logits": first["logits"]} if first.get("logits") else {}),  # the loss's convention (--logits)
                "seq": first.get("seq"), "micro_batch": first.get("micro_batch"),
                "accumulation": first.get("accumulation"), "tokens_per_step": first.get("tokens_per_step"),
                "parameters": first.get("parameters"), "flops_per_token": first.get("flops_per_token"),
                "flops_formula": first.get("flops_formula"), "device_name": first.get("device_name"),
                "steps_timed": len(run.step_times_s), **extra}

    def measure(self, name: str, run: RunFigures, value: float, unit: str, *, expected: float | None = None,
                expected_source: str | None = None, samples: list[float] | None = None,
                not_measurable: Said | None = None, **method: Any) -> None:
        """`not_measurable`: why the computed figure cannot be right; the value is then unknown (NaN, so `compare`
        and `fleet` never take it for a figure) and the method keeps the reason and what was computed."""
        versions = {str(k): str(v) for k, v in (run.first.get("versions") or {}).items()}
        if not_measurable is not None:
            method.update(not_measurable=not_measurable.english(), not_measurable_text=said_json(not_measurable),
                          computed_value=round(float(value), 6))
            value, samples = math.nan, []
        self.measurements.append(Measurement(
            name=name, subject=self.subject(), value=round(float(value), 6), unit=unit,
            expected=round(expected, 6) if expected is not None else None, expected_source=expected_source,
            method=self.method(run, **method),
            samples=[round(float(s), 6) for s in (samples if samples is not None else [value])],
            versions=versions))

    def measured_matmul(self) -> tuple[float | None, str | None]:
        """The bf16 matmul TFLOP/s MFU is also held against: validate's (--validate-report), else the one the 1-GPU
        run measured after its steps."""
        if self.validate_tflops:
            return self.validate_tflops, "validate's bf16 matmul TFLOP/s"
        for run in self.figures:
            matmul = run.first.get("matmul_bf16") if run.ok and run.world_size == 1 else None
            if isinstance(matmul, dict) and isinstance(matmul.get("tflops"), (int, float)) and matmul["tflops"] > 0:
                return float(matmul["tflops"]), ("bf16 matmul TFLOP/s measured on the 1-GPU run's GPU after its "
                                                 "steps (8192³ torch.mm, CUDA events)")
        return None, None

    def peak_tflops(self, run: RunFigures) -> float | None:
        if self.machine is None:
            return None
        return (self.machine.peak_tflops or {}).get(precision_key(run.first.get("precision")))

    # -- the judge ----------------------------------------------------------------------------
    def run_figures(self) -> list[RunFigures]:
        """Each run reduced (slowest rank's median step, tokens/s, memory): what `judge()` judges."""
        return [self._reduce(run) for run in self.runs]

    def judge(self) -> None:
        self.figures = self.run_figures()
        if self.checked_sharing and not self.on_cpu:
            self.findings.extend(sharing_findings("bench", self.host, self.users, self.exclusive))
        for run in self.figures:
            self._run(run)
        self._scaling()
        self._decision()
        sharing = shared(self.users)
        if sharing:
            gpus = [said("bench.shared_gpu", index=index, holders=holders(entry))
                    for index, entry in sorted(sharing.items())]
            for finding in self.findings:
                if finding.check_id in ("bench.scaling_low", "bench.mfu_low") and finding.status != Status.PASS:
                    add_note(finding, "bench.blamed", gpus=gpus)

    def _reduce(self, run: dict[str, Any]) -> RunFigures:
        results = run.get("results") or {}
        world_size = int(run.get("world_size") or len(results) or 1)
        figures = RunFigures(strategy=str(run.get("strategy") or "unknown"), world_size=world_size, ok=False,
                             telemetry=run.get("telemetry", self.telemetry.get((run.get("strategy"), world_size))))
        figures.device_type = next((str(r["device_type"]) for r in results.values()
                                    if isinstance(r, dict) and r.get("device_type")), "cuda")
        skipped = next((said_from(r.get("skipped_text")) or str(r["skipped"]) for r in results.values()
                        if r and r.get("skipped")), None)
        if skipped is not None:  # every rank skips alike, before any collective
            figures.skipped = skipped
            figures.too_big = any(isinstance(r, dict) and r.get("states_bytes") for r in results.values())
            return figures
        good: list[tuple[int, dict[str, Any]]] = []
        for rank in sorted(results, key=_rank_key):
            result = results[rank] or {}
            if "error" in result:
                figures.errors.append((_rank_key(rank), said_from(result.get("error_text")) or str(result["error"])))
            elif result.get("partial"):  # published before the rank stopped: its figures are not the run's
                figures.errors.append((_rank_key(rank), said("bench.rank.partial", timed=len(
                    result.get("step_times_s") or []), steps=result.get("steps", "?"))))
            elif not result.get("step_times_s"):
                figures.errors.append((_rank_key(rank), said("bench.rank.no_steps")))
            else:
                good.append((_rank_key(rank), result))
        # the watchdog's failures, first to fail first: the rank that ended is named before those it took along
        reported = {_rank_key(rank) for rank in results}
        watched: list[tuple[int, str | Said]] = [
            (int(f["rank"]), said_from(f.get("detail_text"))
             or (str(detail) if (detail := f.get("detail") or f.get("kind")) else said("bench.rank.failed")))
            for f in run.get("failures") or [] if int(f["rank"]) not in reported]
        figures.errors[:0] = watched
        missing = sorted(set(range(world_size)) - reported - {rank for rank, _ in watched})
        for rank in missing:
            figures.errors.append((rank, said("bench.rank.no_result")))
        if good:
            figures.first = good[0][1]
        if figures.errors or not good:
            return figures
        slowest = max(good, key=lambda item: _median(item[1]["step_times_s"]))[1]
        figures.rank_step_times_s = {rank: [float(t) for t in result["step_times_s"]] for rank, result in good}
        figures.rank_gpus = {rank: {"cuda_index": result.get("device_index"), "bus_id": result.get("gpu_bus_id")}
                             for rank, result in good}
        figures.rank_hosts = {rank: str(result["host"]) for rank, result in good if result.get("host")}
        figures.step_times_s = [float(t) for t in slowest["step_times_s"]]
        figures.step_median_s = _median(figures.step_times_s)
        tokens = float(figures.first.get("tokens_per_step") or 0)
        if figures.step_median_s <= 0 or tokens <= 0:
            figures.errors.append((good[0][0], said("bench.rank.unusable", tokens=tokens,
                                                    step_s=figures.step_median_s)))
            return figures
        figures.ok = True
        figures.tokens_per_s = tokens / figures.step_median_s
        figures.tokens_per_gpu_step = tokens / world_size
        values = lambda key: [r[key] for _, r in good if isinstance(r.get(key), (int, float))]
        figures.allocated_bytes = max(values("peak_allocated_bytes"), default=None)
        figures.reserved_bytes = max(values("peak_reserved_bytes"), default=None)
        figures.rss_bytes = max(values("peak_rss_bytes"), default=None)
        return figures

    def _run(self, run: RunFigures) -> None:
        self._xids(run)
        if run.skipped is not None:
            self.add("bench.run_failed", Status.SKIP, said("bench.run.skipped", run=run.label, why=run.skipped))
            return
        if not run.ok:
            self._failed(run)
            return
        steps = run.step_times_s
        p10, p90 = _percentile(steps, 0.10), _percentile(steps, 0.90)
        tokens = float(run.first["tokens_per_step"])
        self.measure(f"{run.strategy}_tokens_per_s", run, run.tokens_per_s, "tokens_per_s",
                     samples=[tokens / t for t in steps if t > 0], step_time="the slowest rank's median")
        self.measure(f"{run.strategy}_tokens_per_s_per_gpu", run, run.tokens_per_s / run.world_size,
                     "tokens_per_s")
        self.measure("step_time_s", run, run.step_median_s, "seconds", samples=steps,
                     statistic="median of the slowest rank", p10_s=round(p10, 6), p90_s=round(p90, 6))
        if run.allocated_bytes is not None:
            self.measure("peak_memory_allocated_bytes", run, run.allocated_bytes, "bytes",
                         expected=self.gpu_memory_bytes, expected_source="GPU memory" if self.gpu_memory_bytes else None,
                         statistic="max over ranks")
        if run.reserved_bytes is not None:
            self.measure("peak_memory_reserved_bytes", run, run.reserved_bytes, "bytes",
                         expected=self.gpu_memory_bytes, expected_source="GPU memory" if self.gpu_memory_bytes else None,
                         statistic="max over ranks")
        if run.rss_bytes is not None:
            self.measure("peak_memory_rss_bytes", run, run.rss_bytes, "bytes", statistic="max over ranks")
        self._ranks(run)
        self._mfu(run)
        self._memory(run)
        self._throttle(run)

    def _failed(self, run: RunFigures) -> None:
        if not run.errors:
            run.errors.append((0, said("bench.rank.none_returned")))
        rank, error = run.errors[0]
        msg_id = "bench.run.oom" if run.oom else "bench.run.failed"
        self.add("bench.run_failed", Status.WARN if run.oom else Status.FAIL,
                 said(msg_id + (".more" if len(run.errors) > 1 else ""), run=run.label, rank=rank, error=error,
                      more=len(run.errors) - 1), rank=rank,
                 observed=[{"rank": r, "error": _english(e)} for r, e in run.errors], expected="no error")

    def _ranks(self, run: RunFigures) -> None:
        """Each rank's mean step time, and the straggler rule (checks/job_logs.py, the one `diagnose` applies to
        training logs) over them: a rank both one standard deviation and 10 % slower than the mean is named."""
        times = {rank: steps for rank, steps in run.rank_step_times_s.items() if steps}
        if len(times) < 2:
            return
        for rank, steps in sorted(times.items()):
            self.measurements.append(Measurement(
                name="rank_step_time_s", subject=self.subject(rank, run.rank_hosts.get(rank)),
                value=round(statistics.fmean(steps), 6),
                unit="seconds", method=self.method(run, statistic="mean of this rank's timed steps", rank=rank),
                samples=[round(s, 6) for s in steps],
                versions={str(k): str(v) for k, v in (run.first.get("versions") or {}).items()}))
        spread = straggler_ranks({rank: statistics.fmean(steps) for rank, steps in times.items()})
        for row in spread.stragglers:
            gpu, host = run.rank_gpus.get(row.rank) or {}, run.rank_hosts.get(row.rank) or self.host
            self.add("bench.straggler", Status.WARN, said(
                "bench.straggler.named", run=run.label, rank=row.rank, host=host, mean=round(row.mean, 6),
                gpu=said("bench.straggler.gpu", index=gpu["cuda_index"]) if gpu.get("cuda_index") is not None
                else said("bench.straggler.cpu"),
                percent=round(100 * row.above, 1), ranks=len(times), overall=round(spread.mean, 6),
                std=round(spread.std, 6)), rank=row.rank, host=host, refs=STRAGGLER_REFS,
                observed={"rank": row.rank, "mean_s": round(row.mean, 6), "above_mean": round(row.above, 4),
                          "ranks_mean_s": round(spread.mean, 6), "std_s": round(spread.std, 6), "gpu": gpu or None},
                expected="within one standard deviation or 10 % of the mean of all ranks")

    def _mfu(self, run: RunFigures) -> None:
        flops_per_token = run.first.get("flops_per_token")
        peak = self.peak_tflops(run)
        if not isinstance(flops_per_token, (int, float)) or flops_per_token <= 0:
            return
        achieved_tflops = flops_per_token * run.tokens_per_s / 1e12
        if peak:
            run.mfu = achieved_tflops / (run.world_size * peak)
            dtype = precision_key(run.first.get("precision"))
            self.measure("mfu", run, run.mfu, "fraction", expected=MFU_WARN_BELOW, expected_source=MFU_SOURCE,
                         peak_tflops_per_gpu=peak, peak_source=f"{self.machine.gpu_name} {dtype} dense datasheet")
        measured, source = self.measured_matmul()
        if measured:
            self.measure("mfu_vs_measured_matmul", run, achieved_tflops / (run.world_size * measured), "fraction",
                         peak_tflops_per_gpu=round(measured, 1), peak_source=source)
        if self.on_cpu:
            self.add("bench.mfu_low", Status.SKIP, said("bench.mfu.cpu", run=run.label))
            return
        dtype = precision_key(run.first.get("precision"))
        if run.mfu is None:
            self.add("bench.mfu_low", Status.SKIP, said("bench.mfu.no_peak", run=run.label, dtype=dtype))
        elif dtype not in MFU_JUDGED_PRECISIONS:
            self.add("bench.mfu_low", Status.SKIP, said("bench.mfu.not_judged", run=run.label, mfu=run.mfu, dtype=dtype),
                     observed=round(run.mfu, 4))
        else:
            status = Status.WARN if run.mfu < MFU_WARN_BELOW else Status.PASS
            per_gpu = achieved_tflops / run.world_size
            versus = said("bench.mfu.versus_validate" if self.validate_tflops else "bench.mfu.versus_matmul",
                          share=per_gpu / measured, measured=measured) if measured else ""
            self.add("bench.mfu_low", status,
                     said("bench.mfu.low" if status == Status.WARN else "bench.mfu", run=run.label, mfu=run.mfu,
                          peak=peak, dtype=dtype, achieved=per_gpu, versus=versus, threshold=MFU_WARN_BELOW),
                     observed=round(run.mfu, 4), expected=f">= {MFU_WARN_BELOW}", refs=[MFU_SOURCE])

    def _memory(self, run: RunFigures) -> None:
        if self.on_cpu or run.reserved_bytes is None:
            return
        if not self.gpu_memory_bytes:
            self.add("bench.memory_headroom", Status.SKIP, said("bench.memory.unknown", run=run.label))
            return
        share = run.reserved_bytes / self.gpu_memory_bytes
        self.headroom[(run.strategy, run.world_size)] = share
        values = dict(run=run.label, reserved_gib=run.reserved_bytes / 2**30, total_gib=self.gpu_memory_bytes / 2**30,
                      share=share)
        common = dict(observed=round(share, 4), expected=f"<= {MEMORY_WARN_ABOVE}", refs=[MEMORY_SOURCE])
        if share > MEMORY_WARN_ABOVE:
            self.add("bench.memory_headroom", Status.WARN, said("bench.memory.tight", **values), **common)
        elif share < MEMORY_ROOM_BELOW and run.first.get("micro_batch"):
            self.add("bench.memory_headroom", Status.PASS,
                     said("bench.memory.room", micro_batch=self.micro_batch_room(run), **values), **common)
        else:
            self.add("bench.memory_headroom", Status.PASS, said("bench.memory", **values), **common)

    def micro_batch_room(self, run: RunFigures) -> int:
        """Micro-batch that fills ~90 % of the GPU if the whole footprint grew with it (conservative: the model
        states do not grow, so the true limit is higher)."""
        micro = int(run.first.get("micro_batch") or 1)
        return max(micro, int(micro * MEMORY_TARGET * self.gpu_memory_bytes / run.reserved_bytes))

    def _xids(self, run: RunFigures) -> None:
        """Xids NVML reported during the run's measured window, judged as everywhere (checks/kernel_judge.py)."""
        events = [tuple(event) for event in (run.telemetry or {}).get("xids") or [] if tuple(event) not in self.xids_seen]
        self.xids_seen.update(events)  # a failed run's summary holds every Xid so far: each is said once
        self.findings += nvml_xid_findings("bench.xid", events, lambda index: self.subject(None),
                                           said("bench.xid.during", run=run.label))

    def _throttle(self, run: RunFigures) -> None:
        summary = run.telemetry
        if self.on_cpu or not summary or summary.get("throttle_share") is None:
            return
        share = float(summary["throttle_share"])
        reasons = ", ".join(summary.get("reasons") or []) or said("bench.throttle.no_reasons")
        extra = [said(msg_id, value=summary[key]) for key, msg_id in (
            ("power_w_median", "bench.throttle.power"), ("temp_c_max", "bench.throttle.temperature"),
            ("sm_clock_mhz_median", "bench.throttle.clock")) if summary.get(key) is not None]
        values = dict(run=run.label, share=share, reasons=reasons, extra=extra)
        if share > THROTTLE_WARN_SHARE:
            self.add("bench.throttled", Status.WARN, said("bench.throttle.high" + (".figures" if extra else ""), **values),
                     observed={"throttle_share": round(share, 4), "reasons": summary.get("reasons") or []},
                     expected=f"<= {THROTTLE_WARN_SHARE}", refs=[THROTTLE_SOURCE])
        else:
            self.add("bench.throttled", Status.PASS, said("bench.throttle" + (".figures" if extra else ""), **values),
                     observed={"throttle_share": round(share, 4)}, expected=f"<= {THROTTLE_WARN_SHARE}",
                     refs=[THROTTLE_SOURCE])

    # -- scaling ------------------------------------------------------------------------------
    def _scaling(self) -> None:
        single = next((run for run in self.figures if run.world_size == 1 and run.ok), None)
        for run in self.figures:
            if run.world_size < 2 or not run.ok:
                continue
            if single is None:
                self.add("bench.scaling_low", Status.SKIP, said("bench.scaling.no_baseline", run=run.label))
                continue
            efficiency = run.tokens_per_s / (run.world_size * single.tokens_per_s)
            # the N-GPU step against the 1-GPU step doing the same work per GPU
            same_work_s = single.step_median_s * (run.tokens_per_gpu_step / single.tokens_per_gpu_step)
            exposed = run.step_median_s - same_work_s
            exposed_share = max(0.0, exposed) / run.step_median_s
            noise = NOISE_SIGMAS * math.hypot(median_noise(single.step_times_s), median_noise(run.step_times_s))
            key = topology_of(self.machine, run.world_size, self.host_path, self.topology)
            expected, topology_text = SCALING_EXPECTED[key]
            if self.host_path and key == "pcie_host":
                topology_text = said("bench.topology.why", topology=topology_text, why=self.host_path)
            common = dict(baseline_tokens_per_s=round(single.tokens_per_s, 3), topology=key,
                          noise=round(noise, 4) if math.isfinite(noise) else None)
            above = said("bench.not_measurable.above_one", efficiency=efficiency, noise=noise) \
                if efficiency > 1 + noise else None
            shorter = said("bench.not_measurable.shorter", run=run.label, single=single.label, ms=-exposed * 1e3) \
                if exposed < 0 else None
            exposed_text = said("bench.exposed.not_measurable", why=shorter) if shorter else \
                said("bench.exposed", exposed_ms=exposed * 1e3, exposed_share=exposed_share)
            self.scaling[(run.strategy, run.world_size)] = {
                "efficiency": efficiency, "exposed_s": exposed, "exposed_share": exposed_share, "topology": key,
                "topology_text": topology_text, "expected": expected, "run": run, "above": above,
                "shorter": shorter}
            self.measure("scaling_efficiency", run, efficiency, "fraction",
                         expected=None if self.on_cpu else expected,
                         expected_source=None if self.on_cpu else SCALING_SOURCE, not_measurable=above,
                         formula="tokens_per_s(N) / (N × tokens_per_s(1))", **common)
            self.measure("exposed_communication_s", run, exposed, "seconds", not_measurable=shorter,
                         formula="median step(N) − median step(1) × tokens per GPU(N) / tokens per GPU(1)",
                         single_step_s=round(single.step_median_s, 6), **common)
            self.measure("exposed_communication_share", run, exposed_share, "fraction", not_measurable=shorter,
                         formula="exposed_communication_s / median step(N)", **common)
            numbers = said("bench.scaling.numbers.not_measurable", run=run.label, tokens_per_s=run.tokens_per_s,
                           single_tokens_per_s=single.tokens_per_s, single=single.label, why=above) if above else \
                said("bench.scaling.numbers" + (".cpu_rank" if single.device_type == "cpu" else ""), run=run.label,
                     tokens_per_s=run.tokens_per_s, single_tokens_per_s=single.tokens_per_s, efficiency=efficiency)
            if self.on_cpu:
                self.add("bench.scaling_low", Status.SKIP, said("bench.scaling.cpu", numbers=numbers),
                         observed=round(efficiency, 4))
                continue
            observed = round(efficiency, 4)
            status = (Status.PASS if observed >= expected else
                      Status.WARN if observed >= round(expected - SCALING_FAIL_MARGIN, 4) else Status.FAIL)
            self.add("bench.scaling_low", status,
                     said("bench.scaling" if status == Status.PASS else "bench.scaling.low", numbers=numbers,
                          expected=expected, topology=topology_text, exposed=exposed_text),
                     observed=observed, expected=f">= {expected:.2f}", refs=[SCALING_SOURCE])

    # -- decision -----------------------------------------------------------------------------
    def _decision(self) -> None:
        status, text = self._decide()
        observed = {f"{run.strategy}@{run.world_size}": round(run.tokens_per_s, 1) for run in self.figures if run.ok}
        self.add("bench.decision", status, text, observed=observed or None,
                 refs=[SCALING_SOURCE, MFU_SOURCE, MEMORY_SOURCE])

    def _decide(self) -> tuple[Status, Said]:
        good = [run for run in self.figures if run.ok]
        if self.on_cpu:
            figures = [said("bench.run.tokens", run=run.label, tokens_per_s=run.tokens_per_s) for run in good] \
                or said("bench.decision.none_finished")
            return Status.PASS, said("bench.decision.cpu", figures=figures)
        memory_tight = [run for run in self.figures
                        if (run.oom or run.too_big
                            or self.headroom.get((run.strategy, run.world_size), 0.0) > MEMORY_WARN_ABOVE)
                        and run.strategy in ("single", "ddp")]
        if memory_tight:
            run = memory_tight[0]
            why = (said("bench.why.oom") if run.oom else said("bench.why.too_big") if run.too_big else
                   said("bench.why.reserved", share=self.headroom[(run.strategy, run.world_size)]))
            if max(r.world_size for r in self.figures) == 1:  # one GPU here: nothing to shard across
                return Status.WARN, said("bench.decision.shrink", run=run.label, why=why)
            sharded_too_big = [r for r in self.figures if r.strategy.startswith("fsdp") and r.too_big]
            if sharded_too_big:
                return Status.WARN, said("bench.decision.add_gpus_or_shard", run=run.label, why=why,
                                         sharded=sharded_too_big[0].label)
            sharded = [r for r in good if r.strategy.startswith("fsdp")]
            if sharded:
                return Status.WARN, said("bench.decision.shard.measured", run=run.label, why=why,
                                         sharded=sharded[0].label, tokens_per_s=sharded[0].tokens_per_s)
            return Status.WARN, said("bench.decision.shard", run=run.label, why=why)
        if self.dataloader_ok is False:
            return Status.WARN, said("bench.decision.data.best", best=self._best_text()) if good else \
                said("bench.decision.data")
        if not good:
            return Status.WARN, said("bench.decision.nothing_finished")
        best = self._best_scaled()
        if best is None:
            single = next((run for run in good if run.world_size == 1), None)
            what = said("bench.run.tokens", run=single.label, tokens_per_s=single.tokens_per_s) if single \
                else self._best_text()
            if single is not None and self.machine is not None and self.machine.gpus == 1:
                # one GPU: nothing is wrong and nothing more can be measured here; the fix says where to go next
                mfu = said("bench.decision.mfu", mfu=single.mfu) if single.mfu is not None \
                    else said("bench.decision.mfu_unknown")
                return Status.PASS, said("bench.decision.one_gpu", what=what, mfu=mfu)
            return Status.WARN, said("bench.decision.one_side", what=what)
        scaled = self.scaling[(best.strategy, best.world_size)]
        efficiency, expected = scaled["efficiency"], scaled["expected"]
        mfu = best.mfu if best.mfu is not None else next((r.mfu for r in good if r.world_size == 1), None)
        mfu_text = said("bench.decision.mfu", mfu=mfu) if mfu is not None else said("bench.decision.mfu_unknown")
        numbers = said("bench.decision.numbers.not_measurable", run=best.label, tokens_per_s=best.tokens_per_s,
                       why=scaled["above"], expected=expected, topology=scaled["topology_text"]) if scaled["above"] \
            else said("bench.decision.numbers", run=best.label, tokens_per_s=best.tokens_per_s, efficiency=efficiency,
                      expected=expected, topology=scaled["topology_text"])
        if round(efficiency, 4) < expected:
            exposed = said("bench.exposed.not_measurable", why=scaled["shorter"]) if scaled["shorter"] else \
                said("bench.exposed.each_step", exposed_ms=scaled["exposed_s"] * 1e3,
                     exposed_share=scaled["exposed_share"])
            return Status.WARN, said("bench.decision.communication", numbers=numbers, exposed=exposed,
                                     topology=scaled["topology_text"])
        if mfu is None:
            return Status.PASS, said("bench.decision.good_mfu_unknown", numbers=numbers, mfu=mfu_text)
        if mfu < MFU_WARN_BELOW:
            share = self.headroom.get((best.strategy, best.world_size))
            values = dict(numbers=numbers, mfu=mfu_text, threshold=MFU_WARN_BELOW)
            if share is not None and share < MEMORY_ROOM_BELOW and best.first.get("micro_batch"):
                return Status.WARN, said("bench.decision.single_step.room", micro_batch=self.micro_batch_room(best),
                                         **values)
            return Status.WARN, said("bench.decision.single_step", **values)
        return Status.PASS, said("bench.decision.add_gpus", numbers=numbers, mfu=mfu_text)

    def _best_scaled(self) -> RunFigures | None:
        """The multi-GPU run the decision rests on: the most GPUs, then the most tokens/s."""
        scaled = [entry["run"] for entry in self.scaling.values()]
        return max(scaled, key=lambda run: (run.world_size, run.tokens_per_s), default=None)

    def _best_text(self) -> Said:
        best = max((run for run in self.figures if run.ok), key=lambda run: run.tokens_per_s)
        return said("bench.run.tokens", run=best.label, tokens_per_s=best.tokens_per_s)


def judge_bench(host: str, runs: list[dict[str, Any]], **context: Any) -> tuple[list[Measurement], list[Finding]]:
    """BenchJudge(host, runs, **context).judge(), returning (measurements, findings)."""
    judge = BenchJudge(host, runs, **context)
    judge.judge()
    return judge.measurements, judge.findings
