"""Which node this process runs on, as the scheduler names it: the name a report carries, a pair test names and
`fleet --actions` hands back to `scontrol` or `kubectl`.

A host name is not always the scheduler's name for the node: Slurm's NodeName may differ from the machine's host name
(slurm.conf NodeHostname), and a Kubernetes pod's host name is the pod's, not the node's. Each scheduler exports its
own name to the job; gpuready reads it, and an explicit GPUREADY_NODE_NAME wins (several simulated nodes on one host,
a site's own naming)."""

from __future__ import annotations

import os
import socket

NODE_NAME_VARIABLE = "GPUREADY_NODE_NAME"
SLURM_NODE_VARIABLE = "SLURMD_NODENAME"
"""Set by slurmd in every job step's environment (Slurm's srun/sbatch man pages, OUTPUT ENVIRONMENT VARIABLES)."""
K8S_NODE_VARIABLE = "GPUREADY_K8S_NODE"
"""What `launch k8s` sets from the pod's `spec.nodeName` (the downward API): the node `kubectl cordon` takes."""
_MAX_NAME = 253
"""A DNS name's longest form (RFC 1035), Kubernetes' node-name limit too."""


def _clean(value: str | None) -> str | None:
    text = (value or "").strip()
    return text[:_MAX_NAME] if text and text.isprintable() else None


def node_name(environ: dict[str, str] | None = None) -> str:
    """This node's name for reports: GPUREADY_NODE_NAME, else the Slurm or Kubernetes node name, else the host
    name."""
    env = os.environ if environ is None else environ
    for variable in (NODE_NAME_VARIABLE, SLURM_NODE_VARIABLE, K8S_NODE_VARIABLE):
        name = _clean(env.get(variable))
        if name:
            return name
    return socket.gethostname()


def scheduler_names(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The names each scheduler gives this node and job, where one runs it (empty outside a scheduler)."""
    env = os.environ if environ is None else environ
    wanted = {"slurm_node": SLURM_NODE_VARIABLE, "slurm_job": "SLURM_JOB_ID", "k8s_node": K8S_NODE_VARIABLE}
    return {key: name for key, variable in wanted.items() if (name := _clean(env.get(variable)))}
