"""Which NVML GPUs the CUDA processes gpuready starts will see, from CUDA_VISIBLE_DEVICES.

The ranks run with CUDA_DEVICE_ORDER=PCI_BUS_ID (runner/local.py), so a number in CUDA_VISIBLE_DEVICES is a position
in PCI bus order; an entry may also be a GPU UUID or a unique prefix of one (`GPU-8f3a`). As CUDA does, the list
ends at the first entry that names no GPU. NVML numbers every GPU of the machine, whatever the variable hides: on a
shared server with CUDA_VISIBLE_DEVICES=4,5, NVML's GPUs 0 and 1 are someone else's.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

VARIABLE = "CUDA_VISIBLE_DEVICES"


def visible_nvml_indices(gpus: Iterable[Any], value: str | None = None) -> list[int] | None:
    """NVML indices of the GPUs CUDA processes see, in CUDA's order. `gpus`: objects or dicts with index, bus_id,
    uuid (facts' GPUs or NvmlSession.identity); `value`: the variable (default: this process's). None where the
    variable is unset (every GPU) or names MIG instances (not whole GPUs: NVML's per-GPU figures would mislead)."""
    value = os.environ.get(VARIABLE) if value is None else value
    if value is None:
        return None
    records = [_record(position, gpu) for position, gpu in enumerate(gpus)]
    in_bus_order = sorted(records, key=lambda gpu: gpu["bus_id"] or "")
    chosen: list[int] = []
    for entry in (part.strip() for part in value.split(",")):
        if entry.startswith("MIG-"):
            return None
        match = None
        if entry.isdigit():
            match = in_bus_order[int(entry)] if int(entry) < len(in_bus_order) else None
        elif entry:
            wanted = entry if entry.startswith("GPU-") else f"GPU-{entry}"
            found = [gpu for gpu in records if (gpu["uuid"] or "").lower().startswith(wanted.lower())]
            match = found[0] if len(found) == 1 else None
        if match is None or match["index"] in chosen:
            break  # CUDA ignores the rest of the list after an entry it cannot use
        chosen.append(match["index"])
    return chosen


def _record(position: int, gpu: Any) -> dict[str, Any]:
    get = gpu.get if isinstance(gpu, dict) else (lambda key: getattr(gpu, key, None))
    index = get("index")
    return {"index": index if isinstance(index, int) else position, "bus_id": get("bus_id"), "uuid": get("uuid")}
