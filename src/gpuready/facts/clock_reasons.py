"""Clock-event ("throttle") reasons: NVML's bit flags and nvidia-smi's labels, one vocabulary.

Bits from nvml.h `nvmlClocksEventReason*` (also exported by nvidia-ml-py as
`nvmlClocksEventReason*` / `nvmlClocksThrottleReason*`). What a reason means for a run (thermal, hardware, the
power brake) is knowledge/clock_reasons.toml's.
"""

from __future__ import annotations

REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}

# nvidia-smi XML tags and text labels (normalised) → reason name.
_LABELS = {
    "idle": "gpu_idle",
    "display_clock_setting": "display_clocks_setting",
    "hw_power_brake": "hw_power_brake_slowdown",
}


def reasons_from_mask(mask: int) -> frozenset[str]:
    return frozenset(name for name, bit in REASON_BITS.items() if mask & bit)


def reason_from_label(key: str) -> str | None:
    """`clocks_event_reason_sw_power_cap`, `clocks_throttle_reason_gpu_idle`, `sw_power_cap` → name."""
    for prefix in ("clocks_event_reason_", "clocks_throttle_reason_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    key = _LABELS.get(key, key)
    return key if key in REASON_BITS else None
