"""`gpuready burn`: every selected GPU at full load at once, one process per GPU, with telemetry.

The workers share nothing (no process group), so a lost GPU stops only its own worker; the
sampler runs here, in the parent, apart from them.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready import __version__
from gpuready.devices import auto_device, check_cpu_ranks, gpus_by_identity, local_facts, visible_devices
from gpuready.facts.clock_reasons import reasons_from_mask
from gpuready.facts.ib_counters_live import IB_ROOT, CounterWatch
from gpuready.facts.nvml_records import GpuIdentity, GpuSample
from gpuready.i18n import DEFAULT_LANGUAGE, choose_language, in_language, message, sentence
from gpuready.measuring import MeasuringRun, Measured, Selection, mark_stopped
from gpuready.model import CPU_RUN, Report
from gpuready.pipeline import summarize_facts
from gpuready.report.progress_line import ProgressLine, burn_plan, burn_progress
from gpuready.runner.local import RunOutcome
from gpuready.safe_text import printable
from gpuready.telemetry import Sampler
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge

DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp64")
STARTUP_TIMEOUT_S = 300.0
MEMORY_PHASE_S = 120.0
"""The memory pattern before the GEMM window (seconds on an H200); with start-up, the window and one --timeout it
makes the run's overall deadline."""
BURN_STARTUP_S = 15.0
"""The plan's start-up and memory pattern before the GEMM window (time left, until the window is seen to begin)."""


@dataclass(kw_only=True)
class BurnOptions:
    duration_s: float = 1800.0
    dtype: str | None = None
    """None: bf16 where every GPU has it (compute capability >= 8.0), else fp32."""
    gpus: list[str] = field(default_factory=list)
    device: str = "auto"
    ranks: int | None = None
    """CPU workers with --device cpu (default 1, at most one per usable CPU unless `oversubscribe`); on GPUs at
    most the selected GPUs, and then only the first `ranks` of them are burnt (default: all)."""
    oversubscribe: bool = False
    self_test: bool = False
    interval_s: float = 1.0
    timeout_s: float = 60.0
    """A worker silent for this long counts as lost."""
    log_dir: Path | None = None
    progress: bool = False
    """Show the run's progress on stderr (report/progress_line.py): a live line (and, with NVML, the telemetry table)
    on a terminal, else a line a phase."""
    exclusive: bool = False
    """Another compute process on a selected GPU is a fail before anything starts."""
    lang: str | None = None
    """The progress line's language (`--lang`); None: from the environment."""
    ib_root: Path = IB_ROOT
    """Where the RDMA ports' error counters are read at the start, every `interval_s` and at the end."""


def parse_duration(text: str) -> float:
    """`30m`, `90s`, `1h`, `1h30m` or plain seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([hms])", text)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != text.replace(" ", ""):
        raise ValueError(sentence("error.duration.format", text=repr(text)))
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


LIVE_COLUMNS = ("gpu", "status", "power", "temperature", "sm_clock", "reasons")
"""The live telemetry table's columns (`burn.live.column.<name>` in the catalogue)."""


def _live_table(identity: list[GpuIdentity], selected: list[int], sampler: Sampler, posts: dict,
                lang: str = DEFAULT_LANGUAGE):
    """Each burnt GPU's latest telemetry, above the progress line on a terminal, its words in `lang`."""
    from rich.table import Table  # rich's tables load only where a terminal shows them

    table = Table(expand=False)
    for column in LIVE_COLUMNS:
        table.add_column(message(f"burn.live.column.{column}", lang), no_wrap=True)
    for rank, index in enumerate(selected):
        post = posts.get(rank)
        series = sampler.telemetry.samples.get(index)
        sample = series[-1][1] if series else GpuSample()
        reasons = ", ".join(sorted(reasons_from_mask(int(sample.clock_event_reasons or 0)) - {"gpu_idle"}))
        table.add_row(printable(f"{index} {(identity[index].name or '') if index < len(identity) else ''}"),
                      printable(in_language(post.operation, lang)) if post else message("burn.live.starting", lang),
                      f"{sample.power_w:.0f} W" if sample.power_w is not None else "-",
                      f"{sample.temperature_c} °C" if sample.temperature_c is not None else "-",
                      f"{sample.sm_clock_mhz} MHz" if sample.sm_clock_mhz is not None else "-",
                      reasons or "-")
    return table


def run_burn(options: BurnOptions) -> Report:
    """Every selected GPU (or `ranks` CPU workers) at full load, with telemetry: burn's measuring run."""
    return BurnRun(options).measure()


