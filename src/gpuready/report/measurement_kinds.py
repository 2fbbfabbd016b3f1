"""What kind of figure a measurement is (bandwidth, compute, latency …), which way it is better, and the change
within a run's own noise: knowledge/compare.toml, read by the measurement's name first, then its unit."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuready.knowledge import load_table

HIGHER, LOWER, NEITHER = 1, -1, 0
_BETTER = {"higher": HIGHER, "lower": LOWER, "neither": NEITHER}
OTHER = "other"
"""The kind of a figure the table does not know: compared, never called better or worse."""


@dataclass(frozen=True)
class Kind:
    name: str
    better: int
    """HIGHER where a higher figure is better (throughput, bandwidth), LOWER where lower is (latency, time), NEITHER
    (power: a change is shown, not judged)."""
    names: tuple[str, ...] = ()
    """Parts of a measurement's name that make it this kind, whatever its unit (`busbw`, `latency`)."""
    units: tuple[str, ...] = ()
    noise_pct: float = 0.0
    """How far a figure of this kind moves between runs of one healthy machine (compare.toml `noise_pct`, measured):
    compare's tolerance and fleet's floor for the kind are at least this."""


@lru_cache(maxsize=None)
def kinds() -> tuple[Kind, ...]:
    """The kinds in the table's order (the order names and units are tried in)."""
    return tuple(Kind(name=row["name"], better=_BETTER[row["better"]], names=tuple(row["names"]),
                      units=tuple(row["units"]), noise_pct=float(row.get("noise_pct", 0.0)))
                 for row in load_table("compare")["kind"])


def kind_names() -> tuple[str, ...]:
    return tuple(kind.name for kind in kinds()) + (OTHER,)


def kind_of(name: str, unit: str) -> Kind:
    """A measurement's kind: the first kind a part of its name names, else the first whose units hold its unit."""
    for kind in kinds():
        if any(part in name for part in kind.names):
            return kind
    return next((kind for kind in kinds() if unit in kind.units), Kind(name=OTHER, better=NEITHER))


UNIT_LABELS = {"gb_per_s": "GB/s", "gbit_per_s": "Gbit/s", "bytes_per_s": "B/s", "tflops": "TFLOP/s", "us": "µs",
               "seconds": "s", "tokens_per_s": "tokens/s", "samples_per_s": "samples/s", "celsius": "°C",
               "power_w": "W", "watts": "W", "mhz": "MHz"}
"""A unit id of the documents (DESIGN.md: units are in names) as a reader writes it; any other unit as it is."""


def unit_label(unit: str) -> str:
    return UNIT_LABELS.get(unit, unit)


def default_tolerance_pct() -> float:
    return float(load_table("compare")["tolerance"]["default_pct"])


def default_tolerances_pct() -> dict[str, float]:
    """Kind → compare's tolerance: the default, or the kind's own run-to-run noise where that is wider."""
    default = default_tolerance_pct()
    return {**{kind.name: max(default, kind.noise_pct) for kind in kinds()}, OTHER: default}


def tolerance_source() -> str:
    return str(load_table("compare")["tolerance"]["source"])
