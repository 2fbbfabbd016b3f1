"""The kernel-log reader of `gpuready diagnose` (verbs/diagnose/kernel.py) on published kernel logs and on constructed
ones, one per cascade rule."""

from pathlib import Path

import pytest

from gpuready.facts.types import Facts, GpuFacts
from gpuready.verbs.diagnose.evidence import DiagnoseContext, Line, feed_text
from gpuready.verbs.diagnose.kernel import KernelReader

FIXTURES = Path(__file__).parent / "fixtures"
PUBLIC = FIXTURES / "public" / "xid"
MINE = FIXTURES / "diagnose" / "kernel"


def run(text: str, source: str = "dmesg.txt", facts: Facts | None = None):
    reader = feed_text(KernelReader(), source, text)
    return reader.findings(DiagnoseContext(host="node1", facts=facts))


def run_file(path: Path, facts: Facts | None = None):
    return run(path.read_text(), path.name, facts)


def summary(findings):
    """(check_id, status, bus id, consequence_of) per finding, in the reader's order."""
    return [(f.check_id, f.status.value, f.subject.gpu.bus_id if f.subject.gpu else None, f.consequence_of)
            for f in findings]


def where(finding):
    return [(e.file, e.line) for e in finding.evidence]


def one(findings, check_id, bus_id=None):
    found = [f for f in findings if f.check_id == check_id
             and (bus_id is None or (f.subject.gpu and f.subject.gpu.bus_id == bus_id))]
    assert len(found) == 1, summary(findings)
    return found[0]


# --- published logs ----------------------------------------------------------------------------------------------

def test_clean_h200_log_gives_no_finding():
    for name in ("h200-collect", "h200-docker-collect", "h200-shared"):
        assert run_file(FIXTURES / name / "dmesg.txt") == []


def test_no_kernel_lines_no_findings():
    assert run("hello\nworld\n") == []
    assert KernelReader().findings(DiagnoseContext(host="h")) == []


def test_memory_cascade_48_63_94():
    findings = run_file(PUBLIC / "xid48-63-94-dmesg.txt")
    assert summary(findings) == [
        ("xid.48", "fail", "0000:19:00.0", None),
        ("xid.63", "warn", "0000:19:00.0", "xid.48"),
        ("xid.94", "fail", "0000:19:00.0", "xid.48"),
    ]
    dbe, _remap, contained = findings
    assert where(dbe) == [("xid48-63-94-dmesg.txt", 11)]
    assert where(contained) == [("xid48-63-94-dmesg.txt", n) for n in (13, 14, 15, 16, 17)]
    assert contained.observed["count"] == 9
    assert dbe.observed["first"] == "2024-11-15T12:02:03,470068+00:00"
    assert dbe.observed["blame"] == "GPU"
    assert "Drain the node" in dbe.fix


def test_xid79_then_nvswitch_sxid():
    findings = run_file(PUBLIC / "xid79-sxid-dmesg.txt")
    assert summary(findings) == [
        ("nvswitch.sxid", "fail", None, None),
        ("nvswitch.sxid", "fail", None, None),
        ("nvswitch.sxid", "fail", None, None),
        ("xid.79", "fail", "0000:91:00.0", None),
    ]
    assert [f.observed["switch"] for f in findings[:3]] == ["nvidia-nvswitch1", "nvidia-nvswitch0", "nvidia-nvswitch2"]
    assert where(findings[1]) == [("xid79-sxid-dmesg.txt", n) for n in (7, 9, 11, 13)]
    fallen = findings[3]
    # the Xid line, then the driver's own "fallen off the bus" line for the same GPU
    assert where(fallen) == [("xid79-sxid-dmesg.txt", 3), ("xid79-sxid-dmesg.txt", 4)]
    assert fallen.subject.gpu.uuid == "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b"
    assert "serial 1653723052734" in fallen.message
    assert "reboot" in fallen.fix


def test_fallen_off_bus_without_xid_newer_multiline_message():
    findings = run_file(PUBLIC / "xid79-no-xid-multiline-dmesg.txt")
    assert summary(findings) == [("gpu.fallen_off_bus", "fail", "0000:b3:00.0", None)]
    # the three lines of the message; the driver banner 130 ms later is the same load (its probe), not history
    assert where(findings[0]) == [("xid79-no-xid-multiline-dmesg.txt", n) for n in (1, 2, 3)]
    assert "reseat" in findings[0].fix and "RMA" in findings[0].fix


def test_fallen_off_bus_legacy_message():
    findings = run_file(PUBLIC / "fallen-off-bus-legacy-dmesg.txt")
    assert summary(findings) == [("gpu.fallen_off_bus", "fail", "0000:01:00.0", None)]
    assert where(findings[0]) == [("fallen-off-bus-legacy-dmesg.txt", 1), ("fallen-off-bus-legacy-dmesg.txt", 4)]
    assert findings[0].observed["count"] == 2


