"""A GPU whose Xids follow an NVSwitch SXid lost its NVLink path through the switch: `nvlink.errors` names that GPU
(health.sxid names the switch). NVIDIA's Fabric Manager User Guide, SXid table, SXid 12028 "egress non-posted PRIV
error": "Corresponding GPU NVLink traffic will be stalled ... The GPU driver ... will abort CUDA jobs with Xid 45"
(quoted in leptonai/gpud pull request #338)."""

from conftest import FIXTURES, PUBLIC
from helpers import report_for, statuses

SXID_12028 = (FIXTURES / "boards" / "sxid12028-nonfatal-dmesg.txt").read_text()
# NVRM's Xid 45 line (the driver's "Xid (PCI:%04x:%02x:%02x): %d, pid=%d, name=%s, Ch %08x" as the Xid catalogue
# shows it), 12 s after the SXid line above, on a GPU of the same HGX baseboard
XID_45_AFTER = "[ 9132.104411] NVRM: Xid (PCI:0000:18:00): 45, pid=80211, name=python3, Ch 00000010\n"


def _nvlink_errors(make_bundle, dmesg: str):
    report = report_for(make_bundle({"dmesg.txt": dmesg}))
    return [f for f in report.findings if f.check_id == "nvlink.errors"], report


def test_an_xid_after_an_sxid_names_the_gpu_whose_nvlink_path_failed(make_bundle):
    found, report = _nvlink_errors(make_bundle, SXID_12028 + XID_45_AFTER)
    assert [(f.status.value, f.message_id) for f in found] == [("warn", "nvlink.errors.sxid_path")]
    assert "0000:18:00" in found[0].message and "12028" in found[0].message
    assert [line.line for line in found[0].evidence] == [1, 2]
    assert statuses(report, "health.sxid") == ["warn"]


def test_an_sxid_alone_or_after_the_gpu_fell_off_names_no_gpu_path(make_bundle):
    """The SXid with no GPU Xid after it; and a GPU that fell off the bus before the switch logged link faults
    (tests/fixtures/public/xid/xid79-sxid-dmesg.txt): the switch errors follow the GPU, not the reverse."""
    alone, _ = _nvlink_errors(make_bundle, SXID_12028)
    assert [f.status.value for f in alone] == ["pass"]
    reverse, _ = _nvlink_errors(make_bundle, (PUBLIC / "xid" / "xid79-sxid-dmesg.txt").read_text())
    assert all(f.message_id != "nvlink.errors.sxid_path" for f in reverse)


def test_an_application_fault_after_an_sxid_is_not_the_fabric(make_bundle):
    """Xid 13 and 31 are the application's (xid.toml [sxid] never_causes): no NVLink path is blamed."""
    xid_13 = XID_45_AFTER.replace(": 45, pid=80211, name=python3, Ch 00000010",
                                  ": 13, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Illegal Instruction")
    found, _ = _nvlink_errors(make_bundle, SXID_12028 + xid_13)
    assert all(f.message_id != "nvlink.errors.sxid_path" for f in found)
