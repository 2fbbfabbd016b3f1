"""`gpuready burn`: every selected GPU at full load at once, one process per GPU, with telemetry.

The workers share nothing (no process group), so a lost GPU stops only its own worker; the
sampler runs here, in the parent, apart from them.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready import __version__
from gpuready.i18n import DEFAULT_LANGUAGE, choose_language, in_language, message, sentence
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge
from gpuready.model import Report
from gpuready.safe_text import printable
from gpuready.telemetry import Sampler
from gpuready.measuring import stopped_finding

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


def _live_table(identity: list[dict[str, Any]], selected: list[int], sampler: Sampler, posts: dict,
                lang: str = DEFAULT_LANGUAGE):
    """Each burnt GPU's latest telemetry, above the progress line on a terminal, its words in `lang`."""
    from rich.table import Table
    from gpuready.facts.clock_reasons import reasons_from_mask

    table = Table(expand=False)
    for column in LIVE_COLUMNS:
        table.add_column(message(f"burn.live.column.{column}", lang), no_wrap=True)
    for rank, index in enumerate(selected):
        post = posts.get(rank)
        series = sampler.telemetry.samples.get(index)
        sample = series[-1][1] if series else {}
        reasons = ", ".join(sorted(reasons_from_mask(int(sample.get("clock_event_reasons") or 0)) - {"gpu_idle"}))
        table.add_row(printable(f"{index} {identity[index].get('name', '') if index < len(identity) else ''}"),
                      printable(in_language(post.operation, lang)) if post else message("burn.live.starting", lang),
                      f"{sample['power_w']:.0f} W" if sample.get("power_w") is not None else "-",
                      f"{sample['temperature_c']} °C" if sample.get("temperature_c") is not None else "-",
                      f"{sample['sm_clock_mhz']} MHz" if sample.get("sm_clock_mhz") is not None else "-",
                      reasons or "-")
    return table