def test_xid45_alone_names_the_driver_cause():
    findings = run_file(PUBLIC / "xid45-after-145-149-kernlog.txt")
    assert summary(findings) == [
        ("xid.45", "warn", "0000:dc:00.0", None),
        ("xid.45", "warn", "0000:ed:00.0", None),
        ("xid.45", "warn", "0000:ba:00.0", None),
        ("xid.45", "warn", "0000:97:00.0", None),
    ]
    assert [f.subject.gpu.index for f in findings] == [0, 1, 2, 3]  # order of first appearance
    assert "caused by previous Xid 149" in findings[0].message
    assert where(findings[1]) == [("xid45-after-145-149-kernlog.txt", 2), ("xid45-after-145-149-kernlog.txt", 7)]


def test_application_faults_and_uuid_serials_multi_gpu():
    findings = run_file(MINE / "akash-244-dmesg-T.txt")
    assert summary(findings) == [
        ("xid.43", "warn", "0000:00:05.0", None),
        ("xid.31", "warn", "0000:00:07.0", None),
        ("xid.94", "fail", "0000:00:08.0", None),
    ]
    busy, fault, ecc = findings
    assert busy.observed["blame"] == fault.observed["blame"] == "application"
    assert ecc.observed["blame"] == "GPU" and ecc.observed["next_step"] == "restart the job"
    assert [f.subject.gpu.uuid for f in findings] == ["GPU-efbdfde9-5798-a6e7-4c46-12518fa15375",
                                                       "GPU-3b6ec030-5adc-1847-e155-79f635584b4e",
                                                       "GPU-c24840ec-8de1-83d5-b126-08000173ae32"]
    assert "serial 1652923018111" in ecc.message
    assert busy.observed["first"] == "Wed Jul 31 23:14:18 2024"
    assert busy.observed["last"] == "Wed Jul 31 23:15:26 2024"
    assert where(busy) == [("akash-244-dmesg-T.txt", 4), ("akash-244-dmesg-T.txt", 5)]


def test_xid79_with_uuid_and_crash_dump_notice():
    findings = run_file(MINE / "akash-209-xid79-dmesg-T.txt")
    assert summary(findings) == [("xid.79", "fail", "0000:a1:00.0", None)]
    assert findings[0].subject.gpu.uuid == "GPU-979426f2-893a-7cbb-c4cf-81472f89a462"
    assert where(findings[0]) == [("akash-209-xid79-dmesg-T.txt", 3), ("akash-209-xid79-dmesg-T.txt", 4)]


def test_index_from_facts_where_the_bus_id_is_known():
    facts = Facts(gpus=[GpuFacts(index=0, bus_id="0000:05:00.0"), GpuFacts(index=3, bus_id="0000:00:07.0"),
                        GpuFacts(index=4, bus_id="0000:00:08.0", uuid="GPU-c24840ec-8de1-83d5-b126-08000173ae32")])
    findings = run_file(MINE / "akash-244-dmesg-T.txt", facts)
    # 00:07 and 00:08 are GPU3 and GPU4 of the machine; 00:05 is not among its GPUs: the next free index
    assert [(f.subject.gpu.bus_id, f.subject.gpu.index) for f in findings] == [
        ("0000:00:05.0", 5), ("0000:00:07.0", 3), ("0000:00:08.0", 4)]


# --- constructed logs: one per cascade rule ---------------------------------------------------------------------

def test_nvlink_xid_then_45_and_62_are_consequences():
    log = """\
[ 100.000001] NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 4(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)
[ 100.000002] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python3, Ch 00000001
[ 100.000003] NVRM: Xid (PCI:0000:3b:00): 62, pid=1, name=python3, PMU halt
[ 100.000004] NVRM: Xid (PCI:0000:5d:00): 45, pid=2, name=python3, Ch 00000001
"""
    assert summary(run(log)) == [
        ("xid.74", "fail", "0000:3b:00.0", None),
        ("xid.45", "warn", "0000:3b:00.0", "xid.74"),
        ("xid.62", "fail", "0000:3b:00.0", "xid.74"),
        ("xid.45", "warn", "0000:5d:00.0", None),  # another GPU: not explained by GPU 3b's link
    ]
    assert run(log)[0].observed["blame"] == "fabric"


def test_nvlink5_xid_149_then_45():
    log = """\
Sep 19 10:30:06 cn02 kernel: NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
Sep 19 10:30:07 cn02 kernel: NVRM: Xid (PCI:0018:01:00): 45, pid=7, name=python3, Ch 00000001 caused by previous Xid 149
Sep 19 10:30:07 cn02 kernel: NVRM: Xid (PCI:0018:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)
"""
    findings = run(log)
    assert summary(findings) == [
        ("xid.149", "fail", "0018:01:00.0", None),
        ("xid.45", "warn", "0018:01:00.0", "xid.149"),
        ("xid.154", "warn", "0018:01:00.0", "xid.149"),
    ]
    assert findings[2].observed["recovery_action"] == "Drain and Reset"


def test_sxid_then_gpu_xids_are_consequences_of_the_switch():
    log = """\
[ 500.100000] nvidia-nvswitch3: SXid (PCI:0000:08:00.0): 20034, Fatal, Link 30 LTSSM Fault Up
[ 500.200000] NVRM: Xid (PCI:0000:18:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 2(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)
[ 500.300000] NVRM: Xid (PCI:0000:18:00): 45, pid=1, name=python3, Ch 00000002
[ 500.400000] NVRM: Xid (PCI:0000:2a:00): 13, pid=3, name=python3, Graphics SM Warp Exception
[ 900.000000] NVRM: Xid (PCI:0000:2a:00): 62, pid=3, name=python3, PMU halt
"""
    assert summary(run(log)) == [
        ("nvswitch.sxid", "fail", None, None),
        ("xid.74", "fail", "0000:18:00.0", "nvswitch.sxid"),
        ("xid.45", "warn", "0000:18:00.0", "nvswitch.sxid"),  # via Xid 74, to the root
        ("xid.13", "warn", "0000:2a:00.0", None),  # an application fault: not the switch's doing
        ("xid.62", "fail", "0000:2a:00.0", None),  # 400 s later: outside the window
    ]


def test_memory_chain_without_48_roots_at_95():
    log = """\
2025-03-01T10:00:00,000001+00:00 NVRM: Xid (PCI:0000:9b:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x1) marked for remapping, reset gpu to activate.
2025-03-01T10:00:00,000002+00:00 NVRM: Xid (PCI:0000:9b:00): 95, pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No
2025-03-01T10:00:00,000003+00:00 NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
2025-03-01T10:00:00,000004+00:00 NVRM: Xid (PCI:0000:9b:00): 64, pid='<unknown>', name=<unknown>, Row Remapper: failed
"""
    findings = run(log)
    assert summary(findings) == [
        ("xid.63", "warn", "0000:9b:00.0", "xid.95"),
        ("xid.95", "fail", "0000:9b:00.0", None),
        ("xid.154", "warn", "0000:9b:00.0", "xid.95"),
        ("xid.64", "fail", "0000:9b:00.0", "xid.95"),
    ]
    assert findings[2].observed["recovery_action"] == "GPU Reset Required"


def test_xid79_makes_later_xids_on_that_gpu_consequences():
    log = """\
[ 30709.100000] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[ 30709.100001] NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.
[ 30709.100002] NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
[ 30710.000000] NVRM: Xid (PCI:0000:01:00): 119, pid=9, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP!
[ 30711.000000] NVRM: Xid (PCI:0000:02:00): 119, pid=9, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU1 GSP!
"""
    findings = run(log)
    assert summary(findings) == [
        ("xid.79", "fail", "0000:01:00.0", None),
        ("xid.154", "warn", "0000:01:00.0", "xid.79"),
        ("xid.119", "fail", "0000:01:00.0", "xid.79"),
        ("xid.119", "fail", "0000:02:00.0", None),
    ]
    assert findings[2].observed["blame"] == "driver"


def test_fallen_message_without_xid79_is_the_root_of_later_xids():
    log = """\
[  49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.
[  50.000000] NVRM: Xid (PCI:0000:01:00): 62, pid=1, name=python3, PMU halt
"""
    assert summary(run(log)) == [
        ("xid.62", "fail", "0000:01:00.0", "gpu.fallen_off_bus"),
        ("gpu.fallen_off_bus", "fail", "0000:01:00.0", None),
    ]


def test_driver_reload_breaks_the_cascade_and_makes_history():
    log = """\
[  10.000000] NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 4(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)
[ 500.000000] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)
[ 900.000000] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python3, Ch 00000001
"""
    findings = run(log)
    assert summary(findings) == [
        ("xid.74", "warn", "0000:3b:00.0", None),  # critical, but before the reload: history
        ("xid.45", "warn", "0000:3b:00.0", None),  # after the reload: not explained by the old link error
    ]
    assert findings[0].observed["history"] is True
    assert "580.159.04" in findings[0].message


