"""`gpuready launch torchrun|slurm|k8s`: the text that starts one training (or `validate`, or `bench`) run on N nodes.

Pure functions: `launch_text` returns a shell script (torchrun), an sbatch script (Slurm) or YAML documents
(Kubernetes: an Indexed Job + headless Service, a JobSet, or a Kubeflow TrainJob); `nccl_env` turns Facts into the
NCCL variables worth pinning, each with the reason; `run_local` runs the torchrun form on this node (`--run`).

Conventions followed:
- torchrun c10d rendezvous: `--rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID`, the same on every node
  (torch/distributed/run.py docstring).
- Slurm: one task per node running torchrun, head node = first of `scontrol show hostnames`, `--rdzv-id` =
  `$SLURM_JOB_ID` (pytorch/torchtitan multinode_trainer.slurm).
- Kubernetes: torchrun reads every flag from `PET_<FLAG>` (torch/distributed/argparse_util.py `env`); the node
  rank comes from the `batch.kubernetes.io/job-completion-index` annotation as Kubeflow's torch plugin does
  (kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go); pod 0 of an Indexed Job with `subdomain` set to a
  headless Service is `<job>-0.<service>` (kubernetes.io, "Job with Pod-to-Pod Communication"); JobSet pods are
  `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<jobset>` (kubernetes-sigs/jobset).
"""

from __future__ import annotations

import os
import re
import stat
import secrets
import shlex
import socket
import subprocess
from typing import Any

from pathlib import Path

import yaml

from gpuready.i18n import (DEFAULT_LANGUAGE, Said, Sentence, choose_language, in_language, message, said, said_of,
                           sentence)
from gpuready.cli import option_groups as groups, option_kinds as kind
from gpuready.cli.report_files import WritableFile
from gpuready.evidence.build import build_facts
from gpuready.evidence.bundle import BundleError
from gpuready.evidence.reader import read_bundle
from gpuready.facts.net_interfaces import (IfAddr, interface_of, is_loopback_name, local_interface_entries,
                                           nccl_socket_interfaces, route_source)
from gpuready.facts.network_files import is_virtual_interface
from gpuready.model import ExitCode
from gpuready.node import K8S_NODE_VARIABLE
from gpuready.options import file_kind
from gpuready.options import UsageError
from gpuready.pipeline import gather_facts
from gpuready.runner.torchrun import torchrun_flags
from gpuready.safe_text import printable, tell

KINDS = ("torchrun", "slurm", "k8s")
K8S_KINDS = ("job", "jobset", "trainjob")
DEFAULT_PORT = 29500
"""torchrun's default --master-port, and Kubeflow's PET_MASTER_PORT."""
DEFAULT_REPORTS = "/shared/reports"
"""Where `launch ... validate` has every node write `<hostname>.json` (a folder all nodes share)."""

SHM_GIB_PER_GPU = 8
"""/dev/shm cap per GPU in the Kubernetes pod (emptyDir, medium Memory). Rule: NCCL needs at least 1 GiB of /dev/shm
in a container for its SHM transport and proxy buffers (NCCL troubleshooting, Docker: `--shm-size=1g`), and
PyTorch's DataLoader workers pass every batch through shared memory ("the default shared memory segment size that
container runs with is not enough", pytorch/pytorch README, Docker image); 8 GiB per GPU covers both with several
workers per rank. It is a cap, not a reservation: what is used in it counts against the pod's memory."""
SHM_REF = ("NCCL troubleshooting (Docker: --shm-size=1g): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/"
           "troubleshooting.html; PyTorch README 'Using pre-built images' (shared memory for DataLoader workers)")

DEFAULT_CPUS_PER_GPU = 4
"""Slurm --cpus-per-task per GPU when no facts give the node's CPU count: one CPU for the rank and a few for its
DataLoader workers. A guess, said as such in the script; without any --cpus-per-task Slurm gives the one task (and
so all G ranks) a single CPU."""

ROUTE_PROBE_ADDRESS = "192.0.2.1"
"""TEST-NET-1 (RFC 5737): never on a local subnet, so the kernel routes it through the default route; the UDP
`connect` that asks the route sends no packet."""

NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
K8S_PRODUCT = {"job": "Indexed Job + headless Service", "jobset": "JobSet", "trainjob": "Kubeflow TrainJob"}
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # with re.fullmatch: `$` would let a trailing newline in
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Control characters (newline and tab included): no value the user gives may carry one into a script or manifest."""
_CONTAINER = "trainer"
_JOBSET_REPLICATED_JOB = "node"  # Kubeflow's torch-distributed runtime names its replicatedJob `node` too
_INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

GPUS_PLACEHOLDER = "GPUS_PER_NODE"
"""Written where a GPU count must be a number (an #SBATCH directive, a pod's `nvidia.com/gpu`) and launch was not told
the target nodes' count (no --nproc-per-node, no --bundle): sbatch and the Kubernetes API refuse the file until it
is replaced, so a job never starts on a guessed count. torchrun itself gets `--nproc-per-node gpu` (torchrun's own
value: every GPU the node shows, torch/distributed/run.py)."""
CPUS_PLACEHOLDER = "CPUS_PER_TASK"
"""Slurm's --cpus-per-task where neither the GPU count nor the nodes' CPUs are known (sbatch refuses a non-number)."""
SHM_PLACEHOLDER = "SHM_SIZE"
"""A pod's /dev/shm sizeLimit where the GPU count is not known (the API server refuses a quantity that is not one)."""
TORCHRUN_ALL_GPUS = "gpu"
"""torchrun's --nproc-per-node value for "one rank per GPU this node shows" (torch/distributed/run.py)."""


# --- NCCL variables from facts ------------------------------------------------------------------------------------

def _entries_from_facts(facts: Any) -> list:
    """IfAddr entries (net.py's type) from Facts.net_interfaces (`ip addr` CIDR addresses), in their order."""

    entries = []
    for interface in getattr(facts, "net_interfaces", None) or []:
        for cidr in interface.addresses or []:
            address, _, prefix = cidr.partition("/")
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            entries.append(IfAddr(name=interface.name, family=int(family), address=address, netmask=prefix or None))
    return entries


def _route_interface(peers: list[str], entries: list, route) -> tuple[str | None, Said | str]:
    """The interface the kernel routes the first routable peer (or the default route) through, and what it was."""

    for peer in peers:
        name = interface_of(route(peer, DEFAULT_PORT), entries)
        if name:
            return name, said("launch.how.peer", peer=peer)
    name = interface_of(route(ROUTE_PROBE_ADDRESS, DEFAULT_PORT), entries)
    return (name, said("launch.how.default_route")) if name else (None, "")


def _socket_ifname(facts: Any, peers: list[str], entries: list | None, route) -> tuple[str | None, Sentence]:
    """(NCCL_SOCKET_IFNAME value or None, why: catalogue text whose `first` is the interface and how it was found).
    Live facts: the routing table; a bundle: the only candidate NIC."""

    if entries is None:
        entries = local_interface_entries() if getattr(facts, "live", False) else _entries_from_facts(facts)
    nccl_pick = nccl_socket_interfaces(entries)
    chosen, how = None, ""
    if getattr(facts, "live", False) or route is not None:
        chosen, how = _route_interface(list(peers), entries, route or route_source)
    if chosen is None:
        candidates = [interface.name for interface in getattr(facts, "net_interfaces", None) or []
                      if interface.addresses and not interface.is_virtual
                      and (interface.operstate or "").lower() in ("up", "unknown")]
        if len(candidates) == 1:
            chosen, how = candidates[0], said("launch.how.only_interface")
        elif candidates:
            return None, sentence("launch.ifname.several", candidates=", ".join(candidates))
        else:
            return None, sentence("launch.ifname.none")
    if is_loopback_name(chosen) or is_virtual_interface(chosen):
        return None, sentence("launch.ifname.virtual", interface=chosen)
    effect = said("launch.ifname.effect.other", interface=nccl_pick[0]) if nccl_pick and nccl_pick[0] != chosen \
        else said("launch.ifname.effect.pins")
    return chosen, sentence("launch.ifname.why", first=said("launch.ifname.first", interface=chosen, how=how),
                            effect=effect)


def nccl_env(facts: Any, *, peers: list[str] | tuple[str, ...] = (), entries: list | None = None,
             route=None) -> list[tuple[str, str, str]]:
    """NCCL variables worth setting on this cluster, as (name, value, why); [] without facts.

    NCCL_SOCKET_IFNAME: the interface that routes to `peers` (or carries the default route) where the routing
    table is known (live facts, or `route`, a `(address, port) -> local address` function, given); from a bundle,
    the only non-virtual interface that is up with an address. NCCL_IB_HCA: the ACTIVE RDMA ports in facts, as an
    exact list (`=mlx5_0:1,...`: a plain `mlx5_1` is a prefix that also matches mlx5_10 ...). `entries` overrides the
    interface addresses (net.py IfAddr list). Source: NCCL env.html (NCCL_SOCKET_IFNAME, NCCL_IB_HCA).
    """
    return nccl_env_notes(facts, peers=peers, entries=entries, route=route)[0]


def nccl_env_notes(facts: Any, *, peers: list[str] | tuple[str, ...] = (), entries: list | None = None,
                   route=None) -> tuple[list[tuple[str, str, str]], list[str]]:
    """`nccl_env`'s variables, and one sentence for each variable it did not set (so the absence is explained)."""
    if facts is None:
        return [], [sentence("launch.note.no_facts", doc=NCCL_ENV_DOC)]
    found: list[tuple[str, str, str]] = []
    notes: list[str] = []
    name, why = _socket_ifname(facts, list(peers), entries, route)
    if name:
        found.append(("NCCL_SOCKET_IFNAME", name, why))
    else:
        notes.append(sentence("launch.note.variable", name="NCCL_SOCKET_IFNAME", why=why))
    ports = getattr(facts, "ib_ports", None)
    active = [port for port in ports or [] if (port.state or "").upper() == "ACTIVE"]
    if active:
        layers = sorted({port.link_layer or "unknown link layer" for port in active})
        value = "=" + ",".join(f"{port.device}:{port.port}" for port in active)
        found.append(("NCCL_IB_HCA", value, sentence("launch.hca.why", first=said(
            "launch.hca.first", count=len(active), layers=", ".join(layers)))))
    elif ports is None:
        notes.append(sentence("launch.hca.no_facts"))
    elif not ports:
        notes.append(sentence("launch.hca.no_device"))
    else:
        states = ", ".join(f"{port.device}:{port.port} {port.state or 'unknown'}" for port in ports)
        notes.append(sentence("launch.hca.none_active", states=states))
    for name, value, _why in [item for item in found if _CONTROL.search(item[1])]:
        found.remove((name, value, _why))
        notes.append(sentence("launch.note.control", name=name, value=repr(value)))
    return found, notes


# --- text helpers -------------------------------------------------------------------------------------------------

def _one_line(text: object, lang: str = DEFAULT_LANGUAGE) -> str:
    """Text from facts (interface names, states) for a `#` comment: one line, other controls shown as `\\xNN`."""
    return printable(" ".join(in_language(text, lang).split()))


def _refuse_controls(values: list[tuple[str, str | None]]) -> None:
    """ValueError (one sentence) for the first value holding a newline or other control character: every value is
    quoted (shlex.quote, PyYAML), but a newline in a `#` comment or a name would still end the line."""
    for option, value in values:
        if value is not None and _CONTROL.search(value):
            raise ValueError(sentence("error.launch.control", option=option, value=repr(value)))


def _check(kind: str, nnodes: int, gpus_per_node: int | None, command: list[str], image: str | None, k8s_kind: str,
           port: int, name: str, reports: str = DEFAULT_REPORTS, rdzv_id: str | None = None) -> None:
    _refuse_controls([("--name", name), ("--image", image), ("--reports", reports), ("--rdzv-id", rdzv_id),
                      *((sentence("error.launch.argument"), word) for word in command)])
    if kind not in KINDS:
        raise ValueError(sentence("error.launch.kind", kind=repr(kind), kinds=", ".join(KINDS)))
    if nnodes < 1 or (gpus_per_node is not None and gpus_per_node < 1):
        raise ValueError(sentence("error.launch.counts"))
    if not 0 <= port <= 65535:
        raise ValueError(sentence("error.launch.port", port=port))
    if not command:
        raise ValueError(sentence("error.launch.no_command"))
    if kind == "k8s":
        if k8s_kind not in K8S_KINDS:
            raise ValueError(sentence("error.launch.k8s_kind", kind=repr(k8s_kind), kinds=", ".join(K8S_KINDS)))
        if not image:
            raise ValueError(sentence("error.launch.image"))
        longest = {"job": f"{name}-{nnodes - 1}",
                   "jobset": f"{name}-{_JOBSET_REPLICATED_JOB}-0-{nnodes - 1}",
                   "trainjob": f"{name}-{_JOBSET_REPLICATED_JOB}-0-{nnodes - 1}"}[k8s_kind]
        if not _DNS_LABEL.fullmatch(name) or len(longest) > 63:
            raise ValueError(sentence("error.launch.k8s_name", name=repr(name), longest=repr(longest)))
    elif not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ValueError(sentence("error.launch.name", name=repr(name)))


def free_port() -> int:
    """A TCP port free on this machine now (the kernel's pick); the rendezvous host must have it free too."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def _nproc(gpus_per_node: int | None) -> str:
    """torchrun's --nproc-per-node: the count, or torchrun's `gpu` (every GPU the node shows) where none is known."""
    return TORCHRUN_ALL_GPUS if gpus_per_node is None else str(gpus_per_node)


def _count(gpus_per_node: int | None, per_gpu: int = 1, unit: str = "", placeholder: str = GPUS_PLACEHOLDER) -> str:
    """`per_gpu` x the GPU count (with `unit`) where a number must stand, or the marked placeholder."""
    return placeholder if gpus_per_node is None else f"{per_gpu * gpus_per_node}{unit}"


def _gpus_words(gpus_per_node: int | None) -> Said:
    return (said("launch.gpus.count", gpus=gpus_per_node) if gpus_per_node is not None
            else said("launch.gpus.all", value=TORCHRUN_ALL_GPUS))


def _placeholder_note(names: tuple[str, str], tool: str) -> Said:
    """The comment that marks the placeholders a file holds where launch was not told the nodes' GPU count."""
    return said("launch.placeholders", first=names[0], second=names[1], tool=tool)


GPUREADY_MODULE = ["-m", "gpuready"]


def _one_world_program(command: list[str], reports: str) -> list[str]:
    """`bench ARGS` or `validate --between-nodes ARGS` → what torchrun runs on every node: `-m gpuready VERB ARGS
    --json --out REPORTS/FILE`. The ranks of all nodes form one group (the verb under torchrun) and rank 0 writes the
    one report: pair tests between nodes need every node in one group, as a training step does."""
    return [*GPUREADY_MODULE, *command, "--json", "--out", f"{reports}/{_one_world_file(command)}"]


def _one_world_file(command: list[str]) -> str:
    verb = command[2] if command[:2] == GPUREADY_MODULE else command[0]
    return "bench.json" if verb == "bench" else "between-nodes.json"


def _in_one_world(command: list[str]) -> bool:
    """`bench` and `validate --between-nodes` (before or after `_one_world_program`)."""
    words = command[2:] if command[:2] == GPUREADY_MODULE else command
    return words[:1] == ["bench"] or words[:1] == ["validate"] and "--between-nodes" in words


def _is_validate(command: list[str]) -> bool:
    """validate on every node by itself (its own report per node); `validate --between-nodes` is one group."""
    return command[0] == "validate" and not _in_one_world(command)


def _one_world_values(command: list[str], reports: str) -> dict:
    """The placeholders of the comment that says who writes a group's report: the verb, the folder and the file."""
    return {"verb": " ".join(command[2:4] if "--between-nodes" in command else command[2:3]), "reports": reports,
            "file": _one_world_file(command)}


HOST_NAME_SHELL = '"$(hostname)"'
SLURM_NODE_SHELL = '"${SLURMD_NODENAME:-$(hostname)}"'
"""Under Slurm a report file is named by the node's Slurm NodeName (slurmd sets SLURMD_NODENAME in every step), which
may differ from its host name (slurm.conf NodeHostname): the name `scontrol` takes back."""


def _validate_shell(command: list[str], reports: str, node: str = HOST_NAME_SHELL) -> str:
    """`python -m gpuready validate ARGS --json --out DIR/NODE.json`, `node` shell text left for the node to expand."""
    return (f"mkdir -p {shlex.quote(reports)} && exec python -m gpuready "
            f"{shlex.join(command)} --json --out {shlex.quote(reports)}/{node}.json")


def _torchrun_flags(nnodes: int, gpus_per_node: int | None, endpoint: str, rdzv_id: str) -> str:
    """The torchrun command line, with `endpoint` and `rdzv_id` already shell text (they may hold "$HEAD",
    "$SLURM_JOB_ID"): validate's rendezvous flags (the same torchrun either way) and the run's id."""
    flags = torchrun_flags(nnodes, 0, endpoint)
    flags[flags.index("--nproc-per-node") + 1] = _nproc(gpus_per_node)
    return " ".join(["torchrun", *flags, "--rdzv-id", rdzv_id])


def _shell_env(pairs: list[tuple[str, str, str]], notes: list[str], lang: str) -> list[str]:
    lines = [f"# {message('launch.script.nccl_settings', lang, doc=NCCL_ENV_DOC)}"]
    lines += [f"# {_one_line(note, lang)}" for note in notes]
    for name, value, why in pairs:
        lines += [f"# {name}: {_one_line(why, lang)}", f"export {name}={shlex.quote(value)}"]
    return lines


def _cpus_per_task(facts: Any, gpus_per_node: int | None) -> tuple[int | str, Said]:
    host = getattr(facts, "host", None)
    for field in ("cgroup_cpuset_count", "cpu_count"):
        value = getattr(host, field, None)
        if isinstance(value, int) and value > 0:
            return value, said("launch.cpus.facts", count=value, field=field.replace("_", " "))
    if gpus_per_node is None:
        return CPUS_PLACEHOLDER, said("launch.cpus.placeholder", placeholder=CPUS_PLACEHOLDER,
                                      per_gpu=DEFAULT_CPUS_PER_GPU)
    value = DEFAULT_CPUS_PER_GPU * gpus_per_node
    return value, said("launch.cpus.guess", count=value, per_gpu=DEFAULT_CPUS_PER_GPU)


# --- the three forms ----------------------------------------------------------------------------------------------

def _torchrun_text(nnodes: int, gpus_per_node: int | None, command: list[str], port: int, rdzv_id: str, facts: Any,
                   reports: str, lang: str = DEFAULT_LANGUAGE) -> str:
    pairs, notes = nccl_env_notes(facts)
    say = _comment_in(lang)
    lines = ["#!/usr/bin/env bash"]
    if _is_validate(command):
        lines += [say("launch.script.torchrun.validate", nnodes=nnodes),
                  say("launch.script.each_node_writes", reports=reports),
                  "set -euo pipefail", ""]
        lines += _shell_env(pairs, notes, lang)
        lines += ["", _validate_shell(command, reports)]
        return "\n".join(lines) + "\n"
    head_default = '"${HEAD:-127.0.0.1}"' if nnodes == 1 else \
        f'"${{HEAD:?{message("launch.script.head_missing", lang)}}}"'
    lines += [say("launch.script.torchrun.title", nnodes=nnodes, gpus=_gpus_words(gpus_per_node)),
              say("launch.script.torchrun.head"),
              say("launch.script.torchrun.head_set"),
              say("launch.script.torchrun.port", port=port),
              "set -euo pipefail",
              f"HEAD={head_default}", ""]
    lines += _shell_env(pairs, notes, lang)
    lines.append("")
    if _in_one_world(command):
        lines += [say("launch.script.bench_writes", **_one_world_values(command, reports)),
                  f"mkdir -p {shlex.quote(reports)}"]
    lines += [_torchrun_flags(nnodes, gpus_per_node, f'"$HEAD:{port}"', shlex.quote(rdzv_id)) + " "
              + shlex.join(command)]
    return "\n".join(lines) + "\n"


def _comment_in(lang: str):
    """`say(msg_id, **values)`: the catalogue's text in `lang` as one `#` comment line of a script."""
    def say(msg_id: str, **values: object) -> str:
        return f"# {_one_line(message(msg_id, lang, **values))}"
    return say


SBATCH_OPTIONS = ("--job-name", "--nodes", "--ntasks-per-node", "--gpus-per-node", "--cpus-per-task", "--output")


def _slurm_text(nnodes: int, gpus_per_node: int | None, command: list[str], port: int, name: str, facts: Any,
                reports: str, lang: str = DEFAULT_LANGUAGE) -> str:
    pairs, notes = nccl_env_notes(facts)
    cpus, cpus_why = _cpus_per_task(facts, gpus_per_node)
    say = _comment_in(lang)
    started = (say("launch.script.slurm.validate") if _is_validate(command) else
               say("launch.script.slurm.torchrun", gpus=gpus_per_node) if gpus_per_node is not None else
               say("launch.script.slurm.torchrun_all", value=TORCHRUN_ALL_GPUS))
    lines = ["#!/usr/bin/env bash",
             f"#SBATCH --job-name={name}",
             f"#SBATCH --nodes={nnodes}",
             "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --gpus-per-node={_count(gpus_per_node)}",
             f"#SBATCH --cpus-per-task={cpus}",
             "#SBATCH --output=%x-%j.out",
             started,
             say("launch.script.slurm.cpus", why=cpus_why),
             *([f"# {_one_line(_placeholder_note((GPUS_PLACEHOLDER, CPUS_PLACEHOLDER), 'sbatch'), lang)}"]
               if gpus_per_node is None else []),
             "set -euo pipefail",
             say("launch.script.slurm.srun_cpus"),
             'export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"', ""]
    lines += _shell_env(pairs, notes, lang)
    lines.append("")
    if _is_validate(command):
        lines += [say("launch.script.slurm.each_node_writes", reports=reports),
                  say("launch.script.slurm.bash_c"),
                  f"srun bash -c {shlex.quote(_validate_shell(command, reports, SLURM_NODE_SHELL))}"]
    else:
        if _in_one_world(command):
            lines += [say("launch.script.slurm.bench_writes", **_one_world_values(command, reports)),
                      f"mkdir -p {shlex.quote(reports)}"]
        lines += [say("launch.script.slurm.head_1"), say("launch.script.slurm.head_2"),
                  'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)',
                  say("launch.script.slurm.head_addr"),
                  'head_addr=$(scontrol show node "$head" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')',
                  _torchrun_flags(nnodes, gpus_per_node, f'"${{head_addr:-$head}}:{port}"', '"$SLURM_JOB_ID"').replace(
                      "torchrun", "srun torchrun", 1) + " " + shlex.join(command)]
    return "\n".join(lines) + "\n"


