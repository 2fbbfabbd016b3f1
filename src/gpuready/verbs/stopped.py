"""The finding every run verb adds when a signal stopped it: the figures cover only the part that ran."""

from __future__ import annotations

from gpuready.i18n import finding_text, said
from gpuready.model import Finding, Status, Subject

SIGNALS_SAID = ("SIGINT", "SIGHUP")
"""Signals the catalogue explains (`run.stopped.signal.<name>`); any other is shown by its name."""


def stopped_finding(verb: str, host: str, signal_name: str | None, wall_s: float) -> Finding:
    """`<verb>.interrupted` (warn): a partial run cannot certify the machine, nor does it condemn it."""
    name = signal_name or "SIGINT"
    how = said(f"run.stopped.signal.{name}") if name in SIGNALS_SAID else name
    return Finding(check_id=f"{verb}.interrupted", status=Status.WARN, subject=Subject(host=host),
                   **finding_text(said("run.stopped", signal=how, wall_s=wall_s, verb=verb)),
                   observed=name, expected="a run to its end")
