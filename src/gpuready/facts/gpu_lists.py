"""GPU header lines of `nvidia-smi -L` and `nvidia-smi nvlink -s`: index, name, UUID."""

from __future__ import annotations

import re

from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.types import GpuFacts
from gpuready.facts.units import bounded, strip_ansi
from gpuready.i18n import said

# PyTorch's collect_env (torch/utils/collect_env.py get_gpu_info) prints `nvidia-smi -L` after "GPU models and
# configuration:" with every ` (UUID: …)` removed, the first line on the label's own line where it is one GPU.
_HEADER = re.compile(r"^(?:GPU models and configuration[ \t]{0,4}:[ \t]{0,40})?GPU (\d+): (.+?)\s*"
                     r"(?:\(UUID: ([^)]*)\)[^\n]{0,40})?$")


def parse_gpu_list(text: str, source: str) -> list[GpuFacts]:
    """One GpuFacts per `GPU N: NAME (UUID: GPU-…)` line (or `GPU N: NAME` as collect_env prints it); no bus id (these
    tools do not print it)."""
    gpus = [GpuFacts(index=bounded(match.group(1), "gpus", said("parse.what.gpu_index")), bus_id=None,
                     name=match.group(2).strip(), uuid=uuid if (uuid := match.group(3) or "").startswith("GPU-") else None,
                     source=source)
            for line in strip_ansi(text).splitlines() if (match := _HEADER.match(line.strip()))]
    if not gpus:
        raise ParseFailure("parse.gpu_list.none")
    return gpus
