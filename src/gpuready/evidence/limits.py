"""What gpuready reads of what it is given: one set of limits for every way evidence comes in (README, "Input
limits").

`check --bundle`, `plan`, `launch` and `diagnose` read their inputs through the one evidence reader
(evidence/stream.py), which holds them to these; the defaults keep a run under 500 MB of memory on any input.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True, kw_only=True)
class InputLimits:
    """The limits of one run. The first five have a command-line option (`--max-members`, `--max-*-mib`); the others
    are fixed here."""

    max_members: int = 4096
    """Archive members (and folder entries) looked at; beyond it they are counted, not read."""
    max_archive_bytes: int = 1024 * MIB
    """Bytes inflated from one archive or compressed file, skipped members included (a decompression bomb stops)."""
    max_file_bytes: int = 16 * MIB
    """A file parsed whole (nvidia-smi -q, lspci -vvv, JSON) is read up to this, never further. The largest real
    ones are a few MB (`lspci -vvv` of a big server, `-q -x` of 8 GPUs is ~0.2 MB)."""
    max_held_bytes: int = 64 * MIB
    """All files parsed whole, together. Parsed, text takes ~2-3 times its size: this keeps a run under 500 MB."""
    max_input_bytes: int = 8192 * MIB
    """All bytes read from all inputs; past it, what is left is skipped and the report names it (the holes of a
    sparse file are skipped, not read)."""
    max_files: int = 10_000
    """Files read from all inputs (and, in `diagnose`, entries listed); past it they are counted, not read."""
    max_depth: int = 8
    """Folders (and archives) nested in an input that are walked; deeper ones are named, not read."""
    max_line_bytes: int = 64 * 1024
    """A longer line is cut to this (a minified JSON or a binary blob in a log; the kernel prints lines under 1 KiB)."""
    max_log_kept_bytes: int = 16 * MIB
    """Kernel-log lines kept for the checks (those that name NVIDIA, NVSwitch, PCIe AER, IOMMU or a GPU reset); past
    this, the rest are counted, not kept."""


DEFAULT_LIMITS = InputLimits()


def size_text(count: int) -> str:
    """`16 MiB`, `1.5 KiB`, `12 bytes`: a size as the notes about limits say it."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{count} bytes"
