"""A container given some of the host's GPUs, Xid history around driver reloads and GPU resets, and ECC / row-remap
evidence from the kernel log. Inputs: tests/fixtures/container/ (sources in its README) and the public captures."""

from pathlib import Path

import pytest

from conftest import FIXTURES, PUBLIC
from helpers import messages, report_for, statuses
from gpuready.evidence import collect
from gpuready.checks.registry import run_checks
from gpuready.evidence.build import build_facts
from gpuready.facts.host_files import container_from_cgroup, parse_cgroup_limits, parse_cpu_count, parse_cpuset, split_sections
from gpuready.facts.types import container_of
from gpuready.facts.kernel_log import mark_history, parse_kernel_log, superseded_by
from gpuready.facts.nvidia_smi_plain import parse_nvidia_smi_plain
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_text
from gpuready.facts.types import Facts, GpuFacts, HostFacts

CONTAINER = FIXTURES / "container"
LSPCI_8_H100 = FIXTURES / "partial" / "lspci-d-10de-8xh100.txt"
# The Xid 79 part of a real log (its first 5 lines): GPU 0000:91:00.0 fell off the bus; the SXid lines after it
# are left out (NVSwitch errors concern every GPU of the node, in a pod or not).
XID79 = "".join((PUBLIC / "xid" / "xid79-sxid-dmesg.txt").read_text().splitlines(keepends=True)[:5])
XID48_63_94 = (PUBLIC / "xid" / "xid48-63-94-dmesg.txt").read_text() + "\n"  # the capture ends without one
# The module banner in the layout the brief quotes (550.54.15), time-stamped as `dmesg --time-format iso` prints.
RELOAD_AFTER = ("2024-11-15T13:10:44,100000+00:00 NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  "
                "Tue Mar  5 22:23:56 UTC 2024\n")