# --- YAML (PyYAML: a well-kept library quotes and escapes every value; comments go in a header block) -------------

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./:-]*")  # with re.fullmatch (`$` would pass a trailing newline)
_GO_YAML_BOOLS = {"y", "n"}
"""Booleans to go-yaml v2 (Kubernetes' parser) that PyYAML's YAML 1.1 resolver reads as strings, so leaves plain."""


class _ManifestDumper(yaml.SafeDumper):
    """SafeDumper that double-quotes every string that is not plainly a word. PyYAML quotes what *it* would misread,
    but leaves `1e3` or `y` plain, which go-yaml (kubectl, the API server) reads as a number or a boolean, and a
    `command` with a number in it is then refused. The style is all this decides: PyYAML still does the escaping."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    plain = _PLAIN.fullmatch(text) and text.lower() not in _GO_YAML_BOOLS
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=None if plain else '"')


_ManifestDumper.add_representer(str, _represent_str)


def _yaml_dump(document: dict) -> str:
    """One YAML document, stable and readable: keys in the order built, block style, UTF-8 as is, no folded lines."""
    return yaml.dump(document, Dumper=_ManifestDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=float("inf"))


def _yaml_doc(comments: list, document: dict, lang: str = DEFAULT_LANGUAGE) -> str:
    """`comments` (catalogue text) as `#` lines in `lang`, then the document (PyYAML cannot place a comment inside
    one)."""
    return "".join(f"# {_one_line(line, lang)}\n" for line in comments) + _yaml_dump(document)


def _k8s_env(facts: Any, nnodes: int, gpus_per_node: int | None, master: str | None,
             port: int) -> tuple[list[dict], list[Said]]:
    """PET_* for torchrun (static rendezvous) and MASTER_ADDR/PORT for code that reads them, and the header notes
    that explain them and the NCCL variables a pod is not given."""
    # The node the pod runs on (the downward API's spec.nodeName): a report names it, and `fleet --actions k8s` cordons
    # it; the pod's own host name is the pod's.
    env: list[dict] = [{"name": K8S_NODE_VARIABLE, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    notes: list[Said] = []
    if master is not None:
        notes.append(said("launch.k8s.env_pet"))
        env += [{"name": "PET_NNODES", "value": str(nnodes)},
                {"name": "PET_NPROC_PER_NODE", "value": _nproc(gpus_per_node)},
                {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": _INDEX_ANNOTATION}}},
                {"name": "PET_MASTER_ADDR", "value": master},
                {"name": "PET_MASTER_PORT", "value": str(port)},
                {"name": "MASTER_ADDR", "value": master},
                {"name": "MASTER_PORT", "value": str(port)}]
    return env, notes + [said("launch.k8s.env_note", note=note) for note in _k8s_nccl_notes(facts)]


def _k8s_nccl_notes(facts: Any) -> list:
    """Why each NCCL variable the facts suggest is left out of the pod: host facts do not describe a pod's network."""
    pairs, notes = nccl_env_notes(facts)
    if facts is None:
        return notes
    lines = []
    for name, value, why in pairs:
        first = why.said.values["first"]  # the interface or ports, without what NCCL does with them
        lines.append(said("launch.k8s.ifname" if name == "NCCL_SOCKET_IFNAME" else "launch.k8s.hca", name=name,
                          value=value, first=first))
    return lines + [note for note in notes if not note.startswith("NCCL_SOCKET_IFNAME")]


