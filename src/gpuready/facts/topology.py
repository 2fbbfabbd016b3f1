"""`nvidia-smi topo -m`, `nvidia-smi topo -p2p r` and `nvidia-smi nvlink -s`."""

from __future__ import annotations

import re

from gpuready.facts.marked_lines import first_at_line_start, line_around, marked_lines, one_line_break
from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.smi_tree import SmiParseError
from gpuready.facts.types import NvLink, Topology
from gpuready.facts.units import LIMITS, bounded, cpu_ranges, first_number, strip_ansi
from gpuready.i18n import said

_LINK_TOKEN = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NV#)$")
_DEVICE_LABEL = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|mlx5_\w+)$")
# `[^\S\n]`: a space that does not end the line, as these are searched for over the whole text
_HEADER = re.compile(r"GPU0[^\S\n]+(?:GPU1|NIC0|mlx|CPU Affinity)")  # where only spaces are before it on its line
_GPU_ROW = re.compile(r"\n[^\S\n]*(GPU\d{1,3})[^\S\n]+(?:X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)\b")
_ROW_MARKER = re.compile("GPU|NIC|mlx|Legend:")


def _is_blank(indent: str) -> bool:
    return not indent.strip()


def _gpu_number(label: str) -> int:
    """`GPU3` → 3; ValueError for an index no real machine has."""
    return bounded(label[3:], "gpus", said("parse.what.gpu_label", label=repr(label[:20])))


def _check_link_count(token: str, row_label: str) -> None:
    if token.startswith("NV") and token[2:].isdigit():
        bounded(token[2:], "nvlinks", said("parse.what.row_link", row=row_label, link=repr(token[:20])))


def parse_topo_matrix(text: str) -> Topology:
    """The connection matrix; tabs or spaces, with or without the legend and colour codes.

    Pasted matrices lose things: a header row (then the GPU rows name the columns, the NICs are numbered), a tab
    between two NIC cells (`NODENODE`). The GPU-to-GPU cells must be whole; a row whose NIC cells are garbled keeps
    its GPU links and loses only its NIC links."""
    gpu_labels, nic_labels, rows = _columns(one_line_break(strip_ansi(text)))
    links: dict[tuple[int, int], str] = {}
    cpu_affinity: dict[int, str] = {}
    numa_affinity: dict[int, str] = {}
    nics: dict[str, dict[int, str]] = {}
    for line in marked_lines(rows, _ROW_MARKER):  # a row's first word is a device's label, or `Legend:` ends the rows
        tokens = line.split()
        if not tokens or tokens[0] == "Legend:" or not _DEVICE_LABEL.match(tokens[0]):
            if tokens and tokens[0] == "Legend:":
                break
            continue
        row_label, values = tokens[0], tokens[1:]
        gpu_values = values[:len(gpu_labels)]
        if len(gpu_values) < len(gpu_labels) or not all(_LINK_TOKEN.match(v) for v in gpu_values):
            raise SmiParseError("parse.topo.short_row", row=row_label, count=len(gpu_labels), line=repr(line.strip()))
        links_end = len(gpu_values)
        while links_end < len(values) and _LINK_TOKEN.match(values[links_end]):
            links_end += 1
        nic_values = values[len(gpu_labels):links_end]
        rest = values[links_end:]
        if rest and not re.fullmatch(r"[\d,\-]+|N/A", rest[0]):  # a garbled NIC cell: the row's NIC links are lost
            nic_values, rest = [], [token for token in rest if re.fullmatch(r"[\d,\-]+|N/A", token)]
        if not row_label.startswith("GPU"):
            continue
        row = _gpu_number(row_label)
        for column_label, value in zip(gpu_labels, gpu_values):
            _check_link_count(value, row_label)
            links[(row, _gpu_number(column_label))] = "SYS" if value == "SOC" else value
        if len(nic_values) == len(nic_labels):
            for column_label, value in zip(nic_labels, nic_values):
                nics.setdefault(column_label, {})[row] = value
        if rest:
            if re.fullmatch(r"[\d,\-]+", rest[0]):  # a CPU list (not N/A): bounded, or the file is wrong
                cpu_ranges(rest[0])
            cpu_affinity[row] = rest[0]
        if len(rest) > 1:
            numa_affinity[row] = rest[1]
    if not links:
        raise SmiParseError("parse.topo.no_rows")
    return Topology(gpu_labels=gpu_labels, links=links, cpu_affinity=cpu_affinity,
                    numa_affinity=numa_affinity, nics=nics, nic_names=nic_legend(text))


