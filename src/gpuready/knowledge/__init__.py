"""Data tables, each row with its source: GPU specs, CUDA ↔ driver, Xid catalog, thresholds.

Checks read expectations from here, never from literals in their own code.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@functools.cache
def load_table(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files(__package__).joinpath(f"{name}.toml").read_text())


def thresholds(section: str) -> dict[str, Any]:
    return load_table("thresholds")[section]


@dataclass(frozen=True)
class GpuSpec:
    model: str
    row: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.row.get(key, default)

    @property
    def source(self) -> str:
        return self.row.get("source", "")


@functools.cache
def gpu_spec(product_name: str | None) -> GpuSpec | None:
    """The table row for an nvidia-smi product name, or None for a model the table does not know."""
    if not product_name:
        return None
    for row in load_table("gpus")["gpu"]:
        if re.search(row["match"], product_name, flags=re.IGNORECASE):
            return GpuSpec(model=row["model"], row=row)
    return None


def xid_entry(code: int) -> dict[str, Any] | None:
    return next((row for row in load_table("xid")["xid"] if row["xid"] == code), None)


def xids_evidence_of(condition: str) -> tuple[int, ...]:
    """The Xids whose line is evidence of a memory condition where the GPU's counters were not read (xid.toml
    `evidence_of`): `uncorrectable_memory_error`, `row_remap_pending` or `row_remap_failure`."""
    return tuple(row["xid"] for row in load_table("xid")["xid"] if row.get("evidence_of") == condition)


def xid_evidence_ref() -> str:
    """The citation of a finding that rests on those Xid lines (xid.toml [evidence])."""
    return load_table("xid")["evidence"]["kernel_log_ref"]


@dataclass(frozen=True)
class DriverRequirement:
    minimum: str
    """Below this the CUDA runtime cannot start."""
    minimum_source: str
    full_feature: str | None
    """The GA driver of this exact CUDA release; between the two, minor-version compatibility applies."""
    full_feature_source: str | None


def driver_requirement(cuda_version: str) -> DriverRequirement | None:
    """The drivers a CUDA release (`12.8`, `13`) needs; None for a version the table does not know or that is not a
    version at all (`abc`)."""
    table = load_table("cuda_driver")
    exact = next((row for row in table.get("cuda", []) if row["cuda"] == cuda_version), None)
    parts = version_tuple(cuda_version)
    if not parts:
        return None
    major = parts[0]
    floor = next((row for row in table.get("minor_compat", []) if int(row["cuda_major"]) == major), None)
    if floor is None and exact is None:
        return None
    minimum_row = floor or exact
    return DriverRequirement(minimum=str(minimum_row["min_driver_linux"]), minimum_source=minimum_row["source"],
                             full_feature=str(exact["min_driver_linux"]) if exact else None,
                             full_feature_source=exact["source"] if exact else None)


@functools.cache
def clock_reasons(group: str) -> frozenset[str]:
    """The clock-event reason names of one group of clock_reasons.toml: `thermal`, `hardware`, `power_brake`."""
    return frozenset(load_table("clock_reasons")["groups"][group])


def env_var_rules() -> list[dict[str, Any]]:
    return load_table("env_vars")["var"]


def version_tuple(version: str | None) -> tuple[int, ...]:
    """`580.65.06` → (580, 65, 6), `13` → (13,); () where there is no number to read (`abc`, None).

    Only the leading `N.N.N` counts (`2.11.0+cu130` → (2, 11, 0)); each part is at most nine digits, so a hostile
    version string cannot build a huge integer.
    """
    if not isinstance(version, str):
        return ()
    match = re.match(r"\s*v?(\d{1,9}(?:\.\d{1,9})*)", version)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def platform_spec(gpu_model: str | None, gpu_count: int) -> dict[str, Any] | None:
    """The platforms.toml row for `gpu_count` GPUs of one gpus.toml model (`H100 SXM`), or None."""
    if not gpu_model:
        return None
    return next((row for row in load_table("platforms")["platform"]
                 if gpu_model in row["gpu_models"] and row["gpu_count"] == gpu_count), None)
