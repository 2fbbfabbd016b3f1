"""What a rank says about its progress, as fields: the record ranks post (workloads/, through the store:
runner/progress.py) and the readers take apart (the watchdog names a stuck rank with it, report/progress_line.py draws
the live line from it). No prose crosses: a rank posts its phase, its step, its figures with their units and, where
words are needed, a catalogue id with values; each reader says them in its own language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuready.i18n import Said, json_values

FINAL_PHASES = ("done", "failed", "terminated")
"""Phases after which a rank no longer advances on purpose (`terminated`: it was sent SIGTERM/SIGHUP)."""
PUBLISH_EVERY_S = 2.0
"""How often a burn worker posts its figures (and stores its partial result): the display dates the GEMM window's
start one period before the first figures it sees."""


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One figure a rank measured so far, with its unit."""

    value: float
    """As measured (a count stays a whole number)."""
    unit: str
    """What the value counts or measures: `gemms` (GEMMs done), `tflops` (TFLOP/s), `bytes`. The catalogue's
    `progress.unit.<unit>` says a figure in each language, and a post's message names it `{<unit>}`."""


@dataclass(kw_only=True)
class RankPost:
    """What a rank is doing now: the fields it posts (runner/progress.py adds who posted it, and when)."""

    phase: str
    """`startup`, a workload's name, `finishing` (final barrier, destroy_process_group), `done`, `failed` or
    `terminated`."""
    operation: str = ""
    """The operation named as it is in every language (`init_process_group`, `matmul bf16`); empty where
    `message_id` says it. The reader of the store makes a catalogued message a `Sentence` here (its English, which
    says itself again in the reader's language)."""
    message_id: str | None = None
    """The operation by catalogue id (`op.train.step`), where it needs words."""
    message_values: dict[str, Any] = field(default_factory=dict)
    """The message's own values (a strategy, a rank); the typed fields below fill its other placeholders
    (`{step}`, `{errors}`, `{<unit>}` of each figure)."""
    step: int | None = None
    """Which step of the phase (from 0), where it counts steps."""
    total: int | None = None
    """How many steps the phase has in all."""
    warm_up: bool = False
    """The step is a warm-up step (not measured)."""
    stage: str | None = None
    """A named part of the phase the display shows (`build`, `check`); None: the phase (and its step) alone."""
    figures: list[Figure] = field(default_factory=list)
    """What the rank measured so far (GEMMs done, TFLOP/s), each with its unit."""
    errors: int | None = None
    """Errors the rank found so far (burn's wrong products); None where it does not count them."""

    def values(self) -> dict[str, Any]:
        """The message's values: its own, then the typed fields that are set."""
        typed = {"step": self.step, "total": self.total, "errors": self.errors}
        return {**self.message_values, **{name: value for name, value in typed.items() if value is not None},
                **{figure.unit: figure.value for figure in self.figures}}

    def text(self) -> Said | str:
        """What the rank does, in words: its message by catalogue id (with `values()`), else its operation's name."""
        return Said(self.message_id, self.values()) if self.message_id is not None else self.operation

    def figure(self, unit: str) -> float | None:
        """The value of this post's figure in `unit`; None where it posted none."""
        return next((figure.value for figure in self.figures if figure.unit == unit), None)


def operation_fields(operation: str | Said) -> dict[str, Any]:
    """A post's `operation`, `message_id` and `message_values` for an operation given as a name or as catalogue text
    (a `Said`, sent as its id and values: the reader renders it)."""
    if isinstance(operation, Said):
        return {"operation": "", "message_id": operation.msg_id, "message_values": json_values(operation.values)}
    return {"operation": operation, "message_id": None, "message_values": {}}


def figures_from_json(figures: Any) -> list[Figure]:
    """A post's `figures` read back from JSON (anything malformed is left out: a post never stops the reader)."""
    return [Figure(value=item["value"], unit=str(item["unit"])) for item in figures or []
            if isinstance(item, dict) and isinstance(item.get("value"), (int, float)) and "unit" in item]
