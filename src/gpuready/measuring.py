"""What the measuring verbs (validate, burn, bench) share on the command line: torch and a GPU present before
anything starts, and a local run's errors turned into exit codes."""

from __future__ import annotations

import argparse
from typing import Callable

from gpuready.i18n import DEFAULT_LANGUAGE, choose_language, finding_text, in_language, said, said_of
from gpuready.model import ExitCode, Finding, Status, Subject
from gpuready.safe_text import tell
from gpuready.options import UsageError
from gpuready.cli.output import emit


def usable_device(verb: str, device: str, lang: str = DEFAULT_LANGUAGE) -> str | None:
    """--device with `auto` resolved (cuda: never a silent CPU run), or None where the verb cannot run here (it
    then exits 3): no torch, or no GPU for auto. Says why on stderr, in `lang`."""
    from importlib.util import find_spec
    if find_spec("torch") is None:  # not imported here: the ranks import it, in parallel
        tell(in_language(said("error.needs_torch", verb=verb), lang))
        return None
    from gpuready.devices import NoGpuError, auto_device
    try:
        return auto_device(device, verb)
    except NoGpuError as error:
        tell(in_language(error, lang))
        return None


def run_locally(measure: Callable[[], object], args: argparse.Namespace) -> int:
    """Run `measure()` (it returns the report) and emit its report. A ValueError is a usage error; a SpawnError (the
    ranks or workers already started were stopped, nothing was measured) exits 3."""
    from gpuready.runner.local import SpawnError
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
