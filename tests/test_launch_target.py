"""`launch` writes the target's facts, never the generating machine's (issue 21): from `--bundle` of a target node, or
else left as marked parameters with the reason; `--run` (the script runs here) is the one case that uses this
machine. And `gpuready collect`, which fixes tell users to run, runs bare."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.verbs import collect, launch


def _script(capsys, *options: str) -> str:
    assert cli.main(["launch", "slurm", "--nnodes", "2", *options, "--", "train.py"]) == 0
    return capsys.readouterr().out


def test_without_a_bundle_no_fact_of_this_machine_fills_the_script(capsys, monkeypatch):
    def this_machine(*_args, **_kwargs):
        raise AssertionError("launch read the generating machine's facts")
    monkeypatch.setattr(launch, "gather_facts", this_machine)
    script = _script(capsys, "--nproc-per-node", "8")
    assert "#SBATCH --gpus-per-node=8" in script
    assert "--cpus-per-task: 32 CPUs = 4 per GPU, a guess (no facts): set it to your nodes' cores" in script
    assert "# no facts about the target nodes (--bundle of one gives them): no NCCL variable is set" in script
    assert "export NCCL_SOCKET_IFNAME" not in script


def test_a_target_bundle_gives_its_gpus_and_cpus(capsys):
    script = _script(capsys, "--bundle", str(FIXTURES / "h200-collect"))
    assert "#SBATCH --gpus-per-node=1" in script and "#SBATCH --cpus-per-task=16" in script
    assert "# --cpus-per-task: 16 CPUs: this node's cpu count (facts); every node assumed alike." in script


def test_without_a_gpu_count_or_a_bundle_it_says_what_to_give(capsys):
    assert cli.main(["launch", "slurm", "--", "train.py"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gpuready: give the GPUs per node of the target nodes: --nproc-per-node G, or --bundle of one target node "
        "(`gpuready collect` there)")


def test_bare_collect_writes_an_archive_named_after_the_host_here(monkeypatch, capsys):
    written = {}

    def fake_collect(out, **options):
        written.update(out=out, **options)
        return f"wrote 3 files to {out}"
    monkeypatch.setattr(collect, "run_collect", fake_collect)
    monkeypatch.setattr(collect.socket, "gethostname", lambda: "node 7/gpu")
    assert cli.main(["collect"]) == 0
    assert written["out"] == "gpuready-bundle-node-7-gpu.tar.gz"
    assert capsys.readouterr().out.strip() == "gpuready: wrote 3 files to gpuready-bundle-node-7-gpu.tar.gz"
