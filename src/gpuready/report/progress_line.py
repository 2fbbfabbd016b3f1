"""Live progress of a measuring run (validate, bench, burn), read from what the ranks post to the store.

On a terminal (stderr is a TTY): one line rewritten in place: phase, step k/n, throughput where known, time left.
Elsewhere (a log, a pipe): the plan, then one plain line per phase change (no carriage return, no escape sequence).
Always on stderr, never on stdout; the verbs leave it off with --json. Each verb has a `describe` function that turns
the ranks' posts into a Status; the display does the rest.

Every word of the line comes from the message catalogue (domain `progress`) in the reader's language: a Status keeps
its parts as `Words` (English text that knows its catalogue id), a rank's phase is looked up as `progress.phase.<name>`,
a figure is said by its unit (`progress.unit.<unit>`), and what a rank says it is doing is its catalogued message (or
an operation's name, shown as the rank posted it). The ranks post fields (gpuready.progress.RankPost: phase, step,
figures with units): nothing here reads their prose back.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from gpuready.i18n import DEFAULT_LANGUAGE, Said, Sentence, catalogue, choose_language, in_language, message, said, \
    sentence
from gpuready.progress import FINAL_PHASES, PUBLISH_EVERY_S, RankPost
from gpuready.safe_text import printable


Words = Sentence
"""Catalogue text as a plain English `str` (what a Status compares and a log shows), that the line says again in the
reader's language: gpuready.i18n's `Sentence`."""
words = sentence


def _phase(phase: str) -> Said | str:
    """A rank's or the verb's phase: the catalogue's `progress.phase.<name>` where it names it, else as posted."""
    msg_id = f"progress.phase.{phase}"
    return said(msg_id) if msg_id in catalogue(DEFAULT_LANGUAGE) else phase


def phase_words(phase: str) -> Words | str:
    text = _phase(phase)
    return Words(text) if isinstance(text, Said) else text


@dataclass(kw_only=True)
class Status:
    phase: str
    """What the run does now (a rank's phase, or the verb's name for it); a plain line is printed when it changes."""
    step: int | None = None
    steps: int | None = None
    step_unit: str = ""
    rate: str | None = None
    """Throughput and figures where known, each with its unit (`1,234 tokens/s`): `Figures`."""
    left_s: float | None = None
    """Seconds left by the plan (negative: past it); None while unknown."""
    detail: str = ""
    """What the lowest rank said it is doing."""


class Figures(str):
    """Figures said by their units (`1,200 GEMMs`, `650 TFLOP/s`) as one part of the line: its value is their English
    joined by the line's separator (what a Status compares and a log shows), and `in_language` says each again in the
    reader's language."""

    parts: tuple[Said, ...]

    def __new__(cls, parts: list[Said]) -> "Figures":
        made = super().__new__(cls, message("progress.separator").join(part.english() for part in parts))
        made.parts = tuple(parts)
        return made

    def in_language(self, lang: str) -> str:
        return message("progress.separator", lang).join(in_language(part, lang) for part in self.parts)


def figure(unit: str, value: float) -> Said:
    """One figure in words: `progress.unit.<unit>` (`1,200 GEMMs`)."""
    return said(f"progress.unit.{unit}", value=value)


def summed_figures(posts: list[RankPost]) -> list[Said]:
    """The figures of every post summed by unit (GEMMs and TFLOP/s over the workers), in the order first posted, then
    the errors they counted."""
    sums: dict[str, float] = {}
    for post in posts:
        for item in post.figures:
            sums[item.unit] = sums.get(item.unit, 0) + item.value
    errors = [post.errors for post in posts if post.errors is not None]
    return [figure(unit, value) for unit, value in sums.items()] + ([figure("errors", sum(errors))] if errors else [])


def _said_in(text: object, lang: str) -> str:
    return text.in_language(lang) if isinstance(text, Figures) else in_language(text, lang)