def _gpu_resources(gpus_per_node: int | None) -> dict:
    gpus = {"nvidia.com/gpu": _count(gpus_per_node)}  # a quantity: a string in the API (an int also parses)
    return {"requests": dict(gpus), "limits": dict(gpus)}


def _container(image: str, argv: list[str], env: list[dict], gpus_per_node: int | None, shm: bool) -> dict:
    container: dict = {"name": _CONTAINER, "image": image, "command": argv}
    if env:
        container["env"] = env
    container["resources"] = _gpu_resources(gpus_per_node)
    if shm:
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return container


def _shm_volume(gpus_per_node: int | None) -> dict:
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _count(gpus_per_node, SHM_GIB_PER_GPU, "Gi", SHM_PLACEHOLDER)}}


def _shm_note() -> Said:
    return said("launch.k8s.shm", per_gpu=SHM_GIB_PER_GPU, ref=SHM_REF)


def _argv(command: list[str], reports: str) -> list[str]:
    if _is_validate(command):
        return ["sh", "-c", _validate_shell(command, reports)]
    if _in_one_world(command):  # the report folder first (gpuready does not create --out's folder)
        return ["sh", "-c", f"mkdir -p {shlex.quote(reports)} && exec torchrun {shlex.join(command)}"]
    return ["torchrun", *command]


