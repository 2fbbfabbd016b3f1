"""Clock-event ("throttle") reasons: NVML's bit flags and nvidia-smi's labels, one vocabulary.

Bits from nvml.h `nvmlClocksEventReason*` (also exported by nvidia-ml-py as
`nvmlClocksEventReason*` / `nvmlClocksThrottleReason*`).
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

# Reasons that mean the GPU is slowed by heat or by the board/PSU, not by policy or idleness.
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
HARDWARE_REASONS = frozenset({"hw_slowdown", "hw_power_brake_slowdown"})
# HW Slowdown's sub-reasons (nvidia-smi prints them indented under "HW Slowdown"): the external power brake
# is asserted by the platform (PSU/BMC), not by the GPU's own temperature.
POWER_BRAKE_REASON = "hw_power_brake_slowdown"

# nvidia-smi XML tags and text labels (normalised) → reason name.
_LABELS = {
    "idle": "gpu_idle",
    "display_clock_setting": "display_clocks_setting",
    "hw_power_brake": "hw_power_brake_slowdown",
}


def is_power_brake(reasons: frozenset[str] | set[str] | None) -> bool:
    """The platform is braking the GPU: HW Power Brake Slowdown active while HW Thermal Slowdown is not."""
    reasons = reasons or frozenset()
    return POWER_BRAKE_REASON in reasons and "hw_thermal_slowdown" not in reasons


def reasons_from_mask(mask: int) -> frozenset[str]:
    return frozenset(name for name, bit in REASON_BITS.items() if mask & bit)


def reason_from_label(key: str) -> str | None:
    """`clocks_event_reason_sw_power_cap`, `clocks_throttle_reason_gpu_idle`, `sw_power_cap` → name."""
    for prefix in ("clocks_event_reason_", "clocks_throttle_reason_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    key = _LABELS.get(key, key)
    return key if key in REASON_BITS else None
