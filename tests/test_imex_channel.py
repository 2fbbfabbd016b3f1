"""The IMEX channel inside containers and the IMEX service (issue 33): `collect` records `nvidia-imex-ctl -N -j`,
`systemctl is-active nvidia-imex` and the channel devices this process sees; `nvlink.imex_channel` judges them on a
multi-node NVLink machine only.

GPUs: the published GB200 Fabric blocks of tests/test_mnnvl_fabric.py (leptonai/gpud#1106, a registered tray;
Azure/azhpc-images#506, a tray registered with a zero cluster UUID) and the recorded H200 bundle. The channel and
service files are hand-built in collect's layout (`==> path <==` sections; `systemctl is-active`'s one word); the
major 234 is an example value, the driver picks it at load time. The IMEX domain: tests/fixtures/mnnvl (SOURCES.md).
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES
from gpuready.checks import fabric_mnnvl  # noqa: F401  (importing a module registers its checks)
from gpuready.checks.registry import run_checks
from gpuready.evidence import collect as collect_module
from gpuready.evidence.build import build_facts
from gpuready.evidence.collect import collect
from gpuready.evidence.reader import read_bundle
from gpuready.model import Status
from test_mnnvl_fabric import AZURE_BLOCK, GPUD_BLOCK, _smi_q

IMEX_FILES = ["nvidia-imex-ctl.txt", "imex-service.txt", "imex-channels.txt"]
HOST_CGROUP = "==> /proc/1/cgroup <==\n0::/init.scope\n\n==> /proc/self/cgroup <==\n0::/user.slice/session-4.scope\n"
SLURM_CGROUP = "==> /proc/self/cgroup <==\n0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"
POD_ENV = "KUBERNETES_SERVICE_HOST=10.96.0.1\nNVIDIA_VISIBLE_DEVICES=all\n"  # what the kubelet and device plugin set
DEVICES = "==> /proc/devices <==\n234 nvidia-caps-imex-channels\n"
CHANNEL0 = DEVICES + "\n==> /dev/nvidia-caps-imex-channels <==\nchannel0 c 234:0\n"
EMPTY_FOLDER = DEVICES + "\n==> /dev/nvidia-caps-imex-channels <==\n"
GB200 = _smi_q("NVIDIA GB200", GPUD_BLOCK)


def _judged(make_bundle, **files: str):
    """`check --bundle`'s path (reader, facts, registry) on a bundle of the given files; (status, message) pairs."""
    bundle = read_bundle(make_bundle({name.replace("__", ".").replace("_", "-"): text for name, text in files.items()}))
    facts = build_facts(bundle)
    return [(finding.status, finding.message) for finding in run_checks(facts, only=["nvlink.imex_channel"])], facts


def test_a_pod_on_a_gb200_tray_without_a_channel_fails(make_bundle):
    findings, facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, env__txt=POD_ENV, imex_channels__txt=EMPTY_FOLDER)
    assert facts.imex_channels.major == 234 and facts.imex_channels.folder and facts.imex_channels.channels == []
    assert [status for status, _message in findings] == [Status.FAIL]
    assert findings[0][1].startswith("This kubernetes container was not given an IMEX channel")
    assert "KUBERNETES_SERVICE_HOST" in findings[0][1]


def test_the_fail_names_every_way_to_give_a_channel(make_bundle):
    bundle = read_bundle(make_bundle({"nvidia-smi-q.txt": GB200, "env.txt": POD_ENV, "imex-channels.txt": DEVICES}))
    [finding] = run_checks(build_facts(bundle), only=["nvlink.imex_channel"])
    assert all(way in finding.fix for way in ("ComputeDomain", "NVIDIA_IMEX_CHANNELS", "--device"))
    assert finding.observed == {"channels": [], "folder": False, "major": 234, "container": "kubernetes"}


def test_a_pod_given_channel0_passes(make_bundle):
    findings, _facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, env__txt=POD_ENV, imex_channels__txt=CHANNEL0)
    assert findings == [(Status.PASS, "IMEX channel devices visible to this process: channel0.")]


