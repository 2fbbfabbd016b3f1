"""`gpuready fleet REPORTS... --actions slurm|k8s [--apply]` (issue 34): the scheduler commands that apply the nodes'
verdicts, and their undo.

The reports are real gpuready output of recorded inputs: `check --bundle tests/fixtures/h200-collect` (the H200 VM,
ready with warnings: clean), `diagnose` of a published kernel log with an Xid 79 (tests/fixtures/cases/xid79-…: not
ready, a GPU fallen off the bus: NVIDIA's catalog says RESTART_BM, so reboot_node), `diagnose` of an Xid 13 log (the
application's: a warning, verdict unknown) and a recorded CPU validate (no verdict). Each is copied per node with the
scheduler block, run id and start time the test names: what a Slurm or Kubernetes job on that node would write.
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
from pathlib import Path

import pytest

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.verbs.fleet.actions import MAX_REASON_BYTES, TAINT_KEY, TAINT_VALUES, Action, reason, shown
from gpuready.verbs.fleet.read import Drain, Outcome

XID79_LOG = FIXTURES / "cases" / "xid79-rtx5070ti-desktop-open-gpu-1010" / "journalctl-k.txt"
XID13_LOG = FIXTURES / "cases" / "xid13-a800x8-vllm-5901" / "dmesg.txt"
CPU_VALIDATE = json.loads((FIXTURES / "fleet-actions" / "validate-cpu-quick.json").read_text())
T1, T2, T3 = "2026-12-01T08:00:00+00:00", "2026-12-01T09:30:00+00:00", "2026-12-01T11:00:00+00:00"
XID79_REASON = ("gpuready: health.xid: Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS on GPU0 (0000:01:00.0), 2×: "
                "The GPU has fallen off the PCIe bus: the driver can no longer talk to it (last at an unknown time (the... "
                "(reboot_node, run {run} {when})")
"""254 bytes: the sentence cut where the whole would pass 255 (run ids of three characters)."""


def _json_of(capsys, argv: list[str]) -> dict:
    cli.main(argv)
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, dict]:
    """The real reports, made once: `clean`, `xid79`, `xid13` (JSON documents)."""
    import contextlib
    import io
    made = {}
    for name, argv in (("clean", ["check", "--bundle", str(FIXTURES / "h200-collect"), "--json"]),
                       ("xid79", ["diagnose", str(XID79_LOG), "--json"]),
                       ("xid13", ["diagnose", str(XID13_LOG), "--json"])):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cli.main(argv)
        made[name] = json.loads(out.getvalue())
    return made


def node_report(document: dict, folder: Path, node: str, started_at: str, run_id: str, *, k8s: str | None = None):
    """`document` as the report a job on Slurm node `node` (Kubernetes node `k8s`) wrote at `started_at`."""
    copied = copy.deepcopy(document)
    copied.update(started_at=started_at, run_id=run_id, host=f"host-of-{node}",
                  scheduler={"slurm_node": node, "slurm_job": "4242", **({"k8s_node": k8s} if k8s else {})})
    path = folder / f"{node}-{run_id}.json"
    path.write_text(json.dumps(copied))
    return path


def test_the_levels_behind_the_fixtures(recorded):
    """What the test's nodes rest on: the Xid 79 fails at reboot_node, the Xid 13 warns at restart_job, the clean
    report's warning is not a drain level."""
    failing = [(f["check_id"], f["remediation"]) for f in recorded["xid79"]["findings"] if f["status"] == "fail"]
    assert failing == [("health.xid", "reboot_node")] and recorded["xid79"]["verdict"] == "not_ready"
    assert [(f["check_id"], f["status"], f["remediation"]) for f in recorded["xid13"]["findings"]
            if f["status"] not in ("pass", "skip")] == [("health.xid", "warn", "restart_job")]
    assert recorded["clean"]["verdict"] == "ready_with_warnings"
    assert {f["remediation"] for f in recorded["clean"]["findings"] if f["status"] in ("pass", "skip")} == {"none"}
    assert CPU_VALIDATE["verdict"] == "no_verdict"


