"""`nvidia-smi topo -m`, `nvidia-smi topo -p2p r` and `nvidia-smi nvlink -s`."""

from __future__ import annotations

import re

from gpuready.facts.smi_tree import SmiParseError
from gpuready.facts.types import NvLink, Topology
from gpuready.facts.units import LIMITS, bounded, cpu_ranges, first_number, strip_ansi

_LINK_TOKEN = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NV#)$")
_DEVICE_LABEL = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|mlx5_\w+)$")


def _gpu_number(label: str) -> int:
    """`GPU3` → 3; ValueError for an index no real machine has."""
    return bounded(label[3:], "gpus", f"the GPU label {label[:20]!r}")


def _check_link_count(token: str, row_label: str) -> None:
    if token.startswith("NV") and token[2:].isdigit():
        bounded(token[2:], "nvlinks", f"{row_label}'s link {token[:20]!r}")


def parse_topo_matrix(text: str) -> Topology:
    """The connection matrix; tabs or spaces, with or without the legend and colour codes."""
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    header_index = next((i for i, line in enumerate(lines) if re.match(r"^\s*GPU0\b", line)), None)
    if header_index is None:
        raise SmiParseError("no matrix header starting with GPU0 found")
    columns = [token for token in lines[header_index].split()
               if _DEVICE_LABEL.match(token)]
    gpu_labels = [label for label in columns if label.startswith("GPU")]
    links: dict[tuple[int, int], str] = {}
    cpu_affinity: dict[int, str] = {}
    numa_affinity: dict[int, str] = {}
    nics: dict[str, dict[int, str]] = {}
    for line in lines[header_index + 1:]:
        tokens = line.split()
        if not tokens or tokens[0] == "Legend:" or not _DEVICE_LABEL.match(tokens[0]):
            if tokens and tokens[0] == "Legend:":
                break
            continue
        row_label, values = tokens[0], tokens[1:]
        link_values = values[:len(columns)]
        if len(link_values) < len(columns) or not all(_LINK_TOKEN.match(v) for v in link_values):
            raise SmiParseError(f"row {row_label} does not hold {len(columns)} link types: {line.strip()!r}")
        rest = values[len(columns):]
        if row_label.startswith("GPU"):
            row = _gpu_number(row_label)
            for column_label, value in zip(columns, link_values):
                _check_link_count(value, row_label)
                if column_label.startswith("GPU"):
                    links[(row, _gpu_number(column_label))] = "SYS" if value == "SOC" else value
                else:
                    nics.setdefault(column_label, {})[row] = value
            if rest:
                if re.fullmatch(r"[\d,\-]+", rest[0]):  # a CPU list (not N/A): bounded, or the file is wrong
                    cpu_ranges(rest[0])
                cpu_affinity[row] = rest[0]
            if len(rest) > 1:
                numa_affinity[row] = rest[1]
    if not links:
        raise SmiParseError("the matrix has no GPU rows")
    return Topology(gpu_labels=gpu_labels, links=links, cpu_affinity=cpu_affinity,
                    numa_affinity=numa_affinity, nics=nics)


def parse_topo_p2p(text: str) -> dict[tuple[int, int], str]:
    """`nvidia-smi topo -p2p r`: OK, CNS (chipset not supported), GNS, TNS, NS, U."""
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    header_index = next((i for i, line in enumerate(lines) if re.match(r"^\s*GPU0\b", line)), None)
    if header_index is None:
        raise SmiParseError("no P2P matrix header starting with GPU0 found")
    columns = [_gpu_number(token) for token in lines[header_index].split() if re.fullmatch(r"GPU\d+", token)]
    status: dict[tuple[int, int], str] = {}
    for line in lines[header_index + 1:]:
        tokens = line.split()
        if not tokens or not re.fullmatch(r"GPU\d+", tokens[0]):
            if tokens and tokens[0] == "Legend:":
                break
            continue
        row = _gpu_number(tokens[0])
        for column, value in zip(columns, tokens[1:]):
            status[(row, column)] = value
    return status


_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINE = re.compile(r"^\s*Link (\d+):\s*(.*)$")


def parse_nvlink_status(text: str) -> dict[int, list[NvLink]]:
    """`nvidia-smi nvlink -s`: GPU index → links. An empty file means no NVLink was reported."""
    links: dict[int, list[NvLink]] = {}
    current: int | None = None
    for line in strip_ansi(text).splitlines():
        gpu_match = _NVLINK_GPU.match(line.strip())
        if gpu_match:
            current = _gpu_number(f"GPU{gpu_match.group(1)}")
            links[current] = []
            continue
        link_match = _NVLINK_LINE.match(line)
        if link_match and current is not None:
            state = link_match.group(2).strip()
            inactive = "inactive" in state.lower() or "disabled" in state.lower()
            speed = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)\s*GB/s", state)
            link = bounded(link_match.group(1), "nvlinks",
                           f"GPU {current}'s link number {link_match.group(1)[:20]!r}")
            if len(links[current]) >= LIMITS["nvlinks"][0]:
                raise ValueError(f"GPU {current} lists more than {LIMITS['nvlinks'][0]} NVLink links")
            links[current].append(NvLink(link=link, active=not inactive,
                                         speed_gb_per_s=first_number(speed.group(1)) if speed else None))
    return links
