"""Issue 34: gpuready against a real Slurm (tests/slurm_cluster.py starts one on this host; skipped with the reason
where it cannot start).

- The sbatch script `gpuready launch slurm` writes is submitted as written with `sbatch` and ends COMPLETED: the
  validate form writes its report under the node's Slurm NodeName (SLURMD_NODENAME), and the torchrun form starts
  torchrun on the node, whose ranks meet through the c10d rendezvous on the head node and all-reduce.
- `gpuready fleet --actions slurm --apply` drains the node a failing report names (sinfo shows it drained, with the
  reason), and a newer clean report resumes it (idle).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from slurm_cluster import PARTITION, SlurmCluster, SlurmUnavailable, start_cluster

JOB_TIMEOUT_S = 240.0
"""A validate --quick of 2 CPU ranks took 10-12 s as a Slurm job here (2 cores); torch's import is most of it."""
XID79_CASE = FIXTURES / "cases" / "xid79-rtx5070ti-desktop-open-gpu-1010"
"""A real kernel journal with Xid 79 (GPU fallen off the bus): `diagnose` finds health.xid failing."""
CLEAN_REPORT = FIXTURES / "h200-validate-timing" / "validate-quick-1.json"
"""A recorded validate of a healthy H200 (verdict ready)."""

TRAIN = """\
import json, os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
with open(os.path.join(sys.argv[1], f"rank{dist.get_rank()}.json"), "w") as out:
    json.dump({"rank": dist.get_rank(), "world_size": dist.get_world_size(), "sum": total.item(),
               "slurm_node": os.environ.get("SLURMD_NODENAME"), "job": os.environ.get("SLURM_JOB_ID"),
               "torchrun_run_id": os.environ.get("TORCHELASTIC_RUN_ID")}, out)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running one-node Slurm for this module's tests; skipped, with the reason, where it cannot start."""
    try:
        cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    except SlurmUnavailable as why:
        pytest.skip(f"no Slurm here: {why}")
    yield cluster
    cluster.stop()


def _gpuready(*argv: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuready", *argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def _submit(slurm: SlurmCluster, script: Path) -> dict[str, str]:
    """sbatch SCRIPT (as written, in its folder), then its fields once it has ended."""
    job_id = slurm.run("sbatch", "--parsable", script.name, cwd=script.parent).stdout.strip().split(";")[0]
    fields = slurm.wait_job(job_id, JOB_TIMEOUT_S)
    output = Path(fields.get("StdOut", ""))
    assert fields.get("JobState") == "COMPLETED" and fields.get("ExitCode") == "0:0", (
        f"job {job_id}: {fields.get('JobState')} {fields.get('ExitCode')}\n"
        f"{output.read_text(errors='replace')[-3000:] if output.is_file() else 'no output'}\n{slurm.logs()}")
    assert fields["NodeList"] == slurm.node and fields["Partition"] == PARTITION
    return fields


def test_launch_slurm_validate_runs_under_slurm_and_names_the_node(slurm, tmp_path):
    reports = tmp_path / "reports"
    written = _gpuready("launch", "slurm", "--nnodes", "1", "--nproc-per-node", "2", "--reports", str(reports),
                        "--out", "job.sbatch", "--", "validate", "--device", "cpu", "--ranks", "2", "--quick",
                        env=slurm.env, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    _submit(slurm, tmp_path / "job.sbatch")
    assert [path.name for path in reports.iterdir()] == [f"{slurm.node}.json"]  # the NodeName, not the host name
    report = json.loads((reports / f"{slurm.node}.json").read_text())
    assert report["host"] == slurm.node
    assert {finding["check_id"]: finding["status"] for finding in report["findings"]} == {
        "nccl.failed": "pass", "ddp.mismatch": "pass"}  # gloo collectives and the data-parallel step on 2 ranks
    assert report["facts"]["validate"]["ranks"] == [0, 1]


def test_launch_slurm_torchrun_form_runs_torchrun_under_slurm(slurm, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    out = tmp_path / "ranks"
    out.mkdir()
    written = _gpuready("launch", "slurm", "--nnodes", "1", "--nproc-per-node", "2", "--port", "0",
                        "--out", "job.sbatch", "--", "train.py", str(out), env=slurm.env, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    fields = _submit(slurm, tmp_path / "job.sbatch")
    ranks = sorted((json.loads(path.read_text()) for path in out.glob("rank*.json")), key=lambda rank: rank["rank"])
    assert [rank["rank"] for rank in ranks] == [0, 1]
    assert all(rank["world_size"] == 2 and rank["sum"] == 3.0 for rank in ranks)  # 1 + 2: the all-reduce ran
    assert {rank["slurm_node"] for rank in ranks} == {slurm.node}
    assert {rank["torchrun_run_id"] for rank in ranks} == {fields["JobId"]}  # --rdzv-id "$SLURM_JOB_ID"


# --- fleet --actions slurm --apply: drain, then resume ----------------------------------------------------------

def _fleet_acts(slurm: SlurmCluster, tmp_path: Path) -> bool:
    shown = _gpuready("fleet", "--help", env=slurm.env, cwd=tmp_path)
    return "--actions" in shown.stdout


def _as_node(source: dict, node: str, started_at: str, path: Path) -> Path:
    """`source` as node `node` would have written it at `started_at`."""
    document = {**source, "host": node, "started_at": started_at}
    for item in (*document.get("findings", []), *document.get("measurements", [])):
        if isinstance(item.get("subject"), dict):
            item["subject"] = {**item["subject"], "host": node}
    path.write_text(json.dumps(document))
    return path


def _reasons(slurm: SlurmCluster) -> dict[str, str]:
    lines = slurm.run("sinfo", "-R", "-h", "-o", "%N|%E").stdout.splitlines()
    return dict(line.split("|", 1) for line in lines if "|" in line)


def test_fleet_actions_apply_drains_the_node_and_a_newer_clean_report_resumes_it(slurm, tmp_path):
    if not _fleet_acts(slurm, tmp_path):  # evaluated here, not at collection: it needs a gpuready process
        pytest.skip("gpuready fleet has no --actions yet (issue 34, another part); the lead enables this test")
    diagnosed = _gpuready("diagnose", str(XID79_CASE), "--json", "--out", str(tmp_path / "xid79.json"),
                          env=slurm.env, cwd=tmp_path)
    assert diagnosed.returncode == 1, diagnosed.stderr  # not ready: health.xid fails
    failing = _as_node(json.loads((tmp_path / "xid79.json").read_text()), slurm.node, "2026-12-07T10:00:00+00:00",
                       tmp_path / "failing.json")
    clean = _as_node(json.loads(CLEAN_REPORT.read_text()), slurm.node, "2026-12-07T11:00:00+00:00",
                     tmp_path / "clean.json")
    assert slurm.node_state() == "idle"

    drained = _gpuready("fleet", str(failing), "--actions", "slurm", "--apply", env=slurm.env, cwd=tmp_path)
    assert f"NodeName={slurm.node}" in drained.stdout and "State=DRAIN" in drained.stdout, drained.stderr
    assert slurm.wait_node(("drained", "draining"), 10) in ("drained", "draining")
    assert _reasons(slurm)[slurm.node].startswith("gpuready:")

    resumed = _gpuready("fleet", str(failing), str(clean), "--actions", "slurm", "--apply", env=slurm.env,
                        cwd=tmp_path)
    assert "State=RESUME" in resumed.stdout, resumed.stderr
    assert slurm.wait_node(("idle",), 10) == "idle"
    assert slurm.node not in _reasons(slurm)
