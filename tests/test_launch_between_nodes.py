"""`launch … -- validate --between-nodes` puts every node in one torchrun group (pair tests need the peers in one
group, as a training step does) and rank 0 writes one report; plain `-- validate` stays one report per node."""

import shlex

import yaml

from gpuready.verbs.launch import launch_text

PAIRS = ["validate", "--between-nodes"]


def _last_command(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return shlex.split(lines[-1])


def test_slurm_runs_one_torchrun_group_over_the_allocation():
    argv = _last_command(launch_text("slurm", nnodes=8, gpus_per_node=8, command=PAIRS, reports="/shared/r"))
    assert argv[:2] == ["srun", "torchrun"]
    assert argv[argv.index("--nnodes") + 1] == "8" and argv[argv.index("--rdzv-id") + 1] == "$SLURM_JOB_ID"
    assert argv[argv.index("-m"):] == ["-m", "gpuready", "validate", "--between-nodes", "--json", "--out",
                                       "/shared/r/between-nodes.json"]


def test_torchrun_and_k8s_forms_run_the_same_program():
    argv = _last_command(launch_text("torchrun", nnodes=4, gpus_per_node=8, command=PAIRS, reports="/r"))
    assert argv[0] == "torchrun" and argv[argv.index("-m"):][-3:] == ["--json", "--out", "/r/between-nodes.json"]
    manifest = [doc for doc in yaml.safe_load_all(launch_text("k8s", nnodes=4, gpus_per_node=8, command=PAIRS,
                                                               image="img:1", reports="/r")) if doc]
    job = next(doc for doc in manifest if doc["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][-1] == ("mkdir -p /r && exec torchrun -m gpuready validate --between-nodes --json "
                                        "--out /r/between-nodes.json")
    names = [item["name"] for item in container["env"]]
    assert "PET_MASTER_ADDR" in names and "GPUREADY_K8S_NODE" in names  # a group needs its rendezvous


def test_plain_validate_stays_one_report_per_node():
    text = launch_text("slurm", nnodes=8, gpus_per_node=8, command=["validate"], reports="/shared/r")
    assert "torchrun" not in _last_command(text) and '"${SLURMD_NODENAME:-$(hostname)}".json' in text
