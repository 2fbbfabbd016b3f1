"""Recognise a tool output by its content, whatever the file is called.

People paste `topo.txt`, `out`, `smi-ecc.log`: the name says little, the first lines say which
tool wrote it. `kind_of` returns the bundle file name whose parser reads that output, or None.
Order matters: the more specific shapes are tried first.
"""

from __future__ import annotations

import re
from typing import Callable

from gpuready.facts.bad_input import Sentence, sentence
from gpuready.facts.cuda_samples import SHAPE as CUDA_P2P_SHAPE
from gpuready.facts.marked_lines import first_at_line_start, line_start
from gpuready.facts.nvidia_smi_plain import process_rows_alone

# Only the start of a file is looked at: every recognised shape shows itself early.
SNIFF_CHARS = 65536

_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_LINK = r"(?:NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)"


def _json_with(*keys: str):
    """A JSON object holding these quoted keys (plain string search: linear on any head)."""
    def matches(head: str) -> bool:
        return head.lstrip()[:1] == "{" and all(key in head for key in keys)
    return matches


def _indented_line_start(pattern: str) -> Callable[[str], bool]:
    """Whether `pattern` starts a line after at most 40 spaces or tabs (`^[ \t]{0,40}pattern`, re.MULTILINE).
    `pattern` starts with a literal the engine skips to at C speed; only the lines it is found on are looked at."""
    regex = re.compile(pattern)
    return lambda head: first_at_line_start(head, regex, _tabs_or_spaces) is not None


def _tabs_or_spaces(indent: str) -> bool:
    return len(indent) <= 40 and not indent.strip(" \t")


def _any_of(*matchers: Callable[[str], object]) -> Callable[[str], bool]:
    return lambda head: any(matches(head) for matches in matchers)


# Every pattern is linear on any head, bounded runs (`[ \t]{0,40}`, `[^\n]{0,200}`), never `\s` where a line break must
# not match, never `.*` twice. None starts with `^` or a case-blind letter (the engine would try it at every
# character): a line's start is a look back after the first words (line_start) or checked where those are found.
_SHAPES: list[tuple[str, Callable[[str], object]]] = [
    ("nvidia-smi-q.xml", re.compile(r"<nvidia_smi_log\b").search),
    ("nvml.json", _json_with('"gpuready-nvml"', '"format"')),
    ("manifest.json", _json_with('"files"', '"collected"')),
    ("torch.json", _json_with('"arch_list"')),
    # `nvidia-smi topo -m`: the row of GPU0 (header row or not), or a one-GPU matrix's header
    ("nvidia-smi-topo.txt", _indented_line_start(r"GPU0[ \t]{1,40}(?:X[ \t]{1,40}" + _LINK + r"\b|"
                                                 r"(?:NIC0[ \t]{1,40})?CPU Affinity)")),
    ("nvidia-smi-topo-p2p.txt", _indented_line_start(r"GPU0[ \t]{1,40}X[ \t]{1,40}(?:OK|CNS|GNS|TNS|NS|DR|DNS|U)\b")),
    ("nvidia-smi-nvlink-s.txt", re.compile(line_start("GPU ") + r"\d{1,3}: [^\n]{0,200}\n[ \t]{1,20}Link \d{1,3}:")
     .search),
    ("nvidia-smi-q.txt", _any_of(re.compile("NVSMI LOG").search,
                                 re.compile(line_start("GPU ") + _BUS_ID + r"[ \t]{0,20}$", re.MULTILINE).search,
                                 # a `-q -d PERFORMANCE` section alone: its header, then its first field
                                 re.compile(r"Clocks (?:Event|Throttle) Reasons[ \t]{0,20}\n[ \t]{1,40}Idle[ \t]{1,60}: "
                                            r"(?:Not )?Active").search)),
    # case-blind: the first letter a class of what case-blind matches it (only N and n for `n`, …)
    ("nvidia-smi.txt", _any_of(
        re.compile(r"[Nn](?i:VIDIA-SMI \d|VIDIA-SMI has failed|o devices were found|vidia-smi: (?:command )?not found|"
                   r"VIDIA-SMI couldn't find libnvidia-ml)|[Dd](?i:river/library version mismatch)").search,
        # at a line's start, as nvidia-smi prints them (a daemon's log puts its time first)
        re.compile(r"[Uu](?<![^\n][Uu])(?i:nable to determine the device handle for GPU)|"
                   r"[Ff](?<![^\n][Ff])(?i:ailed to initialize NVML)|"
                   + line_start("|") + r"(?i:[ \t]{0,4}Processes:[ \t]{2,120})").search)),
    ("cuda-p2p.txt", CUDA_P2P_SHAPE.search),
    # or PyTorch's collect_env, which prints `nvidia-smi -L` without the UUIDs after its label
    ("nvidia-smi-L.txt", re.compile(line_start("GPU ") + r"\d{1,3}: [^\n]{1,200}\(UUID: (?:GPU|MIG)-|"
                                    r"GPU models and configuration[ \t]{0,4}:[ \t]{0,40}\n?GPU \d{1,3}: ").search),
    # a bus id at a line's start, searched for from its last colon, looked back from there
    ("lspci-vv.txt", re.compile(r":(?:(?<=^[0-9a-fA-F]{2}:)|(?<=^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:))"
                                r"[0-9a-fA-F]{2}\.[0-7] [^:\n]{1,200}: [^\n]", re.MULTILINE).search),
    ("dmesg.txt", _any_of(
        # `\bkernel`: the look back after the k, so that the engine skips to the letters
        re.compile(r"NVRM: |nvidia-nvswitch\d{0,3}: |k(?<!\wk)ernel: |nv-fabricmanager\[|nvidia-fabricmanager").search,
        re.compile(line_start("[") + r"[ \t]{0,12}\d{1,12}\.\d{1,9}\] ").search)),
    ("meminfo.txt", re.compile(line_start("MemTotal:") + r"\s+\d+").search),
    ("cpuinfo.txt", re.compile(line_start("processor") + r"\s*:\s*\d+").search),
    ("df.txt", re.compile(line_start("Filesystem") + r"\s+\S*(?:blocks|Size)").search),
    ("ibv_devinfo.txt", re.compile(line_start("hca_id:") + r"\s").search),
    # `ibstat`: a CA's name, then its type on the next line (read by the same parser as ibv_devinfo)
    ("ibv_devinfo.txt", re.compile(line_start("CA '") + r"[^'\n]{1,100}'[ \t]{0,20}\r?\n[ \t]{1,40}CA type:").search),
    # `nvidia-imex-ctl -N`: its connectivity table or domain line; `-N -j`: the nodes' connection maps
    ("nvidia-imex-ctl.txt", _any_of(re.compile(r"Nodes From\\To[ \t]{1,40}0\b|Domain State: [A-Z]").search,
                                    _json_with('"nodes"', '"connections"'))),
    # the rows of nvidia-smi's Processes block pasted without their table: the weakest shape, tried last
    ("nvidia-smi.txt", process_rows_alone),
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


def why_not_text(text: str) -> Sentence | None:
    """`is not text: …` where the head of a file is binary content, else None. Looks at the head only."""
    head = text[:SNIFF_CHARS]
    bad = sum(1 for _ in _BINARY.finditer(head))
    if bad and bad > BINARY_SHARE * len(head):
        return sentence("reader.unreadable.not_text", bad=bad, count=len(head))
    return None
