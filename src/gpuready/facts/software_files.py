"""torch.json (written by `collect`), `pip freeze` and `ldconfig -p`."""

from __future__ import annotations

import json
import re
from typing import Any

from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.types import TorchInfo
from gpuready.facts.units import bounded
from gpuready.i18n import said


def parse_torch_json(text: str) -> TorchInfo:
    """torch.json → TorchInfo. Its nulls mean something (no torch, a CPU build, not read), so a field of the wrong
    type (a number where a version string belongs, NaN, a list) is not read as null: the file is unreadable."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ParseFailure("parse.torch.not_object")
    strings = {key: _optional(data, key, str) for key in ("version", "cuda", "nccl_version", "error", "source")}
    arch_list = _optional(data, "arch_list", list)
    if arch_list is not None and not all(isinstance(arch, str) for arch in arch_list):
        raise ParseFailure("parse.torch.arch_list")
    device_count = _optional(data, "device_count", int)
    if device_count is not None:
        bounded(device_count, "gpus", "`device_count`")
    return TorchInfo(version=strings["version"], cuda=strings["cuda"], arch_list=arch_list,
                     device_count=device_count, nccl_version=strings["nccl_version"], error=strings["error"],
                     source=strings["source"] or "torch.json")


_JSON_TYPE_NAMES = {str: "parse.json.a_string", list: "parse.json.a_list", int: "parse.json.an_integer"}


def _optional(data: dict, key: str, kind: type) -> Any:
    """data[key] when it is null, missing or of `kind` (bool is not an integer); ValueError otherwise."""
    value = data.get(key)
    if value is None or (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
        return value
    raise ParseFailure("parse.json.wrong_type", key=key, value=json.dumps(value)[:40],
                       kind=said(_JSON_TYPE_NAMES[kind]))


def parse_pip_freeze(text: str) -> dict[str, str]:
    packages = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if match := re.match(r"^([A-Za-z0-9_.\-]+)\s*==\s*(\S+)", line):
            packages[normalize_package(match.group(1))] = match.group(2)
        elif match := re.match(r"^([A-Za-z0-9_.\-]+)\s+@\s+", line):
            packages[normalize_package(match.group(1))] = "unknown"
        elif match := re.match(r"^([A-Za-z0-9_.\-]+)\s+(\d\S*)$", line):  # `pip list` form
            packages[normalize_package(match.group(1))] = match.group(2)
    return packages


def normalize_package(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_ldconfig(text: str) -> list[str]:
    """Library paths (`libnccl.so.2 (libc6,x86-64) => /usr/lib/.../libnccl.so.2.21.5`)."""
    paths = []
    for line in text.splitlines():
        if "=>" not in line:
            continue
        target = line.split("=>", 1)[1].strip()
        real = re.search(r"\(real (\S+)\)$", target)  # written by `collect` for symlinked libraries
        paths.append(real.group(1) if real else target)
    return paths