LOAD_BEFORE = RELOAD_AFTER.replace("2024-11-15T13:10:44", "2024-11-15T05:00:01")
NOT_ALLOCATED = ["0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]


def _cpuinfo(count: int, sockets: int = 2) -> str:
    """/proc/cpuinfo of `count` logical CPUs: the recorded H200 VM's first block, renumbered (a DGX H100 has 224)."""
    block = (FIXTURES / "h200-collect" / "cpuinfo.txt").read_text().split("\n\n")[0]
    per_socket = count // sockets
    blocks = []
    for cpu in range(count):
        text = block.replace("processor\t: 0", f"processor\t: {cpu}", 1)
        text = text.replace("physical id\t: 0", f"physical id\t: {cpu // per_socket}", 1)
        blocks.append(text)
    return "\n\n".join(blocks) + "\n\n"


def _pod_files(**changes) -> dict:
    files = {"nvidia-smi.txt": CONTAINER / "nvidia-smi-2of8-h100.txt", "lspci-vv.txt": LSPCI_8_H100,
             "dmesg.txt": XID79, "cgroup.txt": CONTAINER / "cgroup-pod-2of8.txt", "env.txt": CONTAINER / "env-pod.txt",
             "cpuinfo.txt": _cpuinfo(224), "meminfo.txt": CONTAINER / "meminfo-dgx-h100.txt",
             "uptime.txt": CONTAINER / "uptime-pod.txt"}
    files.update(changes)
    return {name: source for name, source in files.items() if source is not None}


def _finding(report, check_id):
    found = [finding for finding in report.findings if finding.check_id == check_id]
    assert len(found) == 1, [(f.status.value, f.message) for f in found]
    return found[0]


# ---------------------------------------------------------------- a pod with 2 of 8 H100s


def test_pod_with_two_of_eight_h100s(make_bundle):
    report = report_for(make_bundle(_pod_files()))
    assert statuses(report, "gpu.present") == ["pass"]
    lost = _finding(report, "gpu.lost")
    assert lost.status.value == "pass"
    assert "6 GPU(s) of the host are not allocated to this container: " + ", ".join(NOT_ALLOCATED) in lost.message
    assert lost.observed["not_allocated"] == NOT_ALLOCATED and lost.observed["container"] == "kubernetes"
    assert "env KUBERNETES_SERVICE_HOST is set" in lost.observed["evidence"]

    xid = _finding(report, "health.xid")  # Xid 79 line + its fallen-off-the-bus line, on 0000:91:00.0
    assert xid.status.value == "warn"
    assert xid.observed["xid"] == 79 and xid.observed["count"] == 2 and xid.observed["outside_allocation"] is True
    assert "the node has a faulty GPU outside this kubernetes container" in xid.message
    assert xid.observed["last_age_s"] == pytest.approx(6790000.0 - 6781741.548783, abs=0.1)
    assert "2.3 h ago" in xid.message

    cpu = _finding(report, "host.cpu_per_gpu")
    assert cpu.status.value == "pass"
    assert cpu.observed == "16 CPUs in the container's cpuset (0-15) / 2 GPU(s) = 8.0"
    memory = _finding(report, "host.memory_ratio")  # 200 GiB limit / 2 x 81559 MiB = 1.26x (the host has 2 TiB)
    assert memory.status.value == "warn" and "the container's memory limit" in memory.observed
    assert memory.observed.startswith("200 GiB")
    assert report.verdict().value == "ready_with_warnings"


def test_same_inputs_on_bare_metal(make_bundle):
    report = report_for(make_bundle(_pod_files(**{"env.txt": None, "cgroup.txt": None})))
    lost = _finding(report, "gpu.lost")
    assert lost.status.value == "fail"
    assert lost.message == "lspci lists 6 NVIDIA GPU(s) the driver does not show: " + ", ".join(NOT_ALLOCATED) + "."
    xid = _finding(report, "health.xid")
    assert xid.status.value == "fail" and xid.observed["outside_allocation"] is False
    assert _finding(report, "host.cpu_per_gpu").observed == "224 logical CPUs / 2 GPU(s) = 112.0"
    assert report.verdict().value == "not_ready"


def test_cgroup_without_container_evidence_is_bare_metal(make_bundle):
    """`0::/` alone (a private cgroup namespace, or a host without systemd) says nothing either way."""
    report = report_for(make_bundle(_pod_files(**{"env.txt": None})))
    assert statuses(report, "gpu.lost") == ["fail"]
    assert _finding(report, "host.cpu_per_gpu").observed.startswith("16 CPUs in the container's cpuset")


def test_cpu_quota_below_the_cpuset(make_bundle):
    cgroup = (CONTAINER / "cgroup-pod-2of8.txt").read_text().replace("max 100000", "600000 100000")
    report = report_for(make_bundle(_pod_files(**{"cgroup.txt": cgroup})))
    cpu = _finding(report, "host.cpu_per_gpu")
    assert cpu.observed == "6 CPUs allowed by the container's CPU quota / 2 GPU(s) = 3.0" and cpu.status.value == "warn"


def test_docker_given_all_gpus_warns_about_missing_ones(make_bundle):
    cgroup = "==> /proc/1/cgroup <==\n0::/\n\n==> /.dockerenv <==\n\n"
    report = report_for(make_bundle(_pod_files(**{"cgroup.txt": cgroup, "env.txt": "NVIDIA_VISIBLE_DEVICES=all\n"})))
    lost = _finding(report, "gpu.lost")
    assert lost.status.value == "warn" and "NVIDIA_VISIBLE_DEVICES=all" in lost.message
    assert _finding(report, "health.xid").status.value == "fail"  # every host GPU is this container's


def test_docker_given_two_gpus(make_bundle):
    cgroup = "==> /proc/1/cgroup <==\n0::/\n\n==> /.dockerenv <==\n\n"
    env = "NVIDIA_VISIBLE_DEVICES=0,1\n"  # docker run --gpus '"device=0,1"'
    report = report_for(make_bundle(_pod_files(**{"cgroup.txt": cgroup, "env.txt": env})))
    assert statuses(report, "gpu.lost") == ["pass"] and "docker" in messages(report, "gpu.lost")
    assert statuses(report, "health.xid") == ["warn"]


def test_slurm_job_step_with_its_cgroup(make_bundle):
    cgroup = ("==> /proc/1/cgroup <==\n0::/init.scope\n\n==> /proc/self/cgroup <==\n"
              "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n")
    report = report_for(make_bundle(_pod_files(**{"cgroup.txt": cgroup, "env.txt": "SLURM_JOB_ID=4242\n"})))
    lost = _finding(report, "gpu.lost")
    assert lost.status.value == "pass" and lost.observed["container"] == "slurm"
    assert "env SLURM_JOB_ID=4242" in lost.observed["evidence"]
    # SLURM_JOB_ID without the job's cgroup: the job may see every GPU, so missing ones still fail
    report = report_for(make_bundle(_pod_files(**{"cgroup.txt": None, "env.txt": "SLURM_JOB_ID=4242\n"})))
    assert statuses(report, "gpu.lost") == ["fail"]


# ---------------------------------------------------------------- Xid history: driver reload, GPU reset


def _gpu19(**fields) -> list[GpuFacts]:
    """The GPU of xid48-63-94-dmesg.txt (PCI:0000:19:00), from a source without ECC or row-remapper fields."""
    return [GpuFacts(index=0, bus_id="0000:19:00.0", name="NVIDIA H100 80GB HBM3",
                     uuid="GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1", **fields)]


def _run(log: str, **fields):
    gpus = _gpu19(**fields)
    events = parse_kernel_log(log)
    mark_history(events, {gpu.uuid.lower(): gpu.bus_id for gpu in gpus})  # as facts/build.py does, GPUs known
    facts = Facts(gpus=gpus, kernel_log=events, kernel_log_readable=True)
    found: dict[str, list] = {}
    for finding in run_checks(facts):
        found.setdefault(finding.check_id, []).append(finding)
    return found


def test_xid48_before_a_driver_reload_is_history():
    found = _run(XID48_63_94 + RELOAD_AFTER)
    assert {f.observed["xid"]: f.status.value for f in found["health.xid"]} == {48: "warn", 63: "warn", 94: "warn"}
    assert all(f.observed["history"] for f in found["health.xid"])
    assert "before the driver (re)load (NVIDIA 550.54.15) at 2024-11-15T13:10:44,100000+00:00" \
        in found["health.xid"][0].message
    assert [f.status.value for f in found["health.ecc_uncorrected"]] == ["warn"]
    assert "history" in found["health.ecc_uncorrected"][0].message
    assert [f.status.value for f in found["health.row_remap_pending"]] == ["pass"]  # the reload applied it


def test_xid48_after_the_driver_load_fails():
    found = _run(LOAD_BEFORE + XID48_63_94)
    assert {f.observed["xid"]: f.status.value for f in found["health.xid"]} == {48: "fail", 63: "warn", 94: "fail"}
    ecc = found["health.ecc_uncorrected"]
    assert [f.status.value for f in ecc] == ["fail"]
    assert "the evidence is the kernel log" in ecc[0].message and "Xid 48 ×1, Xid 94 ×9" in ecc[0].message
    assert "last at 2024-11-15T12:02:03,638794+00:00" in ecc[0].message


def test_counters_win_over_the_kernel_log():
    found = _run(LOAD_BEFORE + XID48_63_94, ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0,
                 remap_pending=False)
    assert [f.status.value for f in found["health.ecc_uncorrected"]] == ["pass"]
    assert [f.status.value for f in found["health.row_remap_pending"]] == ["pass"]


def test_xid63_without_a_reset_after_is_a_pending_remap():
    found = _run(XID48_63_94)
    pending = found["health.row_remap_pending"]
    assert [f.status.value for f in pending] == ["fail"] and "no GPU reset or driver reload follows" in pending[0].message
    assert [f.status.value for f in found["health.row_remap_failure"]] == ["skip"]  # nothing says either way


def test_a_gpu_reset_makes_that_gpus_events_history():
    # NVIDIA NVSentinel's reset script logs this after a successful `nvidia-smi -r` (the driver logs no line).
    reset = "2024-11-15T13:00:00,000000+00:00 gpu-node nvsentinel-gpu-reset: GPU reset executed: " \
            "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1, success: true\n"
    found = _run(XID48_63_94 + reset)
    assert [f.status.value for f in found["health.row_remap_pending"]] == ["pass"]
    assert "reset of this GPU" in found["health.row_remap_pending"][0].message
    assert {f.status.value for f in found["health.xid"]} == {"warn"}
    # a failed reset, or a reset of another GPU, changes nothing
    failed = reset.replace("success: true", "success: false")
    assert [f.status.value for f in _run(XID48_63_94 + failed)["health.row_remap_pending"]] == ["fail"]
    other = reset.replace("GPU-b42dd28e", "GPU-00000000")
    assert [f.status.value for f in _run(XID48_63_94 + other)["health.row_remap_pending"]] == ["fail"]


def test_probe_messages_belong_to_the_load_that_prints_the_banner():
    """The 570 open module prints its banner 0.13 s after the probe found the GPU off the bus: still current."""
    events = parse_kernel_log((PUBLIC / "xid" / "xid79-no-xid-multiline-dmesg.txt").read_text())
    assert [(e.kind, None if mark is None else mark.kind) for e, mark in zip(events, superseded_by(events))] == \
        [("fallen_off_bus", None), ("driver_load", None)]
    assert superseded_by(events, same_load_window_s=0.0)[0] is events[1]


def test_xid64_is_a_remap_failure_even_before_a_reload():
    xid64 = ("[ 5512.118227] NVRM: Xid (PCI:0000:19:00): 64, pid='<unknown>', name=<unknown>, "
             "Row Remapper Error: Failed to remap row\n")  # no public capture of Xid 64: hand-built, see README
    reload = "[ 5800.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    for log in (xid64, xid64 + reload):
        found = _run(log)
        assert [f.status.value for f in found["health.row_remap_failure"]] == ["fail"]
    assert "5512 s" not in _run(xid64)["health.row_remap_failure"][0].message  # no uptime: time after boot
    assert "1.5 h after boot" in _run(xid64)["health.row_remap_failure"][0].message


def test_app_xid_outside_the_container_is_a_note():
    xid13 = "[  100.000000] NVRM: Xid (PCI:0000:91:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0)\n"
    facts = Facts(gpus=[GpuFacts(index=0, bus_id="0000:18:00.0", source="nvidia-smi.txt")],
                  kernel_log=parse_kernel_log(xid13), env={"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert [f.status.value for f in run_checks(facts, only=["health.xid"])] == ["pass"]


# ---------------------------------------------------------------- ECC from plain nvidia-smi and -q -d ECC


def test_plain_nvidia_smi_volatile_uncorrected_ecc(make_bundle):
    plain = parse_nvidia_smi_plain((CONTAINER / "nvidia-smi-ecc2-rtx-pro-6000.txt").read_text())
    assert [(gpu.bus_id, gpu.ecc_uncorrected_volatile) for gpu in plain.gpus] == \
        [("0000:54:00.0", 0), ("0000:55:00.0", 2)]
    report = report_for(make_bundle({"nvidia-smi.txt": CONTAINER / "nvidia-smi-ecc2-rtx-pro-6000.txt",
                                     "dmesg.txt": CONTAINER / "journalctl-k-xid48-63-154-rtx-pro-6000.txt"}))
    ecc = _finding(report, "health.ecc_uncorrected")
    assert ecc.status.value == "fail" and ecc.observed == {"volatile": 2, "aggregate": None}
    xid48 = next(f for f in report.findings if f.check_id == "health.xid" and f.observed["xid"] == 48)
    assert xid48.status.value == "fail" and "last at Aug 10 15:36:05" in xid48.message
    # N/A (ECC off or unsupported), MIG's On and Off are no count
    assert [gpu.ecc_uncorrected_volatile for gpu in
            parse_nvidia_smi_plain((PUBLIC / "mig" / "nvidia-smi.txt").read_text()).gpus] == [None]


def test_nvidia_smi_q_d_ecc_fragment(make_bundle):
    query = parse_nvidia_smi_q_text((CONTAINER / "nvidia-smi-q-d-ecc-h100.txt").read_text())
    assert [(gpu.bus_id, gpu.ecc_enabled, gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate)
            for gpu in query.gpus] == [("0000:18:00.0", True, 0, 0), ("0000:2a:00.0", True, 2, 2)]
    report = report_for(make_bundle({"nvidia-smi-q.txt": CONTAINER / "nvidia-smi-q-d-ecc-h100.txt"}))
    assert statuses(report, "health.ecc_uncorrected") == ["fail"]
    assert "GPU1 has 2 uncorrectable ECC error(s)" in messages(report, "health.ecc_uncorrected")


# ---------------------------------------------------------------- parsers


def test_cpu_lists_are_bounded():
    assert parse_cpu_count("0-15") == 16 and parse_cpu_count("0-15,32-47") == 32
    assert parse_cpu_count("0-7,4-11,3") == 12 and parse_cpu_count("65535") == 1
    for bad in ("0-65536", "0-4294967295", "", "0-7:2", "a-b", "7-3", ",".join(["0-65535"] * 70000)):
        with pytest.raises(ValueError):
            parse_cpu_count(bad)


def test_cgroup_v1_and_v2_files():
    v2 = split_sections((CONTAINER / "cgroup-pod-2of8.txt").read_text())
    assert parse_cgroup_limits(v2) == (200 * 2**30, None, "none")
    assert parse_cpuset(v2) == ("0-15", 16)
    v1 = split_sections("==> /sys/fs/cgroup/memory/memory.limit_in_bytes <==\n9223372036854771712\n"
                        "==> /sys/fs/cgroup/cpu/cpu.cfs_quota_us <==\n800000\n"
                        "==> /sys/fs/cgroup/cpu/cpu.cfs_period_us <==\n100000\n"
                        "==> /sys/fs/cgroup/cpuset/cpuset.effective_cpus <==\n0-3,8-11\n"
                        "==> /sys/fs/cgroup/cpuset/cpuset.cpus <==\n0-63\n"
                        "==> /proc/1/cgroup <==\n12:cpuset:/kubepods/burstable/pod1f4/cri-containerd-9a1\n")
    assert parse_cgroup_limits(v1) == (None, 8.0, "kubernetes")
    assert parse_cpuset(v1) == ("0-3,8-11", 8)
    assert container_from_cgroup(v1)[1] == ["/proc/1/cgroup: kubepods (12:cpuset:/kubepods/burstable/pod1f4/"
                                            "cri-containerd-9a1)"]
    assert container_from_cgroup(split_sections("==> /proc/1/cgroup <==\n0::/init.scope\n")) == ("none", [])
    assert container_from_cgroup({}) == (None, [])


def test_container_evidence_from_cgroup_and_env():
    host = HostFacts(container="none", container_evidence=[])
    assert container_of(host, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}) == \
        ("kubernetes", ["env KUBERNETES_SERVICE_HOST is set"])
    assert container_of(host, {"NVIDIA_VISIBLE_DEVICES": "0,1"}) == ("container", ["env NVIDIA_VISIBLE_DEVICES=0,1"])
    assert container_of(host, {"SLURM_JOB_ID": "7"}) == ("none", [])
    assert container_of(HostFacts(), None) == (None, [])
    docker = HostFacts(container="docker", container_evidence=["/.dockerenv exists"])
    assert container_of(docker, {"KUBERNETES_SERVICE_HOST": "x"})[0] == "kubernetes"


def test_corrupt_cpuset_is_an_input_error_and_keeps_the_limits():
    cgroup = (CONTAINER / "cgroup-pod-2of8.txt").read_text().replace("0-15", "0-99999")
    facts = build_facts({"cgroup.txt": cgroup})
    assert facts.host.cgroup_memory_limit_bytes == 200 * 2**30 and facts.host.cgroup_cpuset_count is None
    assert [name for name, _sentence in facts.input_errors] == ["cgroup.txt"]
    assert "beyond 65,536 CPUs" in facts.input_errors[0][1]


def test_collect_reads_the_cpuset_and_our_own_cgroup(tmp_path, monkeypatch):
    assert {"/sys/fs/cgroup/cpuset.cpus.effective", "/sys/fs/cgroup/cpuset/cpuset.effective_cpus",
            "/sys/fs/cgroup/cpuset/cpuset.cpus", "/proc/self/cgroup", "/proc/1/cgroup"} <= set(collect.CGROUP_FILES)
    cpuset, marker = tmp_path / "cpuset.cpus.effective", tmp_path / ".dockerenv"
    cpuset.write_text("0-15\n")
    marker.write_text("")
    monkeypatch.setattr(collect, "CGROUP_FILES", [str(cpuset), str(tmp_path / "absent")])
    monkeypatch.setattr(collect, "CONTAINER_MARKER_FILES", [str(marker), str(tmp_path / "absent")])
    text = collect._cgroup().text
    assert text == f"==> {cpuset} <==\n0-15\n==> {marker} <==\n\n"
    assert split_sections(text) == {str(cpuset): "0-15", str(marker): ""}  # the marker's presence is the evidence


def test_kernel_log_times():
    events = parse_kernel_log((CONTAINER / "journalctl-k-xid48-63-154-rtx-pro-6000.txt").read_text())
    assert [(e.kind, e.code, e.wall_time) for e in events][:2] == [("xid", 48, "Aug 10 15:36:05"),
                                                                  ("xid", 171, "Aug 10 15:36:05")]
    both = parse_kernel_log("Jun 12 16:31:50 host kernel: [12345.678901] NVRM: Xid (PCI:0000:01:00): 79, GPU has "
                            "fallen off the bus.\n")
    assert (both[0].timestamp_s, both[0].wall_time) == (12345.678901, "Jun 12 16:31:50")
    load = parse_kernel_log("[    0.611400] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
                            "Release Build  (nixbld@)\n")
    assert [(e.kind, e.detail) for e in load] == [("driver_load", "580.159.04")]


def test_readme_lists_every_fixture():
    readme = (CONTAINER / "README.md").read_text()
    for path in CONTAINER.iterdir():
        if path.name != "README.md":
            assert f"`{path.name}`" in readme, path.name
    assert Path(LSPCI_8_H100).exists()


def test_recorded_h200_docker_bundle_is_judged_as_a_container_with_its_one_gpu():
    """`gpuready collect --redact` inside the lent H200's Docker container (2026-12-03, driver 580.159.04)."""
    from gpuready.evidence.build import build_facts
    from gpuready.evidence.reader import read_bundle
    bundle = FIXTURES / "h200-docker-collect"
    facts = build_facts(read_bundle(bundle))
    assert facts.host.container == "docker"
    assert any("/.dockerenv" in item for item in facts.host.container_evidence)
    assert any("NVIDIA_VISIBLE_DEVICES" in item for item in facts.host.container_evidence)
    assert facts.host.cgroup_cpuset_count == 16
    report = report_for(bundle)
    problems = {(f.check_id, f.status.value) for f in report.findings if f.status.value in ("warn", "fail", "error")}
    assert problems == {("host.memory_ratio", "warn")}  # 126 GiB RAM for 141 GB of VRAM
    assert report.verdict().value == "ready_with_warnings" and report.exit_code() == 0


def test_nvml_unknown_error_beside_a_gpu_listing_is_lost_device_access(tmp_path):
    """NVML's 'Unknown Error' at start (NVIDIA/nvidia-docker#1671's paste, tests/fixtures/evidence-classes) where
    another output of the same machine lists its GPUs (tests/fixtures/public/mig's `nvidia-smi -L`): the container
    lost its device nodes (NVIDIA/nvidia-container-toolkit#48), not the driver."""
    from gpuready.model import Status
    from helpers import findings, of
    fixtures = Path(__file__).parent / "fixtures"
    error = tmp_path / "container-nvidia-smi.txt"
    error.write_text((fixtures / "evidence-classes" / "nvml-unknown-error-nvidia-docker-1671.txt").read_text())
    listing = tmp_path / "host-nvidia-smi-L.txt"
    listing.write_text((fixtures / "public" / "mig" / "nvidia-smi-L.txt").read_text())
    lost = [f for f in of(findings(error, listing), "software.container") if f.status is Status.FAIL]
    assert len(lost) == 1 and "/dev/nvidia" in lost[0].message and "nvidia-ctk" in lost[0].fix
    alone = of(findings(error), "software.container")  # the error alone: gpu.present's finding, not this one
    assert [f for f in alone if f.status is Status.FAIL] == []


def test_container_toolkit_that_cannot_reach_the_driver_is_gpu_present(tmp_path):
    """libnvidia-container's CLI (`initialization error: %s`) with the reasons NVML gives (its `driver not loaded`,
    the dlopen error of a missing libnvidia-ml.so.1), built from those formats inside a docker error line: the
    host's driver is not usable, said with its cause; a mismatch is the probe's own finding, not a second one."""
    from gpuready.model import Status
    from helpers import findings, of
    prefix = ("docker: Error response from daemon: OCI runtime create failed: error running hook #0: error running "
              "hook: exit status 1, stdout: , stderr: ")
    for reason, cause in (("nvml error: driver not loaded", "not_loaded"),
                          ("load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or "
                           "directory", "no_library")):
        log = tmp_path / f"{cause}.log"
        log.write_text(prefix + f"nvidia-container-cli: initialization error: {reason}: unknown.\n")
        present = [f for f in of(findings(log), "gpu.present") if f.status is Status.FAIL]
        assert [f.message_id for f in present] == [f"gpu.present.unusable_{cause}"], reason
        assert present[0].evidence[0].line == 1
