"""`check --bundle` reads a bundle's logs as `diagnose` does: a support bundle is often the tool outputs plus the log of
the run that failed (a DCGM diag, an NCCL log, a container runtime's error). The tool outputs are the H200's own
collection (tests/fixtures/h200-collect); the logs are published ones, each with its source in its folder's README."""

import json
import subprocess
import sys

from conftest import FIXTURES
from gpuready.checks.registry import CheckOptions
from gpuready.pipeline import check_files, read_evidence_bundle

DIAGNOSE = FIXTURES / "diagnose"
H200 = FIXTURES / "h200-collect"


def _bundle_with(make_bundle, **logs):
    files = {path.name: path for path in H200.iterdir() if path.is_file()}
    return make_bundle({**files, **logs})


def _problems(report) -> dict[str, str]:
    return {f.check_id: f.status.value for f in report.findings if f.status.value in ("warn", "fail")}


def test_a_failed_dcgm_diag_and_an_nccl_shm_error_in_a_bundle_are_findings_of_check(make_bundle):
    """DCGM's `-r 2` on a faulty node (GPU Memory `Fail - GPU: 0`, ml-engineering) and nccl-tests dying on /dev/shm
    (NVIDIA/nccl-tests#166) beside a healthy H200's outputs: check fails both, and names each file as read as a log."""
    folder = _bundle_with(make_bundle, **{
        "dcgm.txt": DIAGNOSE / "dcgm" / "diag_r2_faulty_gpu0_ml_engineering.txt",
        "run.log": DIAGNOSE / "nccl" / "shm-nccl-tests-166.log"})
    report, _machines = check_files(read_evidence_bundle(folder), CheckOptions())
    problems = _problems(report)
    assert problems["dcgm.diag_failed"] == "fail"
    assert problems["nccl.shm_too_small"] == "fail"
    sources = report.facts["sources"]
    assert str(sources["dcgm.txt"]).startswith("read as a log") and "dcgm" in str(sources["dcgm.txt"])
    assert "nccl" in str(sources["run.log"])


def test_a_healthy_dcgm_diag_adds_no_finding(make_bundle):
    """Every test `Pass` (p4de, awsome-distributed-training): the bundle's verdict is what its tool outputs give."""
    plain = check_files(read_evidence_bundle(_bundle_with(make_bundle)), CheckOptions())[0]
    with_pass = check_files(read_evidence_bundle(_bundle_with(
        make_bundle, **{"dcgm.txt": DIAGNOSE / "dcgm" / "diag_r2_pass_p4de_awsome.txt"})), CheckOptions())[0]
    assert _problems(with_pass) == _problems(plain)
    assert with_pass.verdict() == plain.verdict()


def test_check_and_diagnose_agree_on_a_bundle_with_logs(make_bundle):
    """The same folder through both verbs: every problem check reports, diagnose reports too (one judgement)."""
    folder = _bundle_with(make_bundle, **{
        "dcgm.txt": DIAGNOSE / "dcgm" / "diag_targeted_power_fail_sagemaker.txt",
        "container.log": DIAGNOSE / "software" / "driver_too_old_11000_yuan_65.log"})
    run = [sys.executable, "-m", "gpuready"]
    checked = json.loads(subprocess.run(run + ["check", "--bundle", str(folder), "--json"], capture_output=True,
                                        text=True).stdout)
    diagnosed = json.loads(subprocess.run(run + ["diagnose", str(folder), "--json"], capture_output=True,
                                          text=True).stdout)
    flagged = {f["check_id"] for f in checked["findings"] if f["status"] in ("warn", "fail")}
    assert "dcgm.diag_failed" in flagged and "software.driver_cuda" in flagged
    assert flagged <= {f["check_id"] for f in diagnosed["findings"] if f["status"] in ("warn", "fail")}