def test_a_bare_host_without_a_channel_warns_and_its_stopped_service_fails(make_bundle):
    findings, facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, cgroup__txt=HOST_CGROUP,
                              imex_channels__txt=DEVICES, imex_service__txt="inactive\n")
    assert facts.container() == ("none", [])
    assert [status for status, _message in findings] == [Status.WARN, Status.FAIL]
    assert "(the driver's nvidia-caps-imex-channels major: 234)" in findings[0][1]
    assert findings[1][1] == ("The nvidia-imex service is inactive on this multi-node NVLink host: no IMEX daemon "
                              "shares this tray's GPU memory with the other trays.")


def test_a_slurm_job_sees_the_hosts_dev_so_no_channel_is_a_warning(make_bundle):
    findings, facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, cgroup__txt=SLURM_CGROUP, imex_channels__txt=DEVICES)
    assert facts.container()[0] == "slurm"
    assert [status for status, _message in findings] == [Status.WARN]


def test_a_healthy_host_passes_both(make_bundle):
    status_text = ("● nvidia-imex.service - NVIDIA IMEX service\n     Loaded: loaded (/lib/systemd/system/nvidia-imex."
                   "service; enabled; vendor preset: enabled)\n     Active: active (running) since Mon 2025-05-12\n")
    findings, facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, cgroup__txt=HOST_CGROUP,
                              imex_channels__txt=CHANNEL0, imex_service__txt=status_text)
    assert facts.imex_service == "active"  # a pasted `systemctl status` is read too
    assert findings == [(Status.PASS, "IMEX channel devices visible to this process: channel0."),
                        (Status.PASS, "The nvidia-imex service is active.")]


def test_a_stopped_unit_beside_a_domain_that_is_up_is_no_fault(make_bundle):
    # the daemon answered nvidia-imex-ctl (a ComputeDomain pod's daemon, kubernetes-sigs/dra-driver-nvidia-gpu's log)
    up = (FIXTURES / "mnnvl" / "imex-ctl-1-node-up.txt").read_text()
    findings, _facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, cgroup__txt=HOST_CGROUP,
                               imex_channels__txt=CHANNEL0, imex_service__txt="inactive\n", nvidia_imex_ctl__txt=up)
    assert [status for status, _message in findings] == [Status.PASS, Status.PASS]
    assert findings[1][1].startswith("The nvidia-imex service is inactive, but nvidia-imex-ctl shows the IMEX domain UP")


def test_a_stopped_unit_beside_a_domain_that_is_down_fails(make_bundle):
    down = (FIXTURES / "mnnvl" / "imex-ctl-2-nodes-down.json").read_text()
    findings, _facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, cgroup__txt=HOST_CGROUP,
                               imex_channels__txt=CHANNEL0, imex_service__txt="failed\n", nvidia_imex_ctl__txt=down)
    assert [status for status, _message in findings] == [Status.PASS, Status.FAIL]


def test_a_bundle_without_the_new_files_still_works(make_bundle):
    findings, facts = _judged(make_bundle, nvidia_smi_q__txt=GB200)
    assert [status for status, _message in findings] == [Status.SKIP]
    assert "imex-channels.txt" in findings[0][1]
    assert {name: facts.sources[name] for name in IMEX_FILES} == dict.fromkeys(IMEX_FILES, "missing")
    assert facts.input_errors == []


def test_a_tray_registered_without_a_cluster_is_left_to_fabric_clique(make_bundle):
    findings, _facts = _judged(make_bundle, nvidia_smi_q__txt=_smi_q("NVIDIA GB200", AZURE_BLOCK),
                               env__txt=POD_ENV, imex_channels__txt=EMPTY_FOLDER)
    assert [status for status, _message in findings] == [Status.SKIP]
    assert "nvlink.fabric_clique" in findings[0][1]


def test_a_single_node_nvswitch_box_gets_no_imex_finding(make_bundle):
    # an H100 (HGX) reports a zero cluster UUID by design (meta-pytorch/torchcomms#1385); no channel is needed there
    h100 = _smi_q("NVIDIA H100 80GB HBM3", AZURE_BLOCK.replace("Insufficient Resources", "Success"))
    findings, _facts = _judged(make_bundle, nvidia_smi_q__txt=h100, env__txt=POD_ENV, imex_channels__txt=EMPTY_FOLDER,
                               imex_service__txt="inactive\n")
    assert [status for status, _message in findings] == [Status.SKIP]
    assert findings[0][1].startswith("No GPU of a multi-node NVLink domain")


