"""Remediation levels (issue 34): every finding says what it takes to clear it, from knowledge/remediation.toml and,
for an Xid, from NVIDIA's Xid catalog (Resolution Bucket, Immediate Action). The expected levels here are read off
the catalog's column (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and NVIDIA's memory
error management guide, not off the table."""

from __future__ import annotations

import contextlib
import io
import json
import re
from importlib import resources
from pathlib import Path

import pytest

from conftest import FIXTURES
from gpuready.checks.registry import CHECKS, registered_in_order
from gpuready.checks.remediation import level_of, xid_level
from gpuready.cli import main as cli
from gpuready.model import Finding, Remediation, Report, Status, Subject
from gpuready.report.console import render_console
from gpuready.report.markdown import markdown_summary

DOCS = Path(__file__).resolve().parents[1] / "docs" / "findings.md"
XID79_LOG = FIXTURES / "cases" / "xid79-rtx5070ti-desktop-open-gpu-1010" / "journalctl-k.txt"
OTHER_IDS = ("burn.xid", "bench.xid", "validate.xid", "burn.errors", "burn.straggler", "burn.gpu_lost",
             "validate.rank_hung", "validate.rank_unkillable", "bench.mfu_low", "bundle.unreadable", "plan.fits",
             "diagnose.nothing_found", "monitor.prometheus", "ddp.init_failed")
"""Ids the verbs' judges write (not in the check catalog page)."""


def documented_ids() -> list[str]:
    ids = set()
    for line in DOCS.read_text().splitlines():
        if line.startswith("| `"):
            ids.update(re.findall(r"`([a-z_0-9]+\.[a-z_0-9.]+)`", line.split("|")[1]))
    return sorted(ids)


def test_every_check_id_gets_a_level_and_a_failure_is_never_none():
    registered_in_order()
    ids = sorted(set(documented_ids()) | set(CHECKS) | set(OTHER_IDS))
    assert len(ids) > 90
    for check_id in ids:
        assert level_of(check_id, Status.FAIL) != Remediation.NONE, check_id  # raises NoLevel where not covered
        assert level_of(check_id, Status.PASS) == level_of(check_id, Status.SKIP) == Remediation.NONE


@pytest.mark.parametrize("code, level", [
    (79, "reboot_node"),     # GPU fallen off the bus: RESTART_BM
    (13, "restart_job"),     # Graphics engine exception: RESTART_APP
    (31, "restart_job"),     # MMU fault: RESTART_APP
    (48, "reset_gpu"),       # double-bit ECC: WORKFLOW_XID_48, ends in a reset
    (95, "reset_gpu"),       # uncontained ECC: RESET_GPU
    (64, "drain_replace"),   # row-remapping failure: RMA (memory error management guide)
    (54, "drain_replace"),   # auxiliary power: CHECK_MECHANICALS
    (119, "reset_gpu"),      # GSP timeout: RESET_GPU
])
def test_xid_levels_follow_nvidia_catalog(code, level):
    assert xid_level(code) == Remediation(level)
    assert level_of("health.xid", Status.FAIL, {"xid": code}) == Remediation(level)
    assert level_of("burn.xid", Status.FAIL, code) == Remediation(level)  # NVML's event: the code itself


def test_exact_levels_of_machine_checks():
    assert level_of("pcie.link_degraded", Status.FAIL) == Remediation.DRAIN_REPLACE
    assert level_of("health.row_remap_failure", Status.FAIL) == Remediation.DRAIN_REPLACE
    assert level_of("health.row_remap_pending", Status.WARN) == Remediation.RESET_GPU
    assert level_of("software.torch_arch", Status.FAIL) == Remediation.RESTART_JOB
    assert level_of("health.xid", Status.WARN, {"xid": 99999}) == Remediation.RESET_GPU  # unknown code: the row's


def _run(argv: list[str]) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv)
    return code, json.loads(out.getvalue())


def test_a_real_xid79_report_carries_its_level_and_matches_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    _code, document = _run(["diagnose", str(XID79_LOG), "--json"])
    assert [(f["check_id"], f["remediation"]) for f in document["findings"] if f["status"] == "fail"] == [
        ("health.xid", "reboot_node")]
    assert all(f["remediation"] for f in document["findings"])
    schema = json.loads(resources.files("gpuready").joinpath("schema/report.schema.json").read_text())
    jsonschema.validate({**document, "scheduler": {"slurm_node": "gpu-a01", "slurm_job": "7"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**document, "findings": [{**document["findings"][0], "remediation": "pray"}]}, schema)


def test_console_and_markdown_show_the_level_where_not_none():
    _code, document = _run(["diagnose", str(XID79_LOG), "--json"])
    console = io.StringIO()
    from rich.console import Console
    render_console(document, Console(file=console, width=200, color_system=None), lang="en")
    assert "remediation: reboot the node" in console.getvalue()
    zh = io.StringIO()
    render_console(document, Console(file=zh, width=200, color_system=None), lang="zh")
    assert "重启节点（reboot）" in zh.getvalue()
    markdown = markdown_summary([document], "en")
    assert "**remediation:** reboot the node" in markdown
    assert markdown.count("**remediation:**") == 1  # the pass and skip rows say nothing


def test_a_bundle_read_here_names_no_scheduler(monkeypatch):
    """The scheduler block is the node a live run ran on: a bundle read inside a Slurm job is another machine's."""
    monkeypatch.setenv("SLURMD_NODENAME", "login-1")
    _code, document = _run(["check", "--bundle", str(FIXTURES / "h200-collect"), "--json"])
    assert "scheduler" not in document


def test_report_writes_the_scheduler_where_set():
    report = Report(tool_version="t", host="h", scheduler={"slurm_node": "gpu-a17", "slurm_job": "4242"},
                    findings=[Finding(check_id="gpu.present", status=Status.PASS, subject=Subject(host="h"),
                                      message="m", remediation=Remediation.NONE)])
    document = report.to_dict()
    assert document["scheduler"] == {"slurm_node": "gpu-a17", "slurm_job": "4242"}
    assert document["findings"][0]["remediation"] == "none"
    assert "scheduler" not in Report(tool_version="t", host="h").to_dict()
