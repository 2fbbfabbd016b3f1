"""Recognise a tool output by its content, whatever the file is called.

People paste `topo.txt`, `out`, `smi-ecc.log`: the name says little, the first lines say which
tool wrote it. `kind_of` returns the bundle file name whose parser reads that output, or None.
Order matters: the more specific shapes are tried first.
"""

from __future__ import annotations

import re
from typing import Callable

from gpuready.facts.cuda_samples import SHAPE as CUDA_P2P_SHAPE

# Only the start of a file is looked at: every recognised shape shows itself early.
SNIFF_CHARS = 65536

_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_LINK = r"(?:NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)"


def _json_with(*keys: str):
    """A JSON object holding these quoted keys (plain string search: linear on any head)."""
    def matches(head: str) -> bool:
        return head.lstrip()[:1] == "{" and all(key in head for key in keys)
    return matches


# Every pattern is linear on any head: anchored to a line's start with bounded runs (`[ \t]{0,40}`, `[^\n]{0,200}`),
# never `\s` where a line break must not match, never `.*` twice.
_SHAPES: list[tuple[str, Callable[[str], object]]] = [
    ("nvidia-smi-q.xml", re.compile(r"<nvidia_smi_log\b").search),
    ("nvml.json", _json_with('"gpuready-nvml"', '"format"')),
    ("manifest.json", _json_with('"files"', '"collected"')),
    ("torch.json", _json_with('"arch_list"')),
    # `nvidia-smi topo -m`: the row of GPU0 (header row or not), or a one-GPU matrix's header
    ("nvidia-smi-topo.txt", re.compile(r"^[ \t]{0,40}GPU0[ \t]{1,40}X[ \t]{1,40}" + _LINK + r"\b", re.MULTILINE).search),
    ("nvidia-smi-topo.txt", re.compile(r"^[ \t]{0,40}GPU0[ \t]{1,40}(?:NIC0[ \t]{1,40})?CPU Affinity",
                                       re.MULTILINE).search),
    ("nvidia-smi-topo-p2p.txt", re.compile(r"^[ \t]{0,40}GPU0[ \t]{1,40}X[ \t]{1,40}(?:OK|CNS|GNS|TNS|NS|DNS|U)\b",
                                           re.MULTILINE).search),
    ("nvidia-smi-nvlink-s.txt", re.compile(r"^GPU \d{1,3}: [^\n]{0,200}\n[ \t]{1,20}Link \d{1,3}:", re.MULTILINE).search),
    ("nvidia-smi-q.txt", re.compile(r"NVSMI LOG|^GPU " + _BUS_ID + r"[ \t]{0,20}$", re.MULTILINE).search),
    ("nvidia-smi.txt", re.compile(r"NVIDIA-SMI \d|NVIDIA-SMI has failed|No devices were found|"
                                  r"Driver/library version mismatch|nvidia-smi: (?:command )?not found|"
                                  # at a line's start, as nvidia-smi prints them (a daemon's log puts its time first)
                                  r"^Unable to determine the device handle for GPU|^Failed to initialize NVML|"
                                  r"NVIDIA-SMI couldn't find libnvidia-ml|^\|[ \t]{0,4}Processes:[ \t]{2,120}",
                                  re.IGNORECASE | re.MULTILINE).search),
    ("cuda-p2p.txt", CUDA_P2P_SHAPE.search),
    ("nvidia-smi-L.txt", re.compile(r"^GPU \d{1,3}: [^\n]{1,200}\(UUID: (?:GPU|MIG)-", re.MULTILINE).search),
    ("lspci-vv.txt", re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [^:\n]{1,200}: [^\n]",
                                re.MULTILINE).search),
    ("dmesg.txt", re.compile(r"NVRM: |nvidia-nvswitch\d{0,3}: |\bkernel: |^\[[ \t]{0,12}\d{1,12}\.\d{1,9}\] |"
                             r"nv-fabricmanager\[|nvidia-fabricmanager", re.MULTILINE).search),
    ("meminfo.txt", re.compile(r"^MemTotal:\s+\d+", re.MULTILINE).search),
    ("cpuinfo.txt", re.compile(r"^processor\s*:\s*\d+", re.MULTILINE).search),
    ("df.txt", re.compile(r"^Filesystem\s+\S*(?:blocks|Size)", re.MULTILINE).search),
    ("ibv_devinfo.txt", re.compile(r"^hca_id:\s", re.MULTILINE).search),
]


def kind_of(text: str) -> str | None:
    """Only the head is looked at (the reader passes no more than SNIFF_CHARS)."""
    head = text[:SNIFF_CHARS]
    return next((kind for kind, matches in _SHAPES if matches(head)), None)


# What text files do not carry: NUL, control characters other than tab, newline, vertical tab, form feed, carriage
# return and escape (terminal colours), and undecodable bytes (U+FFFD once decoded). Random bytes are about 12 % of
# these; a text file with a stray byte far below 1 %.
_BINARY = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]")
BINARY_SHARE = 0.01


def why_not_text(text: str) -> str | None:
    """`is not text: …` where the head of a file is binary content, else None. Looks at the head only."""
    head = text[:SNIFF_CHARS]
    bad = sum(1 for _ in _BINARY.finditer(head))
    if bad and bad > BINARY_SHARE * len(head):
        return (f"is not text: {bad} of its first {len(head)} characters are NUL, control characters or undecodable "
                "bytes, not what a tool prints")
    return None
