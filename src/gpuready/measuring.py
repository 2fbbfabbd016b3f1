"""The measuring-run template that validate, burn and bench fill in, and what they share on the command line.

A measuring run is prepare / run / judge (`MeasuringRun.measure`):
- prepare: the verb selects the device, the ranks and the GPUs they use (devices.py) and reads this node's facts; the
  run then holds what watches those GPUs while the ranks run (who else computes on them, the NVML sampler or the Xid
  watch, the NVML session, the live display), every one in one `ExitStack`: the one place that closes them. With
  `--exclusive`, a GPU another process computes on refuses the run before any rank starts.
- run: the verb starts its ranks (`start_ranks`, runner/local.py), once or run after run.
- judge: the verb's judge turns the outcome, the facts, the GPUs' other users and the samples into the report.
Ctrl-C, SIGTERM and SIGHUP stop the ranks and keep what was measured (runner/local.py marks the outcome interrupted,
the verb's report says so with `stopped_finding`); a rank that cannot be started is a SpawnError (exit 3); either way
the stack closes what the run held.
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable

from gpuready.cli.output import emit
from gpuready.devices import NoGpuError, auto_device, exclusive_refusal, local_facts, selected_indices
from gpuready.facts.gpu_users import GpuUsers, UserWatch
from gpuready.facts.nvml import NvmlSession
from gpuready.facts.nvml_records import GpuIdentity
from gpuready.i18n import DEFAULT_LANGUAGE, choose_language, finding_text, in_language, said, said_of
from gpuready.model import ExitCode, Finding, Report, Status, Subject
from gpuready.node import node_name, scheduler_names
from gpuready.options import UsageError
from gpuready.runner import local as local_runner
from gpuready.runner.local import RunOutcome, SpawnError
from gpuready.safe_text import tell
from gpuready.telemetry import Sampler, Telemetry, start_telemetry


@dataclass(kw_only=True)
class Selection:
    """What a measuring run uses, decided before its ranks start (or, for validate, while they import torch)."""

    device: str
    """`cuda` or `cpu`."""
    ranks: int
    """How many ranks (processes, one per GPU on CUDA) to start."""
    gpus: list[int] | None = None
    """NVML indices of the GPUs the ranks use; None: every GPU, or none known (CPU runs)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables the ranks get: CUDA_VISIBLE_DEVICES (as UUIDs) where --gpus chose the GPUs."""
    facts: Any = None
    """This node's Facts (None on CPU runs): expected figures, and the report's summary of the machine."""
    identity: list[GpuIdentity] = field(default_factory=list)
    """NVML's identity (bus id, UUID, name) of this node's GPUs, by NVML index, where the run opened a session."""


@dataclass(kw_only=True)
class Measured:
    """What a measuring run hands its verb's judge."""

    selection: Selection
    outcome: Any
    """What the verb's run returned: a runner RunOutcome, or the verb's own record of several runs (bench)."""
    users: dict[int, GpuUsers] | None
    """Who else computed on the selected GPUs before and while the ranks ran, by NVML index; None where NVML could
    not say or nobody looked (CPU runs: see `checked_sharing`)."""
    checked_sharing: bool
    """Whether the GPUs' other users were looked for (GPU runs)."""
    telemetry: Telemetry | None
    """The NVML samples and Xid events of the run; None without NVML (CPU runs)."""
    host: str


