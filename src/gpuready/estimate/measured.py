"""The figures a saved validate report measured, for the estimates that read them (plan's step time, bench's MFU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuready.i18n import sentence
from gpuready.options import MAX_REPORT_BYTES, InputFileError, read_json_input


MEASURED_NAMES = {"matmul_tflops_bf16": "matmul_tflops_bf16", "all_reduce_busbw_gb_per_s": "all_reduce_busbw_gb_per_s",
                  "h2d_pinned_gb_per_s": "h2d_gb_per_s"}
"""validate's measurement names → the figures plan's step-time model reads (Machine.measured)."""

MEASURED_MAX = 1e6
"""No TFLOP/s or GB/s figure of one GPU comes near a million: a larger one is not a measurement."""


def measured_figures(path: Path, option: str = "--validate-report") -> dict[str, Any]:
    """The slowest GPU's figure of each measurement plan uses (a step waits for the slowest rank); InputFileError
    where the file is not a gpuready report (a regular file of strict JSON, at most 64 MiB)."""
    document = read_json_input(path, option, max_bytes=MAX_REPORT_BYTES)
    measurements = document.get("measurements") if isinstance(document, dict) else None
    if not isinstance(measurements, list):
        raise InputFileError(sentence("error.report.not_report", option=option, path=str(path)))
    figures: dict[str, Any] = {}
    for item in measurements:
        name = MEASURED_NAMES.get(item.get("name")) if isinstance(item, dict) and isinstance(item.get("name"), str) \
            else None
        value = item.get("value") if name else None
        if name and isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= MEASURED_MAX:
            figures[name] = min(figures.get(name, value), float(value))
    if not figures:
        raise InputFileError(sentence("error.report.no_figures", option=option, path=str(path),
                                 names=", ".join(MEASURED_NAMES), most=MEASURED_MAX))
    figures["source"] = str(path)
    return figures
