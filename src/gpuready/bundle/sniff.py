"""Recognise a tool output by its content, whatever the file is called.

People paste `topo.txt`, `out`, `smi-ecc.log`: the name says little, the first lines say which
tool wrote it. `kind_of` returns the bundle file name whose parser reads that output, or None.
Order matters: the more specific shapes are tried first.
"""

from __future__ import annotations

import re

from gpuready.facts.cuda_samples import SHAPE as CUDA_P2P_SHAPE

# Only the start of a file is looked at: every recognised shape shows itself early.
SNIFF_CHARS = 65536

_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    ("nvidia-smi-q.xml", re.compile(r"<nvidia_smi_log\b")),
    ("nvml.json", re.compile(r'^\s*\{.*"format"\s*:\s*"gpuready-nvml"', re.DOTALL)),
    ("manifest.json", re.compile(r'^\s*\{.*"files"\s*:.*"collected"', re.DOTALL)),
    ("torch.json", re.compile(r'^\s*\{.*"arch_list"', re.DOTALL)),
    # `nvidia-smi topo -m`: a header row of GPU labels, then rows of link types.
    ("nvidia-smi-topo.txt", re.compile(r"^\s*GPU0\b.*\n(?:.*\n)*?GPU0\s+X\s+(?:NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)",
                                       re.MULTILINE)),
    ("nvidia-smi-topo.txt", re.compile(r"^\s*GPU0\s+(?:NIC0\s+)?CPU Affinity", re.MULTILINE)),
    # rows pasted without their header row
    ("nvidia-smi-topo.txt", re.compile(r"^\s*GPU0\s+X\s+(?:NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)\s", re.MULTILINE)),
    ("nvidia-smi-topo-p2p.txt", re.compile(r"^\s*GPU0\b.*\n(?:.*\n)*?GPU0\s+X\s+(?:OK|CNS|GNS|TNS|NS|DNS|U)\b",
                                           re.MULTILINE)),
    ("nvidia-smi-nvlink-s.txt", re.compile(r"^GPU \d+: .*\n\s+Link \d+:", re.MULTILINE)),
    ("nvidia-smi-q.txt", re.compile(r"=+\s*NVSMI LOG\s*=+|^GPU " + _BUS_ID + r"\s*$", re.MULTILINE)),
    ("nvidia-smi.txt", re.compile(r"NVIDIA-SMI \d|NVIDIA-SMI has failed|No devices were found|"
                                  r"Driver/library version mismatch|nvidia-smi: (?:command )?not found|"
                                  # at a line's start, as nvidia-smi prints them (a daemon's log puts its time first)
                                  r"^Unable to determine the device handle for GPU|^Failed to initialize NVML|"
                                  r"NVIDIA-SMI couldn't find libnvidia-ml|^\|\s{0,4}Processes:\s{2,}",
                                  re.IGNORECASE | re.MULTILINE)),
    ("cuda-p2p.txt", CUDA_P2P_SHAPE),
    ("nvidia-smi-L.txt", re.compile(r"^GPU \d+: .+\(UUID: (?:GPU|MIG)-", re.MULTILINE)),
    ("lspci-vv.txt", re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [^:\n]+: .+", re.MULTILINE)),
    ("dmesg.txt", re.compile(r"NVRM: |nvidia-nvswitch\d*: |\bkernel: |^\[\s*\d+\.\d+\] |nv-fabricmanager\[|"
                             r"nvidia-fabricmanager", re.MULTILINE)),
    ("meminfo.txt", re.compile(r"^MemTotal:\s+\d+", re.MULTILINE)),
    ("cpuinfo.txt", re.compile(r"^processor\s*:\s*\d+", re.MULTILINE)),
    ("df.txt", re.compile(r"^Filesystem\s+\S*(?:blocks|Size)", re.MULTILINE)),
    ("ibv_devinfo.txt", re.compile(r"^hca_id:\s", re.MULTILINE)),
]


def kind_of(text: str) -> str | None:
    """Only the head is looked at (the reader passes no more than SNIFF_CHARS)."""
    head = text[:SNIFF_CHARS]
    return next((kind for kind, shape in _SHAPES if shape.search(head)), None)


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
