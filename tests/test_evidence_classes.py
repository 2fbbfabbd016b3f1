"""Outputs that stand where a table was expected (NVML and driver messages, Fabric Manager and CUDA 802, a lost GPU
named only in an error line, a `-q` head without GPU sections, files of several machines): the finding an engineer
would give, the same through `check --bundle` and `diagnose`."""

from pathlib import Path

import pytest

from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.model import Status
from gpuready.pipeline import check_files
from gpuready.verbs.diagnose.run import diagnose

FIXTURES = Path(__file__).parent / "fixtures"
CLASSES = FIXTURES / "evidence-classes"
PUBLIC = FIXTURES / "public"


def problems(report):
    return sorted({(f.check_id, f.status.value) for f in report.findings if f.status in (Status.WARN, Status.FAIL)})


def both(path: Path):
    """(check --bundle's report, diagnose's report) on one file or folder."""
    return check_files(read_bundle(path), CheckOptions())[0], diagnose([path])


@pytest.mark.parametrize(("name", "expected", "verdict"), [
    ("fm-version-mismatch-akash-632.log", [("gpu.fabric", "fail")], "not_ready"),
    ("cuda-802-llamafactory-7888.log", [("gpu.fabric", "fail")], "not_ready"),
    ("cuda-802-pytorch-35710.log", [("gpu.fabric", "fail")], "not_ready"),
    ("fm-nothing-to-do-a40-gpu-operator-610.log", [], "unknown"),
    ("fm-nothing-to-do-2x4090-cube-studio-29.log", [], "unknown"),
    ("nvml-unknown-error-container-toolkit-1227.txt", [("gpu.present", "fail")], "not_ready"),
    ("nvml-unknown-error-nvidia-docker-1671.txt", [("gpu.present", "fail")], "not_ready"),
])
def test_diagnose_gives_what_an_engineer_would(name, expected, verdict):
    report = diagnose([CLASSES / name])
    assert problems(report) == expected
    assert report.verdict().value == verdict


@pytest.mark.parametrize("name", ["fm-version-mismatch-akash-632.log", "nvml-unknown-error-container-toolkit-1227.txt",
                                  "nvml-unknown-error-nvidia-docker-1671.txt", "fm-nothing-to-do-a40-gpu-operator-610.log"])
def test_check_reads_the_same_tool_outputs_alike(name):
    checked, diagnosed = both(CLASSES / name)
    assert problems(checked) == problems(diagnosed)
    assert checked.verdict() == diagnosed.verdict()


def test_nvml_unknown_error_names_the_container_cause_and_fix():
    finding = next(f for f in diagnose([CLASSES / "nvml-unknown-error-container-toolkit-1227.txt"]).findings
                   if f.check_id == "gpu.present")
    assert "daemon-reload" in finding.message and "nvidia-ctk system create-dev-char-symlinks" in finding.fix


def test_fabric_manager_mismatch_names_both_versions_and_quotes_the_line():
    finding = next(f for f in diagnose([CLASSES / "fm-version-mismatch-akash-632.log"]).findings
                   if f.check_id == "gpu.fabric")
    assert finding.observed == {"fabric_manager": "550.127.05", "driver": "550.120"}
    assert [(Path(e.file).name, e.line) for e in finding.evidence][0] == ("fm-version-mismatch-akash-632.log", 3)


def test_fabric_manager_with_nothing_to_do_fails_on_an_nvswitch_board(tmp_path):
    """The same NV_WARN_NOTHING_TO_DO on an HGX board is a fault (NVLink5 without NVLSM): the board decides."""
    (tmp_path / "nvidia-smi.txt").write_text((PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi.txt").read_text())
    log = (CLASSES / "fm-nothing-to-do-2x4090-cube-studio-29.log").read_text()
    (tmp_path / "fm.log").write_text(log)
    fabric = [f for f in diagnose([tmp_path]).findings if f.check_id == "gpu.fabric"]
    assert [f.status for f in fabric] == [Status.FAIL]


def test_lost_gpu_named_only_in_an_error_line():
    report = diagnose([PUBLIC / "gpu-err" / "nvidia-smi-device-handle-error.txt"])
    assert problems(report) == [("gpu.lost", "fail")]
    lost = next(f for f in report.findings if f.check_id == "gpu.lost")
    assert lost.subject.gpu.bus_id == "0000:91:00.0"


def test_a_q_head_without_gpu_sections_is_not_the_driver_seeing_no_gpu(tmp_path):
    head = "\n".join((PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt").read_text().splitlines()[:7]) + "\n"
    assert "Attached GPUs" in head and "Product Name" not in head
    (tmp_path / "q.txt").write_text(head)
    checked, diagnosed = both(tmp_path / "q.txt")
    for report in (checked, diagnosed):
        assert problems(report) == [] and report.verdict().value == "unknown"
        assert "the driver announces 8, but no GPU section came with it" in report.not_enough_evidence.english()


def test_files_of_several_machines_are_judged_one_by_one():
    """public/gpu-err holds captures of three machines (drivers 535.154.05 and 525.125.06, and a line from a third)."""
    checked, diagnosed = both(PUBLIC / "gpu-err")
    for report in (checked, diagnosed):
        mixed = [f for f in report.findings if f.check_id == "bundle.mixed_machines"]
        assert len(mixed) == 1 and "3 machines" in mixed[0].message
        assert ("gpu.lost", "fail") in problems(report) and report.verdict().value == "not_ready"
    # each machine counts its own GPUs: the 8 of the 535 box, the 1 of the 525 box, the lost one named alone
    counts = {f.subject.host: f.observed for f in checked.findings if f.check_id == "gpu.present"}
    assert counts == {"machine 1 (driver 535.154.05)": 8, "machine 2 (driver 525.125.06)": 1,
                      "machine 3 (files that name no host or driver)": 1}


def test_one_machines_files_are_not_split():
    checked, _ = both(FIXTURES / "h200-collect")
    assert not [f for f in checked.findings if f.check_id == "bundle.mixed_machines"]


@pytest.mark.parametrize(("name", "gpu", "pids"), [
    ("nvidia-smi-processes-ddp-psmt-20.txt", 5, [26599, 26600, 26601]),
    ("nvidia-smi-processes-every-gpu-pytorch-64130.txt", 0, [331903, 331904, 331905]),
])
def test_ranks_that_all_touch_one_gpu(name, gpu, pids):
    checked, diagnosed = both(CLASSES / name)
    for report in (checked, diagnosed):
        finding = next(f for f in report.findings if f.check_id == "ddp.ranks_share_gpu0")
        assert finding.status == Status.WARN and finding.observed["gpu"] == gpu and finding.observed["pids"] == pids
        assert "set_device(local_rank)" in finding.fix
        assert ("gpu.present", "fail") not in problems(report)  # a Processes block alone names no GPU


def test_one_process_per_gpu_is_not_sharing(tmp_path):
    rows = [line for line in (CLASSES / "nvidia-smi-processes-ddp-psmt-20.txt").read_text().splitlines()
            if "MiB" not in line or "2885MiB" in line or " 6   " in line or " 7   " in line or " 8   " in line]
    (tmp_path / "smi.txt").write_text("\n".join(rows) + "\n")
    found = [f for f in diagnose([tmp_path / "smi.txt"]).findings if f.check_id == "ddp.ranks_share_gpu0"]
    assert found == []  # diagnose lists problems only; check's pass says so
    checked = check_files(read_bundle(tmp_path / "smi.txt"), CheckOptions())[0]
    assert [f.status for f in checked.findings if f.check_id == "ddp.ranks_share_gpu0"] == [Status.PASS]