_NIC_LEGEND = re.compile(r"^[^\S\n]*NIC Legend:[^\S\n]*$", re.MULTILINE)
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d{1,4}):\s*([\w.:-]{1,64})\s*$")


def nic_legend(text: str) -> dict[str, str]:
    """`NIC Legend:` below the matrix (nvidia-smi 525 and later): `NIC0: mlx5_0` → {"NIC0": "mlx5_0"}; {} where the
    matrix has none (older ones name the devices in the columns themselves)."""
    legend = _NIC_LEGEND.search(strip_ansi(text))
    names: dict[str, str] = {}
    if legend is None:
        return names
    for line in strip_ansi(text)[legend.end():].splitlines():
        entry = _NIC_LEGEND_ENTRY.match(line)
        if entry:
            names[entry.group(1)] = entry.group(2)
        elif line.strip() and names:
            break  # the legend ends at the first other line after its entries
    return names


def _columns(text: str) -> tuple[list[str], list[str], str]:
    """The GPU columns, the NIC columns and the text of the rows below them: from the header row (the first line that
    starts with one, after spaces), else from the rows."""
    header = first_at_line_start(text, _HEADER, _is_blank)
    if header is None:
        return *_columns_from_rows(text), text
    columns = [token for token in line_around(text, header.start()).split() if _DEVICE_LABEL.match(token)]
    gpu_labels = [label for label in columns if label.startswith("GPU")]
    nic_labels = [label for label in columns if not label.startswith("GPU")]
    return gpu_labels, nic_labels, text[text.find("\n", header.start()) + 1 or len(text):]


def _columns_from_rows(text: str) -> tuple[list[str], list[str]]:
    """The columns of a matrix pasted without its header row: the GPU rows' own labels, then as many NICs as the first
    row has link cells beyond them."""
    lined = "\n" + text  # a row is searched for as "\n" and spaces before its label, from the first line with a GPU
    first_line = lined.rfind("\n", 0, text.find("GPU") + 1) if "GPU" in text else len(lined)
    gpus = _GPU_ROW.findall(lined, first_line)
    if not gpus:
        raise SmiParseError("parse.topo.no_header")
    first_row = line_around(lined, _GPU_ROW.search(lined, first_line).start() + 1).split()
    cells = 0
    while cells + 1 < len(first_row) and _LINK_TOKEN.match(first_row[cells + 1]):
        cells += 1
    return gpus, [f"NIC{number}" for number in range(max(cells - len(gpus), 0))]


def parse_topo_p2p(text: str) -> dict[tuple[int, int], str]:
    """`nvidia-smi topo -p2p r`: OK, CNS (chipset not supported), GNS, TNS, NS, U."""
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    header_index = next((i for i, line in enumerate(lines) if re.match(r"^\s*GPU0\b", line)), None)
    if header_index is None:
        raise SmiParseError("parse.topo_p2p.no_header")
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
# The lines that can say anything: a GPU's (`GPU 0: …`), a link's (`Link 3: …`) and a poster's elision (`...`)
_NVLINK_MARKER = re.compile(r"GPU |Link |\.\.\.|\u2026")
_ELISION = re.compile(r"^\s{0,40}(?:\.{3,40}|\u2026{1,10})\s{0,40}$")


def parse_nvlink_status(text: str) -> dict[int, list[NvLink] | None]:
    """`nvidia-smi nvlink -s`: GPU index → links. An empty file means no NVLink was reported. Only the lines with a
    marker are read (blank lines: one C-speed search).

    nvidia-smi lists every link a GPU has, a down one as `<inactive>`; a GPU whose listing a poster cut (a line of
    dots: `...`, `......`) shows only some of them, so its links are None (not reported), never "the others down"."""
    links: dict[int, list[NvLink] | None] = {}
    cut: set[int] = set()
    current: int | None = None
    for line in marked_lines(strip_ansi(text), _NVLINK_MARKER):
        if _ELISION.match(line):
            if current is not None:
                cut.add(current)
            continue
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
                           said("parse.what.gpu_link_number", index=current, number=repr(link_match.group(1)[:20])))
            if len(links[current]) >= LIMITS["nvlinks"]:
                raise ParseFailure("parse.nvlink.too_many", index=current, bound=LIMITS["nvlinks"])
            links[current].append(NvLink(link=link, active=not inactive,
                                         speed_gb_per_s=first_number(speed.group(1)) if speed else None))
    return {index: None if index in cut else found for index, found in links.items()}
