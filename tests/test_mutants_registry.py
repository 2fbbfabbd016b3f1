"""Tests that kill the mutants of checks/registry.py that survived the suite (issue 23, mutation testing; the run and
its module → test-file table are in benchmarks/mutation_score.sh): the runner's skips for a missing fact or a missing
GPU, a crashing check, the CheckContext helpers that build findings, per_gpu's pass, and the kernel-log helpers.

Expected texts are the English catalogue's (src/gpuready/locale/en/LC_MESSAGES/check_registry.po and the checks' own
.po files), filled in by hand; the bundle file that provides each fact is the one facts/build.py reads it from (its
`use("<file>", …)` calls), not the registry's table.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuready.checks.registry import (CHECKS, Check, CheckContext, CheckOptions, check, kernel_evidence,
                                      kernel_log_missing, queried, registered_in_order, run_checks)
from gpuready.facts.types import Facts, GpuFacts, HostFacts, KernelEvent
from gpuready.i18n import said
from gpuready.model import Evidence, Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

NO_GPU = "No NVIDIA GPU is visible, so there is nothing to judge (see gpu.present)."
"""check_registry.po, registry.no_gpu."""
KERNEL_LOG_FIX = "sudo gpuready check, or `sudo dmesg > dmesg.txt` into the bundle"
"""check_registry.po, registry.kernel_log_unreadable.fix and registry.kernel_log_absent.fix."""


def _gpu(index: int = 0, **fields) -> GpuFacts:
    return GpuFacts(index=index, bus_id=f"0000:{0x3b + index:02x}:00.0", name="NVIDIA H100 80GB HBM3",
                    source="nvml.json", **fields)


def _run(facts: Facts, *check_ids: str):
    return [(finding.check_id, finding.status, finding.message) for finding in run_checks(facts, only=check_ids)]


@pytest.fixture
def registered():
    """Registers checks made for one test through the public `@check` decorator, and removes them afterwards."""
    added: list[str] = []

    def register(check_id: str, function, needs: tuple[str, ...] = (), needs_gpus: bool = False):
        check(check_id, needs, needs_gpus)(function)
        added.append(check_id)
    yield register
    for check_id in added:
        CHECKS.pop(check_id, None)


# ------------------------------------------------------------------------------- a missing fact names its file

@pytest.mark.parametrize("check_id, facts, needs", [
    # facts/build.py: use("dmesg.txt", … _apply_kernel_log …)
    ("pcie.aer", Facts(), "kernel_log (dmesg.txt)"),
    # use("meminfo.txt", meminfo), use("cpuinfo.txt", cpuinfo), use("df.txt", df) (shm and the disks)
    ("host.memory_ratio", Facts(gpus=[_gpu()]), "host.memory_total_bytes (meminfo.txt)"),
    ("host.cpu_per_gpu", Facts(gpus=[_gpu()]), "host.cpu_count (cpuinfo.txt)"),
    ("host.shm", Facts(gpus=[_gpu()]), "host.shm_total_bytes (df.txt)"),
    ("host.disk", Facts(gpus=[_gpu()]), "host.disks (df.txt)"),
    # use("ulimit.txt", … memlock_limit_bytes …), use("uptime.txt", … uptime_s …), use("modules.txt", … modules …)
    ("host.memlock", Facts(), "host.memlock_limit_bytes (ulimit.txt)"),
    ("health.pcie_replay", Facts(gpus=[_gpu()]), "host.uptime_s (uptime.txt)"),
    ("network.gdr", Facts(), "host.kernel_modules (modules.txt)"),
    # _use_network_files: sysfs.txt sets ib_ports and net_interfaces, ibv_devinfo.txt ib_ports where sysfs had none
    ("network.rdma", Facts(), "ib_ports (sysfs.txt / ibv_devinfo.txt)"),
    ("network.nic_speed", Facts(), "net_interfaces (sysfs.txt)"),
    # use("torch.json", …), use("env.txt", …)
    ("software.torch_arch", Facts(gpus=[_gpu()]), "torch (torch.json)"),
    ("software.env", Facts(), "env (env.txt)"),
    # use("nvidia-smi-topo.txt", from_topology); use("nvidia-smi-topo-p2p.txt", … p2p_read …), nvml.json's p2p_read
    ("topology.cross_numa", Facts(gpus=[_gpu()]), "topology (nvidia-smi-topo.txt)"),
    ("topology.p2p", Facts(gpus=[_gpu()]), "p2p_read (nvidia-smi-topo-p2p.txt / nvml.json)"),
])
def test_a_check_without_its_fact_skips_and_names_the_file_that_provides_it(check_id, facts, needs):
    """check_registry.po registry.not_judged: 'Not judged: needs {sources}, which this run does not have.', with
    `sources` the fact and, in brackets, the bundle file(s) it is read from."""
    assert _run(facts, check_id) == [
        (check_id, Status.SKIP, f"Not judged: needs {needs}, which this run does not have.")]


def test_two_missing_facts_are_named_in_the_order_the_check_needs_them_comma_separated():
    """software.driver_cuda needs torch and driver_version; with neither, both are named, torch first, joined by ', ':
    torch from torch.json; driver_version from nvml.json or nvidia-smi (facts/nvml.py reads `driver_version`,
    facts/nvidia_smi_plain.py the header's 'Driver Version')."""
    assert _run(Facts(gpus=[_gpu()]), "software.driver_cuda") == [
        ("software.driver_cuda", Status.SKIP, "Not judged: needs torch (torch.json), driver_version "
                                              "(nvml.json / nvidia-smi), which this run does not have.")]


def test_a_check_that_needs_the_gpu_list_or_lspci_names_their_files(registered):
    """A check may need the GPU list itself (needs_gpus off) or the PCI devices: the GPU list comes from nvml.json,
    nvidia-smi-q.xml, nvidia-smi-q.txt or nvidia-smi.txt (facts/build.py's use(…) of each, in that order), the PCI
    devices from lspci-vv.txt; a fact the table does not know is named as itself."""
    registered("test.needs_lists", lambda context: [], needs=("gpus", "pci_devices", "host.bogus"))
    assert _run(Facts(), "test.needs_lists") == [
        ("test.needs_lists", Status.SKIP,
         "Not judged: needs gpus (nvml.json / nvidia-smi-q.xml / nvidia-smi-q.txt / nvidia-smi.txt), pci_devices "
         "(lspci-vv.txt), host.bogus (host.bogus), which this run does not have.")]


# ------------------------------------------------------------------------------- no GPU, a crash, nothing found

@pytest.mark.parametrize("gpus", [None, []])
def test_a_per_gpu_check_skips_with_the_no_gpu_reason_when_no_gpu_is_visible(gpus):
    """gpu.persistence is registered with @check's defaults (it needs GPUs): with no GPU list (None) or an empty one
    it is not run; the skip says registry.no_gpu, not the check's own 'Persistence mode not reported …'. gpu.present,
    registered with needs_gpus=False, runs and says there is no source (check_gpu.po gpu.present.no_source) or no
    GPU (gpu.present.no_gpu)."""
    present = ("No GPU source in this bundle (nvml.json, nvidia-smi-q.xml/.txt or nvidia-smi.txt)." if gpus is None
               else "No NVIDIA GPU or driver is usable on this machine. The driver is loaded but sees no GPU.")
    assert _run(Facts(gpus=gpus), "gpu.persistence", "gpu.present") == [
        ("gpu.persistence", Status.SKIP, NO_GPU),
        ("gpu.present", Status.SKIP if gpus is None else Status.FAIL, present)]


def test_a_check_made_by_hand_needs_gpus_unless_told_otherwise():
    """Check's field needs_gpus defaults to True ('Skip (with the reason) when no GPU is visible')."""
    CHECKS["test.by_hand"] = Check("test.by_hand", (), lambda context: [context.passed("ran")])
    try:
        assert _run(Facts(gpus=[]), "test.by_hand") == [("test.by_hand", Status.SKIP, NO_GPU)]
    finally:
        del CHECKS["test.by_hand"]


def test_a_crashing_check_is_an_error_with_the_exception_and_the_next_check_still_runs(registered):
    """A check that divides by zero: Python raises ZeroDivisionError('division by zero') (Python docs, built-in
    exceptions); registry.check_crashed 'The check itself failed: {error}: {detail}' with its fix 'Report this at the
    gpuready issue tracker with the bundle attached.'; the check after it still runs."""
    registered("test.crash", lambda context: [1 / 0])
    registered("test.after", lambda context: [context.warn("Fan 2 reads 0 RPM.")])
    findings = run_checks(Facts(), only=["test.crash", "test.after"])
    assert [(f.check_id, f.status, f.message, f.fix) for f in findings] == [
        ("test.crash", Status.ERROR, "The check itself failed: ZeroDivisionError: division by zero",
         "Report this at the gpuready issue tracker with the bundle attached."),
        ("test.after", Status.WARN, "Fan 2 reads 0 RPM.", None)]
    assert findings[0].message_id == "registry.check_crashed"


def test_a_check_that_finds_nothing_passes_with_nothing_to_flag(registered):
    """A check returning no finding: one pass, registry.nothing_to_flag 'Nothing to flag.'."""
    registered("test.silent", lambda context: [])
    assert _run(Facts(), "test.silent") == [("test.silent", Status.PASS, "Nothing to flag.")]


def test_a_check_id_cannot_be_registered_twice():
    with pytest.raises(ValueError) as raised:
        check("gpu.persistence")(lambda context: [])
    assert str(raised.value) == "check id gpu.persistence registered twice"
    assert CHECKS["gpu.persistence"].function.__name__ == "gpu_persistence"


def test_a_registered_check_cannot_be_changed_and_options_are_keyword_only():
    """Check is frozen (the registry is shared by every run in the process); CheckOptions is keyword-only, so that
    `CheckOptions(8)` cannot be read as 8 GPUs, 8 W of PSU or an 8 W circuit."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        CHECKS["gpu.persistence"].needs_gpus = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        CheckOptions(8)  # type: ignore[misc]


def test_a_check_function_called_with_a_bare_context_uses_the_default_options_and_no_id():
    """CheckContext(facts) alone: options are CheckOptions() (no --expect-gpus), the check id ''. gpu.present on an
    empty GPU list then fails with expected '>= 1' (check_gpu.po gpu.present.no_gpu)."""
    (finding,) = CHECKS["gpu.present"].function(CheckContext(facts=Facts(gpus=[])))
    assert (finding.check_id, finding.status, finding.expected, finding.message) == (
        "", Status.FAIL, ">= 1", "No NVIDIA GPU or driver is usable on this machine. The driver is loaded but sees no "
                                 "GPU.")


# ------------------------------------------------------------------------------- the findings a context builds

@pytest.mark.parametrize("hostname, host", [(None, "localhost"), ("", "localhost"), ("gpu-node-07", "gpu-node-07")])
def test_a_finding_names_the_host_or_localhost_when_no_hostname_was_read(hostname, host):
    facts = Facts(host=HostFacts(hostname=hostname), gpus=[])
    (finding,) = run_checks(facts, only=["gpu.persistence"])
    assert (finding.subject.host, finding.subject.gpu) == (host, None)


def test_a_plain_sentence_is_the_message_with_the_fix_given_and_no_catalogue_id():
    context = CheckContext(facts=Facts(gpus=[_gpu(0), _gpu(1)]), check_id="test.plain")
    gpu0, gpu1 = context.gpus
    finding = context.warn("GPU0↔GPU1 reads 3 GB/s.", gpu=gpu0, peer=gpu1, fix="Reseat the bridge.")
    assert (finding.check_id, finding.status, finding.message, finding.fix, finding.message_id) == (
        "test.plain", Status.WARN, "GPU0↔GPU1 reads 3 GB/s.", "Reseat the bridge.", None)
    assert finding.subject.label() == "GPU0↔GPU1"
    assert (finding.subject.gpu.bus_id, finding.subject.peer.bus_id) == ("0000:3b:00.0", "0000:3c:00.0")
    assert context.fail("No fix known.").fix is None


def test_an_explicit_fix_replaces_the_catalogue_fix_and_none_keeps_it():
    """registry.kernel_log_absent has a catalogue fix; a fix given to the finding wins over it, none keeps it."""
    context = CheckContext(facts=Facts(), check_id="health.xid")
    text = said("registry.kernel_log_absent", what="Xid")
    assert context.skip(text, fix="Attach /var/log/kern.log.").fix == "Attach /var/log/kern.log."
    kept = context.skip(text)
    assert (kept.message, kept.fix) == ("Xid not judged: no dmesg.txt in this run.", KERNEL_LOG_FIX)
    assert context.skip(text, check_id="nvlink.errors").check_id == "nvlink.errors"


# ------------------------------------------------------------------------------- per_gpu's pass

def test_the_pass_counts_the_judged_gpus_and_says_how_many_others_do_not_report():
    """gpu.persistence on 3 GPUs: GPU0 and GPU2 report persistence on, GPU1 reports nothing: 2 judged, 3 - 2 = 1
    unjudged. check_gpu.po gpu.persistence.all_good 'Persistence mode is on on all {count} GPU(s).' with count 2,
    then registry.all_good_others_unreported '{judged} {unjudged} other GPU(s) do not report it.'."""
    facts = Facts(gpus=[_gpu(0, persistence_mode=True), _gpu(1), _gpu(2, persistence_mode=True)])
    assert _run(facts, "gpu.persistence") == [
        ("gpu.persistence", Status.PASS,
         "Persistence mode is on on all 2 GPU(s). 1 other GPU(s) do not report it.")]


def test_the_pass_has_no_unreported_part_when_every_gpu_reports():
    facts = Facts(gpus=[_gpu(0, persistence_mode=True), _gpu(1, persistence_mode=True)])
    assert _run(facts, "gpu.persistence") == [
        ("gpu.persistence", Status.PASS, "Persistence mode is on on all 2 GPU(s).")]


# ------------------------------------------------------------------------------- which GPUs the driver was asked about

@pytest.mark.parametrize("source, asked", [
    ("nvml.json", True), ("nvidia-smi-q.xml", True), ("nvidia-smi-q.txt", True),
    ("nvidia-smi.txt, nvidia-smi-q.txt", True),
    ("nvidia-smi.txt", False), ("nvidia-smi-topo.txt, lspci-vv.txt", False), ("", False)])
def test_a_gpu_is_queried_in_depth_only_by_nvml_or_nvidia_smi_q(source, asked):
    """nvml.json and `nvidia-smi -q` (XML or text) ask the driver about each GPU's modes; plain nvidia-smi's table, the
    topology matrix and lspci only list GPUs."""
    assert queried(GpuFacts(index=0, bus_id=None, source=source)) is asked


# ------------------------------------------------------------------------------- the kernel log

@pytest.mark.parametrize("readable, message", [
    (False, "Xid not judged: the kernel log was not readable (dmesg needs root or group adm)."),
    (None, "Xid not judged: no dmesg.txt in this run."),
    (True, "Xid not judged: no dmesg.txt in this run.")])
def test_a_missing_kernel_log_says_whether_it_was_unreadable_or_absent(readable, message):
    """check_registry.po registry.kernel_log_unreadable / registry.kernel_log_absent with what = 'Xid'
    (check_health.po health.xid.what). Only a log known to be unreadable (readable False) is 'not readable'."""
    facts = Facts(kernel_log=None, kernel_log_readable=readable)
    assert _run(facts, "health.xid") == [("health.xid", Status.SKIP, message)]
    skip = kernel_log_missing(CheckContext(facts=facts, check_id="health.xid"), said("health.xid.what"))
    assert skip.fix == KERNEL_LOG_FIX
    assert kernel_log_missing(CheckContext(facts=Facts(kernel_log=[], kernel_log_readable=False)),
                              said("health.xid.what")) is None


def test_kernel_evidence_quotes_a_line_without_a_file_as_the_kernel_log():
    """An event read from a live `dmesg` has no file: the evidence names 'kernel log'; one from a bundle its file."""
    events = [KernelEvent(kind="xid", line="NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
                          line_number=12),
              KernelEvent(kind="xid", line="NVRM: Xid (PCI:0000:3c:00): 48, DBE", line_number=40, source="dmesg.txt"),
              KernelEvent(kind="xid", line="no line number", line_number=None, source="dmesg.txt")]
    assert kernel_evidence(events) == [
        Evidence(file="kernel log", line=12, text="NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."),
        Evidence(file="dmesg.txt", line=40, text="NVRM: Xid (PCI:0000:3c:00): 48, DBE")]
