"""Kernel logs through `gpuready diagnose`: the check registry judges them (health.xid, health.sxid, nvlink.errors,
pcie.aer, ...), exactly as `check --bundle` does; published logs and constructed ones, one per cascade rule."""

from pathlib import Path

import pytest

from gpuready.model import Status
from gpuready.verbs.diagnose.run import diagnose

FIXTURES = Path(__file__).parent / "fixtures"
PUBLIC = FIXTURES / "public" / "xid"
MINE = FIXTURES / "diagnose" / "kernel"
KERNEL_CHECKS = ("health.xid", "health.sxid", "nvlink.errors", "pcie.aer", "health.ecc_uncorrected",
                 "health.row_remap_pending", "health.row_remap_failure")


def run(text: str, tmp_path: Path, name: str = "dmesg.txt"):
    path = tmp_path / name
    path.write_text(text)
    return run_file(path)


def run_file(path: Path):
    return [f for f in diagnose([path]).findings if f.check_id in KERNEL_CHECKS and f.status != Status.PASS]


def xids(findings):
    """(Xid, status, bus id, what it follows from) per health.xid finding, in the log's order of GPUs and codes."""
    return sorted((f.observed["xid"], f.status.value, f.subject.gpu.bus_id if f.subject.gpu else None,
                   f.observed["follows_from"]) for f in findings if f.check_id == "health.xid")


def where(finding):
    return [(Path(e.file).name, e.line) for e in finding.evidence]


def one(findings, check_id, xid=None):
    found = [f for f in findings if f.check_id == check_id and (xid is None or f.observed.get("xid") == xid)]
    assert len(found) == 1, [(f.check_id, f.status.value) for f in findings]
    return found[0]


# --- published logs ----------------------------------------------------------------------------------------------

def test_clean_h200_logs_give_no_kernel_finding():
    for name in ("h200-collect", "h200-docker-collect", "h200-shared"):
        assert run_file(FIXTURES / name / "dmesg.txt") == []


def test_memory_cascade_48_63_94():
    findings = run_file(PUBLIC / "xid48-63-94-dmesg.txt")
    assert xids(findings) == [(48, "fail", "0000:19:00.0", None), (63, "warn", "0000:19:00.0", "Xid 48"),
                              (94, "fail", "0000:19:00.0", "Xid 48")]
    dbe, contained = one(findings, "health.xid", 48), one(findings, "health.xid", 94)
    assert where(dbe) == [("xid48-63-94-dmesg.txt", 11)]
    assert contained.observed["count"] == 9
    assert where(contained)[:4] == [("xid48-63-94-dmesg.txt", n) for n in (13, 14, 15, 16)]
    assert dbe.observed["blame"] == "GPU"
    # the log alone is evidence of uncorrectable ECC errors and of a pending row remap
    assert one(findings, "health.ecc_uncorrected").status == Status.FAIL
    assert one(findings, "health.row_remap_pending").status == Status.FAIL


def test_xid79_then_nvswitch_sxid():
    findings = run_file(PUBLIC / "xid79-sxid-dmesg.txt")
    switches = [f for f in findings if f.check_id == "health.sxid"]
    assert [(f.status.value, f.observed["switch"]) for f in switches] == [("fail", 0), ("fail", 1), ("fail", 2)]
    assert where(switches[0]) == [("xid79-sxid-dmesg.txt", n) for n in (7, 9, 11, 13)]
    fallen = one(findings, "health.xid", 79)
    assert fallen.status == Status.FAIL and fallen.observed["count"] == 2  # the Xid line and its "fallen off" line
    assert where(fallen) == [("xid79-sxid-dmesg.txt", 3), ("xid79-sxid-dmesg.txt", 4)]
    assert "reboot" in fallen.fix.lower()


def test_fallen_off_bus_without_xid_newer_multiline_message():
    findings = run_file(PUBLIC / "xid79-no-xid-multiline-dmesg.txt")
    # the driver banner 130 ms later is the same load (its probe), not history
    assert xids(findings) == [(79, "fail", "0000:b3:00.0", None)]


