"""RDMA NIC kernel-log lines (issue 33): mlx5_core/mlx4_core lines into `nic` events, judged by network.nic_kernel,
the same through `check --bundle` (a dmesg.txt in a bundle folder) and `diagnose` (a pasted log); and the mlx5
`hw_counters/` beside the port counters, judged by network.ib_counters.

Each published line names its source. Lines rebuilt from the driver's format strings say so."""

from __future__ import annotations

from pathlib import Path

from gpuready.checks import nic_kernel  # noqa: F401  registers network.nic_kernel
from gpuready.checks.registry import run_checks
from gpuready.evidence.build import build_facts
from gpuready.evidence.reader import read_bundle
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.network_files import parse_ib_sysfs
from gpuready.model import Status
from gpuready.verbs.diagnose.run import diagnose

CHECK = "network.nic_kernel"

# openucx/ucx#7738 (comment by angainor, 2021-12-01): a node's dmesg through pdsh (`b1360: ` prefix).
UCX_7738_TIMEOUT = (
    "b1360: [14280.445220] mlx5_core 0000:61:00.0: wait_func_handle_exec_timeout:1104:(pid 141183): cmd[22]: "
    "CREATE_DCT(0x710) No done completion\n"
    "b1360: [14280.445226] mlx5_core 0000:61:00.0: wait_func:1132:(pid 141181): CREATE_DCT(0x710) timeout. Will "
    "cause a leak of a command resource\n")
# A linux-rdma/virtualization thread on a crashed mlx5_vdpa device ("the device is already in bad FW state").
VDPA_HEALTH = (
    "[  445.937186] mlx5_core 0000:0d:00.0: poll_health:801:(pid 0): device's health compromised - reached miss count\n"
    "[  445.937212] mlx5_core 0000:0d:00.0: print_health_info:431:(pid 0): Health issue observed, firmware internal "
    "error, severity(3) ERROR:\n")
# NVIDIA/NVSentinel, tests (TestSyslogHealthMonitorNICDriverDetection): journal lines with the `kernel: ` prefix.
NVSENTINEL_UNRECOVERABLE = ("kernel: [   17.982217] mlx5_core 0000:41:00.0: print_health_info:458:(pid 0): synd 0x8: "
                            "unrecoverable hardware error\n")
NVSENTINEL_HIGH_TEMP = ("kernel: [123.456794] mlx5_core 0000:5c:00.0: Port module event[error]: module 0, Cable error, "
                        "High Temperature\n")
NVSENTINEL_UNPLUGGED = "kernel: [    8.951695] mlx5_core 0000:63:00.1: Port module event: module 1, Cable unplugged\n"
NVSENTINEL_ACCESS_REG = ("kernel: [123.456795] mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1441871): "
                         "ACCESS_REG(0x805) op_mod(0x1) failed, status bad operation(0x2), syndrome (0x305684), "
                         "err(-22)\n")
# NVIDIA/l2fwd-nv#6 ("The performance is not reach to 100Gbps"): a ConnectX-6 Dx in a Gen3 x8 link.
L2FWD_6_PCIE = ("[10380.315885] mlx5_core 0000:b3:00.1: 63.008 Gb/s available PCIe bandwidth, limited by 8 GT/s x8 "
                "link at 0000:b2:00.0 (capable of 252.048 Gb/s with 16 GT/s x16 link)\n")
# Rebuilt from the driver's format strings (no published capture found): events.c's error string for
# MLX5_MODULE_EVENT_ERROR_POWER_BUDGET_EXCEEDED, and en_main.c's `Link down`/`Link up` (netdev_info, so the
# interface follows the address), here in journalctl's default format.
REBUILT_POWER = "[  612.004512] mlx5_core 0000:1a:00.0: Port module event[error]: module 0, Cable error, Power budget exceeded\n"
REBUILT_FLAPS = "".join(
    f"Mar 03 10:0{minute}:1{n} node7 kernel: mlx5_core 0000:9a:00.0 ibp154s0: Link {state}\n"
    for minute, n, state in ((1, 0, "down"), (1, 4, "up"), (2, 0, "down"), (2, 5, "up"), (3, 1, "down"), (3, 6, "up")))