def test_gpu_reset_makes_earlier_xids_history():
    log = """\
Mar  1 10:00:00 node1 kernel: NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b
Mar  1 10:00:00 node1 kernel: NVRM: Xid (PCI:0000:91:00): 95, pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No
Mar  1 10:05:00 node1 nvsentinel-gpu-reset: GPU reset executed: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b, success: true
"""
    findings = run(log)
    assert summary(findings) == [
        ("xid.95", "warn", "0000:91:00.0", None),
        ("gpu.reset", "pass", "0000:91:00.0", None),
    ]
    assert where(findings[1]) == [("dmesg.txt", 3)]
    failed = run(log.replace("success: true", "success: false"))
    assert summary(failed) == [("xid.95", "fail", "0000:91:00.0", None), ("gpu.reset", "warn", "0000:91:00.0", None)]


def test_unknown_xid_code_warns_with_the_raw_line():
    findings = run("[ 1.5] NVRM: Xid (PCI:0000:3b:00): 171, pid=1, name=x, something new\n")
    assert summary(findings) == [("xid.171", "warn", "0000:3b:00.0", None)]
    assert "not in gpuready's catalog" in findings[0].message
    assert "something new" in findings[0].message


def test_ansi_codes_and_crlf():
    log = ("\x1b[33m[  12.000001] NVRM: Xid (PCI:0000:3B:00): 48, pid=1, name=x, An uncorrectable double bit error\x1b[0m\r\n"
           "\x1b[33m[  12.000002] NVRM: Xid (PCI:0000:3B:00): 63, pid=1, name=x, Row Remapper: New row\x1b[0m\r\n")
    findings = run(log)
    assert summary(findings) == [("xid.48", "fail", "0000:3b:00.0", None), ("xid.63", "warn", "0000:3b:00.0", "xid.48")]
    assert findings[0].evidence[0].text == \
        "[  12.000001] NVRM: Xid (PCI:0000:3B:00): 48, pid=1, name=x, An uncorrectable double bit error"
    assert findings[0].observed["first"] == "12.000001 s after boot"


@pytest.mark.parametrize(("line", "first"), [
    ("[ 1843.308145] NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.", "1843.308145 s after boot"),
    ("Jun  3 10:11:12 node1 kernel: [ 1843.308145] NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
     "Jun  3 10:11:12"),  # syslog with the kernel's stamp too: the wall clock is shown
    ("2025-06-03T10:11:12,345678+00:00 NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
     "2025-06-03T10:11:12,345678+00:00"),
    ("[Tue Jun  3 10:11:12 2025] NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.",
     "Tue Jun  3 10:11:12 2025"),
    ("Jun  3 10:11:12 node1 kernel: NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.", "Jun  3 10:11:12"),
    ("NVRM: Xid (0000:b3:00): 79, GPU has fallen off the bus.", "an unknown time (no time stamp)"),
])
def test_time_stamp_formats(line, first):
    findings = run(line + "\n")
    assert summary(findings) == [("xid.79", "fail", "0000:b3:00.0", None)]
    assert findings[0].observed["first"] == first


def test_aer_line():
    log = "[ 7.0] pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received: 0000:01:00.0\n"
    findings = run(log)
    assert summary(findings) == [("pcie.aer", "warn", None, None)]
    assert findings[0].observed["uncorrected"] is True


def test_memory_stays_bounded_and_counts_everything():
    lines = [f"[ {i}.0] NVRM: Xid (PCI:0000:38:00): 13, pid=1, name=x, Graphics SM Warp Exception" for i in range(1, 20001)]
    lines.append("[ 30000.0] NVRM: Xid (PCI:0000:38:00): 79, GPU has fallen off the bus.")
    reader = feed_text(KernelReader(), "big.log", "\n".join(lines))
    kept = sum(len(group.kept) + (group.last is not None) for group in reader._groups.values())
    assert kept <= 10
    findings = reader.findings(DiagnoseContext(host="h"))
    assert summary(findings) == [("xid.13", "warn", "0000:38:00.0", None), ("xid.79", "fail", "0000:38:00.0", None)]
    assert findings[0].observed["count"] == 20000
    assert findings[0].observed["last"] == "20000.000000 s after boot"
    assert where(findings[1]) == [("big.log", 20001)]


def test_feed_single_lines_like_the_framework():
    reader = KernelReader()
    assert reader.compiled_markers().search("NVRM: Xid (PCI:0000:38:00): 13, x")
    assert not reader.compiled_markers().search("usb 1-1: new high-speed USB device")
    reader.feed(Line(source="a.log", number=7, text="[ 1.0] NVRM: Xid (PCI:0000:38:00): 46, x"))
    findings = reader.findings(DiagnoseContext(host="h"))
    assert summary(findings) == [("xid.46", "fail", "0000:38:00.0", None)]
    assert where(findings[0]) == [("a.log", 7)]