def _pod_template(image: str, argv: list[str], env: list[dict], gpus_per_node: int | None, subdomain: str | None) -> dict:
    spec: dict = {}
    if subdomain:
        spec["subdomain"] = subdomain
    spec["restartPolicy"] = "Never"
    spec["containers"] = [_container(image, argv, env, gpus_per_node, shm=True)]
    spec["volumes"] = [_shm_volume(gpus_per_node)]
    return {"spec": spec}


def _header(nnodes: int, gpus_per_node: int | None, command: list[str], k8s_kind: str, reports: str) -> list[Said]:
    lines = [said("launch.k8s.title", product=K8S_PRODUCT[k8s_kind], nnodes=nnodes, gpus=_gpus_words(gpus_per_node))]
    if gpus_per_node is None:
        lines.append(_placeholder_note((GPUS_PLACEHOLDER, SHM_PLACEHOLDER), "kubectl apply"))
    if _is_validate(command):
        lines += [said("launch.k8s.validate", reports=reports), said("launch.k8s.image")]
    if _in_one_world(command):
        lines += [said("launch.k8s.bench", **_one_world_values(command, reports))]
    return lines


def _k8s_job_text(header: list[str], nnodes: int, gpus_per_node: int | None, argv: list[str], image: str, name: str,
                  env: tuple[list[dict], list[Said]], lang: str = DEFAULT_LANGUAGE) -> str:
    env_items, env_notes = env
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"job-name": name}}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"completionMode": "Indexed", "completions": nnodes, "parallelism": nnodes, "backoffLimit": 0,
                    "template": _pod_template(image, argv, env_items, gpus_per_node, subdomain=name)}}
    service_notes = [said("launch.k8s.service", name=name), said("launch.k8s.publish")]
    job_notes = [said("launch.k8s.backoff"), *env_notes, _shm_note()]
    return _yaml_doc(header + service_notes, service, lang) + "---\n" + _yaml_doc(job_notes, job, lang)


