"""Turn the strings standard tools print into numbers with units in their names."""

from __future__ import annotations

import re

_NOT_AVAILABLE = {"", "n/a", "[n/a]", "not supported", "[not supported]", "none", "unknown", "-"}
# What nvidia-smi prints where the driver failed to read a field.
_READ_ERRORS = ("err!", "unknown error", "[unknown error]", "gpu is lost", "[gpu is lost]")

_BYTES_PER_UNIT = {"b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
                   "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes and carriage returns pasted along with tool output."""
    return _ANSI_ESCAPE.sub("", text).replace("\r", "")


def is_read_error(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _READ_ERRORS


def clean(value: str | None) -> str | None:
    """The value, or None where the tool printed N/A, an error, or nothing."""
    if value is None:
        return None
    value = value.strip()
    lowered = value.lower()
    if lowered in _NOT_AVAILABLE or lowered in _READ_ERRORS:
        return None
    return value


def first_number(value: str | None) -> float | None:
    value = clean(value)
    if value is None:
        return None
    match = re.search(r"-?\d+(?:\.\d+)?", value)
    return float(match.group()) if match else None


def to_int(value: str | None) -> int | None:
    value = clean(value)
    if value is None:
        return None
    if re.fullmatch(r"0x[0-9a-fA-F]+", value):
        return int(value, 16)
    number = first_number(value)
    return int(number) if number is not None else None


def to_bytes(value: str | None) -> int | None:
    """`143771 MiB` → bytes; a bare number counts as MiB, as nvidia-smi's memory fields do."""
    value = clean(value)
    if value is None:
        return None
    match = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?", value, flags=re.IGNORECASE)
    if not match:
        return None
    unit = (match.group(2) or "MiB").lower()
    return int(float(match.group(1)) * _BYTES_PER_UNIT[unit])


def to_bool(value: str | None) -> bool | None:
    value = clean(value)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("enabled", "yes", "active", "on", "true", "1"):
        return True
    if lowered in ("disabled", "no", "not active", "off", "false", "0"):
        return False
    return None


def normalize_bus_id(text: str | None) -> str | None:
    """`00000000:3B:00.0`, `PCI:0000:3b:00`, `3b:00.0` → `0000:3b:00.0`."""
    if not text:
        return None
    text = text.strip().lower()
    if text.startswith("pci:"):
        text = text[4:]
    match = re.fullmatch(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?", text)
    if not match:
        return None
    domain, bus, device, function = match.groups()
    domain_int = int(domain, 16) if domain else 0
    return f"{domain_int & 0xFFFF:04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function or '0'}"


def parse_cpu_list(text: str) -> set[int]:
    """`0-15,32-47` → {0..15, 32..47}."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part or not re.fullmatch(r"\d+(-\d+)?", part):
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus
