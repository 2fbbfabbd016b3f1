"""Turn the strings standard tools print into numbers with units in their names."""

from __future__ import annotations

import math
import re

from gpuready.facts.bad_input import ParseFailure
from gpuready.i18n import Said, said

# What a real machine can have: the bound on every count, index, range and size read from a file, in ONE place.
# A value at or beyond its bound is not a fact but a corrupt or hostile file (`topo -m` with CPU affinity
# `0-2147483649` would build a 2^31-element set): the parser raises a ParseFailure (a ValueError) with one sentence,
# and build_facts reports that file as `bundle.unreadable` (exit 2) while the other files are still judged. Each bound
# is far above today's largest machines, so that no real output trips it.
LIMITS: dict[str, int] = {  # name: bound (what it counts and why no machine reaches it: `parse.limit.<name>`)
    "cpus": 2**16,  # the kernel's NR_CPUS tops out at 8,192
    "numa_nodes": 2**10,  # the kernel's MAX_NUMNODES is 1,024
    "gpus": 1024,  # NVML enumerates a few dozen in one host at most
    "nvlinks": 64,  # NVML_NVLINK_MAX_LINKS is 36 in nvidia-ml-py 13
    "bytes": 2**50,  # 1 PiB; one GPU has 2^38 at most, one host 2^44
    "pcie_gen": 16,  # Gen6 is the newest
    "pcie_width": 64,  # x32 is the widest link the standard defines
}
MAX_MAGNITUDE = 2**53
"""A number without a bound of its own above is absurd beyond ±2^53 (where floats stop counting in ones): the
converters read it as None, like NaN, ±inf and text that is no number."""


def bounded(value: int | str, limit: str, what: Said | str) -> int:
    """`value` (an int, or a string of digits) when 0 <= value < LIMITS[limit]; else a ParseFailure naming `what`
    (catalogue text, or a field's name as the file spells it)."""
    bound = LIMITS[limit]
    if isinstance(value, str):  # digits only: a regex matched them; too many digits is beyond any bound
        value = int(value) if len(value) <= 30 else 10**30
    if value < 0:
        raise ParseFailure("parse.limit.negative", what=what, value=f"{value:,}", noun=said(f"parse.limit.{limit}"))
    if value >= bound:
        raise ParseFailure("parse.limit.beyond", what=what, value=f"{value:,}" if value < 10**30 else
                           said("parse.limit.30_digits"), bound=bound, noun=said(f"parse.limit.{limit}"),
                           why=said(f"parse.limit.{limit}.why"))
    return value


def finite(value: object, *, non_negative: bool = False) -> float | None:
    """A JSON number as a float: None for NaN, ±inf, a magnitude beyond 2^53, a negative where `non_negative`,
    and anything that is not a number (bool, str, list …)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        if abs(value) > MAX_MAGNITUDE:
            return None
        value = float(value)
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE or (non_negative and value < 0):
        return None
    return value


def whole(value: object) -> int | None:
    """A JSON number as a non-negative int (counts, sizes, indices): None for fractions and what `finite` rejects."""
    number = finite(value, non_negative=True)
    return int(number) if number is not None and number == int(number) else None


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


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def first_number(value: str | None) -> float | None:
    """The first number in a tool's text (`700.00 W` → 700.0); None for N/A, NaN, inf or beyond ±2^53."""
    value = clean(value)
    if value is None:
        return None
    match = _NUMBER.search(value)
    return finite(float(match.group())) if match else None


def to_int(value: str | None) -> int | None:
    """A count as a tool prints it (`12`, `0x1f`): None for N/A, negatives, fractions, NaN, inf or beyond 2^53."""
    value = clean(value)
    if value is None:
        return None
    if re.fullmatch(r"0x[0-9a-fA-F]+", value):
        return whole(int(value, 16))
    number = first_number(value)
    return int(number) if number is not None and number >= 0 else None


def to_bytes(value: str | None) -> int | None:
    """`143771 MiB` → bytes; a bare number counts as MiB, as nvidia-smi's memory fields do.

    None for what is not a size (N/A, negative); ValueError for a size of 2^50 bytes or more (LIMITS).
    """
    value = clean(value)
    if value is None:
        return None
    match = re.fullmatch(r"(\d{1,30}(?:\.\d{1,30})?)\s*([KMGT]i?B|B)?", value, flags=re.IGNORECASE)
    if not match:
        return None
    unit = (match.group(2) or "MiB").lower()
    return bounded(int(float(match.group(1)) * _BYTES_PER_UNIT[unit]), "bytes",
                   said("parse.what.size", size=repr(value[:40])))


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


def cpu_ranges(text: str) -> list[tuple[int, int]]:
    """A Linux CPU list as cgroup, sysfs and `nvidia-smi topo -m` print it (`0-15,32-47`, `3`) → [(low, high)].

    Raises ValueError on anything else, on a CPU at or beyond LIMITS["cpus"], and on more entries than that.
    """
    text = text.strip()
    if not text:
        raise ParseFailure("parse.cpu_list.empty")
    bound = LIMITS["cpus"]
    parts = text.split(",", bound)
    if len(parts) > bound:
        raise ParseFailure("parse.cpu_list.too_long", bound=bound)
    ranges: list[tuple[int, int]] = []
    for part in parts:
        part = part.strip()
        match = re.fullmatch(r"(\d{1,12})(?:-(\d{1,12}))?", part)
        if not match:
            raise ParseFailure("parse.cpu_list.bad_entry", entry=repr(part[:40]))
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ParseFailure("parse.cpu_list.backwards", entry=repr(part))
        bounded(high, "cpus", said("parse.what.cpu_entry", entry=repr(part)))
        ranges.append((low, high))
    return ranges


def parse_cpu_count(text: str) -> int:
    """How many distinct CPUs a CPU list names (overlaps counted once, no set built); ValueError as `cpu_ranges`."""
    count, reached = 0, -1
    for low, high in sorted(cpu_ranges(text)):
        if high > reached:
            count += high - max(low, reached + 1) + 1
            reached = high
    return count


def parse_cpu_list(text: str) -> set[int]:
    """`0-15,32-47` → {0..15, 32..47}; an empty text (sysfs's form of an empty mask) → set(); otherwise ValueError
    as `cpu_ranges`, so the set never has more than 2^16 members."""
    cpus: set[int] = set()
    if not text.strip():
        return cpus
    for low, high in cpu_ranges(text):
        cpus.update(range(low, high + 1))
    return cpus