# geerlingguy/arm-nas#16 (`dmesg | grep mlx5`, a ConnectX-5 at boot): probe lines only, the PCIe line without
# `limited by`, a cable plugged; plus one `Link up` (the interface brought up, rebuilt as above).
ARM_NAS_16_PROBE = (
    "[   10.643316] mlx5_core 0004:01:00.0: firmware version: 16.27.2048\n"
    "[   10.643346] mlx5_core 0004:01:00.0: 63.008 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x8 link)\n"
    "[   11.071754] mlx5_core 0004:01:00.0: Rate limit: 127 rates are supported, range: 0Mbps to 24414Mbps\n"
    "[   11.097374] mlx5_core 0004:01:00.0: Port module event: module 0, Cable plugged\n"
    "[   11.097626] mlx5_core 0004:01:00.0: mlx5_pcie_event:294:(pid 542): PCIe slot advertised sufficient power (75W).\n"
    "[   12.310021] mlx5_core 0004:01:00.0 enP4p1s0f0np0: Link up\n")


def _nic_events(text: str) -> list[tuple[str | None, str | None, str]]:
    return [(event.bus_id, event.port, event.detail) for event in parse_kernel_log(text) if event.kind == "nic"]


def _by_bundle(text: str, tmp_path: Path) -> list:
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "dmesg.txt").write_text(text)
    findings = run_checks(build_facts(read_bundle(folder)), only=[CHECK])
    return [finding for finding in findings if finding.status != Status.PASS]


def _by_diagnose(text: str, tmp_path: Path) -> list:
    pasted = tmp_path / "pasted.log"
    pasted.write_text(text)
    return [finding for finding in diagnose([pasted]).findings if finding.check_id == CHECK
            and finding.status != Status.PASS]


def _both(text: str, tmp_path: Path) -> list[tuple[str, str | None, str]]:
    """(status, nic, message) of each finding, the same by both verbs (asserted)."""
    bundle = [(f.status.value, f.subject.nic, f.message) for f in _by_bundle(text, tmp_path)]
    pasted = [(f.status.value, f.subject.nic, f.message) for f in _by_diagnose(text, tmp_path)]
    assert bundle == pasted
    return bundle


def test_published_lines_parse_into_typed_events():
    assert _nic_events(UCX_7738_TIMEOUT) == [("0000:61:00.0", None, "cmd_timeout")] * 2
    assert _nic_events(VDPA_HEALTH) == [("0000:0d:00.0", None, "fatal")] * 2
    assert _nic_events(NVSENTINEL_UNRECOVERABLE) == [("0000:41:00.0", None, "fatal")]
    assert _nic_events(NVSENTINEL_HIGH_TEMP) == [("0000:5c:00.0", "module 0", "module_error High Temperature")]
    assert _nic_events(NVSENTINEL_UNPLUGGED) == [("0000:63:00.1", "module 1", "module_unplugged")]
    assert _nic_events(REBUILT_POWER) == [("0000:1a:00.0", "module 0", "module_error Power budget exceeded")]
    assert _nic_events(L2FWD_6_PCIE) == [("0000:b3:00.1", None, "pcie_limited 63.008 Gb/s available PCIe bandwidth, "
                                          "limited by 8 GT/s x8 link at 0000:b2:00.0 (capable of 252.048 Gb/s with "
                                          "16 GT/s x16 link)")]
    assert _nic_events(REBUILT_FLAPS)[:2] == [("0000:9a:00.0", "ibp154s0", "link_down"),
                                              ("0000:9a:00.0", "ibp154s0", "link_up")]
    # a failed register access is monitoring noise (NVSentinel: non-fatal, "Filter/Ignore"); a recovered command too
    assert _nic_events(NVSENTINEL_ACCESS_REG) == []
    assert _nic_events("[  230.681799] mlx5_core 0000:00:02.0: wait_func_handle_exec_timeout:1113:(pid 3122): cmd[0]: "
                       "CREATE_CQ(0x400) recovered after timeout\n") == []


def test_firmware_death_and_command_timeouts_fail_by_both_verbs(tmp_path):
    found = _both(UCX_7738_TIMEOUT + VDPA_HEALTH + NVSENTINEL_UNRECOVERABLE, tmp_path)
    assert [(status, nic) for status, nic, _ in found] == [("fail", "0000:0d:00.0"), ("fail", "0000:41:00.0"),
                                                           ("fail", "0000:61:00.0")]
    assert "firmware dead or unhealthy (2 kernel-log lines" in found[0][2]
    assert "did not answer driver commands (2 kernel-log lines" in found[2][2]