@pytest.fixture()
def fleet_folder(tmp_path, recorded) -> Path:
    """gpu-a01: Xid 79 only → drain. gpu-a02: clean only → nothing (no drain of ours to undo). gpu-a03: Xid 79 at T1,
    clean at T2 → resume. gpu-a04: clean at T1, Xid 79 at T2 → drain (the clean report is older). gpu-a05: Xid 79 at
    T1, CPU validate at T3 → drain (no verdict decides nothing). gpu-a06: CPU validate only → nothing. gpu-a07: Xid 13
    (application, verdict unknown) → nothing. gpu-a08: Xid 79 at T2 and clean at the same T2 → drain stays (not newer)."""
    folder = tmp_path / "reports"
    folder.mkdir()
    node_report(recorded["xid79"], folder, "gpu-a01", T1, "r01", k8s="node-a01")
    node_report(recorded["clean"], folder, "gpu-a02", T1, "r02", k8s="node-a02")
    node_report(recorded["xid79"], folder, "gpu-a03", T1, "r3a", k8s="node-a03")
    node_report(recorded["clean"], folder, "gpu-a03", T2, "r3b", k8s="node-a03")
    node_report(recorded["clean"], folder, "gpu-a04", T1, "r4a", k8s="node-a04")
    node_report(recorded["xid79"], folder, "gpu-a04", T2, "r4b", k8s="node-a04")
    node_report(recorded["xid79"], folder, "gpu-a05", T1, "r5a", k8s="node-a05")
    node_report(CPU_VALIDATE, folder, "gpu-a05", T3, "r5b", k8s="node-a05")
    node_report(CPU_VALIDATE, folder, "gpu-a06", T1, "r06", k8s="node-a06")
    node_report(recorded["xid13"], folder, "gpu-a07", T1, "r07", k8s="node-a07")
    node_report(recorded["xid79"], folder, "gpu-a08", T2, "r8a", k8s="node-a08")
    node_report(recorded["clean"], folder, "gpu-a08", T2, "r8b", k8s="node-a08")
    return folder


def test_actions_slurm_exact(fleet_folder, capsys):
    code = cli.main(["fleet", str(fleet_folder), "--actions", "slurm"])
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f'scontrol update NodeName=gpu-a01 State=DRAIN Reason="{XID79_REASON.format(run="r01", when=T1)}"',
        "scontrol update NodeName=gpu-a03 State=RESUME",
        f'scontrol update NodeName=gpu-a04 State=DRAIN Reason="{XID79_REASON.format(run="r4b", when=T2)}"',
        f'scontrol update NodeName=gpu-a05 State=DRAIN Reason="{XID79_REASON.format(run="r5a", when=T1)}"',
        f'scontrol update NodeName=gpu-a08 State=DRAIN Reason="{XID79_REASON.format(run="r8a", when=T2)}"',
    ]
    assert code == ExitCode.NOT_READY  # fleet's own judgement: failing nodes; nothing was run
    assert len(XID79_REASON.format(run="r01", when=T1).encode()) == 254


def test_actions_k8s_exact(fleet_folder, capsys):
    cli.main(["fleet", str(fleet_folder), "--actions", "k8s"])
    assert capsys.readouterr().out.splitlines() == [
        "kubectl taint nodes node-a01 gpuready.io/health=pending-reboot:NoSchedule --overwrite",
        "kubectl cordon node-a01",
        "kubectl taint nodes node-a03 gpuready.io/health-",
        "kubectl uncordon node-a03",
        "kubectl taint nodes node-a04 gpuready.io/health=pending-reboot:NoSchedule --overwrite",
        "kubectl cordon node-a04",
        "kubectl taint nodes node-a05 gpuready.io/health=pending-reboot:NoSchedule --overwrite",
        "kubectl cordon node-a05",
        "kubectl taint nodes node-a08 gpuready.io/health=pending-reboot:NoSchedule --overwrite",
        "kubectl cordon node-a08",
    ]


def test_a_clean_report_alone_resumes_nothing(tmp_path, recorded, capsys):
    """Resume only undoes a drain fleet saw: a clean report with no earlier failing one says nothing."""
    node_report(recorded["clean"], tmp_path, "gpu-b01", T3, "only")
    code = cli.main(["fleet", str(tmp_path), "--actions", "slurm"])
    captured = capsys.readouterr()
    assert captured.out == "" and "no node to drain or resume" in captured.err and code == ExitCode.READY


def test_the_json_document_lists_the_actions(fleet_folder, capsys):
    document = _json_of(capsys, ["fleet", str(fleet_folder), "--actions", "slurm", "--json"])
    rows = {row["node"]: row for row in document["actions"]}
    assert sorted(rows) == ["gpu-a01", "gpu-a03", "gpu-a04", "gpu-a05", "gpu-a08"]
    assert rows["gpu-a03"]["action"] == "resume" and rows["gpu-a03"]["report"]["run_id"] == "r3b"
    assert rows["gpu-a01"]["commands"] == [["scontrol", "update", "NodeName=gpu-a01", "State=DRAIN",
                                            "Reason=" + XID79_REASON.format(run="r01", when=T1)]]
    assert {node["host"] for node in document["nodes"]} >= {"gpu-a01", "gpu-a03"}  # named by the scheduler's name