def run_burn(options: BurnOptions) -> Report:
    import torch

    from gpuready.devices import visible_devices
    from gpuready.runner.local import run_local
    from gpuready.devices import check_cpu_ranks

    from gpuready.devices import auto_device
    device = auto_device(options.device, "burn")  # NoGpuError without a GPU unless --device cpu
    if device == "cpu" and options.ranks is not None:
        check_cpu_ranks(options.ranks, options.oversubscribe)  # before NVML, facts or any worker
    session = facts = None
    selected: list[int] = []
    extra_env: dict[str, str] = {}
    if device == "cuda":
        from gpuready.evidence.collect import collect
        from gpuready.evidence.build import build_facts
        from gpuready.facts.nvml import NvmlSession
        facts = build_facts(collect(with_torch=False)[0], live=True)
        session = NvmlSession()
        if options.gpus:
            extra_env["CUDA_VISIBLE_DEVICES"] = visible_devices(options.gpus, facts)
            uuids = extra_env["CUDA_VISIBLE_DEVICES"].split(",")
            selected = [i for uuid in uuids for i, gpu in enumerate(session.identity) if gpu["uuid"] == uuid]
        else:  # the user's CUDA_VISIBLE_DEVICES, or every GPU
            from gpuready.facts.visible import visible_nvml_indices
            selected = visible_nvml_indices(session.identity)
            if selected is None:
                selected = list(range(len(session.handles)))
            elif not selected:
                session.close()
                raise ValueError(sentence("error.visible.none", value=repr(os.environ.get("CUDA_VISIBLE_DEVICES"))))
        if options.ranks is not None:
            if options.ranks > len(selected):
                session.close()
                raise ValueError(sentence("error.ranks.selected", ranks=options.ranks, count=len(selected)))
            selected = selected[:options.ranks]
        ranks = len(selected)
    else:
        ranks = options.ranks or 1
    watch = None
    if device == "cuda":
        from gpuready.facts.gpu_users import UserWatch
        from gpuready.devices import exclusive_refusal
        watch = UserWatch(selected)
        refused = exclusive_refusal("burn", watch.before, {"device": device, "ranks": 0}) if options.exclusive \
            else None
        if refused is not None:
            session.close()
            return refused
    dtype = options.dtype or _default_dtype(facts, selected)
    spec = {"device": device, "workloads": ["burn"], "collectives": False, "startup_timeout_s": STARTUP_TIMEOUT_S,
            "options": {"timeout_s": options.timeout_s,
                        "burn": {"duration_s": options.duration_s, "dtype": dtype, "self_test": options.self_test}}}
    log_dir = options.log_dir or Path(tempfile.mkdtemp(prefix="gpuready-burn-"))
    identity = session.identity if session else []
    sampler = Sampler(session, selected, options.interval_s) if session else None
    progress = None
    if options.progress:
        from gpuready.report.progress_line import ProgressLine, burn_plan, burn_progress
        lang = choose_language(options.lang)
        samples = (lambda: sum(len(series) for series in list(sampler.telemetry.samples.values()))) if sampler else None
        progress = ProgressLine(
            "burn", burn_plan(ranks, device, dtype, options.duration_s),
            burn_progress(options.duration_s, BURN_STARTUP_S, samples), lang=lang,
            extra=(lambda posts: _live_table(identity, selected, sampler, posts, lang)) if sampler else None)

    try:
        if watch:
            watch.__enter__()
        if sampler:
            sampler.__enter__()
        outcome = run_local(world_size=ranks, spec=spec, log_dir=log_dir, startup_timeout_s=STARTUP_TIMEOUT_S,
                            extra_env=extra_env, on_progress=progress, independent=True,
                            deadline_s=STARTUP_TIMEOUT_S + MEMORY_PHASE_S + options.duration_s + options.timeout_s)
    finally:
        if watch:
            watch.__exit__(None, None, None)
        if sampler:
            sampler.stop()
        if progress is not None:
            progress.close()
        if session:
            session.close()
    burn_gpus = []
    for rank in range(ranks):
        result = outcome.results.get(rank, {})
        data = (result.get("workloads") or {}).get("burn")
        index = selected[rank] if rank < len(selected) else None
        facts_gpu = next((gpu for gpu in (facts.gpus or []) if index is not None and gpu.index == index), None) \
            if facts else None
        burn_gpus.append(BurnGpu(rank=rank, nvml_index=index, identity=identity[index] if index is not None else {},
                                 result=data, slowdown_c=facts_gpu.slowdown_temperature_c if facts_gpu else None,
                                 power_limit_w=facts_gpu.power_limit_w if facts_gpu else None,
                                 power_default_limit_w=facts_gpu.power_default_limit_w if facts_gpu else None))
    host = socket.gethostname()
    judge = BurnJudge(host, burn_gpus, sampler.telemetry if sampler else None, outcome.failures, options.self_test,
                      users=watch.seen if watch else None, checked_sharing=watch is not None,
                      exclusive=options.exclusive)
    judge.judge()
    report = Report(tool_version=__version__, host=host, findings=judge.findings, measurements=judge.measurements,
                    series=sampler.telemetry.series(host, identity) if sampler else [])
    report.hung = any(failure.kind in ("hang", "exit", "start") for failure in outcome.failures)
    report.interrupted, report.interrupted_by = outcome.interrupted, outcome.interrupted_by
    from gpuready.pipeline import summarize_facts
    # The machine's GPUs and driver beside the run's settings: `fleet` groups nodes by GPU model, count and driver.
    report.facts = {**(summarize_facts(facts) if facts is not None else {}), "burn": {"dtype": dtype, "duration_s": options.duration_s, "device": device, "ranks": ranks,
                             "log_dir": str(log_dir), "wall_s": round(outcome.wall_s, 1),
                             "telemetry_interval_s": options.interval_s,
                             "xid_source": sampler.telemetry.xid_source if sampler else "none",
                             "self_test": options.self_test, "rendezvous_store": outcome.store_address,
                             "overridden_env": outcome.overridden_env, "deadline_s": outcome.deadline_s,
                             **({"interrupted_by": outcome.interrupted_by or "SIGINT"} if outcome.interrupted else {})}}
    if outcome.interrupted:
        report.findings.insert(0, stopped_finding("burn", host, outcome.interrupted_by, outcome.wall_s))
    return report


def _default_dtype(facts: Any, selected: list[int]) -> str:
    if facts is None:
        return "fp32"
    capabilities = [gpu.compute_capability for gpu in facts.gpus or [] if gpu.index in selected]
    if capabilities and all(cc and float(cc) >= 8.0 for cc in capabilities):
        return "bf16"
    return "fp32"

