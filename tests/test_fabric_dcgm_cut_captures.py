"""gpu.fabric from logs (a DCGM table whose test failed on CUDA's 802, NCCL's NVLS transport failing on a CUDA call),
DCGM tests that never judged a GPU (a skip, not a finding), and gpu.present on a capture cut before its GPU list.

Evidence is built from the programs' own formats, not from the real case that showed each gap:
- dcgmi's table stencil (DCGM dcgmi/Diag.cpp, `| <name, 25> | <info, 45> |`) around DCGM's cuInit error text
  ("Error using CUDA API cuInit") and CUDA's string for cudaErrorSystemNotReady (802, "system not yet initialized");
- NCCL's WARN prefix (src/debug.cc: `host:pid:tid [dev] file:line NCCL WARN`) and its CUDA-check text
  (src/include/checks.h: `Cuda failure <n> '<text>'`), with CUDA's string for error 801 (operation not supported);
- nvidia-smi's header (tests/fixtures/public/single-gpu-ansi, cut before its GPU rows)."""

from __future__ import annotations

from pathlib import Path

from gpuready.model import Status
from helpers import findings, of, only, report_for, statuses

PUBLIC = Path(__file__).parent / "fixtures" / "public"


def _row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |"


def _dcgm_802_table() -> str:
    reason = ("GPU 3 Error using CUDA API cuInit Unable to initialize CUDA library: 'system not yet initialized'. "
              "Please check if a CUDA sample program can be run successfully on this host.")
    pieces = [reason[i:i + 45] for i in range(0, len(reason), 45)]
    rows = [_row("Warning" if i == 0 else "", piece) for i, piece in enumerate(pieces)]
    return "\n".join(["Successfully ran diagnostic for group.",
                      "+---------------------------+------------------------------------------------+",
                      _row("Diagnostic", "Result"),
                      "+===========================+================================================+",
                      "|-----  Deployment  --------+------------------------------------------------|",
                      _row("Denylist", "Pass"),
                      "+-----  Hardware  ----------+------------------------------------------------+",
                      _row("Diagnostic", "Fail - GPU: 3"), *rows,
                      "+---------------------------+------------------------------------------------+", ""])


def test_dcgm_test_failed_on_cuda_802_is_the_fabric_not_a_gpu_failure(tmp_path):
    path = tmp_path / "dcgm.txt"
    path.write_text(_dcgm_802_table())
    found = findings(path)
    assert of(found, "dcgm.diag_failed") == []
    skipped = only(found, "dcgm.diag_error")
    assert skipped.status is Status.SKIP and "802" in skipped.message and "RMA" not in skipped.fix
    fabric = only(found, "gpu.fabric")
    assert fabric.status is Status.FAIL and fabric.observed == "cudaErrorSystemNotReady"
    assert fabric.evidence and "system not yet" in " ".join(e.text for e in fabric.evidence) or fabric.evidence


def test_nvls_cuda_failure_is_the_fabric_and_other_transports_are_not(tmp_path):
    nvls = tmp_path / "nccl.log"
    nvls.write_text("gpu-a07:4411:4502 [5] NCCL INFO NCCL_NVLS_ENABLE set by environment to 1.\n"
                    "gpu-a07:4411:4502 [5] transport/nvls.cc:151 NCCL WARN Cuda failure 801 'operation not supported'\n"
                    "gpu-a07:4411:4502 [5] NCCL INFO init.cc:1080 -> 1\n")
    fabric = only(findings(nvls), "gpu.fabric")
    assert fabric.status is Status.FAIL and "NVLS" in fabric.message and "nvidia-smi -r" in fabric.fix
    other = tmp_path / "p2p.log"
    other.write_text("gpu-a07:4411:4502 [5] transport/p2p.cc:275 NCCL WARN Cuda failure 1 'invalid argument'\n")
    assert [f.status for f in of(findings(other), "gpu.fabric") if f.status is not Status.PASS] == []


def test_internal_error_is_a_skip_that_says_why():
    found = findings(Path(__file__).parent / "fixtures" / "diagnose" / "dcgm" / "diag_internal_error_dcgm4_dcgm_253.txt")
    assert only(found, "dcgm.diag_error").status is Status.SKIP


def test_a_header_cut_before_the_gpu_rows_is_no_missing_gpu(tmp_path):
    header = [line for line in (PUBLIC / "single-gpu-ansi" / "nvidia-smi.txt").read_text().splitlines()
              if "Driver Version" in line]
    assert header, "the fixture's header line"
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "nvidia-smi.txt").write_text("+" + "-" * 40 + "+\n" + header[0] + "\n")
    present = [f for f in report_for(tmp_path / "cut").findings if f.check_id == "gpu.present"]
    assert [(f.status, f.message_id) for f in present] == [(Status.PASS, "gpu.present.driver_only")]
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "nvidia-smi.txt").write_text("No devices were found\n")
    assert statuses(report_for(tmp_path / "none"), "gpu.present") == ["fail"]


def test_fabric_manager_failing_to_start_as_systemd_and_its_script_say_it(tmp_path):
    """Fabric Manager not running, in the words of systemctl (`Job for nvidia-fabricmanager.service failed because the
    control process exited with error code.`, NVIDIA/gpu-operator#356), systemd (`Failed to start %s.` with the unit's
    Description, `NVIDIA fabric manager service`) and its start script (`"<command>" failed! Exit code: N`): a
    failure on an NVSwitch board (tests/fixtures/public/dgx-h100-nvswitch), no finding on boards without NVSwitch."""
    hgx = PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi.txt"
    lines = ("Job for nvidia-fabricmanager.service failed because the control process exited with error code.",
             "Mar 02 08:11:09 hgx-07 systemd[1]: Failed to start NVIDIA fabric manager service.",
             'Mar 02 08:11:09 hgx-07 nvidia-fabricmanager-start.sh[2210]: "/usr/bin/nv-fabricmanager -c '
             '/usr/share/nvidia/nvswitch/fabricmanager.cfg" failed! Exit code: 255')
    for number, line in enumerate(lines):
        log = tmp_path / f"fm{number}.txt"
        log.write_text(line + "\n")
        fabric = only(findings(log, hgx), "gpu.fabric")
        assert fabric.status is Status.FAIL and fabric.evidence, line
    consumer = tmp_path / "nvidia-smi-4090.txt"
    consumer.write_text((PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-8x4090.txt").read_text())
    assert [f for f in of(findings(tmp_path / "fm1.txt", consumer), "gpu.fabric") if f.status is Status.FAIL] == []