def _k8s_jobset_text(header: list[str], nnodes: int, gpus_per_node: int | None, argv: list[str], image: str, name: str,
                     env: tuple[list[dict], list[Said]], lang: str = DEFAULT_LANGUAGE) -> str:
    env_items, env_notes = env
    job_template = {"spec": {"completionMode": "Indexed", "completions": nnodes, "parallelism": nnodes,
                             "backoffLimit": 0,
                             "template": _pod_template(image, argv, env_items, gpus_per_node, subdomain=None)}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
              "spec": {"network": {"enableDNSHostnames": True},
                       "failurePolicy": {"maxRestarts": 0},
                       "replicatedJobs": [{"name": _JOBSET_REPLICATED_JOB, "replicas": 1, "template": job_template}]}}
    notes = [said("launch.k8s.jobset_needs"),
             said("launch.k8s.jobset_network", name=name, pods=f"{name}-{_JOBSET_REPLICATED_JOB}-0-<i>.{name}"),
             *env_notes, _shm_note()]
    return _yaml_doc(header + notes, jobset, lang)


def _k8s_trainjob_text(header: list[str], nnodes: int, gpus_per_node: int | None, argv: list[str], image: str, name: str,
                       env: tuple[list[dict], list[Said]], validate: bool, lang: str = DEFAULT_LANGUAGE) -> str:
    env_items, env_notes = env
    trainer: dict = {"image": image, "command": argv, "numNodes": nnodes}
    if not validate and gpus_per_node is not None:  # unknown: the runtime's own default (one rank per GPU)
        trainer["numProcPerNode"] = gpus_per_node
    trainer["resourcesPerNode"] = _gpu_resources(gpus_per_node)
    if env_items:
        trainer["env"] = env_items
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
                "spec": {"runtimeRef": {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                                        "kind": "ClusterTrainingRuntime"},
                         "trainer": trainer}}
    notes = [said("launch.k8s.trainjob_needs", master=f"{name}-node-0-0.{name}"),
             said("launch.k8s.trainjob_shm", size=_count(gpus_per_node, SHM_GIB_PER_GPU, "Gi", SHM_PLACEHOLDER),
                  per_gpu=SHM_GIB_PER_GPU),
             *env_notes]
    return _yaml_doc(header + notes, trainjob, lang)