def fake_tool(folder: Path, name: str, exit_code: int = 0) -> Path:
    """A `name` on PATH that records its argv (one JSON list per line) and exits `exit_code`."""
    folder.mkdir(exist_ok=True)
    log = folder / f"{name}.argv"
    script = folder / name
    script.write_text(f"#!/usr/bin/env python3\nimport json, sys\n"
                      f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\nsys.exit({exit_code})\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return log


def _recorded_argv(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_apply_runs_argument_lists_slurm(fleet_folder, tmp_path, monkeypatch, capsys):
    log = fake_tool(tmp_path / "bin", "scontrol")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code = cli.main(["fleet", str(fleet_folder), "--actions", "slurm", "--apply"])
    out = capsys.readouterr().out
    argvs = _recorded_argv(log)
    assert argvs[0] == ["update", "NodeName=gpu-a01", "State=DRAIN",
                        "Reason=" + XID79_REASON.format(run="r01", when=T1)]  # spaces and all: one argument
    assert argvs[1] == ["update", "NodeName=gpu-a03", "State=RESUME"]
    assert [argv[1] for argv in argvs] == ["NodeName=gpu-a01", "NodeName=gpu-a03", "NodeName=gpu-a04",
                                           "NodeName=gpu-a05", "NodeName=gpu-a08"]
    assert out.splitlines()[1] == "scontrol update NodeName=gpu-a03 State=RESUME: exit code 0"
    assert code == ExitCode.NOT_READY  # every command succeeded: fleet's judgement alone


def test_apply_runs_argument_lists_k8s_and_a_failure_is_exit_3(fleet_folder, tmp_path, monkeypatch, capsys):
    log = fake_tool(tmp_path / "bin", "kubectl", exit_code=1)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code = cli.main(["fleet", str(fleet_folder), "--actions", "k8s", "--apply"])
    out = capsys.readouterr().out
    assert _recorded_argv(log)[:4] == [
        ["taint", "nodes", "node-a01", "gpuready.io/health=pending-reboot:NoSchedule", "--overwrite"],
        ["cordon", "node-a01"], ["taint", "nodes", "node-a03", "gpuready.io/health-"], ["uncordon", "node-a03"]]
    assert "kubectl cordon node-a01: exit code 1" in out.splitlines()
    assert code == ExitCode.TOOL_ERROR


def test_apply_where_the_tool_is_absent_runs_nothing(fleet_folder, tmp_path, monkeypatch, capsys):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code = cli.main(["fleet", str(fleet_folder), "--actions", "slurm", "--apply"])
    out = capsys.readouterr().out
    assert out.strip() == "scontrol is not on PATH: nothing was run (run the commands --actions prints where " \
                          "scontrol is)"
    assert code == ExitCode.TOOL_ERROR


def test_apply_without_actions_is_a_usage_error(fleet_folder, capsys):
    assert cli.main(["fleet", str(fleet_folder), "--apply"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "--apply runs the commands of --actions" in err and "Traceback" not in err


LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
"""Kubernetes label (and taint) value syntax: at most 63 characters (apimachinery validation.IsValidLabelValue)."""
QUALIFIED_NAME = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def test_taint_key_and_values_follow_kubernetes_syntax():
    assert QUALIFIED_NAME.fullmatch(TAINT_KEY) and len(TAINT_KEY.split("/")[-1]) <= 63
    assert sorted(TAINT_VALUES.values()) == ["pending-reboot", "pending-replacement", "pending-reset"]
    for value in TAINT_VALUES.values():
        assert LABEL_VALUE.fullmatch(value) and len(value) <= 63


def test_a_hostile_sentence_cannot_break_the_reason():
    """Quotes, `$(…)`, backquotes, backslashes and newlines from a report never reach the printed line; the Reason
    stays within Slurm's 255 bytes, multi-byte text cut on a character boundary."""
    drain = Drain(level="drain_replace", check_id="pcie.link_degraded",
                  message='x16 "then" $(reboot) `id` \\ \n second line ' + "é" * 300)
    action = Action(node="gpu-z", resume=False, drain=drain,
                    decided_by=Outcome(started_at=T1, path="p", run_id="rz", verdict="not_ready", drain=drain))
    text = reason(action)
    assert not re.search(r"[\"'`$\\\n]", text) and len(text.encode()) <= MAX_REASON_BYTES
    assert text.startswith("gpuready: pcie.link_degraded: x16 then (reboot) id second line é")
    assert text.endswith(f"... (drain_replace, run rz {T1})")
    line = shown(["scontrol", "update", "NodeName=gpu-z", "State=DRAIN", f"Reason={text}"])
    assert line == f'scontrol update NodeName=gpu-z State=DRAIN Reason="{text}"'


def test_a_node_name_no_scheduler_takes_is_refused_in_one_sentence(tmp_path, recorded, capsys):
    node_report(recorded["xid79"], tmp_path, "bad name;rm", T1, "r1")
    code = cli.main(["fleet", str(tmp_path), "--actions", "slurm"])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not a valid slurm node name" in captured.err and "Traceback" not in captured.err
    assert code == ExitCode.USAGE
