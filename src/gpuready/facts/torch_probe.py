"""What torch says about itself, run in a child process (`python -m gpuready.facts.torch_probe`).

`import torch` takes seconds, and initialising CUDA can hang on a sick GPU, so `check` runs this
apart, started first and under a timeout. `metadata_only()` answers without importing torch.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any


def metadata_only() -> dict[str, Any]:
    """torch's version and CUDA from its package files; no import, so no arch list."""
    info: dict[str, Any] = {"source": "package metadata"}
    try:
        info["version"] = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        info["error"] = "torch is not installed"
        return info
    spec = importlib.util.find_spec("torch")
    version_file = Path(next(iter(spec.submodule_search_locations or []), "")) / "version.py" if spec else None
    if version_file and version_file.is_file():
        match = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", version_file.read_text(), re.MULTILINE)
        info["cuda"] = match.group(1) if match else None
    for package in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
        try:
            info["nccl_version"] = importlib.metadata.version(package)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    return info


def full() -> dict[str, Any]:
    info = metadata_only()
    if "error" in info:
        return info
    try:
        import torch
    except Exception as error:  # a broken install is a finding, not a crash
        info["error"] = f"import torch failed: {type(error).__name__}: {error}"
        return info
    info.update(source="import torch", version=torch.__version__, cuda=torch.version.cuda)
    try:
        info["device_count"] = torch.cuda.device_count()
        info["arch_list"] = torch.cuda.get_arch_list() if torch.version.cuda else []
        if torch.version.cuda:
            version = torch.cuda.nccl.version()
            info["nccl_version"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    except Exception as error:
        info["error"] = f"torch.cuda failed: {type(error).__name__}: {error}"
    return info


if __name__ == "__main__":
    json.dump(full(), sys.stdout)
