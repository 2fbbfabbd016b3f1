"""The finding every run verb adds when a signal stopped it: the figures cover only the part that ran."""

from __future__ import annotations

from gpuready.model import Finding, Status, Subject


def stopped_finding(verb: str, host: str, signal_name: str | None, wall_s: float) -> Finding:
    """`<verb>.interrupted` (warn): a partial run cannot certify the machine, nor does it condemn it."""
    name = signal_name or "SIGINT"
    how = {"SIGINT": "Ctrl-C (SIGINT)", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP (the terminal or session went away)"}
    return Finding(check_id=f"{verb}.interrupted", status=Status.WARN, subject=Subject(host=host),
                   message=f"Stopped by {how.get(name, name)} after {wall_s:.0f} s: the figures and findings cover "
                           "only the part that ran.",
                   observed=name, expected="a run to its end",
                   fix=f"Run `gpuready {verb}` again to its end (under a scheduler: a time limit above the run's "
                       "deadline).")
