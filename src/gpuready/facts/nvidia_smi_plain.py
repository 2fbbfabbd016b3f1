"""Plain `nvidia-smi`: the driver's own error sentences, and the GPU table when nothing else exists."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuready.facts.types import GpuFacts, GpuProcess
from gpuready.facts.units import bounded, first_number, normalize_bus_id, strip_ansi, to_bytes, to_int
from gpuready.i18n import said

# The sentences nvidia-smi prints when it cannot reach the GPUs, and what each means.
DRIVER_ERRORS = {
    "driver/library version mismatch": "version_mismatch",
    "couldn't communicate with the nvidia driver": "no_driver",
    "no devices were found": "no_devices",
    "command not found": "no_nvidia_smi",
    "nvidia-smi: not found": "no_nvidia_smi",
    "failed to initialize nvml: unknown error": "nvml_unknown",
    "nvidia-smi couldn't find libnvidia-ml.so": "no_library",
}
# `Unable to determine the device handle for GPU0000:91:00.0: Unknown Error` (one line per GPU that does not answer;
# the others are listed as usual): that GPU is lost, the driver itself works.
_HANDLE = re.compile(r"Unable to determine the device handle for GPU ?([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
                     r"\.[0-7]):? ?([^\n]{0,200})")

# `[^\S\n]`: a space that does not end the line, as these are searched over the whole text.
_ROW = re.compile(r"\n\|[^\S\n]*(\d+)[^\S\n]+([^\n]+?)[^\S\n]+(On|Off|ERR!)[^\S\n]*\|[^\S\n]*"
                  r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
# A row of the Processes block, read from its line's start to its end. Drivers since 450 print the MIG ids
# (`GPU GI CI PID Type Process name GPU Memory Usage`: `|    5   N/A  N/A     26598      C   ...envs/bin/python3     2885MiB |`),
# older ones `GPU PID Type Process name Usage` (`|    0     12345      C   python    1234MiB |`); Type is C (compute),
# G (graphics), C+G, M (an MPS server) or M+C; a long name is cut to `...` and its end; the memory reads `N/A` where
# the driver cannot attribute it (Windows WDDM). A paste may cut the left border of its first row or drop both borders.
_ROW_LINE = re.compile(r"[ \t]{0,40}(?:\|[ \t]{0,8})?(\d{1,3})[ \t]{1,12}(?:(?:N/A|\d{1,3})[ \t]{1,8}(?:N/A|\d{1,3})[ \t]{1,16})?"
                       r"(\d{1,10})[ \t]{1,8}(C\+G|M\+C|C|G|M)[ \t]{1,8}([^|\s][^|\n]{0,160}?)[ \t]{1,80}"
                       r"(?:(\d{1,9})MiB|N/A)[ \t]{0,8}\|?[ \t]{0,8}")
# Where a row can end (its memory cell, at most its right border after it): only the lines these are on are read.
_ROW_END = re.compile(r"(?:MiB|N/A)[ \t]{0,8}\|?[ \t]{0,8}$", re.MULTILINE)
_DRIVER = re.compile(r"Driver Version:\s*([\d.]+)")
_CUDA = re.compile(r"CUDA Version:\s*([\d.]+)")
# Case-blind; its first letter a class of what a case-blind `i` matches: a regex that starts with a class is searched
# for at C speed, one case-blind from its start is tried at every character.
_INFOROM = re.compile("[Ii\u0130\u0131](?i:nforom is corrupted at gpu ([0-9A-Fa-f:.]+))")
# The driver sentences, searched for in the lower-cased text
_DRIVER_ERROR = re.compile("|".join(re.escape(sentence) for sentence in DRIVER_ERRORS))
# What str.splitlines ends a line at besides "\n" and "\r" (strip_ansi has taken every "\r")
_OTHER_LINE_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def _volatile_uncorrected_ecc(row: str) -> int | None:
    """The third cell of a GPU's first row, `Volatile Uncorr. ECC`: a count since the driver loaded.

    `N/A` (ECC off or not supported), `Off`, `On` (MIG mode prints the mode there) and `ERR!` are no count.
    """
    cells = row.strip().strip("|").split("|")
    if len(cells) < 3:
        return None
    return to_int(cells[2])


@dataclass
class PlainSmi:
    driver_version: str | None = None
    cuda_version: str | None = None
    error_kind: str | None = None
    error_line: str | None = None
    gpus: list[GpuFacts] = field(default_factory=list)
    corrupted_inforom_bus_ids: list[str] = field(default_factory=list)
    processes: list[tuple[int, GpuProcess]] | None = None
    """(nvidia-smi's GPU number, process) per row of the Processes block; [] where it says none run; None where the
    block is not in the text."""
    unanswered: dict[str, str] = field(default_factory=dict)
    """Bus id → the driver's reason, for each GPU nvidia-smi could not get a handle for."""


def parse_nvidia_smi_plain(text: str) -> PlainSmi:
    """The markers are searched over the whole text; only the lines they are on are read (blank lines, foreign
    output: a few C-speed passes)."""
    text = _one_line_break(strip_ansi(text))
    result = PlainSmi()
    result.error_kind, result.error_line = _driver_error(text)
    handle_lines = _unanswered(text, result.unanswered)
    result.corrupted_inforom_bus_ids = _corrupted_inforoms(text, handle_lines)
    if match := _DRIVER.search(text):
        result.driver_version = match.group(1)
    if match := _CUDA.search(text):
        result.cuda_version = match.group(1)
    lined = "\n" + text  # every line after a "\n": a row is searched for as "\n|", fast
    for match in _ROW.finditer(lined):
        next_line, line = _line_at(lined, match.start() + 1)
        if gpu := _gpu_of_row(match, line, _line_at(lined, next_line)[1]):
            result.gpus.append(gpu)
    result.processes = _processes(lined)
    listed = {gpu.bus_id for gpu in result.gpus}
    for bus_id, reason in result.unanswered.items():
        if bus_id not in listed:
            result.gpus.append(GpuFacts(index=0, bus_id=bus_id, lost=True, error_fields=[reason],
                                        source="nvidia-smi.txt"))
    result.gpus.sort(key=lambda gpu: gpu.bus_id)
    return result


def _one_line_break(text: str) -> str:
    """The text with "\n" for every line break str.splitlines knows."""
    for other in _OTHER_LINE_BREAKS:
        if other in text:
            text = text.replace(other, "\n")
    return text


def _line_at(text: str, position: int) -> tuple[int, str]:
    """(end, text) of the line that holds `position` ("" past the end); the end is where the next line starts."""
    if position >= len(text):
        return len(text), ""
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    end = len(text) if end < 0 else end
    return end + 1, text[start:end]


def _driver_error(text: str) -> tuple[str | None, str | None]:
    """(kind, line) of the first line that holds one of nvidia-smi's sentences (the first in DRIVER_ERRORS' order),
    in any case."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character that lowers to two (`İ`): the lines no longer line up
        lines = (line for line in text.splitlines() if any(sentence in line.lower() for sentence in DRIVER_ERRORS))
        return _first_sentence(next(lines, None))
    found = _DRIVER_ERROR.search(lowered)
    return _first_sentence(_line_at(text, found.start())[1] if found else None)


def _first_sentence(line: str | None) -> tuple[str | None, str | None]:
    lowered = (line or "").lower()
    return next(((kind, line.strip()) for sentence, kind in DRIVER_ERRORS.items() if sentence in lowered), (None, None))


def _unanswered(text: str, unanswered: dict[str, str]) -> set[int]:
    """Each GPU a line says nvidia-smi could not get a handle for (the first on a line); the lines' ends."""
    lines: set[int] = set()
    for match in _HANDLE.finditer(text):
        end = _line_at(text, match.start())[0]
        if end in lines:
            continue
        lines.add(end)
        if bus_id := normalize_bus_id(match.group(1)):
            unanswered[bus_id] = match.group(2).strip() or "no answer"
    return lines


def _corrupted_inforoms(text: str, skipped_lines: set[int]) -> list[str]:
    """The GPUs a line says have a corrupted infoROM (the first on a line; not on a line about a GPU handle)."""
    found: list[str] = []
    for match in _INFOROM.finditer(text):
        end = _line_at(text, match.start())[0]
        if end not in skipped_lines:
            skipped_lines.add(end)
            found.append(normalize_bus_id(match.group(1)) or match.group(1))
    return found


_UNREAD_NAMES = ("ERR!", "[Unknown Error]", "Unknown Error", "N/A", "[N/A]")
"""What the Name cell reads where nvidia-smi could not read the name."""


def _gpu_of_row(match: re.Match, line: str, second: str) -> GpuFacts | None:
    """The GPU of a table row: its first line and the line under it."""
    bus_id = normalize_bus_id(match.group(4))
    if bus_id is None:
        return None
    index = bounded(match.group(1), "gpus", said("parse.what.gpu_number", number=repr(match.group(1)[:20])))
    name = match.group(2).strip()
    # nvidia-smi prints `ERR!` where NVML answered with an error (`[Unknown Error]` in --query-gpu): no model name
    gpu = GpuFacts(index=index, bus_id=bus_id, name=None if name in _UNREAD_NAMES else name,
                   persistence_mode={"On": True, "Off": False}.get(match.group(3)), source="nvidia-smi.txt")
    gpu.ecc_uncorrected_volatile = _volatile_uncorrected_ecc(line)
    cells = [cell.strip() for cell in second.strip().strip("|").split("|")]
    if len(cells) >= 2:
        temperature = re.search(r"(\d+)C\b", cells[0])
        gpu.temperature_c = first_number(temperature.group(1)) if temperature else None
        power = re.search(r"(\d+)W\s*/\s*(\d+)W", cells[0])
        if power:
            gpu.power_draw_w, gpu.power_limit_w = first_number(power.group(1)), first_number(power.group(2))
        memory = re.search(r"(\d+)MiB\s*/\s*(\d+)MiB", cells[1])
        if memory:
            gpu.memory_used_bytes, gpu.memory_total_bytes = to_bytes(memory.group(1)), to_bytes(memory.group(2))
    gpu.error_fields = ["ERR!"] * sum(cell.count("ERR!") for cell in (line, second))
    gpu.lost = len(gpu.error_fields) >= 3 or "GPU is lost" in line + second
    return gpu


def _processes(text: str) -> list[tuple[int, GpuProcess]] | None:
    """The rows of the Processes block: the rows after the first line that says `Processes:`; where no line does
    (the rows pasted without their table), every run of two or more rows, blank lines between them allowed. None
    where neither is in the text."""
    rows = _rows(text)
    header = text.find("Processes:")
    if header >= 0:
        after = _line_at(text, header)[0]
        return [_process_of(match) for start, _, match in rows if start >= after]
    found = [_process_of(match) for run in _runs(text, rows) if len(run) >= 2 for match in run]
    return found or None


def _rows(text: str) -> list[tuple[int, int, re.Match]]:
    """(start, end, match) of each line that reads as a process row, in order."""
    rows = []
    position = 0
    while found := _ROW_END.search(text, position):
        start = text.rfind("\n", 0, found.start()) + 1
        end = text.find("\n", found.start())
        end = len(text) if end < 0 else end
        if match := _ROW_LINE.fullmatch(text, start, end):
            rows.append((start, end, match))
        position = end + 1  # one row a line
    return rows


def _runs(text: str, rows: list[tuple[int, int, re.Match]]) -> list[list[re.Match]]:
    """The rows in runs: a run goes on while only blank lines come between one row and the next."""
    runs: list[list[re.Match]] = []
    last_end = None
    for start, end, match in rows:
        if last_end is not None and not text[last_end:start].strip():
            runs[-1].append(match)
        else:
            runs.append([match])
        last_end = end
    return runs


def _process_of(match: re.Match) -> tuple[int, GpuProcess]:
    memory = match.group(5)
    return int(match.group(1)), GpuProcess(pid=int(match.group(2)), name=match.group(4).strip(), kind=match.group(3),
                                           used_memory_bytes=to_bytes(memory) if memory else None)


def process_rows_alone(head: str) -> bool:
    """Whether a paste is made of process rows without their table: a run of two or more rows, and rows at least
    half of its lines that are not blank (a long log that quotes a few rows is a log)."""
    head = head.replace("\r", "")
    runs = _runs(head, _rows(head))
    if not any(len(run) >= 2 for run in runs):
        return False
    rows = sum(len(run) for run in runs)
    return 2 * rows >= sum(1 for line in head.splitlines() if line.strip())