def test_fallen_off_bus_legacy_message():
    findings = run_file(PUBLIC / "fallen-off-bus-legacy-dmesg.txt")
    assert xids(findings) == [(79, "fail", "0000:01:00.0", None)]
    assert one(findings, "health.xid").observed["count"] == 2


def test_xid45_caused_by_nvlink_xids_counts_as_that_nvlink_error():
    findings = run_file(PUBLIC / "xid45-after-145-149-kernlog.txt")
    assert {(x[0], x[1]) for x in xids(findings)} == {(45, "warn")}  # the catalog blames the application
    nvlink = [f for f in findings if f.check_id == "nvlink.errors"]
    assert len(nvlink) == 4 and {f.status for f in nvlink} == {Status.FAIL}  # the 145/149 lines themselves are gone


def test_application_faults_warn_and_ecc_fails():
    findings = run_file(MINE / "akash-244-dmesg-T.txt")
    assert xids(findings) == [(31, "warn", "0000:00:07.0", None), (43, "warn", "0000:00:05.0", None),
                              (94, "fail", "0000:00:08.0", None)]
    fault = one(findings, "health.xid", 31)
    assert fault.observed["blame"] == "application" and fault.fix.startswith("Check the application first.")


def test_xid79_with_crash_dump_notice():
    findings = run_file(MINE / "akash-209-xid79-dmesg-T.txt")
    assert xids(findings) == [(79, "fail", "0000:a1:00.0", None)]
    assert where(one(findings, "health.xid")) == [("akash-209-xid79-dmesg-T.txt", 3),
                                                   ("akash-209-xid79-dmesg-T.txt", 4)]


# --- constructed logs: one per cascade rule ---------------------------------------------------------------------

def test_nvlink_xid_then_45_and_62_are_consequences(tmp_path):
    log = """\
[ 100.000001] NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 4(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)
[ 100.000002] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python3, Ch 00000001
[ 100.000003] NVRM: Xid (PCI:0000:3b:00): 62, pid=1, name=python3, PMU halt
[ 100.000004] NVRM: Xid (PCI:0000:5d:00): 45, pid=2, name=python3, Ch 00000001
"""
    findings = run(log, tmp_path)
    assert xids(findings) == [(45, "warn", "0000:3b:00.0", "Xid 74"), (45, "warn", "0000:5d:00.0", None),
                              (62, "fail", "0000:3b:00.0", "Xid 74")]
    link = one(findings, "nvlink.errors")
    assert link.status == Status.FAIL and link.observed["links"] == [4]


def test_nvlink5_xid_149_then_45_and_154(tmp_path):
    log = """\
Sep 19 10:30:06 cn02 kernel: NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
Sep 19 10:30:07 cn02 kernel: NVRM: Xid (PCI:0018:01:00): 45, pid=7, name=python3, Ch 00000001 caused by previous Xid 149
Sep 19 10:30:07 cn02 kernel: NVRM: Xid (PCI:0018:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)
"""
    findings = run(log, tmp_path)
    assert xids(findings) == [(45, "warn", "0018:01:00.0", "Xid 149"), (154, "warn", "0018:01:00.0", "Xid 149")]
    assert one(findings, "nvlink.errors").status == Status.FAIL


def test_sxid_then_gpu_xids_follow_from_the_switch(tmp_path):
    log = """\
[ 500.100000] nvidia-nvswitch3: SXid (PCI:0000:08:00.0): 20034, Fatal, Link 30 LTSSM Fault Up
[ 500.200000] NVRM: Xid (PCI:0000:18:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 2(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)
[ 500.300000] NVRM: Xid (PCI:0000:18:00): 45, pid=1, name=python3, Ch 00000002
[ 500.400000] NVRM: Xid (PCI:0000:2a:00): 13, pid=3, name=python3, Graphics SM Warp Exception
[ 900.000000] NVRM: Xid (PCI:0000:2a:00): 62, pid=3, name=python3, PMU halt
"""
    findings = run(log, tmp_path)
    assert xids(findings) == [
        (13, "warn", "0000:2a:00.0", None),  # an application fault: not the switch's doing
        (45, "warn", "0000:18:00.0", "an NVSwitch SXid"),  # via Xid 74, to the root
        (62, "fail", "0000:2a:00.0", None),  # 400 s later: outside the window
    ]
    assert one(findings, "health.sxid").status == Status.FAIL