def test_the_recorded_h200_bundle_gets_no_imex_finding():
    facts = build_facts(read_bundle(FIXTURES / "h200-collect"))
    [finding] = run_checks(facts, only=["nvlink.imex_channel"])
    assert finding.status == Status.SKIP and "NVIDIA/NVSentinel#1471" in finding.refs[0]


def test_an_unreadable_service_file_is_one_input_error(make_bundle):
    findings, facts = _judged(make_bundle, nvidia_smi_q__txt=GB200, imex_service__txt="hello\n")
    assert [name for name, _sentence in facts.input_errors] == ["imex-service.txt"]
    assert [status for status, _message in findings] == [Status.SKIP]  # the channel is still judged: not recorded


def test_an_ls_l_paste_of_the_folder_is_read():
    paste = (DEVICES + "\n==> /dev/nvidia-caps-imex-channels/ <==\n"
             "cr--r--r-- 1 root root 234, 0 May 12 09:14 channel0\ncr--r--r-- 1 root root 234, 7 May 12 09:14 channel7\n")
    channels = build_facts({"imex-channels.txt": paste}).imex_channels
    assert (channels.channels, channels.folder, channels.major) == ([0, 7], True, 234)


# --- collect ----------------------------------------------------------------------------------------------------------

def _collect_imex(monkeypatch, tmp_path, path: str | None = None):
    monkeypatch.setenv("PATH", path or str(tmp_path / "empty-path"))
    return collect(with_torch=False, only=IMEX_FILES)


def test_collect_without_nvidia_imex_ctl_records_it_as_missing(monkeypatch, tmp_path):
    files, manifest = _collect_imex(monkeypatch, tmp_path)
    entry = manifest["files"]["nvidia-imex-ctl.txt"]
    assert (entry["collected"], entry["error"]) == (False, "nvidia-imex-ctl not found")
    assert "nvidia-imex-ctl.txt" not in files and "imex-channels.txt" in files
    if not os.path.isdir("/run/systemd/system"):  # this VM, a container: no systemd, nothing recorded
        assert manifest["files"]["imex-service.txt"]["error"] == "systemd is not running here"
    facts = build_facts(files)
    assert facts.sources["nvidia-imex-ctl.txt"] == "missing" and facts.input_errors == []


def test_collect_reads_the_channel_devices_it_sees(monkeypatch, tmp_path):
    folder = tmp_path / "nvidia-caps-imex-channels"
    folder.mkdir()
    (folder / "channel0").symlink_to("/dev/null")  # a character device (1:3), as stat sees through the link
    (folder / "channel1").write_text("")  # a plain file is no channel
    monkeypatch.setattr(collect_module, "CHANNEL_FOLDER", str(folder))
    files, _manifest = _collect_imex(monkeypatch, tmp_path)
    assert f"==> {folder} <==\nchannel0 c 1:3\nchannel1 - " in files["imex-channels.txt"]
    assert build_facts(files).imex_channels.channels == [0]


@pytest.mark.parametrize("exit_code", [0, 1])
def test_collect_keeps_the_domain_only_when_the_daemon_answers(monkeypatch, tmp_path, exit_code):
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    answer = FIXTURES / "mnnvl" / "imex-ctl-2-nodes-down.json"
    tool = bin_folder / "nvidia-imex-ctl"
    body = f"cat {answer}" if exit_code == 0 else "echo 'could not connect to the IMEX daemon' >&2"
    tool.write_text(f"#!/bin/sh\n[ \"$*\" = '-N -j' ] || exit 9\n{body}\nexit {exit_code}\n")
    tool.chmod(0o755)
    files, manifest = _collect_imex(monkeypatch, tmp_path, f"{bin_folder}:/usr/bin:/bin")
    entry = manifest["files"]["nvidia-imex-ctl.txt"]
    if exit_code == 0:
        assert build_facts(files).imex.state == json.loads(answer.read_text())["status"] == "DOWN"
    else:
        assert "nvidia-imex-ctl.txt" not in files
        assert (entry["exit_code"], entry["error"]) == (1, "could not connect to the IMEX daemon")