def duration(seconds: float, lang: str = DEFAULT_LANGUAGE) -> str:
    seconds = round(abs(seconds))
    return message("progress.duration.seconds", lang, seconds=seconds) if seconds < 60 else \
        message("progress.duration.minutes", lang, minutes=seconds // 60, seconds=seconds % 60)


def time_left(left_s: float | None, lang: str = DEFAULT_LANGUAGE) -> str:
    if left_s is None:
        return message("progress.left.estimating", lang)
    if 0 <= left_s < 1:
        return message("progress.left.almost_done", lang)
    return message("progress.left" if left_s >= 0 else "progress.left.past_plan", lang,
                   duration=duration(left_s, lang))


class ProgressLine:
    """Call it with the ranks' posts (runner.local.run_local's `on_progress`); close() when the run ends."""

    def __init__(self, verb: str, plan: str | Said, describe: Callable[..., Status], *,
                 extra: Callable[[dict], Any] | None = None, stream: Any = None, lang: str | None = None):
        """`extra`: on a terminal, a rich renderable of the posts shown above the line (burn's telemetry table).
        `plan`: what the run will do (`validate_plan`, `burn_plan`, `bench_plan` say it from the catalogue).
        `lang`: the reader's language (`choose_language(args.lang)`); None: from the environment (GPUREADY_LANG, the
        locale)."""
        self.verb, self.describe, self.extra = verb, describe, extra
        self.lang = lang or choose_language()
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.last_phase: str | None = None
        self.live = None
        if self.stream.isatty():
            from rich.console import Console
            from rich.live import Live
            self.live = Live(console=Console(file=self.stream), auto_refresh=False, transient=False,
                             redirect_stdout=False)
            self.live.start()
        self._print(message("progress.header", self.lang, verb=verb, plan=printable(in_language(plan, self.lang))))

    def __call__(self, posts: dict, **context: Any) -> None:
        status = self.describe(posts, time.monotonic() - self.started, **context)
        if self.live is not None:
            from rich.console import Group
            from rich.text import Text
            line = Text(self.line(status), no_wrap=True, overflow="ellipsis")
            self.live.update(Group(self.extra(posts), line) if self.extra else line, refresh=True)
        elif status.phase != self.last_phase:
            self._print(f"  [{time.monotonic() - self.started:5.0f} s] {self.line(status, elapsed=False)}")
        self.last_phase = status.phase

    def line(self, status: Status, elapsed: bool = True) -> str:
        lang = self.lang
        parts = [message("progress.phase", lang, verb=self.verb, phase=in_language(status.phase, lang))]
        if status.step is not None and status.steps:
            parts[0] += f" {status.step}/{status.steps}{status.step_unit}"
        parts += [_said_in(status.rate, lang)] if status.rate else []
        parts += [message("progress.elapsed", lang, duration=duration(time.monotonic() - self.started, lang))] \
            if elapsed else []
        parts += [time_left(status.left_s, lang)]
        parts += [in_language(status.detail, lang)] if status.detail else []
        return printable(message("progress.separator", lang).join(parts))

    def _print(self, text: str) -> None:
        try:
            if self.live is not None:
                self.live.console.print(text, markup=False, highlight=False)
            else:
                print(text, file=self.stream, flush=True)
        except BrokenPipeError:  # nobody reads stderr any more: the run and its report go on
            pass

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def lowest(posts: dict) -> Any:
    """The post of the lowest rank still working (else of the lowest rank), or None."""
    active = [rank for rank, post in posts.items() if post.phase not in FINAL_PHASES]
    return posts[min(active or posts)] if posts else None


def validate_progress(predicted_s: float, workloads: list[str]) -> Callable[..., Status]:
    """validate: the rank phase, its workload's place among those that run, and the plan's time left."""
    def describe(posts: dict, elapsed_s: float) -> Status:
        post = lowest(posts)
        if post is None:
            return Status(phase=phase_words("launching"), left_s=predicted_s - elapsed_s)
        place = workloads.index(post.phase) + 1 if post.phase in workloads else None
        left_s = 0.0 if post.phase in FINAL_PHASES else predicted_s - elapsed_s
        return Status(phase=phase_words(post.phase), step=place, steps=len(workloads), left_s=left_s,
                      detail=post.operation)
    return describe


class BenchProgress:
    """bench: each run's stage, its step k/n, tokens/s between the steps seen, and the steps left in every run."""

    def __init__(self, runs: list[tuple[str, int]], steps: int, tokens_per_step: Callable[[str, int], int]):
        self.runs, self.steps, self.tokens_per_step = runs, steps, tokens_per_step
        self.started: dict[int, float] = {}
        self.first: dict[int, tuple[int, float]] = {}
        """Run → (step, elapsed s) when its first step was seen."""
        self.first_timed: dict[int, tuple[int, float]] = {}
        """Run → (step, elapsed s) when its first step after warm-up was seen: the rate counts from there, as the
        final figure does (the median of timed steps), so warm-up's compilation and allocation are not in it."""
        self.step_s: dict[int, float] = {}
        self.overhead_s: float | None = None
        """Start-up and model building of a run, the longest one seen."""

    def __call__(self, posts: dict, elapsed_s: float, run: int = 0) -> Status:
        strategy, world_size = self.runs[run]
        started = self.started.setdefault(run, elapsed_s)
        post = lowest(posts)
        stage, step = (post.phase if post else "launching"), None
        if post and post.phase == "train" and post.step is not None:
            step = post.step + 1
            stage = "warm-up" if post.warm_up else "steps"
            first_step, first_s = self.first.setdefault(run, (step, elapsed_s))
            self.overhead_s = max(self.overhead_s or 0.0, first_s - started)
            timed_step, timed_s = self.first_timed.setdefault(run, (step, elapsed_s)) if not post.warm_up \
                else (step, elapsed_s)
            if step > timed_step:  # a second timed step: from here on, timed steps only
                first_step, first_s = timed_step, timed_s
            if step > first_step:
                self.step_s[run] = (elapsed_s - first_s) / (step - first_step)
        elif post and post.phase == "train":
            stage = post.stage or post.phase  # `build`, `check`
        step_s = self.step_s.get(run) or next((self.step_s[r] for r in sorted(self.step_s, reverse=True)), None)
        left = None
        if step_s and self.overhead_s is not None:
            if stage in ("launching", "startup", "ready", "build"):  # this run's start-up, then all its steps
                left = max(0.0, self.overhead_s - (elapsed_s - started)) + self.steps * step_s
            else:
                left = (self.steps - (step or self.steps)) * step_s
            left += (len(self.runs) - run - 1) * (self.overhead_s + self.steps * step_s)
        rate = Figures([figure("tokens_per_s", self.tokens_per_step(strategy, world_size) / self.step_s[run])]) \
            if run in self.step_s else None
        return Status(phase=words("progress.bench.phase", run=f"{strategy}×{world_size}", stage=_phase(stage)),
                      step=step, steps=self.steps if step else None, rate=rate, left_s=left,
                      detail=words("progress.bench.run", run=run + 1, runs=len(self.runs)))


def burn_progress(duration_s: float, startup_s: float, samples: Callable[[], int] | None) -> Callable[..., Status]:
    """burn: memory pattern then the GEMM window (seconds of it), the workers' figures summed (GEMMs, TFLOP/s, errors),
    telemetry samples taken, and the window's time left."""
    window: list[float] = []

    def describe(posts: dict, elapsed_s: float) -> Status:
        post = lowest(posts)
        measuring = [p for p in posts.values() if p.figures]
        phase = post.phase if post else "launching"
        if phase == "burn":
            phase = "gemm" if measuring else "memory"
        if measuring and not window:
            window.append(elapsed_s - PUBLISH_EVERY_S)  # the first figures come one publication after it began
        left = window[0] + duration_s - elapsed_s if window else startup_s + duration_s - elapsed_s
        parts = summed_figures(measuring) + ([figure("samples", samples())] if samples is not None else [])
        step = min(duration_s, elapsed_s - window[0]) if window and phase == "gemm" else None
        return Status(phase=phase_words(phase), step=None if step is None else round(max(step, 0)),
                      steps=round(duration_s), step_unit=" s", rate=Figures(parts) if parts else None,
                      left_s=max(left, 0.0) if phase not in FINAL_PHASES else 0.0,
                      detail=words("progress.burn.workers", count=len(posts)) if posts else "")
    return describe


# -- what each verb's run will do: the line's first line (`gpuready VERB: PLAN`) --------------------------------------

def validate_plan(ranks: int, device: str, workloads: list[str], quick: bool, predicted_s: float) -> Said:
    """`2 rank(s) on cpu, workloads collectives, ddp (quick); predicted about 40 s`."""
    return said("progress.plan.validate.quick" if quick else "progress.plan.validate", ranks=ranks, device=device,
                workloads=", ".join(workloads), predicted_s=predicted_s)


def burn_plan(workers: int, device: str, dtype: str, duration_s: float) -> Said:
    """`1 worker(s) on cpu, fp32 GEMMs for 4 s after a memory pattern`."""
    return said("progress.plan.burn", workers=workers, device=device, dtype=dtype, duration_s=duration_s)


def bench_plan(model: str, ranks: int, device: str, runs: list[tuple[str, int]], warmup_steps: int,
               steps: int) -> Said:
    """`tiny on 2 cpu rank(s), runs single×1, ddp×2; 1 warm-up + 6 measured steps each`."""
    return said("progress.plan.bench", model=model, ranks=ranks, device=device,
                runs=", ".join(f"{strategy}×{world_size}" for strategy, world_size in runs), warmup_steps=warmup_steps,
                steps=steps)