def _k8s_text(nnodes: int, gpus_per_node: int | None, command: list[str], image: str, k8s_kind: str, port: int, name: str,
              facts: Any, reports: str, lang: str = DEFAULT_LANGUAGE) -> str:
    validate = _is_validate(command)
    argv = _argv(command, reports)
    header = _header(nnodes, gpus_per_node, command, k8s_kind, reports)
    if k8s_kind == "job":
        env = _k8s_env(facts, nnodes, gpus_per_node, None if validate else f"{name}-0.{name}", port)
        return _k8s_job_text(header, nnodes, gpus_per_node, argv, image, name, env, lang)
    if k8s_kind == "jobset":
        master = None if validate else f"{name}-{_JOBSET_REPLICATED_JOB}-0-0.{name}"
        env = _k8s_env(facts, nnodes, gpus_per_node, master, port)
        return _k8s_jobset_text(header, nnodes, gpus_per_node, argv, image, name, env, lang)
    env = _k8s_env(facts, nnodes, gpus_per_node, None, port)  # the runtime sets PET_*
    return _k8s_trainjob_text(header, nnodes, gpus_per_node, argv, image, name, env, validate, lang)


# --- the entry points ---------------------------------------------------------------------------------------------

def launch_text(kind: str, *, nnodes: int, gpus_per_node: int | None, command: list[str], image: str | None = None,
                k8s_kind: str = "job", port: int = DEFAULT_PORT, name: str = "train", facts: Any = None,
                rdzv_id: str | None = None, reports: str = DEFAULT_REPORTS, lang: str = DEFAULT_LANGUAGE) -> str:
    """The launch file or command for `kind` (`torchrun` | `slurm` | `k8s`); ValueError (one sentence) on bad input.
    Its comments are in `lang` (the commands and values are the same in any language).

    `command`: `["train.py", ARGS...]`, or `["validate", ARGS...]` to run `python -m gpuready validate --json --out
    REPORTS/$(hostname).json` on every node instead, or `["bench", ARGS...]` to run gpuready bench as one torchrun
    group over all nodes (rank 0 writes REPORTS/bench.json). `port` 0 picks a port free on this machine. `rdzv_id` (torchrun
    only; default `<name>-<random>`); Slurm uses $SLURM_JOB_ID, Kubernetes a static rendezvous on pod 0.
    `facts`: this node's Facts, for the NCCL variables (see `nccl_env`) and Slurm's --cpus-per-task.
    `gpus_per_node` None (not told): torchrun gets `--nproc-per-node gpu`, and a number sbatch or Kubernetes needs is a
    marked placeholder (GPUS_PER_NODE, CPUS_PER_TASK, SHM_SIZE) that they refuse until it is replaced.
    """
    command = list(command)
    _check(kind, nnodes, gpus_per_node, command, image, k8s_kind, port, name, reports, rdzv_id)
    if _in_one_world(command):
        command = _one_world_program(command, reports)
    if port == 0:
        port = free_port()
    if kind == "torchrun":
        return _torchrun_text(nnodes, gpus_per_node, command, port, rdzv_id or f"{name}-{secrets.token_hex(4)}",
                              facts, reports, lang)
    if kind == "slurm":
        return _slurm_text(nnodes, gpus_per_node, command, port, name, facts, reports, lang)
    return _k8s_text(nnodes, gpus_per_node, command, image or "", k8s_kind, port, name, facts, reports, lang)