def test_memory_chain_without_48_roots_at_95(tmp_path):
    log = """\
2025-03-01T10:00:00,000001+00:00 NVRM: Xid (PCI:0000:9b:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x1) marked for remapping, reset gpu to activate.
2025-03-01T10:00:00,000002+00:00 NVRM: Xid (PCI:0000:9b:00): 95, pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No
2025-03-01T10:00:00,000003+00:00 NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
2025-03-01T10:00:00,000004+00:00 NVRM: Xid (PCI:0000:9b:00): 64, pid='<unknown>', name=<unknown>, Row Remapper: failed
"""
    findings = run(log, tmp_path)
    assert xids(findings) == [(63, "warn", "0000:9b:00.0", "Xid 95"), (64, "fail", "0000:9b:00.0", "Xid 95"),
                              (95, "fail", "0000:9b:00.0", None), (154, "warn", "0000:9b:00.0", "Xid 95")]
    assert one(findings, "health.row_remap_failure").status == Status.FAIL


def test_xid79_makes_later_xids_on_that_gpu_consequences(tmp_path):
    log = """\
[ 30709.100000] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[ 30709.100001] NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.
[ 30709.100002] NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
[ 30710.000000] NVRM: Xid (PCI:0000:01:00): 119, pid=9, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP!
[ 30711.000000] NVRM: Xid (PCI:0000:02:00): 119, pid=9, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU1 GSP!
"""
    findings = run(log, tmp_path)
    assert xids(findings) == [(79, "fail", "0000:01:00.0", None), (119, "fail", "0000:01:00.0", "Xid 79"),
                              (119, "fail", "0000:02:00.0", None), (154, "warn", "0000:01:00.0", "Xid 79")]
    assert [f.observed["blame"] for f in findings if f.observed.get("xid") == 119] == ["driver", "driver"]


def test_fallen_message_without_xid79_is_the_root_of_later_xids(tmp_path):
    log = """\
[  49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.
[  50.000000] NVRM: Xid (PCI:0000:01:00): 62, pid=1, name=python3, PMU halt
"""
    assert xids(run(log, tmp_path)) == [(62, "fail", "0000:01:00.0", "Xid 79"), (79, "fail", "0000:01:00.0", None)]


def test_driver_reload_breaks_the_cascade_and_makes_history(tmp_path):
    log = """\
[  10.000000] NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 4(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)
[ 500.000000] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)
[ 900.000000] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python3, Ch 00000001
"""
    findings = run(log, tmp_path)
    assert xids(findings) == [(45, "warn", "0000:3b:00.0", None)]  # after the reload: not the old link's doing
    link = one(findings, "nvlink.errors")
    assert link.status == Status.WARN and "history" in link.message  # critical, but before the reload


def test_gpu_reset_makes_earlier_xids_history(tmp_path):
    log = """\
Mar  1 10:00:00 node1 kernel: NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b
Mar  1 10:00:00 node1 kernel: NVRM: Xid (PCI:0000:91:00): 95, pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No
Mar  1 10:05:00 node1 nvsentinel-gpu-reset: GPU reset executed: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b, success: true
"""
    assert xids(run(log, tmp_path)) == [(95, "warn", "0000:91:00.0", None)]
    assert xids(run(log.replace("success: true", "success: false"), tmp_path)) == [(95, "fail", "0000:91:00.0", None)]


