"""torch.json (written by `collect`), `pip freeze` and `ldconfig -p`."""

from __future__ import annotations

import json
import re

from gpuready.facts.types import TorchInfo


def parse_torch_json(text: str) -> TorchInfo:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("torch.json is not a JSON object")
    arch_list = data.get("arch_list")
    return TorchInfo(version=data.get("version"), cuda=data.get("cuda"),
                     arch_list=list(arch_list) if isinstance(arch_list, list) else None,
                     device_count=data.get("device_count"), nccl_version=data.get("nccl_version"),
                     error=data.get("error"), source=data.get("source", "torch.json"))


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
