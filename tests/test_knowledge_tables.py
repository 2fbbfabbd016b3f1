"""Structure checks for the data tables in src/gpuready/knowledge/*.toml.

These tests read the TOML files directly (no gpuready loader involved) and check
that every row has the required keys with the right types, a non-empty source,
no duplicate keys, compilable regexes, and that each known nvidia-smi product
name is matched by exactly one GPU row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

KNOWLEDGE = Path(__file__).resolve().parents[1] / "src" / "gpuready" / "knowledge"


def _load(name: str) -> dict:
    with open(KNOWLEDGE / name, "rb") as fh:
        return tomllib.load(fh)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_types(row: dict, spec: dict[str, object], where: str) -> None:
    for key, typ in spec.items():
        if key not in row:
            continue
        value = row[key]
        if typ == "number":
            assert _is_number(value), f"{where}: {key}={value!r} is not a number"
        elif typ is int:
            assert isinstance(value, int) and not isinstance(value, bool), (
                f"{where}: {key}={value!r} is not an int"
            )
        else:
            assert isinstance(value, typ), f"{where}: {key}={value!r} is not {typ}"


def _check_source(row: dict, where: str) -> None:
    assert isinstance(row.get("source"), str), f"{where}: missing source"
    assert row["source"].strip(), f"{where}: empty source"


def _check_unknown_keys(row: dict, allowed: set[str], where: str) -> None:
    extra = set(row) - allowed
    assert not extra, f"{where}: unexpected keys {sorted(extra)}"


def _check_meta(data: dict) -> None:
    meta = data.get("meta")
    if meta is None:
        return
    assert isinstance(meta, dict)
    assert isinstance(meta.get("schema_version"), int)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", meta.get("reviewed", "")), meta


# --------------------------------------------------------------------------- gpus.toml

GPU_REQUIRED = {
    "model": str,
    "match": str,
    "arch": str,
    "compute_capability": str,
    "memory_gb": int,
    "datacenter": bool,
    "source": str,
}
GPU_OPTIONAL = {
    "memory_bw_gb_per_s": "number",
    "tdp_w": int,
    "pcie_gen": int,
    "pcie_width": int,
    "nvlink_gen": int,
    "nvlink_links": int,
    "nvlink_gb_per_s": "number",
    "nvlink_via": str,
    "peak_tflops_bf16_dense": "number",
    "peak_tflops_fp16_dense": "number",
    "peak_tflops_tf32_dense": "number",
    "peak_tflops_fp32": "number",
    "peak_tflops_fp8_dense": "number",
    "notes": str,
    "bar1_ships_mib": int,
    "bar1_source": str,
}
GPU_ARCHES = {"Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell"}
NVLINK_VIA = {"nvswitch", "bridge", "none", "nvlink_switch_system"}
FP8_ARCHES = {"Ada Lovelace", "Hopper", "Blackwell"}

# nvidia-smi product names that must each match exactly one [[gpu]] row,
# mapped to the row's model.
KNOWN_NAMES = {
    "NVIDIA H200": "H200 SXM",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
    "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "Tesla V100-SXM2-32GB": "V100 SXM2 32GB",
    "Tesla V100-SXM2-16GB": "V100 SXM2 16GB",
    "Tesla V100-PCIE-32GB": "V100 PCIe 32GB",
    "NVIDIA B200": "B200",
    "NVIDIA L40S": "L40S",
    "NVIDIA L40": "L40",
    "NVIDIA L4": "L4",
    "NVIDIA A10": "A10",
    "NVIDIA A10G": "A10G",
    "NVIDIA A40": "A40",
    "Tesla T4": "T4",
    "NVIDIA RTX A6000": "RTX A6000",
    "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",
    "NVIDIA GeForce RTX 4090": "RTX 4090",
    "NVIDIA GeForce RTX 3090": "RTX 3090",
    "NVIDIA GeForce RTX 5090": "RTX 5090",
    "NVIDIA GeForce RTX 2070": "RTX 2070",
    "NVIDIA GeForce RTX 2080": "RTX 2080",
    "NVIDIA RTX A5000": "RTX A5000",
    "Tesla V100S-PCIE-32GB": "V100S PCIe 32GB",
    "NVIDIA GeForce GTX 1080 Ti": "GTX 1080 Ti",
    "GeForce GTX 1080 Ti": "GTX 1080 Ti",
    # Names as the driver prints them: the 'Compatible GPUs' table of NVIDIA/open-gpu-kernel-modules README.md
    # (product name + PCI device id), and published nvidia-smi outputs where noted.
    "NVIDIA GB200": "GB200",  # nvidia-smi tables of GB200 trays (189471 MiB, 1200 W cap)
    "NVIDIA GB300": "GB300",
    "NVIDIA B300 SXM6 AC": "B300 SXM",  # torch.cuda.get_device_name() in NVIDIA/cosmos-framework#114
    "NVIDIA B100": "B100",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX PRO 6000 Blackwell Workstation",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "RTX PRO 6000 Blackwell Max-Q",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX PRO 6000 Blackwell Server",
    "NVIDIA RTX PRO 6000 Blac...": "RTX PRO 6000 Blackwell",  # plain table's cut column
    "NVIDIA GeForce RTX 5080": "RTX 5080",
    "NVIDIA GeForce RTX 5070 Ti": "RTX 5070 Ti",
    "NVIDIA H800": "H800 SXM",
    "NVIDIA H800 PCIe": "H800 PCIe",
    "NVIDIA H20": "H20",
    "NVIDIA A800-SXM4-80GB": "A800 SXM4 80GB",
    "NVIDIA A800-SXM4-40GB": "A800 SXM4 40GB",
    "NVIDIA A800 80GB PCIe": "A800 PCIe 80GB",
    "NVIDIA A800 80GB PCIe LC": "A800 PCIe 80GB",
    "NVIDIA A30": "A30",
    "NVIDIA A2": "A2",
    "NVIDIA L20": "L20",
    "NVIDIA RTX 5880 Ada Generation": "RTX 5880 Ada",
    "NVIDIA RTX 5000 Ada Generation": "RTX 5000 Ada",
    "NVIDIA RTX A4000": "RTX A4000",
    "NVIDIA RTX A4500": "RTX A4500",
    "NVIDIA GeForce RTX 4080": "RTX 4080",
    "NVIDIA GeForce RTX 4080 SUPER": "RTX 4080 SUPER",
    "NVIDIA GeForce RTX 3090 Ti": "RTX 3090 Ti",
    "NVIDIA GeForce RTX 3080": "RTX 3080",
    "NVIDIA GeForce RTX 3080 Ti": "RTX 3080 Ti",
    "NVIDIA GeForce RTX 2080 Ti": "RTX 2080 Ti",
    "GeForce RTX 2080 Ti": "RTX 2080 Ti",
    "NVIDIA TITAN V": "TITAN V",
    "TITAN V": "TITAN V",
    "NVIDIA TITAN RTX": "TITAN RTX",
    "Tesla P100-PCIE-16GB": "P100 PCIe 16GB",
    "Tesla P100-PCIE-12GB": "P100 PCIe 12GB",
    "Tesla P100-SXM2-16GB": "P100 SXM2",
    "Tesla P40": "P40",
}

# Names that must NOT match any row (near-misses of the rows above, or boards that
# have no row and must stay "unknown" instead of borrowing another board's specs).
UNMATCHED_NAMES = [
    "NVIDIA GH200 144G HBM3e",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 5090 D",
    "NVIDIA GeForce RTX 4060 Ti",
    "NVIDIA GeForce RTX 3060 Laptop GPU",
    "NVIDIA GeForce RTX 2070 SUPER",
    "NVIDIA GeForce RTX 2080 SUPER",
    "Tesla V100-SXM3-32GB",
    "Tesla K80",
    # other boards of the new rows' families, each with other figures (open-gpu-kernel-modules 'Compatible GPUs')
    "NVIDIA H20-3e",
    "NVIDIA H20 NVL16",
    "NVIDIA H800 NVL",
    "NVIDIA GB10",
    "NVIDIA RTX PRO 5000 Blackwell",
    "NVIDIA RTX PRO 4500 Blackwell Server Edition",
    "NVIDIA RTX 6000D",
    "NVIDIA RTX A4000H",
    "NVIDIA RTX A4000 Laptop GPU",
    "NVIDIA RTX A2000",
    "NVIDIA RTX A2000 12GB",
    "NVIDIA A800 40GB Active",
    "NVIDIA GeForce RTX 4080 Laptop GPU",
    "NVIDIA GeForce RTX 3080 Ti Laptop GPU",
    "NVIDIA GeForce RTX 5080 Laptop GPU",
    "NVIDIA GeForce RTX 5070 Ti Laptop GPU",
    "NVIDIA RTX 5000 Ada Generation Laptop GPU",
    "NVIDIA L2",
    "NVIDIA A16",
]


@pytest.fixture(scope="module")
def gpus() -> list[dict]:
    data = _load("gpus.toml")
    _check_meta(data)
    assert set(data) <= {"meta", "gpu"}, sorted(data)
    rows = data["gpu"]
    assert isinstance(rows, list) and rows
    return rows


# NVIDIA's published figures, read apart from gpus.toml. Datasheets give tensor peaks "with sparsity"; the dense
# figure is half of it (the footnote "* With sparsity"). Compute capability: https://developer.nvidia.com/cuda-gpus
PUBLISHED_GPUS = {
    # H100 datasheet (https://www.nvidia.com/en-us/data-center/h100/): H100 SXM 80 GB, 3.35 TB/s, up to 700 W,
    # BF16/FP16 1,979* → 989 dense (989.4 in the Hopper whitepaper), TF32 989* → 494.5, FP8 3,958* → 1,979, FP32 67,
    # NVLink 900 GB/s, PCIe Gen5
    "H100 SXM": dict(memory_gb=80, memory_bw_gb_per_s=3350, tdp_w=700, peak_tflops_bf16_dense=989.0,
                     peak_tflops_tf32_dense=494.5, peak_tflops_fp8_dense=1979.0, peak_tflops_fp32=67.0,
                     nvlink_gb_per_s=900, pcie_gen=5, compute_capability="9.0"),
    # H200 datasheet (https://www.nvidia.com/en-us/data-center/h200/): H200 SXM 141 GB HBM3e, 4.8 TB/s, up to 700 W,
    # the H100 SXM's tensor peaks; H200 NVL up to 600 W, BF16 1,671* → 835.5
    "H200 SXM": dict(memory_gb=141, memory_bw_gb_per_s=4800, tdp_w=700, peak_tflops_bf16_dense=989.0,
                     peak_tflops_fp8_dense=1979.0, nvlink_gb_per_s=900, compute_capability="9.0"),
    "H200 NVL": dict(memory_gb=141, memory_bw_gb_per_s=4800, tdp_w=600, peak_tflops_bf16_dense=835.5),
    # A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): SXM 80 GB 2,039 GB/s 400 W, PCIe 80 GB
    # 1,935 GB/s 300 W, 40 GB 1,555 GB/s (SXM 400 W, PCIe 250 W); BF16 312 dense, TF32 156, FP32 19.5; NVLink 600 GB/s
    "A100 SXM4 80GB": dict(memory_gb=80, memory_bw_gb_per_s=2039, tdp_w=400, peak_tflops_bf16_dense=312.0,
                           peak_tflops_tf32_dense=156.0, peak_tflops_fp32=19.5, nvlink_gb_per_s=600,
                           compute_capability="8.0"),
    "A100 SXM4 40GB": dict(memory_gb=40, memory_bw_gb_per_s=1555, tdp_w=400, peak_tflops_bf16_dense=312.0),
    "A100 PCIe 80GB": dict(memory_gb=80, memory_bw_gb_per_s=1935, tdp_w=300, peak_tflops_bf16_dense=312.0),
    "A100 PCIe 40GB": dict(memory_gb=40, memory_bw_gb_per_s=1555, tdp_w=250),
    # L40S datasheet: 48 GB GDDR6, 864 GB/s, 350 W, BF16 362.05 | 733*, TF32 183 | 366*, FP8 733 | 1,466*, FP32 91.6
    "L40S": dict(memory_gb=48, memory_bw_gb_per_s=864, tdp_w=350, peak_tflops_bf16_dense=362.05,
                 peak_tflops_tf32_dense=183.0, peak_tflops_fp8_dense=733.0, peak_tflops_fp32=91.6,
                 compute_capability="8.9"),
    # L4 datasheet: 24 GB, 300 GB/s, 72 W, BF16 242* → 121, FP8 485* → 242.5, FP32 30.3
    "L4": dict(memory_gb=24, memory_bw_gb_per_s=300, tdp_w=72, peak_tflops_bf16_dense=121.0,
               peak_tflops_fp8_dense=242.5, peak_tflops_fp32=30.3),
    # GeForce RTX 4090 specifications (nvidia.com): 24 GB GDDR6X (21 Gbps × 384 bit / 8 = 1,008 GB/s), 450 W total
    # graphics power; Ada Lovelace whitepaper (v2.1, Table 2): BF16 with FP32 accumulate 165.2, TF32 82.6, FP8
    # 330.3, FP32 82.6
    "RTX 4090": dict(memory_gb=24, memory_bw_gb_per_s=1008, tdp_w=450, peak_tflops_bf16_dense=165.2,
                     peak_tflops_tf32_dense=82.6, peak_tflops_fp8_dense=330.3, peak_tflops_fp32=82.6,
                     nvlink_gb_per_s=0, compute_capability="8.9"),
    # GeForce RTX 5090 specifications: 32 GB GDDR7, 1,792 GB/s, 575 W total graphics power
    "RTX 5090": dict(memory_gb=32, memory_bw_gb_per_s=1792, tdp_w=575, compute_capability="12.0"),
    # V100 datasheet: SXM2 300 W 125 tensor TFLOPS FP32 15.7, PCIe 250 W 112 / 14, 900 GB/s, NVLink 300 GB/s
    "V100 SXM2 32GB": dict(memory_gb=32, memory_bw_gb_per_s=900, tdp_w=300, peak_tflops_fp16_dense=125.0,
                           peak_tflops_fp32=15.7, nvlink_gb_per_s=300, compute_capability="7.0"),
    "V100 PCIe 32GB": dict(memory_gb=32, memory_bw_gb_per_s=900, tdp_w=250, peak_tflops_fp16_dense=112.0,
                           peak_tflops_fp32=14.0),
    # T4 datasheet: 16 GB, 320 GB/s, 70 W, FP16 65, FP32 8.1
    "T4": dict(memory_gb=16, memory_bw_gb_per_s=320, tdp_w=70, peak_tflops_fp16_dense=65.0, peak_tflops_fp32=8.1,
               compute_capability="7.5"),
}


def test_gpu_rows_match_published_datasheets(gpus):
    by_model = {row["model"]: row for row in gpus}
    for model, published in PUBLISHED_GPUS.items():
        assert {key: by_model[model].get(key) for key in published} == published, model
    # every row is well formed, so a lookup never trips on a missing key
    for i, row in enumerate(gpus):
        where = f"gpus.toml row {i} ({row.get('model')!r})"
        for key in GPU_REQUIRED:
            assert key in row, f"{where}: missing {key}"
        _check_types(row, {**GPU_REQUIRED, **GPU_OPTIONAL}, where)
        _check_unknown_keys(row, set(GPU_REQUIRED) | set(GPU_OPTIONAL), where)
        _check_source(row, where)


def test_gpu_values_are_plausible(gpus):
    for row in gpus:
        where = f"gpus.toml {row['model']!r}"
        assert row["arch"] in GPU_ARCHES, where
        assert re.fullmatch(r"\d{1,2}\.\d", row["compute_capability"]), where
        assert 8 <= row["memory_gb"] <= 512, where
        if "nvlink_via" in row:
            assert row["nvlink_via"] in NVLINK_VIA, where
            if row["nvlink_via"] == "none":
                assert row.get("nvlink_gen", 0) == 0, where
                assert row.get("nvlink_links", 0) == 0, where
                assert row.get("nvlink_gb_per_s", 0) == 0, where
            else:
                assert row.get("nvlink_gen", 1) > 0, where
        if row.get("nvlink_gen", 0) == 0 and "nvlink_gen" in row:
            assert row.get("nvlink_via", "none") == "none", where
        if "pcie_gen" in row:
            assert row["pcie_gen"] in (3, 4, 5, 6), where
        if "pcie_width" in row:
            assert row["pcie_width"] in (1, 2, 4, 8, 16), where
        for key, value in row.items():
            if key.startswith("peak_tflops_") or key in (
                "memory_bw_gb_per_s",
                "tdp_w",
                "nvlink_gb_per_s",
            ):
                assert value >= 0, f"{where}: {key}={value}"
        if "peak_tflops_fp8_dense" in row:
            assert row["arch"] in FP8_ARCHES, f"{where}: fp8 on {row['arch']}"
        # Dense 16-bit tensor peak is never below the FP32 (CUDA core) peak.
        if "peak_tflops_bf16_dense" in row and "peak_tflops_fp32" in row:
            assert row["peak_tflops_bf16_dense"] >= row["peak_tflops_fp32"], where


def test_gpu_no_duplicate_models_or_patterns(gpus):
    models = [row["model"] for row in gpus]
    assert len(models) == len(set(models)), "duplicate model names"
    matches = [row["match"] for row in gpus]
    assert len(matches) == len(set(matches)), "duplicate match patterns"


def test_gpu_regexes_compile(gpus):
    for row in gpus:
        re.compile(row["match"], re.IGNORECASE)


def _matching_models(gpus: list[dict], name: str) -> list[str]:
    return [
        row["model"] for row in gpus if re.search(row["match"], name, re.IGNORECASE)
    ]


@pytest.mark.parametrize("name", sorted(KNOWN_NAMES))
def test_known_nvidia_smi_name_matches_exactly_one_row(gpus, name):
    hits = _matching_models(gpus, name)
    assert hits == [KNOWN_NAMES[name]], f"{name!r} matched {hits}"


@pytest.mark.parametrize("name", UNMATCHED_NAMES)
def test_near_miss_names_match_no_row(gpus, name):
    hits = _matching_models(gpus, name)
    assert hits == [], f"{name!r} unexpectedly matched {hits}"


def test_every_gpu_row_is_exercised_by_a_known_name(gpus):
    assert {row["model"] for row in gpus} <= set(KNOWN_NAMES.values()) | {"V100 PCIe 16GB"}
    assert _matching_models(gpus, "Tesla V100-PCIE-16GB") == ["V100 PCIe 16GB"]


# --------------------------------------------------------------------------- cuda_driver.toml

DRIVER_RE = re.compile(r"\d{3}(\.\d{1,3}){0,2}")


def _driver_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@pytest.fixture(scope="module")
def cuda_table() -> dict:
    data = _load("cuda_driver.toml")
    _check_meta(data)
    assert set(data) <= {"meta", "cuda", "minor_compat"}, sorted(data)
    return data


def test_cuda_rows_structure(cuda_table):
    rows = cuda_table["cuda"]
    assert rows
    seen = set()
    for row in rows:
        where = f"cuda_driver.toml cuda={row.get('cuda')!r}"
        for key in ("cuda", "min_driver_linux", "source"):
            assert key in row, f"{where}: missing {key}"
        _check_unknown_keys(
            row, {"cuda", "min_driver_linux", "update_drivers_linux", "source", "notes"}, where
        )
        assert isinstance(row["cuda"], str) and re.fullmatch(r"\d{2}\.\d", row["cuda"]), where
        assert row["cuda"] not in seen, f"{where}: duplicate"
        seen.add(row["cuda"])
        assert isinstance(row["min_driver_linux"], str)
        assert DRIVER_RE.fullmatch(row["min_driver_linux"]), where
        _check_source(row, where)
        updates = row.get("update_drivers_linux", {})
        assert isinstance(updates, dict), where
        for release, driver in updates.items():
            assert release.startswith(row["cuda"] + "."), f"{where}: {release}"
            assert isinstance(driver, str) and DRIVER_RE.fullmatch(driver), where
            assert _driver_key(driver) >= _driver_key(row["min_driver_linux"]), where
        if "notes" in row:
            assert isinstance(row["notes"], str)


def test_cuda_rows_cover_expected_versions_in_order(cuda_table):
    versions = [row["cuda"] for row in cuda_table["cuda"]]
    expected = [f"11.{m}" for m in range(9)] + [
        f"12.{m}" for m in range(10) if m != 7  # there is no CUDA 12.7
    ] + ["13.0", "13.1"]
    assert versions == expected
    drivers = [_driver_key(row["min_driver_linux"]) for row in cuda_table["cuda"]]
    assert drivers == sorted(drivers), "GA minimum drivers should increase with CUDA version"


def test_cuda_spot_values(cuda_table):
    by_version = {row["cuda"]: row["min_driver_linux"] for row in cuda_table["cuda"]}
    # NVIDIA CUDA Toolkit release notes, Table 3 (toolkit driver version, Linux x86_64, GA):
    # CUDA 12.4 GA >= 550.54.14, CUDA 13.0 GA >= 580.65.06.
    assert by_version["12.4"] == "550.54.14"
    assert by_version["13.0"] == "580.65.06"


def test_minor_compat_rows(cuda_table):
    rows = cuda_table["minor_compat"]
    majors = [row["cuda_major"] for row in rows]
    assert sorted(majors) == [11, 12, 13]
    assert len(majors) == len(set(majors))
    for row in rows:
        where = f"cuda_driver.toml minor_compat cuda_major={row.get('cuda_major')!r}"
        for key in ("cuda_major", "min_driver_linux", "source"):
            assert key in row, f"{where}: missing {key}"
        _check_unknown_keys(
            row, {"cuda_major", "min_driver_linux", "below_driver", "source", "notes"}, where
        )
        assert isinstance(row["cuda_major"], int) and not isinstance(row["cuda_major"], bool)
        assert isinstance(row["min_driver_linux"], str)
        assert DRIVER_RE.fullmatch(row["min_driver_linux"]), where
        if "below_driver" in row:
            assert DRIVER_RE.fullmatch(row["below_driver"]), where
            assert _driver_key(row["below_driver"]) > _driver_key(row["min_driver_linux"])
        _check_source(row, where)
        # The minor-compat floor never exceeds the GA minimum of any toolkit in the family.
        family = [
            _driver_key(c["min_driver_linux"])
            for c in cuda_table["cuda"]
            if c["cuda"].split(".")[0] == str(row["cuda_major"])
        ]
        if row["cuda_major"] != 11:  # 11.0 GA shipped with an older driver (see notes)
            assert all(_driver_key(row["min_driver_linux"]) <= d for d in family), where


# --------------------------------------------------------------------------- xid.toml

XID_REQUIRED = {
    "xid": int,
    "name": str,
    "meaning": str,
    "severity": str,
    "action": str,
    "blame": str,
    "source": str,
}
XID_OPTIONAL = {
    "name_alt": str,
    "nvidia_immediate": str,
    "nvidia_investigatory": str,
    "notes": str,
    "nvlink": bool,
    "severity_from_line": bool,
    "blame_source": str,
    "evidence_of": str,
}
SEVERITIES = {"critical", "error", "info"}
BLAMES = {"application", "fabric", "driver", "GPU"}
EVIDENCE = {"uncorrectable_memory_error", "row_remap_pending", "row_remap_failure"}
REQUIRED_XIDS = [
    8, 13, 31, 32, 38, 43, 45, 46, 48, 54, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94,
    95, 109, 119, 120, 121, 136, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154,
    158, 167,
]


@pytest.fixture(scope="module")
def xids() -> list[dict]:
    data = _load("xid.toml")
    _check_meta(data)
    assert set(data) <= {"meta", "judge", "sxid", "xid", "cascade", "evidence"}, sorted(data)
    for rule in ("judge", "sxid", "evidence"):  # the one kernel judge's rule: data with its source
        _check_source(data[rule], f"xid.toml [{rule}]")
    for position, cascade in enumerate(data["cascade"]):
        _check_source(cascade, f"xid.toml [[cascade]] {position}")
    rows = data["xid"]
    assert isinstance(rows, list) and rows
    return rows


def test_xid_rows_structure(xids):
    for row in xids:
        where = f"xid.toml xid={row.get('xid')!r}"
        for key in XID_REQUIRED:
            assert key in row, f"{where}: missing {key}"
        _check_types(row, {**XID_REQUIRED, **XID_OPTIONAL}, where)
        _check_unknown_keys(row, set(XID_REQUIRED) | set(XID_OPTIONAL), where)
        _check_source(row, where)
        assert row["severity"] in SEVERITIES, where
        assert row["blame"] in BLAMES and row.get("evidence_of", "uncorrectable_memory_error") in EVIDENCE, where
        assert (row["blame"] == "fabric") == bool(row.get("nvlink")), where
        assert ("blame_source" in row) == (row["blame"] == "driver"), where  # the one blame no column states
        assert 0 < row["xid"] < 1000, where
        assert re.fullmatch(r"[A-Z0-9_]+", row["name"]), where
        assert row["meaning"].strip() and row["action"].strip(), where


def _nvidia_xid_catalog() -> dict[int, dict[str, str]]:
    """NVIDIA's Xid catalog as published (tests/fixtures/nvidia-xid-catalog/README.md)."""
    lines = (Path(__file__).parent / "fixtures" / "nvidia-xid-catalog" / "catalog.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    return {int(row[0]): dict(zip(header, row)) for row in (line.split("\t") for line in lines[1:])}


def test_xid_rows_agree_with_nvidia_catalog(xids):
    """Each row's mnemonic and NVIDIA's two resolution buckets are the catalog's, verbatim (a multi-line cell's lines
    joined by '; '); a code NVIDIA says needs a GPU reset or a reboot (RESET_GPU, RESTART_BM) is critical, and one it
    says to ignore or to restart the application for is not."""
    catalog = _nvidia_xid_catalog()
    assert len(catalog) == 172 and sorted(catalog) == list(range(1, 173))
    codes = [row["xid"] for row in xids]
    assert codes == sorted(set(codes)), "rows ordered by xid, no duplicates"
    missing = set(REQUIRED_XIDS) - set(codes)
    assert not missing, f"missing xids {sorted(missing)}"
    for row in xids:
        published = catalog[row["xid"]]
        names = " / | ".join([row["name"]] + ([row["name_alt"]] if "name_alt" in row else []))
        assert names == published["mnemonic"], row["xid"]
        assert row["nvidia_immediate"] == published["immediate_action"], row["xid"]
        assert row["nvidia_investigatory"] == published["investigatory_action"].replace(" | ", "; "), row["xid"]
        if published["immediate_action"] in ("RESET_GPU", "RESTART_BM"):
            assert row["severity"] == "critical", row["xid"]
        if published["immediate_action"] in ("IGNORE", "RESTART_APP"):
            assert row["severity"] != "critical", row["xid"]


def test_every_xid_nvidia_resets_the_gpu_for_is_known(xids):
    catalog = _nvidia_xid_catalog()
    reset = {code for code, row in catalog.items() if row["immediate_action"] in ("RESET_GPU", "RESTART_BM")}
    assert reset - {row["xid"] for row in xids} == set()


def test_xid_known_classifications(xids):
    by_code = {row["xid"]: row for row in xids}
    for code in (13, 31, 43, 45):
        assert by_code[code]["blame"] == "application", code
    for code in (48, 62, 64, 79, 95, 119, 140):
        assert by_code[code]["severity"] == "critical", code
        assert by_code[code]["blame"] != "application", code
    assert by_code[79]["name"].endswith("GPU_HAS_FALLEN_OFF_THE_BUS")


def test_memory_evidence_rows_are_the_catalogs_memory_errors(xids):
    """NVIDIA's catalog descriptions decide which rows are evidence of a memory condition: an uncorrectable one
    ('Double Bit ECC Error', 'Contained/Uncontained memory error', 'ECC Unrecovered Error'), a row marked for
    remapping ('GPU memory remapping event') or a remap that failed ('GPU memory remapping failure')."""
    catalog = _nvidia_xid_catalog()
    known = {row["xid"] for row in xids}

    def described(pattern: str) -> set[int]:
        return {code for code, row in catalog.items() if re.fullmatch(pattern, row["description"]) and code in known}
    by_condition: dict[str, set[int]] = {}
    for row in xids:
        if "evidence_of" in row:
            by_condition.setdefault(row["evidence_of"], set()).add(row["xid"])
    assert by_condition == {
        "uncorrectable_memory_error": described(r"Double Bit ECC Error|(Un)?[Cc]ontained memory error|ECC Unrecovered Error"),
        "row_remap_pending": described(r"GPU memory remapping event"),
        "row_remap_failure": described(r"GPU memory remapping failure")}
    assert by_condition["uncorrectable_memory_error"] == {48, 94, 95, 140}


def test_driver_blame_follows_the_catalogs_driver_and_gsp_rows(xids):
    """Every row the catalog describes as the driver's firmware or the GSP firmware ('Driver firmware error',
    'GSP RPC Timeout', 'GSP Error') blames the driver; the one driver row the description does not name (61, listed
    'Unused' for Ampere+) says why in its blame_source."""
    catalog = _nvidia_xid_catalog()
    driver = {row["xid"] for row in xids if row["blame"] == "driver"}
    named = {row["xid"] for row in xids if re.search(r"Driver firmware|GSP", catalog[row["xid"]]["description"])}
    assert named == {38, 119, 120} and named <= driver
    for code in driver - named:
        row = next(row for row in xids if row["xid"] == code)
        assert catalog[code]["mnemonic"].split("_")[0] in row["blame_source"], code  # PMU_BREAKPOINT: the PMU firmware


def test_cascades_follow_the_catalogs_descriptions():
    """[[cascade]]: the codes NVIDIA describes as following another error ('due to previous errors', 'regarding
    another Xid') follow any earlier error; the memory chain from a DBE is the catalog's remapping and
    contained/uncontained rows plus that informational one; a GPU fallen off the bus is NVIDIA's row 79."""
    catalog = _nvidia_xid_catalog()
    data = _load("xid.toml")
    cascades = {cascade["why"]: cascade for cascade in data["cascade"]}
    follows = {code for code, row in catalog.items()
               if re.search(r"due to previous errors|regarding another Xid", row["description"] + row["investigatory_action"])}
    assert follows == {45, 154} == set(cascades["xid.cascade.earlier_error"]["effects"])
    assert cascades["xid.cascade.earlier_error"]["causes"] == []
    memory = {code for code, row in catalog.items()
              if re.fullmatch(r"GPU memory remapping (event|failure)|(Un)?[Cc]ontained memory error", row["description"])}
    dbe = cascades["xid.cascade.dbe"]
    assert [catalog[code]["description"] for code in dbe["causes"]] == ["Double Bit ECC Error"]
    assert set(dbe["effects"]) == memory | {154}
    fallen = [code for code, row in catalog.items() if row["description"] == "GPU has fallen off the bus"]
    assert fallen == [data["judge"]["fallen_off_bus_xid"]] == cascades["xid.cascade.fallen_off_bus"]["causes"]


def test_clock_reason_groups_name_nvml_reasons():
    from gpuready.facts.clock_reasons import REASON_BITS
    groups = _load("clock_reasons.toml")["groups"]
    _check_source(groups, "clock_reasons.toml [groups]")
    assert set(groups) == {"thermal", "hardware", "power_brake", "source"}
    for name in ("thermal", "hardware", "power_brake"):
        assert groups[name] and set(groups[name]) <= set(REASON_BITS), name
    assert set(groups["power_brake"]) <= set(groups["hardware"])  # the brake is a HW Slowdown sub-reason