def test_unknown_xid_code_warns_with_the_raw_line(tmp_path):
    findings = run("[ 1.5] NVRM: Xid (PCI:0000:3b:00): 171, pid=1, name=x, something new\n", tmp_path)
    finding = one(findings, "health.xid")
    assert finding.status == Status.WARN and "not in gpuready's catalog" in finding.message
    assert "something new" in finding.message and "Look Xid 171 up" in finding.fix


def test_ansi_codes_and_crlf(tmp_path):
    log = ("\x1b[33m[  12.000001] NVRM: Xid (PCI:0000:3B:00): 48, pid=1, name=x, An uncorrectable double bit error\x1b[0m\r\n"
           "\x1b[33m[  12.000002] NVRM: Xid (PCI:0000:3B:00): 63, pid=1, name=x, Row Remapper: New row\x1b[0m\r\n")
    findings = run(log, tmp_path)
    assert xids(findings) == [(48, "fail", "0000:3b:00.0", None), (63, "warn", "0000:3b:00.0", "Xid 48")]
    assert one(findings, "health.xid", 48).evidence[0].text == \
        "[  12.000001] NVRM: Xid (PCI:0000:3B:00): 48, pid=1, name=x, An uncorrectable double bit error"


@pytest.mark.parametrize("line", [
    "[ 1843.308145] NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
    "Jun  3 10:11:12 node1 kernel: [ 1843.308145] NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
    "2025-06-03T10:11:12,345678+00:00 NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
    "[Tue Jun  3 10:11:12 2025] NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
    "Jun  3 10:11:12 node1 kernel: NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
    "NVRM: Xid (0000:b3:00): 79, GPU has fallen off the bus.",
])
def test_time_stamp_formats(line, tmp_path):
    assert xids(run(line + "\n", tmp_path)) == [(79, "fail", "0000:b3:00.0", None)]


def test_aer_line_without_a_gpu_listing_is_judged(tmp_path):
    log = "[ 7.0] pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received: 0000:01:00.0\n"
    findings = run(log, tmp_path)
    assert [f.check_id for f in findings] == ["pcie.aer"] and findings[0].status in (Status.WARN, Status.FAIL)


def test_many_lines_count_everything_and_quote_a_few(tmp_path):
    lines = [f"[ {i}.0] NVRM: Xid (PCI:0000:38:00): 13, pid=1, name=x, Graphics SM Warp Exception"
             for i in range(1, 20001)]
    lines.append("[ 30000.0] NVRM: Xid (PCI:0000:38:00): 79, GPU has fallen off the bus.")
    findings = run("\n".join(lines), tmp_path, "big.log")
    assert xids(findings) == [(13, "warn", "0000:38:00.0", None), (79, "fail", "0000:38:00.0", None)]
    assert one(findings, "health.xid", 13).observed["count"] == 20000
    assert len(one(findings, "health.xid", 13).evidence) == 5
    assert where(one(findings, "health.xid", 79)) == [("big.log", 20001)]


def test_one_dbe_line_is_quoted_and_judged_once(tmp_path):
    """NVIDIA's catalog row 48 'Double Bit ECC Error' (immediate action WORKFLOW_XID_48): health.xid reports the line
    (quoted, judged by the one kernel judge); health.ecc_uncorrected, with no counters in the input, states the
    uncorrectable memory error it shows with the judge's status and quotes nothing. Before a later driver load both
    say history (warn)."""
    line = ("[  12.000001] NVRM: GPU at PCI:0000:3b:00: GPU-0a1b2c3d-0000-0000-0000-000000000000\n"
            "[  12.000002] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) "
            "has been detected on GPU in the framebuffer at partition 0, subpartition 0.\n")
    reload = "[ 900.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    for log, status in ((line, Status.FAIL), (line + reload, Status.WARN)):
        findings = run(log, tmp_path)
        xid, ecc = one(findings, "health.xid", 48), one(findings, "health.ecc_uncorrected")
        assert (xid.status, ecc.status) == (status, status)
        assert [e.line for e in xid.evidence] == [2] and ecc.evidence == []
