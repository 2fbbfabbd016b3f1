"""`gpuready bench`: does adding GPUs make a real training step faster here?

Runs the training workload (workloads/train.py) through the same runner and watchdog as validate: on 1 GPU, then on
N GPUs with DDP and with FSDP2, the same per-GPU micro-batch each time (weak scaling), with the NVML sampler beside
it; the judge (judge.py) turns the rank results into tokens/s, MFU, scaling efficiency, memory and a decision.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready import __version__
from gpuready.devices import auto_device, check_cpu_ranks, local_facts, selected_indices
from gpuready.estimate.expect import host_path_pairs
from gpuready.estimate.machine import machine_from_facts
from gpuready.estimate.measured import measured_figures
from gpuready.estimate.memory import Strategy, TrainSetup, memory_per_gpu
from gpuready.facts.clock_reasons import reasons_from_mask
from gpuready.i18n import said_json, sentence, text_of
from gpuready.knowledge import clock_reasons
from gpuready.measuring import MeasuringRun, Measured, Selection, mark_stopped
from gpuready.model import CPU_RUN, Report
from gpuready.node import node_name
from gpuready.pipeline import summarize_facts
from gpuready.report.progress_line import BenchProgress, ProgressLine, bench_plan
from gpuready.shapes import PRESETS, ModelShape, ShapeError, shape_from_hf_config, with_sequence
from gpuready.verbs.bench.data import dataloader_throughput, storage_throughput
from gpuready.verbs.bench.judge import BenchJudge, judge_bench

STRATEGIES = ("ddp", "fsdp2")


class BenchError(ValueError):
    """Options that describe no model, or more ranks than GPUs (a usage error)."""


@dataclass(kw_only=True)
class BenchOptions:
    preset: str = "gpt2-small"
    model_config: Path | None = None
    shape: dict[str, Any] = field(default_factory=dict)
    """Explicit --layers/--hidden/--heads/--vocab/--kv-heads/--ffn-hidden (overrides the preset)."""
    seq: int | None = None
    micro_batch: int = 4
    global_batch: int | None = None
    precision: str = "amp-bf16"
    recompute: str = "none"
    logits: str = "fp32"
    """The loss's logits: fp32 (upcast, Hugging Face) or bf16 (kept 16-bit, nanoGPT); plan's --logits."""
    compile: bool = False
    steps: int = 20
    warmup_steps: int = 5
    device: str = "auto"
    ranks: int | None = None
    strategies: tuple[str, ...] = STRATEGIES
    timeout_s: float = 300.0
    startup_timeout_s: float = 300.0
    """Process-group creation (NCCL's set-up included), and the rendezvous of a --nnodes run."""
    log_dir: Path | None = None
    oversubscribe: bool = False
    exclusive: bool = False
    """Another compute process on a selected GPU: refused before anything starts (a fail finding)."""
    validate_report: Path | None = None
    data: bool = False
    """Also measure the data path: DataLoader throughput by worker count against what the GPUs consume."""
    data_path: Path | None = None
    """Also measure reading this folder against what training needs (pre-tokenised uint16 tokens)."""
    progress: bool = False
    """Show the runs' progress on stderr (report/progress_line.py): a live line on a terminal, else a line a phase."""
    lang: str | None = None
    """The progress line's language (`--lang`); None: from the environment."""


def bench_shape(options: BenchOptions) -> ModelShape:
    try:
        if options.model_config is not None:
            shape = shape_from_hf_config(options.model_config, "--model-config")
        elif options.shape:
            shape = ModelShape(name="given shape", **options.shape)
        elif options.preset in PRESETS:
            shape = PRESETS[options.preset]
        else:
            raise BenchError(sentence("error.preset.unknown", preset=repr(options.preset), presets=", ".join(PRESETS)))
    except (ShapeError, TypeError) as error:
        raise BenchError(text_of(error)) from None
    return with_sequence(shape, options.seq or default_seq(shape))


def default_seq(shape: ModelShape) -> int:
    return 32 if shape.name == "tiny" else min(2048, shape.max_positions)


def train_settings(options: BenchOptions, shape: ModelShape, strategy: str, world_size: int) -> dict[str, Any]:
    accumulation = 1
    if options.global_batch:  # strong scaling: the same global batch on every GPU count, by accumulation
        accumulation = max(1, options.global_batch // (options.micro_batch * world_size))
    return {"shape": dataclasses.asdict(shape),
            "strategy": strategy, "precision": options.precision, "recompute": options.recompute,
            "logits": options.logits,
            "attention": "flash", "seq": options.seq or default_seq(shape), "micro_batch": options.micro_batch,
            "accumulation": accumulation, "warmup_steps": options.warmup_steps, "steps": options.steps,
            "compile": options.compile}


def run_bench(options: BenchOptions) -> Report:
    """1 GPU (or rank), then every selected GPU with each strategy; the report the judge makes of it."""
    return BenchRun(options).measure()


@dataclass(kw_only=True)
class BenchRuns:
    """What bench's runs left for the judge."""

    runs: list[dict[str, Any]]
    """Each run as the judge reads it (run_entry)."""
    interrupted_by: str | None
    """The signal that stopped the runs (None: they all ran)."""
    wall_s: float
    log_dir: Path


class BenchRun(MeasuringRun):
    """bench's measuring run (measuring.py): one run per strategy, the sampler beside them all, judge_bench."""

    verb = "bench"

    def __init__(self, options: BenchOptions):
        super().__init__(exclusive=options.exclusive)
        self.options = options
        self.shape = bench_shape(options)  # a model that cannot be built is a usage error before anything starts
        self.node = NodeView()

    def select(self) -> Selection:
        device = auto_device(self.options.device, "bench")
        if device == "cuda":
            import torch  # CUDA's own count of the GPUs it shows (torch: seconds, only on GPU runs)
            available = torch.cuda.device_count()
            ranks = self.options.ranks or available
            if ranks > available:
                raise BenchError(sentence("error.ranks.visible", ranks=ranks, count=available))
        else:
            ranks = self.options.ranks or 2
            check_cpu_ranks(ranks, self.options.oversubscribe)
        return Selection(device=device, ranks=ranks)

    def plan(self, selection: Selection) -> list[tuple[str, int]]:
        """The runs: (strategy, ranks), the 1-GPU run first."""
        ranks = selection.ranks
        return [("single", 1)] + ([(strategy, ranks) for strategy in self.options.strategies] if ranks > 1 else [])

    def prepare(self, selection: Selection) -> None:
        self.node = node_view(selection.device, selection.ranks)
        selection.facts, selection.gpus = self.node.facts, self.node.gpus

    def refused_facts(self, selection: Selection) -> dict[str, Any]:
        return {"device": selection.device, "runs": []}

    def open_display(self, selection: Selection) -> Any:
        return bench_progress(self.options, self.shape, selection.device, self.plan(selection)) \
            if self.options.progress else None

    def run(self, selection: Selection) -> BenchRuns:
        options, device = self.options, selection.device
        log_dir = options.log_dir or Path(tempfile.mkdtemp(prefix="gpuready-bench-"))
        runs: list[dict[str, Any]] = []
        started, interrupted_by = time.monotonic(), None
        for strategy, world_size in self.plan(selection):
            too_big = states_do_not_fit(options, self.shape, strategy, world_size,
                                        memory_capacity_bytes(device, self.node.machine, world_size), device)
            if too_big is not None:  # certain to fail: said, not spawned (a model can take minutes to build)
                runs.append(run_entry(strategy, world_size, {0: too_big}))
                continue
            spec = {"device": device, "workloads": ["train"], "startup_timeout_s": options.startup_timeout_s,
                    "options": {"timeout_s": options.timeout_s,
                                "train": train_settings(options, self.shape, strategy, world_size)}}
            outcome = self.start_ranks(spec=spec, world_size=world_size, log_dir=log_dir / f"{strategy}-{world_size}",
                                       startup_timeout_s=options.startup_timeout_s,
                                       deadline_s=run_deadline_s(options, runs=1),
                                       on_progress=self.display and functools.partial(self.display, run=len(runs)))
            results = {rank: (result.get("workloads") or {}).get("train") or no_result()
                       for rank, result in outcome.results.items()}
            runs.append(run_entry(strategy, world_size, results, outcome.failures, self.sampler))
            if outcome.interrupted:
                interrupted_by = outcome.interrupted_by or "SIGINT"
                break
        return BenchRuns(runs=runs, interrupted_by=interrupted_by, wall_s=time.monotonic() - started, log_dir=log_dir)

    def judge(self, measured: Measured) -> Report:
        done = measured.outcome
        return bench_report(self.options, self.shape, measured.selection.device, done.runs, users=measured.users,
                            checked_sharing=measured.checked_sharing, interrupted_by=done.interrupted_by,
                            wall_s=done.wall_s, log_dir=done.log_dir, node=self.node)


def bench_progress(options: BenchOptions, shape: ModelShape, device: str, plan: list[tuple[str, int]]):
    """The live display of the runs in `plan` (strategy, ranks): stage, step k/n, tokens/s, time left."""

    def tokens_per_step(strategy: str, world_size: int) -> int:
        settings = train_settings(options, shape, strategy, world_size)
        return settings["micro_batch"] * settings["seq"] * settings["accumulation"] * world_size
    return ProgressLine("bench", bench_plan(shape.name, plan[-1][1], device, plan, options.warmup_steps,
                                            options.steps),
                        BenchProgress(plan, options.warmup_steps + options.steps, tokens_per_step), lang=options.lang)


ZERO_STAGE = {"single": 0, "ddp": 0, "fsdp2-noreshard": 2, "fsdp2": 3}
"""What each strategy shards of the model states, in plan's terms (plan/memory.py)."""


def states_do_not_fit(options: BenchOptions, shape: ModelShape, strategy: str, world_size: int,
                      capacity_bytes: int | None, device: str) -> dict[str, Any] | None:
    """A skipped rank result where the model states alone (weights, gradients, AdamW state per GPU, as plan counts
    them) exceed one device's memory: the run cannot succeed. None where they fit or the memory is unknown."""
    if not capacity_bytes:
        return None
    settings = train_settings(options, shape, strategy, world_size)
    setup = TrainSetup(shape=shape, seq=settings["seq"], micro_batch=settings["micro_batch"],
                       precision=options.precision, recompute=options.recompute)
    states = memory_per_gpu(setup, Strategy(name=strategy, dp=world_size, zero=ZERO_STAGE[strategy])).model_states
    if states <= capacity_bytes:
        return None
    why = sentence("workloads.bench.states_too_big." + ("gpu" if device == "cuda" else "rank"),
                   parameters=shape.parameters(), precision=options.precision, need_gib=states / 2**30,
                   have_gib=capacity_bytes / 2**30)
    return {"skipped": str(why), "skipped_text": said_json(why), "strategy": strategy, "world_size": world_size,
            "states_bytes": states, "capacity_bytes": capacity_bytes, "device_type": device}


def no_result() -> dict[str, Any]:
    """A rank's train result where it stored none."""
    error = sentence("workloads.bench.no_result")
    return {"error": str(error), "error_text": said_json(error)}


def memory_capacity_bytes(device: str, machine: Any, ranks: int) -> int | None:
    """One GPU's memory; on CPU ranks this host's memory shared by the run's `ranks`; None where unknown."""
    if device == "cuda":
        return getattr(machine, "memory_bytes_per_gpu", None) if machine is not None else None
    try:
        import psutil  # optional: without it the memory is unknown
        return psutil.virtual_memory().total // max(1, ranks)
    except Exception:
        return None


def run_entry(strategy: str, world_size: int, results: dict[int, dict[str, Any]], failures: list[Any] = (),
              sampler: Any = None) -> dict[str, Any]:
    """One run as the judge reads it (judge.py): its training results by rank, the watchdog's RankFailures (rank,
    kind, detail) and the telemetry over its measured window."""
    return {"strategy": strategy, "world_size": world_size, "results": results,
            "failures": [failure_entry(failure) for failure in failures],
            "telemetry": telemetry_summary(sampler, results)}


def failure_entry(failure: Any) -> dict[str, Any]:
    """A watchdog's RankFailure as a run's `failures` entry (judge.py reads rank, kind and detail, and the detail by
    catalogue id where the watchdog said it so)."""
    return {"rank": failure.rank, "kind": failure.kind, "detail": failure.detail,
            **({"detail_text": said_json(failure.said)} if getattr(failure, "said", None) is not None else {})}


def run_deadline_s(options: BenchOptions, runs: int) -> float:
    """The whole of `runs` runs: start-up, then every step at its longest, plus building and the checksum."""
    return options.startup_timeout_s + runs * options.timeout_s * (options.steps + options.warmup_steps + 2)


def consumed_rates(runs: list[dict[str, Any]], host: str) -> tuple[float, float] | None:
    """(samples/s, tokens/s) of the fastest run, as the judge reduces it: what the data path must keep up with.
    None: no run finished."""
    done = [figures for figures in BenchJudge(host, runs).run_figures() if figures.ok]
    if not done:
        return None
    fastest = max(done, key=lambda figures: figures.tokens_per_s)
    return fastest.tokens_per_s / fastest.first["seq"], fastest.tokens_per_s


def _data_path(options: BenchOptions, runs: list[dict[str, Any]], host: str) -> tuple[list, list]:
    if not options.data and options.data_path is None:
        return [], []
    rates = consumed_rates(runs, host)
    measurements, findings = [], []
    if options.data:
        more, found = dataloader_throughput(needed_samples_per_s=rates[0] if rates else None, host=host)
        measurements += more
        findings += found
    if options.data_path is not None:
        # pre-tokenised data: 2 bytes (uint16) per token the GPUs consume
        more, found = storage_throughput(options.data_path, needed_bytes_per_s=2 * rates[1] if rates else None,
                                         host=host)
        measurements += more
        findings += found
    return measurements, findings


def telemetry_summary(sampler: Any, results: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """Power, temperature and clock-event reasons over the measured window of this run's training results (None
    without NVML)."""
    if sampler is None:
        return None
    windows = list(results.values())
    starts = [w["window_start"] for w in windows if w.get("window_start")]
    ends = [w["window_end"] for w in windows if w.get("window_end")]
    telemetry = sampler.telemetry
    if not starts or not ends:  # a run that measured nothing (a rank died): every Xid so far may be its cause
        return {"samples": 0, "xids": [[round(t, 1), index, code] for t, index, code in telemetry.xid_events],
                "xid_source": telemetry.xid_source}
    begin, end = min(starts), max(ends)
    xids = [[round(t, 1), index, code] for t, index, code in telemetry.xid_events
            if begin <= telemetry.started_at + t <= end]
    samples = [sample for series in telemetry.samples.values() for t, sample in series
               if begin <= telemetry.started_at + t <= end]
    if not samples:
        return {"samples": 0, "xids": xids, "xid_source": telemetry.xid_source}
    slowing = clock_reasons("thermal") | clock_reasons("hardware")
    slow = [sample for sample in samples if reasons_from_mask(int(sample.clock_event_reasons or 0)) & slowing]
    powers = sorted(s.power_w for s in samples if s.power_w is not None)
    temps = [s.temperature_c for s in samples if s.temperature_c is not None]
    clocks = sorted(s.sm_clock_mhz for s in samples if s.sm_clock_mhz is not None)
    reasons = sorted({reason for s in slow for reason in reasons_from_mask(int(s.clock_event_reasons or 0))})
    return {"samples": len(samples), "throttle_share": len(slow) / len(samples), "reasons": reasons,
            "power_w_median": powers[len(powers) // 2] if powers else None, "temp_c_max": max(temps) if temps else None,
            "sm_clock_mhz_median": clocks[len(clocks) // 2] if clocks else None, "xids": xids,
            "xid_source": telemetry.xid_source}


def bench_report(options: BenchOptions, shape: ModelShape, device: str, runs: list[dict[str, Any]], *,
                 users: dict[int, Any] | None, checked_sharing: bool, interrupted_by: str | None, wall_s: float,
                 log_dir: Path | None, node: NodeView | None = None, topology: str | None = None) -> Report:
    """`users`: NVML index → GpuUsers of this node's GPUs seen during the runs (None with checked_sharing: NVML could
    not say); `node`: this node's view, found here where not given."""
    host = node_name()
    node = node or node_view(device, 0)
    validate_tflops = None
    if options.validate_report is not None:
        validate_tflops = measured_figures(options.validate_report, "--validate-report").get("matmul_tflops_bf16")
    data_measurements, data_findings = _data_path(options, runs, host)
    dataloader = [f for f in data_findings if f.check_id == "bench.dataloader_bottleneck"]
    dataloader_ok = None if not dataloader or dataloader[0].status.value == "skip" else \
        dataloader[0].status.value == "pass"
    measurements, findings = judge_bench(host, runs, machine=node.machine, host_path=node.host_path,
                                         validate_tflops=validate_tflops,
                                         users=users, checked_sharing=checked_sharing, dataloader_ok=dataloader_ok,
                                         exclusive=options.exclusive,
                                         topology=topology)
    measurements += data_measurements
    findings[-1:-1] = data_findings  # bench.decision stays last
    report = Report(tool_version=__version__, host=host, findings=findings, measurements=measurements,
                    facts=summarize_facts(node.facts) if node.facts is not None else {})
    report.facts["bench"] = {"model": {"name": shape.name, "family": shape.family, "parameters": shape.parameters()},
                             "device": device, "runs": [{"strategy": r["strategy"], "world_size": r["world_size"],
                                                         "failures": r["failures"], "telemetry": r["telemetry"]}
                                                        for r in runs],
                             "wall_s": round(wall_s, 1), "log_dir": str(log_dir)}
    if interrupted_by:
        mark_stopped(report, "bench", host, interrupted_by, wall_s)
    report.hung = any(f["kind"] in ("hang", "exit", "start") for r in runs for f in r["failures"])
    report.no_verdict_reason = CPU_RUN if device == "cpu" else None  # CPU ranks test the code path, not a machine
    return report


@dataclass
class NodeView:
    """This node as the judge needs it."""
    machine: Any = None
    """plan's Machine (GPU model, memory, NVLink domain); None on CPUs or where the facts cannot be read."""
    gpus: list[int] = field(default_factory=list)
    """NVML indices of the GPUs the ranks use (CUDA_VISIBLE_DEVICES honoured: NVML's GPU 0 may be someone else's)."""
    host_path: str | None = None
    """Why some pair of those GPUs has no peer-to-peer path (validate.expect.host_path_pairs), or None."""
    facts: Any = None
    """This node's Facts (NVML), whose summary the report carries: `fleet` groups nodes by GPU model and driver."""


def node_view(device: str, ranks: int) -> NodeView:
    """This node for `ranks` ranks: its Machine, the GPUs they use and whether every pair has P2P."""
    if device != "cuda":
        return NodeView()
    try:
        facts = local_facts("cuda")
        gpus = selected_indices(None, facts, ranks)
        gpus = list(range(ranks)) if gpus is None else gpus
        by_index = {gpu.index: gpu for gpu in facts.gpus or []}
        return NodeView(machine=machine_from_facts(facts), gpus=gpus,
                        host_path=host_path_pairs(facts, [by_index.get(index) for index in gpus]), facts=facts)
    except Exception:
        return NodeView(gpus=list(range(ranks)))
