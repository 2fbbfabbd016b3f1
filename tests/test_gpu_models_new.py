"""The GPU models gpus.toml gained (Grace Blackwell, Blackwell workstation and server cards, the China-market Hopper
and Ampere parts, older workstation/consumer cards): an nvidia-smi name of each is recognised, and the checks that
need a model's published figures judge instead of skipping.

Evidence, none of it from the shared real cases:
- nvidia-smi names: the 'Compatible GPUs' table of NVIDIA/open-gpu-kernel-modules README.md;
- a GB200 tray's plain nvidia-smi rows as published in public notes found through the code index ('NVIDIA GB200',
  bus 00000008:01:00.0, 181W / 1200W, 189471MiB, MIG Disabled); its `topo -m` is built from nvidia-smi's own matrix
  format with NV18 between the tray's GPUs (18 fifth-generation NVLinks per Blackwell GPU, NVIDIA's NVLink page);
- two RTX PRO 6000 Blackwell Max-Q cards at their 300.00 W limit (a published `--query-gpu` CSV in a dashboard test
  found through the code index), and the same cap on a Workstation Edition (600 W board) to show the cut;
- an 8-GPU H20 board's `topo -m` with NV18 between every pair, in nvidia-smi's matrix format."""

from __future__ import annotations

from pathlib import Path

from gpuready.estimate.machine import machine_from_description
from gpuready.knowledge import gpu_spec
from gpuready.model import Status
from helpers import report_for

HEADER = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
"""


def _row(index: int, name: str, bus: str, cap: int, memory_mib: int) -> str:
    return (f"| {index:>3}  {name:<28} On  | {bus:>18} Off | {'0':>20} |\n"
            f"| N/A   38C    P0            181W / {cap:>4}W | {'2MiB / ' + str(memory_mib) + 'MiB':>22} |"
            f"      0%      Default |\n"
            f"|                                         |                        |             Disabled |\n"
            "+-----------------------------------------+------------------------+----------------------+\n")


def _table(rows: list[str]) -> str:
    return HEADER + "".join(rows)


def _topo(count: int, link: str, short: int | None = None) -> str:
    """nvidia-smi topo -m's matrix: `link` between every pair, NV12 on the pairs of GPU `short`."""
    def cell(i: int, j: int) -> str:
        return " X " if i == j else ("NV12" if short in (i, j) else link)
    head = "\t" + "\t".join(f"GPU{i}" for i in range(count)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    lines = [f"GPU{i}\t" + "\t".join(cell(i, j) for j in range(count)) + "\t0-71\t0\t\tN/A\n"
             for i in range(count)]
    legend = ("\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between "
              "NUMA nodes (e.g., QPI/UPI)\n  NV#  = Connection traversing a bonded set of # NVLinks\n")
    return head + "".join(lines) + legend


def _bundle(tmp_path: Path, smi: str, topo: str | None = None) -> Path:
    (tmp_path / "nvidia-smi.txt").write_text(smi)
    if topo is not None:
        (tmp_path / "nvidia-smi-topo.txt").write_text(topo)
    return tmp_path


def _of(report, check_id):
    return [finding for finding in report.findings if finding.check_id == check_id]


def test_names_from_the_driver_table_find_their_rows():
    for name, model in {"NVIDIA GB200": "GB200", "NVIDIA GB300": "GB300", "NVIDIA B300 SXM6 AC": "B300 SXM",
                        "NVIDIA H20": "H20", "NVIDIA H800": "H800 SXM", "NVIDIA A800-SXM4-80GB": "A800 SXM4 80GB",
                        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "RTX PRO 6000 Blackwell Max-Q",
                        "Tesla P40": "P40"}.items():
        assert gpu_spec(name).model == model, name
    for other in ("NVIDIA H200", "NVIDIA H20-3e", "NVIDIA B200", "NVIDIA GB10"):
        assert gpu_spec(other) is None or gpu_spec(other).model not in ("H20", "B300 SXM", "GB200")


def test_gb200_tray_is_nvlinked_and_asks_for_no_host_fabric_manager_or_nvswitch(tmp_path):
    buses = ["00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0"]
    smi = _table([_row(i, "NVIDIA GB200", bus, 1200, 189471) for i, bus in enumerate(buses)])
    report = report_for(_bundle(tmp_path, smi, _topo(4, "NV18")))
    links = _of(report, "nvlink.link_down")
    assert links and all(finding.status is Status.PASS for finding in links), [f.message for f in links]
    fabric = _of(report, "gpu.fabric")
    assert all(finding.status in (Status.PASS, Status.SKIP) for finding in fabric), [f.message for f in fabric]
    assert not [f for f in report.findings if f.status in (Status.WARN, Status.FAIL)
                and ("Fabric Manager" in f.message or "NVSwitch" in f.message)]
    power = _of(report, "power.limit")
    assert all(finding.status is Status.PASS for finding in power), [f.message for f in power]


def test_gb200_tray_with_a_gpu_short_of_its_links_fails(tmp_path):
    smi = _table([_row(i, "NVIDIA GB200", f"0000000{i}:01:00.0", 1200, 189471) for i in range(4)])
    topo = _topo(4, "NV18", short=3)
    report = report_for(_bundle(tmp_path, smi, topo))
    assert Status.FAIL in {finding.status for finding in _of(report, "nvlink.link_down")}


def test_gb200_machine_is_one_nvlink_domain():
    assert machine_from_description("4x GB200").nvlink_domain == 4


def test_rtx_pro_6000_max_q_at_300_w_is_its_default_and_the_workstation_edition_at_300_w_is_capped(tmp_path):
    spec = gpu_spec("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition")
    assert spec.get("tdp_w") == 300
    cut = gpu_spec("NVIDIA RTX PRO 6000 Blac...")
    assert cut is not None and cut.get("tdp_w") is None and cut.get("nvlink_via") == "none"
    workstation = _table([_row(0, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "00000000:54:00.0", 300,
                               97887)])
    report = report_for(_bundle(tmp_path, workstation))
    power = _of(report, "power.limit")
    assert [finding.status for finding in power] == [Status.WARN], [f.message for f in power]


def test_h20_board_with_nv18_everywhere_is_nvswitch_wired(tmp_path):
    smi = _table([_row(i, "NVIDIA H20", f"00000000:{0x18 + i:02X}:00.0", 400, 97871) for i in range(8)])
    report = report_for(_bundle(tmp_path, smi, _topo(8, "NV18")))
    links = _of(report, "nvlink.link_down")
    assert [finding.status for finding in links] == [Status.PASS], [f.message for f in links]
    assert machine_from_description("8x H20").nvlink_domain == 8
