"""Plain `nvidia-smi`: the driver's own error sentences, and the GPU table when nothing else exists."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuready.facts.types import GpuFacts, GpuProcess
from gpuready.facts.units import bounded, first_number, normalize_bus_id, strip_ansi, to_bytes, to_int

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

_ROW = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(On|Off|ERR!)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
# A row of the Processes block: `|    5   N/A  N/A     26598      C   ...envs/bin/python3     2885MiB |` (GI/CI columns
# since 450; older drivers print `|    0     12345      C   python    1234MiB |`).
_PROCESS = re.compile(r"^\|\s{1,8}(\d{1,3})\s{1,8}(?:(?:N/A|\d{1,3})\s{1,8}(?:N/A|\d{1,3})\s{1,12})?(\d{1,10})\s{1,8}"
                      r"(C\+G|M\+C|C|G|M)\s{1,8}([^|\s][^|]{0,120}?)\s{1,60}(\d{1,9})MiB\s{0,8}\|")
_DRIVER = re.compile(r"Driver Version:\s*([\d.]+)")
_CUDA = re.compile(r"CUDA Version:\s*([\d.]+)")
_INFOROM = re.compile(r"infoROM is corrupted at gpu ([0-9A-Fa-f:.]+)", re.IGNORECASE)


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
    text = strip_ansi(text)
    result = PlainSmi()
    for line in text.splitlines():
        lowered = line.lower()
        for sentence, kind in DRIVER_ERRORS.items():
            if sentence in lowered and result.error_kind is None:
                result.error_kind, result.error_line = kind, line.strip()
        if match := _HANDLE.search(line):
            if bus_id := normalize_bus_id(match.group(1)):
                result.unanswered[bus_id] = match.group(2).strip() or "no answer"
            continue
        if match := _INFOROM.search(line):
            result.corrupted_inforom_bus_ids.append(normalize_bus_id(match.group(1)) or match.group(1))
    if match := _DRIVER.search(text):
        result.driver_version = match.group(1)
    if match := _CUDA.search(text):
        result.cuda_version = match.group(1)
    lines = text.splitlines()
    for position, line in enumerate(lines):
        match = _ROW.match(line)
        if not match:
            continue
        bus_id = normalize_bus_id(match.group(4))
        if bus_id is None:
            continue
        second = lines[position + 1] if position + 1 < len(lines) else ""
        index = bounded(match.group(1), "gpus", f"the GPU number {match.group(1)[:20]!r}")
        gpu = GpuFacts(index=index, bus_id=bus_id, name=match.group(2).strip(),
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
        result.gpus.append(gpu)
    result.processes = _processes(lines)
    listed = {gpu.bus_id for gpu in result.gpus}
    for bus_id, reason in result.unanswered.items():
        if bus_id not in listed:
            result.gpus.append(GpuFacts(index=0, bus_id=bus_id, lost=True, error_fields=[reason],
                                        source="nvidia-smi.txt"))
    result.gpus.sort(key=lambda gpu: gpu.bus_id)
    return result


def _processes(lines: list[str]) -> list[tuple[int, GpuProcess]] | None:
    start = next((position for position, line in enumerate(lines) if "Processes:" in line), None)
    if start is None:
        return None
    found = []
    for line in lines[start + 1:]:
        if match := _PROCESS.match(line.strip()):
            found.append((int(match.group(1)), GpuProcess(pid=int(match.group(2)), name=match.group(4).strip(),
                                                          kind=match.group(3),
                                                          used_memory_bytes=to_bytes(match.group(5)))))
    return found