class BurnRun(MeasuringRun):
    """burn's measuring run (measuring.py): independent workers, one per GPU, the sampler beside them, BurnJudge."""

    verb = "burn"

    def __init__(self, options: BurnOptions):
        super().__init__(exclusive=options.exclusive)
        self.options = options
        self.sample_interval_s = options.interval_s
        self.dtype = options.dtype or "fp32"
        self.log_dir: Path | None = None
        self.ib_watch: CounterWatch | None = None

    def select(self) -> Selection:
        device = auto_device(self.options.device, "burn")  # NoGpuError without a GPU unless --device cpu
        if device == "cpu" and self.options.ranks is not None:
            check_cpu_ranks(self.options.ranks, self.options.oversubscribe)  # before NVML, facts or any worker
        return Selection(device=device, ranks=self.options.ranks or 1)

    def prepare(self, selection: Selection) -> None:
        """On GPUs: every bundle file's facts, NVML's GPUs, and those --gpus (or CUDA_VISIBLE_DEVICES) selects."""
        if selection.device == "cuda":
            selection.facts = local_facts("cuda", files=None)
            selection.identity = self.nvml_session().identity
            if self.options.gpus:
                selection.env["CUDA_VISIBLE_DEVICES"] = visible_devices(self.options.gpus, selection.facts)
            selection.gpus = gpus_by_identity(selection.identity, selection.env.get("CUDA_VISIBLE_DEVICES"),
                                              self.options.ranks)
            selection.ranks = len(selection.gpus)
        self.dtype = self.options.dtype or _default_dtype(selection.facts, selection.gpus or [])

    def refused_facts(self, selection: Selection) -> dict[str, Any]:
        return {"device": selection.device, "ranks": 0}

    def open_display(self, selection: Selection) -> Any:
        if not self.options.progress:
            return None
        lang = choose_language(self.options.lang)
        sampler = self.sampler
        samples = (lambda: sum(len(series) for series in list(sampler.telemetry.samples.values()))) \
            if sampler else None
        return ProgressLine(
            "burn", burn_plan(selection.ranks, selection.device, self.dtype, self.options.duration_s),
            burn_progress(self.options.duration_s, BURN_STARTUP_S, samples), lang=lang,
            extra=(lambda posts: _live_table(selection.identity, selection.gpus, sampler, posts, lang))
            if sampler else None)

    def run(self, selection: Selection) -> RunOutcome:
        options = self.options
        self.log_dir = options.log_dir or Path(tempfile.mkdtemp(prefix="gpuready-burn-"))
        spec = {"device": selection.device, "workloads": ["burn"], "collectives": False,
                "startup_timeout_s": STARTUP_TIMEOUT_S,
                "options": {"timeout_s": options.timeout_s, "burn": {"duration_s": options.duration_s,
                                                                     "dtype": self.dtype,
                                                                     "self_test": options.self_test}}}
        with CounterWatch(options.ib_root, options.interval_s) as self.ib_watch:
            return self.start_ranks(spec=spec, log_dir=self.log_dir, startup_timeout_s=STARTUP_TIMEOUT_S,
                                    independent=True, deadline_s=STARTUP_TIMEOUT_S + MEMORY_PHASE_S
                                    + options.duration_s + options.timeout_s)

    def judge(self, measured: Measured) -> Report:
        selection, outcome, options = measured.selection, measured.outcome, self.options
        judge = BurnJudge(measured.host, burn_gpus(selection, outcome), measured.telemetry, outcome.failures,
                          options.self_test, users=measured.users, checked_sharing=measured.checked_sharing,
                          exclusive=options.exclusive, ib_window=self.ib_watch.window if self.ib_watch else None)
        judge.judge()
        report = Report(tool_version=__version__, host=measured.host, findings=judge.findings,
                        measurements=judge.measurements,
                        series=measured.telemetry.series(measured.host, selection.identity)
                        if measured.telemetry else [])
        report.hung = any(failure.kind in ("hang", "exit", "start") for failure in outcome.failures)
        report.no_verdict_reason = CPU_RUN if selection.device == "cpu" else None
        # The machine's GPUs and driver beside the run's settings: `fleet` groups nodes by GPU model, count and driver.
        report.facts = {**(summarize_facts(selection.facts) if selection.facts is not None else {}), "burn": {
            "dtype": self.dtype, "duration_s": options.duration_s, "device": selection.device,
            "ranks": selection.ranks, "log_dir": str(self.log_dir), "wall_s": round(outcome.wall_s, 1),
            "telemetry_interval_s": options.interval_s,
            "xid_source": measured.telemetry.xid_source if measured.telemetry else "none",
            "self_test": options.self_test, "rendezvous_store": outcome.store_address,
            "overridden_env": outcome.overridden_env, "deadline_s": outcome.deadline_s,
            **({"ib_counters": self.ib_watch.window.to_json()} if self.ib_watch else {}),
            **({"interrupted_by": outcome.interrupted_by or "SIGINT"} if outcome.interrupted else {})}}
        if outcome.interrupted:
            mark_stopped(report, "burn", measured.host, outcome.interrupted_by, outcome.wall_s)
        return report


def burn_gpus(selection: Selection, outcome: RunOutcome) -> list[BurnGpu]:
    """Each worker's result beside its GPU's identity and limits (the judge's view of one GPU)."""
    gpus = []
    for rank in range(selection.ranks):
        data = (outcome.results.get(rank, {}).get("workloads") or {}).get("burn")
        index = selection.gpus[rank] if selection.gpus and rank < len(selection.gpus) else None
        facts_gpu = next((gpu for gpu in (selection.facts.gpus or []) if index is not None and gpu.index == index),
                         None) if selection.facts else None
        identity = dataclasses.asdict(selection.identity[index]) if index is not None else {}
        gpus.append(BurnGpu(rank=rank, nvml_index=index, identity=identity,
                            result=data, slowdown_c=facts_gpu.slowdown_temperature_c if facts_gpu else None,
                            power_limit_w=facts_gpu.power_limit_w if facts_gpu else None,
                            power_default_limit_w=facts_gpu.power_default_limit_w if facts_gpu else None))
    return gpus


def _default_dtype(facts: Any, selected: list[int]) -> str:
    if facts is None:
        return "fp32"
    capabilities = [gpu.compute_capability for gpu in facts.gpus or [] if gpu.index in selected]
    if capabilities and all(cc and float(cc) >= 8.0 for cc in capabilities):
        return "bf16"
    return "fp32"

