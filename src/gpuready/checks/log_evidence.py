"""A log-derived finding's evidence: the lines its facts rest on, each with its file and line number."""

from __future__ import annotations

from typing import Iterable

from gpuready.checks.registry import MAX_EVIDENCE_LINES
from gpuready.facts.log_facts import Line
from gpuready.model import Evidence


def quote(lines: Iterable[Line], limit: int = MAX_EVIDENCE_LINES) -> list[Evidence]:
    """The first `limit` lines (in the order given), each once, cut as a report quotes a line."""
    seen, quoted = set(), []
    for line in lines:
        key = (line.source, line.number)
        if key not in seen:
            seen.add(key)
            source, number, text = line.quoted()
            quoted.append(Evidence(file=source, line=number, text=text))
        if len(quoted) == limit:
            break
    return quoted


NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
"""NVIDIA's NCCL troubleshooting guide: the reference of most log-derived findings."""