class MeasuringRun:
    """One run of a measuring verb: `measure()` prepares, runs and judges; the verb fills in the steps below.

    `verb`: its name (`validate`, `burn`, `bench`), in findings and facts. `sample_interval_s`: the NVML sampler's
    period over the selected GPUs; None: no samples, the Xids NVML reports only (validate)."""

    verb = ""
    sample_interval_s: float | None = 1.0

    def __init__(self, *, exclusive: bool = False):
        self.exclusive = exclusive
        self.selection: Selection | None = None
        self.users: UserWatch | None = None
        self.sampler: Sampler | None = None
        self.session: Any = None
        self.display: Any = None
        """The live progress line (report/progress_line.py) the ranks' posts go to; None: no display."""
        self.outcome: Any = None
        """What the verb's run returned (None until it has, or where the run was refused)."""
        self._stack: ExitStack | None = None
        self._prepared = False

    # -- what a verb fills in -----------------------------------------------------------------------------------------

    def select(self) -> Selection:
        """The device and the ranks, bounded before anything starts (ValueError: a usage error)."""
        raise NotImplementedError

    def prepare(self, selection: Selection) -> None:
        """This node's facts and the GPUs the ranks use (`selection.gpus`, `selection.env`); by default the fast facts
        and the first GPUs CUDA_VISIBLE_DEVICES shows."""
        selection.facts = local_facts(selection.device)
        if selection.device == "cuda":
            selection.gpus = selected_indices(None, selection.facts, selection.ranks)

    def prepares_early(self) -> bool:
        """Whether `prepare` runs before the ranks start (else while they import torch: its seconds overlap theirs).
        An `--exclusive` run always prepares first: it may refuse to start."""
        return True

    def refused_facts(self, selection: Selection) -> dict[str, Any]:
        """What `facts[verb]` says of a run `--exclusive` refused."""
        return {"device": selection.device}

    def sampled_gpus(self, selection: Selection) -> list[int]:
        """The GPUs the sampler reads (none: Xids only)."""
        return list(selection.gpus or []) if self.sample_interval_s is not None else []

    def open_display(self, selection: Selection) -> Any:
        """The live progress line (with a `close()`), or None."""
        return None

    def run(self, selection: Selection) -> Any:
        """Start the ranks (`start_ranks`): the outcome the judge reads."""
        raise NotImplementedError

    def judge(self, measured: Measured) -> Report:
        raise NotImplementedError

    # -- the template -------------------------------------------------------------------------------------------------

    def measure(self) -> Report:
        """prepare / run / judge; a run `--exclusive` refuses ends at prepare with the refusal's report."""
        selection = self.selection = self.select()
        with ExitStack() as stack:
            self._stack = stack
            if self.exclusive or self.prepares_early():
                refused = self._prepare(selection)
                if refused is not None:
                    return refused
            self.display = self.open_display(selection)
            if self.display is not None:
                stack.callback(self.display.close)
            outcome = self.outcome = self.run(selection)
        report = self.judge(Measured(selection=selection, outcome=outcome,
                                     users=self.users.seen if self.users is not None else None,
                                     checked_sharing=self.users is not None,
                                     telemetry=self.sampler.telemetry if self.sampler is not None else None,
                                     host=node_name()))  # the scheduler's name for this node (node.py)
        report.scheduler = scheduler_names()
        return report

    def start_ranks(self, *, spec: dict[str, Any], log_dir: Path, startup_timeout_s: float, deadline_s: float,
                    world_size: int | None = None, independent: bool = False,
                    on_progress: Callable[..., None] | None = None) -> RunOutcome:
        """Start `world_size` ranks of `spec` (default: the selection's) and watch them to their end (runner/local.py);
        the posts go to `on_progress` (default: the display). Where `prepare` waits for the ranks to start, it runs
        while they import torch."""
        selection = self.selection
        late = None if self._prepared else lambda: self._prepare(selection)  # never exclusive: nothing to refuse
        return local_runner.run_local(world_size=world_size or selection.ranks, spec=spec, log_dir=log_dir,
                                      startup_timeout_s=startup_timeout_s, extra_env=selection.env,
                                      on_progress=on_progress if on_progress is not None else self.display,
                                      independent=independent, deadline_s=deadline_s, on_started=late)

    def nvml_session(self) -> NvmlSession:
        """This run's NVML session (opened once, closed with the run): `prepare` may read NVML's identity from it."""
        if self.session is None:
            self.session = NvmlSession()
            self._stack.callback(self.session.close)
        return self.session

    def _prepare(self, selection: Selection) -> Report | None:
        """The verb's preparation, then what watches the GPUs: their other users, and the sampler; the refusal report
        where `--exclusive` meets a GPU another process computes on (nothing then samples)."""
        self.prepare(selection)
        self._prepared = True
        if selection.device == "cuda":
            self.users = self._stack.enter_context(UserWatch(selection.gpus))
            refused = exclusive_refusal(self.verb, self.users.before, self.refused_facts(selection)) \
                if self.exclusive else None
            if refused is not None:
                return refused
        session, self.sampler = start_telemetry(selection.device, self.sampled_gpus(selection),
                                                self.sample_interval_s or 1.0, session=self.session)
        if session is not None and session is not self.session:
            self.session = session
            self._stack.callback(session.close)
        if self.sampler is not None:
            self._stack.callback(self.sampler.stop)
        return None


def usable_device(verb: str, device: str, lang: str = DEFAULT_LANGUAGE) -> str | None:
    """--device with `auto` resolved (cuda: never a silent CPU run), or None where the verb cannot run here (it
    then exits 3): no torch, or no GPU for auto. Says why on stderr, in `lang`."""
    if find_spec("torch") is None:  # not imported here: the ranks import it, in parallel
        tell(in_language(said("error.needs_torch", verb=verb), lang))
        return None
    try:
        return auto_device(device, verb)
    except NoGpuError as error:
        tell(in_language(error, lang))
        return None


def run_locally(measure: Callable[[], object], args: argparse.Namespace) -> int:
    """Run `measure()` (it returns the report) and emit its report. A ValueError is a usage error; a SpawnError (the
    ranks or workers already started were stopped, nothing was measured) exits 3."""
    try:
        report = measure()
    except ValueError as error:
        raise UsageError(said_of(error)) from None
    except SpawnError as error:
        tell(in_language(error, choose_language(args.lang)))
        return ExitCode.TOOL_ERROR
    return emit(report, args)


SIGNALS_SAID = ("SIGINT", "SIGHUP")
"""Signals the catalogue explains (`run.stopped.signal.<name>`); any other is shown by its name."""


def stopped_finding(verb: str, host: str, signal_name: str | None, wall_s: float) -> Finding:
    """`<verb>.interrupted` (warn): a partial run cannot certify the machine, nor does it condemn it."""
    name = signal_name or "SIGINT"
    how = said(f"run.stopped.signal.{name}") if name in SIGNALS_SAID else name
    return Finding(check_id=f"{verb}.interrupted", status=Status.WARN, subject=Subject(host=host),
                   **finding_text(said("run.stopped", signal=how, wall_s=wall_s, verb=verb)),
                   observed=name, expected="a run to its end")


def mark_stopped(report: Report, verb: str, host: str, interrupted_by: str | None, wall_s: float) -> None:
    """A run stopped by a signal (Ctrl-C: SIGINT): the report says so first (`<verb>.interrupted`) and keeps what was
    measured; its exit code is 128 + the signal's number."""
    report.interrupted, report.interrupted_by = True, interrupted_by or "SIGINT"
    report.findings.insert(0, stopped_finding(verb, host, interrupted_by, wall_s))
