"""The node a report names: the scheduler's name where one runs the job (what `scontrol`/`kubectl` take back)."""

import socket

from gpuready.node import node_name, scheduler_names


def test_an_explicit_name_wins_over_the_schedulers():
    env = {"GPUREADY_NODE_NAME": "sim-node-3", "SLURMD_NODENAME": "gpu-a17", "GPUREADY_K8S_NODE": "ip-10-0-0-1"}
    assert node_name(env) == "sim-node-3"


def test_slurm_names_the_node_by_its_nodename_not_the_host_name():
    assert node_name({"SLURMD_NODENAME": "gpu-a17"}) == "gpu-a17"
    assert scheduler_names({"SLURMD_NODENAME": "gpu-a17", "SLURM_JOB_ID": "4242"}) == {
        "slurm_node": "gpu-a17", "slurm_job": "4242"}


def test_kubernetes_names_the_node_the_pod_runs_on():
    assert node_name({"GPUREADY_K8S_NODE": "ip-10-0-0-1.ec2.internal"}) == "ip-10-0-0-1.ec2.internal"


def test_outside_a_scheduler_the_host_name_and_nothing_else():
    assert node_name({}) == socket.gethostname()
    assert scheduler_names({}) == {}


def test_blank_or_control_characters_are_no_name():
    assert node_name({"GPUREADY_NODE_NAME": "  ", "SLURMD_NODENAME": "bad\nname"}) == socket.gethostname()
