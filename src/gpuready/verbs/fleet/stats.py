"""Robust statistics of one measurement over a cohort's nodes, and how far one node's figure sits from them.

Median and MAD (median absolute deviation) rather than mean and standard deviation: the slow nodes a fleet report
looks for would pull a mean and widen a standard deviation until they no longer stand out. The constants are
knowledge/fleet.toml's, with their source.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpuready.knowledge import load_table, thresholds


@dataclass(frozen=True)
class Spread:
    """A measurement's centre and spread over `n` nodes (this fleet's, or a baseline's)."""
    median: float
    mad: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "mad": self.mad, "n": self.n}


def spread(values: list[float]) -> Spread:
    middle = statistics.median(values)
    return Spread(median=middle, mad=statistics.median(abs(value - middle) for value in values), n=len(values))


@dataclass(frozen=True)
class Limits:
    z_limit: float
    mad_to_sigma: float
    floor_pct: float
    min_robust_nodes: int
    expected_fraction: float
    """Below this share of its expectation a figure is low whatever the fleet does: validate's own warning line."""

    @classmethod
    def from_knowledge(cls, floor_pct: float | None = None) -> Limits:
        table = load_table("fleet")["fleet"]
        return cls(z_limit=table["z_limit"], mad_to_sigma=table["mad_to_sigma"],
                   floor_pct=table["floor_pct"] if floor_pct is None else floor_pct,
                   min_robust_nodes=table["min_robust_nodes"],
                   expected_fraction=thresholds("validate")["low_warn_fraction"])

    @staticmethod
    def sources() -> list[str]:
        return [load_table("fleet")["fleet"]["source"], thresholds("validate")["source"]]


BOUND = 1e300
"""What a ratio of two in-range figures is cut to (a figure over a MAD of 1e-300 overflows): the document stays finite
JSON, the order of the figures the same."""


def bounded(value: float) -> float:
    """`value` within ±BOUND (an infinity from an overflowing ratio becomes the bound)."""
    return max(-BOUND, min(BOUND, value))


def deficit_pct(value: float, reference: float, sense: int) -> float:
    """How much worse than `reference` the figure is, in % of it (negative: better). `sense` +1 where higher is
    better; -1 where lower is (a latency 10 % above the median is a 10 % deficit)."""
    return sense * (reference - value) / abs(reference) * 100


def modified_z(value: float, centre: Spread, sense: int, limits: Limits) -> float | None:
    """0.6745 (x - median) / MAD, signed so that worse is negative; None where MAD is 0 (every node alike)."""
    if centre.mad == 0:
        return None
    return sense * limits.mad_to_sigma * (value - centre.median) / centre.mad


def stands_out(value: float, centre: Spread, sense: int, limits: Limits, noise_pct: float = 0.0) -> bool:
    """An outlier: worse than the others by a z-score beyond the limit AND by at least the floor in % (the fleet's,
    or the figure's own run-to-run noise where that is wider: a small-message latency moves by 70 % between runs of
    one healthy machine), so that a difference nobody cares about is not flagged. Where MAD is 0 the floor alone
    decides."""
    if centre.median == 0:
        return False
    z = modified_z(value, centre, sense, limits)
    return deficit_pct(value, centre.median, sense) >= max(limits.floor_pct, noise_pct) and \
        (z is None or z <= -limits.z_limit)


def share_of_expected(value: float, expected: float, sense: int) -> float:
    """The figure as a share of its expectation, 1.0 = as expected; for a lower-is-better figure the speed it
    means (expected / value), so that 0.9 reads '10 % slow' either way."""
    if sense > 0:
        return value / expected
    return expected / value if value > 0 else 0.0
