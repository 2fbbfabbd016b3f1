"""One judgement: the same kernel line gets the same status from every verb that sees it.

`check --bundle` and `diagnose` read the line; `burn` and `monitor` get the Xid number from NVML's event API (no line,
so only codes whose status does not depend on the line's own words are fed to them). Expected statuses are the ones
the rule in knowledge/xid.toml ([judge], [sxid]) states with NVIDIA's catalog as its source, written here by hand."""

from pathlib import Path

import pytest

from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.model import Status
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge
from gpuready.pipeline import check_files
from gpuready.verbs.diagnose.run import diagnose
from gpuready.verbs.monitor import describe, xid_status
from gpuready.runner.local import RunOutcome
from gpuready.telemetry import Telemetry
from gpuready.verbs.validate.run import build_report

RELOAD = "[ 9000.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
# (kernel line, the check that reports it, expected status, the Xid number when NVML alone can carry the verdict)
ROWS = [
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "health.xid", "fail", 79),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been "
     "detected on GPU in the framebuffer at partition 0, subpartition 0.", "health.xid", "fail", 48),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 95, pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). "
     "RST: Yes, D-RST: No", "health.xid", "fail", 95),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 119, pid=9, name=nvidia-smi, Timeout after 6s of waiting for RPC "
     "response from GPU0 GSP!", "health.xid", "fail", 119),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 120, pid=9, name=python, GSP task timeout @ pc:0x1, task: 1",
     "health.xid", "fail", 120),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1)",
     "health.xid", "warn", 13),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=python, Ch 00000008, intr 00000000. MMU Fault",
     "health.xid", "warn", 31),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 43, pid=1, name=python, Ch 00000008", "health.xid", "warn", 43),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 201, pid=1, name=python, something new", "health.xid", "warn", 201),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 4",
     "nvlink.errors", "fail", 74),
    ("[ 100.1] NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x00000004 0x0 0x0 0x0)",
     "nvlink.errors", "warn", None),
    ("[ 100.1] NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x0 0x0 0x0)",
     "nvlink.errors", "fail", None),
    ("[ 100.1] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error",
     "health.sxid", "warn", None),
    ("[ 100.1] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
     "health.sxid", "fail", None),
    # history: a later driver load makes a fault a dated warning, in every verb that reads the log
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n" + RELOAD, "health.xid", "warn", None),
    ("[ 100.1] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up\n" + RELOAD,
     "health.sxid", "warn", None),
    ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=python3, NVLink: fatal error detected on link 4\n" + RELOAD,
     "nvlink.errors", "warn", None),
]


def _statuses(report, check_id):
    return sorted({f.status.value for f in report.findings if f.check_id == check_id and f.status != Status.PASS})


def _burn_status(code: int) -> str:
    telemetry = Telemetry(started_at=1000.0, samples={0: []}, xid_source="NVML event API")
    telemetry.xid_events = [(5.0, 0, code)]
    gpu = BurnGpu(rank=0, nvml_index=0, identity={"bus_id": "0000:3b:00.0", "uuid": "GPU-0", "name": "NVIDIA H100"},
                  result=None, slowdown_c=None)
    judge = BurnJudge("h", [gpu], telemetry, [])
    judge._xid()
    return next(f.status.value for f in judge.findings if f.check_id == "burn.xid")


def _validate_status(code: int) -> str:
    outcome = RunOutcome(xid_events=[(3.0, 0, code)])
    report = build_report(outcome, None, "h")
    return next(f.status.value for f in report.findings if f.check_id == "validate.xid")


@pytest.mark.parametrize(("line", "check_id", "expected", "code"), ROWS)
def test_one_line_one_status_in_every_verb(tmp_path, line, check_id, expected, code):
    path = tmp_path / "dmesg.txt"
    path.write_text(line + ("" if line.endswith("\n") else "\n"))
    checked = check_files(read_bundle(path), CheckOptions())[0]
    diagnosed = diagnose([path])
    assert _statuses(checked, check_id) == [expected]
    assert _statuses(diagnosed, check_id) == [expected]
    if code is not None:
        assert _burn_status(code) == expected
        assert _validate_status(code) == expected
        assert xid_status(code) == expected
        assert describe({"gpu": 0, "event": "xid", "xid": code}).split(": ", 1)[1].startswith(expected.upper())


def test_nvlink_xids_are_reported_once():
    """An NVLink Xid is nvlink.errors' alone and an SXid health.sxid's: no second finding judges the same line."""
    for line, check_id, _expected, _code in ROWS:
        if check_id in ("nvlink.errors", "health.sxid") and "\n" not in line:
            report = diagnose_text(line)
            others = {"health.xid", "nvlink.errors", "health.sxid"} - {check_id}
            assert not [f for f in report.findings if f.check_id in others and f.status != Status.PASS], line


def diagnose_text(text: str):
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dmesg.txt"
        path.write_text(text + "\n")
        return diagnose([path])


def test_one_gpu_by_bus_id_whatever_the_tool_spells_it(tmp_path):
    """The Xid's `PCI:0000:3B:00`, old drivers' `3b:00`, nvidia-smi's `00000000:3B:00.0` are one GPU: the finding
    names the GPU the nvidia-smi table lists, by its index and bus id."""
    table = (Path(__file__).parent / "fixtures" / "public" / "dgx-h100-nvswitch" / "nvidia-smi.txt").read_text()
    listed = [line.split("|")[2].split()[0] for line in table.splitlines() if line.startswith("|") and ":" in line
              and "000000" in line.split("|")[2]]
    assert listed[3] == "00000000:5D:00.0"
    (tmp_path / "nvidia-smi.txt").write_text(table)
    for spelling in ("PCI:0000:5D:00", "PCI:0000:5d:00", "0000:5d:00"):
        (tmp_path / "dmesg.txt").write_text(f"[ 10.0] NVRM: Xid ({spelling}): 79, GPU has fallen off the bus.\n")
        for report in (diagnose([tmp_path]), check_files(read_bundle(tmp_path), CheckOptions())[0]):
            xid = next(f for f in report.findings if f.check_id == "health.xid" and f.status == Status.FAIL)
            assert (xid.subject.gpu.index, xid.subject.gpu.bus_id) == (3, "0000:5d:00.0"), spelling
