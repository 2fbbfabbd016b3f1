"""A saved document's measurements as the views show them: which are shown, and each one's cells (name, subject,
value, expected, share of expected) as text. The Markdown summary reads them; the console's table shows the same
cells (report/tables.py)."""

from __future__ import annotations

from gpuready.i18n import in_language, said_from
from gpuready.report.document import mapping, number, sequence, subject_label, text
from gpuready.report.labels import LANGUAGE_KEY, labels_for
from gpuready.safe_text import printable


def shown_measurements(document: dict, verbose: bool) -> list[dict]:
    """The measurements a summary shows: latency figures (one per collective) only when `verbose`."""
    measurements = [mapping(item) for item in sequence(document.get("measurements"))]
    return [m for m in measurements if verbose or LATENCY_NAME not in text(m.get("name"))]


def measurement_cells(measurement: dict, labels: dict | None = None) -> tuple[str, str, str, str, str]:
    """(name, subject, value, expected, share of expected), as `691.4 watts`, `700.0`, `99%`; `-` for no expected
    figure, an empty share where either figure is unknown; `not measurable: …` (in the `labels`' language) for a
    figure the verb found cannot be right."""
    unit = text(measurement.get("unit"), "")
    value = number(measurement.get("value"))
    expected_value = number(measurement.get("expected"))
    expected = format_value(expected_value, unit, generic_unit=False) if expected_value else "-"
    share = f"{value / expected_value:.0%}" if expected_value and value is not None else ""
    return text(measurement.get("name")), measurement_label(measurement), value_text(measurement, labels), expected, \
        share


def measurement_label(measurement: dict) -> str:
    """Whose figure it is: the GPU or host; bench's run (`ddp×8`); validate across nodes, the transport NCCL used
    (`host · NET/IB`)."""
    subject = mapping(measurement.get("subject"))
    label = subject_label(subject) if subject.get("gpu") else text(subject.get("host"))
    method = mapping(measurement.get("method"))
    if method.get("strategy") and method.get("world_size"):  # bench: which run the figure is of
        label += printable(f" {method['strategy']}×{method['world_size']}")
    if method.get("transport"):  # validate across nodes: the transport beside each busbw figure
        label += printable(f" · {text(method['transport'])}")
    return label


def value_text(measurement: dict, labels: dict | None = None) -> str:
    """A measurement's value as the views show it: `not measurable: <why>` where the verb found the computed figure
    cannot be right (its method's `not_measurable`, by catalogue id in `not_measurable_text`), else `format_value`."""
    method = mapping(measurement.get("method"))
    if method.get("not_measurable") is None:
        return format_value(number(measurement.get("value")), text(measurement.get("unit"), ""))
    labels = labels or labels_for("en")
    why = said_from(method.get("not_measurable_text"))
    try:
        reason = in_language(why, labels.get(LANGUAGE_KEY, "en")) if why is not None else text(method["not_measurable"])
    except (KeyError, ValueError, IndexError, TypeError):  # an id or values this version's catalogue does not know
        reason = text(method["not_measurable"])
    return printable(labels["not_measurable"].format(why=reason))


LATENCY_NAME = "latency_us"
"""Latency measurements (`all_reduce_latency_us`, one per collective) are listed under --verbose only."""


def format_value(value: float | int | None, unit: str, generic_unit: bool = True) -> str:
    """A figure in the unit a reader expects: seconds below one in ms or µs, fractions in %, bytes in GiB; other
    units as `1,234.5 GB/s` (without the unit where `generic_unit` is False); `?` for an unknown figure."""
    generic = unit.replace("gb_per_s", "GB/s").replace("tflops", "TFLOP/s") if generic_unit else ""
    if value is None or value != value:  # unknown, or NaN from an older or damaged document
        return f"? {generic}".rstrip() if value is None else f"nan {generic}".rstrip()
    if unit == "seconds":
        if abs(value) < 1e-3:
            return f"{value * 1e6:,.1f} µs"
        return f"{value * 1e3:,.1f} ms" if abs(value) < 1 else f"{value:,.2f} s"
    if unit == "fraction":
        return f"{value:.1%}"
    if unit == "bytes":
        return f"{value / 2**30:,.1f} GiB"
    if unit == "tokens_per_s":
        return f"{value:,.0f} tokens/s"
    return f"{value:,.1f} {generic}".rstrip()