def test_module_events_and_flaps_warn_naming_the_port(tmp_path):
    found = _both(NVSENTINEL_HIGH_TEMP + NVSENTINEL_UNPLUGGED + REBUILT_POWER + REBUILT_FLAPS, tmp_path)
    assert [(status, nic) for status, nic, _ in found] == [("warn", "0000:1a:00.0"), ("warn", "0000:5c:00.0"),
                                                           ("warn", "0000:63:00.1"), ("warn", "0000:9a:00.0")]
    assert found[0][2] == "RDMA NIC 0000:1a:00.0, module 0: the transceiver reported an error (Power budget exceeded)."
    assert "module 0: the transceiver reported an error (High Temperature)" in found[1][2]
    assert found[2][2] == "RDMA NIC 0000:63:00.1, module 1: the cable or transceiver was unplugged."
    assert found[3][2] == "RDMA NIC 0000:9a:00.0, port ibp154s0: the link went down 3 times (a flapping link)."


def test_hca_limited_by_its_slot_warns(tmp_path):
    [(status, nic, message)] = _both(L2FWD_6_PCIE, tmp_path)
    assert (status, nic) == ("warn", "0000:b3:00.1")
    assert "limited by 8 GT/s x8 link at 0000:b2:00.0" in message


def test_normal_probe_lines_and_one_link_down_give_no_finding(tmp_path):
    one_down = "[   13.000001] mlx5_core 0004:01:00.0 enP4p1s0f0np0: Link down\n"
    assert _both(ARM_NAS_16_PROBE + one_down + NVSENTINEL_ACCESS_REG, tmp_path) == []


def test_chinese_text_keeps_device_and_command():
    from gpuready.i18n import text_in
    text = text_in("zh", "network.nic_kernel.cmd_timeout", {"device": "0000:61:00.0", "count": 2})
    assert "0000:61:00.0" in text and "Will cause a leak of a command resource" in text and "固件" in text


# ------------------------------------------------------------------------------------------------------ hw_counters

def _sysfs(files: dict[str, str]) -> str:
    """A `collect` sysfs.txt (head-style sections) in the kernel's layout (sysfs-class-infiniband)."""
    return "\n".join(f"==> /sys/class/infiniband/{path} <==\n{value}\n" for path, value in files.items())


def _rail(device: str, **hw: str) -> dict[str, str]:
    files = {f"{device}/hca_type": "MT4129", f"{device}/ports/1/state": "4: ACTIVE",
             f"{device}/ports/1/phys_state": "5: LinkUp", f"{device}/ports/1/rate": "400 Gb/sec (4X NDR)",
             f"{device}/ports/1/link_layer": "Ethernet", f"{device}/ports/1/counters/symbol_error": "0"}
    files.update({f"{device}/ports/1/hw_counters/{name}": value for name, value in hw.items()})
    return files


def test_hw_counters_are_read_beside_the_port_counters():
    from gpuready.facts.host_files import split_sections
    [port] = parse_ib_sysfs(split_sections(_sysfs(_rail("mlx5_0", out_of_sequence="17", roce_slow_restart="0"))))
    assert port.counters == {"symbol_error": 0, "out_of_sequence": 17, "roce_slow_restart": 0}


def test_hw_counters_above_zero_warn_and_never_fail():
    files = {**_rail("mlx5_0", local_ack_timeout_err="4", rnr_nak_retry_err="0"), **_rail("mlx5_1")}
    findings = run_checks(build_facts({"sysfs.txt": _sysfs(files)}), only=["network.ib_counters"])
    [finding] = findings
    assert finding.status is Status.WARN and "mlx5_0/1 local_ack_timeout_err=4" in finding.message
    assert "rnr_nak_retry_err" not in finding.message
    quiet = run_checks(build_facts({"sysfs.txt": _sysfs({**_rail("mlx5_0", out_of_sequence="0"),
                                                          **_rail("mlx5_1")})}), only=["network.ib_counters"])
    assert [finding.status for finding in quiet] == [Status.PASS]
