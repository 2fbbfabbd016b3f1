"""Any single file that names GPUs is enough to judge what it carries; nothing that names a GPU is `unknown`.

Inputs are real captures (tests/fixtures/public, tests/fixtures/partial, each README names the source),
given under the names people paste them with, not the bundle's names.
"""

import json
import shutil

import pytest

from conftest import FIXTURES, PUBLIC
from helpers import messages, report_for, statuses
from gpuready.cli.main import main
from gpuready.checks.registry import CheckOptions
from gpuready.evidence.build import build_facts
from gpuready.facts.types import NetInterface
from gpuready.model import Verdict
from gpuready.pipeline import check_report

PARTIAL = FIXTURES / "partial"


def _folder(tmp_path, **files):
    folder = tmp_path / "evidence"
    folder.mkdir()
    for name, source in files.items():
        shutil.copy(source, folder / name.replace("__", "."))
    return folder


def test_topology_matrix_alone_names_the_gpus_and_runs_the_topology_checks(tmp_path):
    folder = _folder(tmp_path, topo__txt=PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-topo.txt")
    report = report_for(folder)
    assert [gpu["index"] for gpu in report.facts["gpus"]] == list(range(8))
    assert all(gpu["bus_id"] is None for gpu in report.facts["gpus"])  # topo -m prints no bus ids
    assert report.facts["sources"]["topo.txt"] == "parsed as nvidia-smi-topo.txt"
    assert statuses(report, "topology.matrix") == ["warn"]
    assert "16 SYS" in messages(report, "topology.matrix")
    assert statuses(report, "topology.cross_numa") == ["warn"]
    # nvidia-smi printed the matrix, so the driver reached all 8 GPUs: enough for a verdict, its warnings stand
    assert report.verdict() == Verdict.READY_WITH_WARNINGS and report.exit_code() == 0


def test_dgx_matrix_as_a_single_file_passes_the_nvlink_checks():
    report = report_for(PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo.txt")
    assert len(report.facts["gpus"]) == 8
    assert statuses(report, "topology.matrix") == ["pass"] and "NV18" in messages(report, "topology.matrix")
    assert statuses(report, "nvlink.link_down") == ["pass"]


@pytest.mark.parametrize("content", [None, "Meeting notes: the GPUs arrived on Tuesday.\n"])
def test_nothing_that_names_a_gpu_is_unknown_and_exit_2(tmp_path, content):
    folder = tmp_path / "bundle"
    folder.mkdir()
    if content:
        (folder / "notes.txt").write_text(content)
    report = report_for(folder)
    assert report.verdict() == Verdict.UNKNOWN
    assert report.verdicts() == {"single_node": Verdict.UNKNOWN, "multi_node": Verdict.UNKNOWN}
    assert report.exit_code() == 2
    assert "no file names a GPU" in report.not_enough_evidence.english()
    assert "nvidia-smi-q.txt (`nvidia-smi -q`)" in report.not_enough_evidence.english()
    if content:
        assert "notes.txt (ignored: not a tool output gpuready recognises)" in report.not_enough_evidence.english()
    document = report.to_dict()
    assert document["verdict"] == "unknown" and document["exit_code"] == 2


def test_unknown_through_the_cli_writes_the_report_and_exits_2(tmp_path, capsys):
    folder = tmp_path / "empty"
    folder.mkdir()
    assert main(["check", "--bundle", str(folder), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["verdict"] == "unknown" and document["not_enough_evidence"].startswith("Not enough evidence")


def test_lspci_alone_names_the_gpus_not_the_nvswitches():
    report = report_for(PARTIAL / "lspci-d-10de-8xh100.txt")
    gpus = report.facts["gpus"]
    assert [gpu["bus_id"] for gpu in gpus] == ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                               "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
    assert {gpu["model"] for gpu in gpus} == {"H100 SXM"}
    assert "lspci" in messages(report, "gpu.present")


def test_kernel_log_alone_names_the_gpu_of_its_xid(tmp_path):
    folder = _folder(tmp_path, rank3__err=PUBLIC / "xid" / "xid79-sxid-dmesg.txt")
    report = report_for(folder)
    assert [gpu["bus_id"] for gpu in report.facts["gpus"]] == ["0000:91:00.0"]
    assert "fail" in statuses(report, "health.xid")
    assert report.exit_code() == 1


def test_two_q_fragments_of_one_machine_merge_into_one_gpu(tmp_path):
    folder = _folder(tmp_path, perf__txt=PARTIAL / "h200-nvidia-smi-q-d-performance.txt",
                     q__txt=FIXTURES / "h200-shared" / "nvidia-smi-q.txt")
    facts = build_facts({path.name: path.read_text() for path in folder.iterdir()})
    assert len(facts.gpus) == 1
    gpu = facts.gpus[0]
    assert gpu.name == "NVIDIA H200" and gpu.clock_event_reasons == frozenset({"gpu_idle"})
    assert facts.sources["perf.txt"] == facts.sources["q.txt"] == "parsed as nvidia-smi-q.txt"


def test_ecc_fragment_alone_judges_ecc_and_row_remapping():
    report = report_for(PUBLIC / "ecc-errors" / "nvidia-smi-q-a100-excerpt.txt")
    assert statuses(report, "health.ecc_uncorrected") == ["pass"]
    assert "177 corrected" in messages(report, "health.ecc_uncorrected")
    assert statuses(report, "health.row_remap_pending") == ["fail"]


def test_plain_nvidia_smi_under_any_name(tmp_path):
    folder = _folder(tmp_path, out=PUBLIC / "mixed-models" / "nvidia-smi.txt")
    report = report_for(folder)
    assert report.facts["sources"]["out"] == "parsed as nvidia-smi.txt"
    assert "warn" in statuses(report, "gpu.model_mismatch")


def _one_gbe_report(**kwargs):
    facts = build_facts({name: (FIXTURES / "h200-collect" / name).read_text()
                         for name in ("nvml.json", "nvidia-smi-topo.txt", "meminfo.txt", "cpuinfo.txt")})
    facts.net_interfaces = [NetInterface(name="eno1", speed_mbit_per_s=1000, operstate="up")]
    return check_report(facts, CheckOptions(), **kwargs)


def test_a_box_on_1gbe_is_judged_single_node_unless_told_otherwise():
    single = _one_gbe_report()
    assert statuses(single, "network.nic_speed") == ["fail"]
    assert single.verdicts()["multi_node"] == Verdict.NOT_READY
    assert single.verdict() == single.verdicts()["single_node"] != Verdict.NOT_READY
    assert single.exit_code() == 0
    multi = _one_gbe_report(multi_node=True)
    assert multi.verdict() == Verdict.NOT_READY and multi.exit_code() == 1
    assert multi.to_dict()["judged_for"] == "multi_node"


def test_cli_nnodes_above_one_means_multi_node(tmp_path, capsys):
    folder = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "h200-collect", folder)
    (folder / "sysfs.txt").write_text("==> /sys/class/net/eno1/operstate <==\nup\n\n"
                                      "==> /sys/class/net/eno1/speed <==\n1000\n")
    assert main(["check", "--bundle", str(folder), "--json"]) == 0
    capsys.readouterr()
    assert main(["check", "--bundle", str(folder), "--json", "--nnodes", "2"]) == 1
    assert json.loads(capsys.readouterr().out)["judged_for"] == "multi_node"


def test_a_model_without_nvlink_warns_without_a_topology_file():
    report = report_for(PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt")
    assert statuses(report, "topology.matrix") == ["warn"]
    assert "No NVLink: RTX 4090 has none" in messages(report, "topology.matrix")
    # An SXM part may or may not be NVLinked as expected: only the matrix says, so no verdict on the model alone.
    assert statuses(report_for(PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt"), "topology.matrix") == ["skip"]


def test_checks_that_lack_their_facts_skip_instead_of_passing():
    report = report_for(PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo.txt")
    for check_id in ("gpu.lost", "gpu.model_mismatch", "gpu.persistence", "gpu.mig", "gpu.compute_mode",
                     "gpu.ecc_mode", "gpu.fabric", "health.retired_pages", "pcie.gen_degraded", "pcie.acs_iommu",
                     "power.budget", "software.container"):
        assert statuses(report, check_id) == ["skip"], check_id
    passed = {f.check_id for f in report.findings if f.status.value == "pass"}
    assert passed == {"gpu.present", "host.numa_affinity", "nvlink.link_down", "topology.matrix",
                      "topology.cross_numa"}
