"""`launch` writes the target's facts, never the generating machine's (issue 21): from `--bundle` of a target node, or
else left as marked parameters with the reason; `--run` (the script runs here) is the one case that uses this
machine. And `gpuready collect`, which fixes tell users to run, runs bare."""

from __future__ import annotations

import os

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


def test_without_a_gpu_count_or_a_bundle_the_counts_are_marked_placeholders(capsys):
    """Issue 32: no --nproc-per-node and no bundle is no longer an error (the README's examples give neither): torchrun
    counts the GPUs itself (`--nproc-per-node gpu`), and each number sbatch needs is a placeholder it refuses."""
    assert cli.main(["launch", "slurm", "--", "train.py"]) == 0
    script = capsys.readouterr().out
    assert "#SBATCH --gpus-per-node=GPUS_PER_NODE\n#SBATCH --cpus-per-task=CPUS_PER_TASK\n" in script
    assert "# GPUS_PER_NODE and CPUS_PER_TASK: placeholders, launch was not told the target nodes' GPUs" in script
    assert "srun torchrun --nnodes 1 --nproc-per-node gpu --rdzv-backend c10d" in script


def test_k8s_without_a_gpu_count_marks_the_quantities(capsys):
    assert cli.main(["launch", "k8s", "--image", "img", "--", "train.py"]) == 0
    manifest = capsys.readouterr().out
    assert 'nvidia.com/gpu: GPUS_PER_NODE' in manifest and "sizeLimit: SHM_SIZE" in manifest
    assert '- name: PET_NPROC_PER_NODE\n          value: gpu\n' in manifest


def test_out_writes_the_file_only_when_launch_succeeds(tmp_path, capsys):
    target = tmp_path / "job.sbatch"
    target.write_text("the previous script\n")
    assert cli.main(["launch", "slurm", "--out", str(target), "--name", "bad name", "--", "train.py"]) == 2
    assert target.read_text() == "the previous script\n"
    assert cli.main(["launch", "slurm", "--nproc-per-node", "8", "--out", str(target), "--", "train.py"]) == 0
    assert "#SBATCH --gpus-per-node=8\n" in target.read_text()
    assert capsys.readouterr().out == ""
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.sbatch"]


def test_out_refuses_a_fifo_or_a_folder_before_any_work(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert cli.main(["launch", "slurm", "--out", str(fifo), "--", "train.py"]) == 2
    assert capsys.readouterr().err.strip() == f"gpuready: --out {fifo} is not a regular file (a FIFO); give a file name"
    assert cli.main(["launch", "slurm", "--out", str(tmp_path), "--", "train.py"]) == 2
    assert capsys.readouterr().err.strip() == f"gpuready: --out {tmp_path} is a folder; give a file name"


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