def run_local(text: str, *, env: dict[str, str] | None = None) -> int:
    """`--run`: runs the torchrun form (the exact text printed) with bash on this node; its exit code (130 on
    Ctrl-C). HEAD comes from the environment (`env` overrides it); a multi-node script without it stops at once
    with bash's message naming HEAD."""
    environ = {**os.environ, **(env or {})}
    try:
        return subprocess.run(["bash", "-c", text, "gpuready-launch"], env=environ).returncode
    except KeyboardInterrupt:
        return 130


def _target_facts(args) -> Any:
    """The facts of the nodes the job will run on: a target node's bundle (--bundle), or this machine's where the
    script runs here (--run). Otherwise none: the machine gpuready runs on (a laptop, a login node) is not the target,
    so its NICs and CPU count must not fill the script; those values stay marked parameters, each with why."""
    if args.bundle is not None:
        try:
            return build_facts(read_bundle(args.bundle))
        except BundleError as error:
            raise UsageError(said_of(error)) from None
    if not args.run:
        return None
    try:
        return gather_facts(None, fast=True)
    except Exception:  # no GPU tools here: the script runs without this machine's NCCL settings
        return None


# --- the command line ----------------------------------------------------------------------------------------------

SUMMARY = "the torchrun command, sbatch script or Kubernetes manifest to run a job"
DESCRIPTION = ("gpuready launch torchrun|slurm|k8s [options] -- train.py ARGS (or `-- validate` to run gpuready "
               "validate on every node)")


def add_arguments(parser) -> None:
    parser.add_argument("kind", choices=("torchrun", "slurm", "k8s"), help=said("cli.launch.kind"))
    groups.add(parser, "nnodes", said("cli.launch.nnodes"), default=1)
    groups.add(parser, "nproc_per_node", said("cli.launch.nproc_per_node"))
    groups.add(parser, "bundle", said("cli.launch.bundle"))
    parser.add_argument("--image", metavar="IMG", help=said("cli.launch.image"))
    parser.add_argument("--k8s-kind", choices=("job", "jobset", "trainjob"), default="job",
                        help=said("cli.launch.k8s_kind"))
    parser.add_argument("--port", type=kind.ANY_PORT, default=DEFAULT_PORT, metavar="P",
                        help=groups.with_range(said("cli.launch.port"), kind.ANY_PORT))
    parser.add_argument("--name", default="train", metavar="NAME", help=said("cli.launch.name"))
    parser.add_argument("--reports", default=DEFAULT_REPORTS, metavar="DIR", help=said("cli.launch.reports"))
    parser.add_argument("--run", action="store_true", help=said("cli.launch.run"))
    parser.add_argument("--out", type=Path, action=WritableFile, metavar="FILE", help=said("cli.launch.out"))
    groups.add_language(parser)


def write_out(path: Path, text: str) -> None:
    """`text` to `path` only whole: a hidden file in the same folder, then renamed over it, so that a failure leaves
    the old file (or none), never an empty or half one; UsageError (one sentence) where it cannot be written. A FIFO,
    a device or a folder put there since the option was checked is refused, never opened."""
    named = {"option": "--out", "path": str(path)}
    if path.is_dir():
        raise UsageError(said("report_files.is_folder", **named))
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):
        raise UsageError(said("report_files.not_regular", kind=file_kind(path.stat().st_mode), **named))
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise UsageError(said("error.launch.out_unwritten", reason=str(error.strerror or error), **named)) from None


def run(args) -> int:
    if not args.command:
        raise UsageError(said("error.launch.give_command"))
    if args.run and args.kind != "torchrun":
        raise UsageError(said("error.launch.run_torchrun_only"))
    facts = _target_facts(args)
    gpus = args.nproc_per_node or (len(facts.gpus) if facts is not None and facts.gpus else None)
    try:
        text = launch_text(args.kind, nnodes=args.nnodes, gpus_per_node=gpus, command=args.command,
                           image=args.image, k8s_kind=args.k8s_kind, port=args.port, name=args.name, facts=facts,
                           reports=args.reports, lang=choose_language(args.lang))
    except ValueError as error:
        raise UsageError(said_of(error)) from None
    if args.out is not None:
        write_out(args.out, text)
        tell(message("launch.wrote", choose_language(args.lang), path=str(args.out)))
    if args.run:
        return run_local(text)
    if args.out is not None:
        return ExitCode.READY
    print(text, end="" if text.endswith("\n") else "\n")
    return ExitCode.READY
