"""`gpuready launch`: golden files per kind, and real parsers (bash -n, sbatch directives, PyYAML + the kubernetes
client's models) on every generated form. Regenerate goldens with GPUREADY_UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuready.facts.types import Facts, HostFacts, IbPort, NetInterface
from gpuready.verbs import launch
from gpuready.verbs.launch import launch_text, nccl_env, run_local

GOLDEN = Path(__file__).parent / "fixtures" / "launch"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
COMMAND = ["train.py", "--lr", "3e-4", "a b"]
NASTY = ["train.py", "--msg", "it's \"quoted\" $HOME `x` a;b", "--empty", "", "yes", "3e-4", "1:20", "#x", "- y"]
BASH = shutil.which("bash")


def _facts() -> Facts:
    return Facts(host=HostFacts(cpu_count=96),
                 ib_ports=[IbPort(device="mlx5_0", port=1, state="ACTIVE", rate_gbit_per_s=400.0,
                                  link_layer="InfiniBand"),
                           IbPort(device="mlx5_1", port=1, state="DOWN", rate_gbit_per_s=None,
                                  link_layer="InfiniBand")],
                 net_interfaces=[NetInterface(name="docker0", speed_mbit_per_s=None, operstate="down",
                                              addresses=["172.17.0.1/16"], is_virtual=True),
                                 NetInterface(name="eth0", speed_mbit_per_s=100000, operstate="up",
                                              addresses=["10.0.0.5/24"]),
                                 NetInterface(name="lo", speed_mbit_per_s=None, operstate="unknown",
                                              addresses=["127.0.0.1/8"], is_virtual=True)])


CASES = {
    "torchrun.sh": dict(kind="torchrun"),
    "slurm.sbatch": dict(kind="slurm"),
    "slurm-facts.sbatch": dict(kind="slurm", facts=_facts()),
    "torchrun-validate.sh": dict(kind="torchrun", command=["validate", "--quick"]),
    "slurm-validate.sbatch": dict(kind="slurm", command=["validate", "--quick"]),
    "k8s-job.yaml": dict(kind="k8s", k8s_kind="job"),
    "k8s-job-facts.yaml": dict(kind="k8s", k8s_kind="job", facts=_facts()),
    "k8s-job-validate.yaml": dict(kind="k8s", k8s_kind="job", command=["validate", "--quick"]),
    "torchrun-bench.sh": dict(kind="torchrun", command=["bench", "--preset", "1.3B"]),
    "slurm-bench.sbatch": dict(kind="slurm", command=["bench", "--preset", "1.3B"]),
    "k8s-job-bench.yaml": dict(kind="k8s", k8s_kind="job", command=["bench", "--preset", "1.3B"]),
    "k8s-jobset.yaml": dict(kind="k8s", k8s_kind="jobset"),
    "k8s-trainjob.yaml": dict(kind="k8s", k8s_kind="trainjob"),
}


def _render(case: dict, command: list[str] | None = None) -> str:
    case = dict(case)
    kind = case.pop("kind")
    return launch_text(kind, nnodes=2, gpus_per_node=8, command=command or case.pop("command", COMMAND),
                       image=IMAGE, rdzv_id="golden", **{k: v for k, v in case.items() if k != "command"})


@pytest.mark.parametrize("filename", sorted(CASES))
def test_golden(filename):
    text = _render(CASES[filename])
    path = GOLDEN / filename
    if os.environ.get("GPUREADY_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}: run with GPUREADY_UPDATE_GOLDEN=1"
    assert text == path.read_text()


# --- shell forms ----------------------------------------------------------------------------------------------

def _bash_n(text: str, tmp_path: Path) -> None:
    if not BASH:
        pytest.skip("bash not installed")
    script = tmp_path / "launch.sh"
    script.write_text(text)
    result = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def _command_line(text: str, first_word: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(first_word + " ")]
    return line


@pytest.mark.parametrize("filename", [name for name in sorted(CASES) if not name.endswith(".yaml")])
@pytest.mark.parametrize("command", [None, NASTY], ids=["plain", "nasty"])
def test_shell_forms_parse(filename, command, tmp_path):
    if command and CASES[filename].get("command"):
        command = [CASES[filename]["command"][0], *NASTY[1:]]
    _bash_n(_render(CASES[filename], command), tmp_path)


@pytest.mark.parametrize("kind, word", [("torchrun", "torchrun"), ("slurm", "srun")])
@pytest.mark.parametrize("command", [COMMAND, NASTY], ids=["plain", "nasty"])
def test_args_survive_shell_quoting(kind, word, command):
    line = _command_line(_render({"kind": kind}, command), word)
    argv = shlex.split(line)
    assert argv[-len(command):] == command
    assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--nproc-per-node") + 1] == "8"
    assert argv[argv.index("--rdzv-backend") + 1] == "c10d"


def test_torchrun_form_is_the_brief_one():
    line = _command_line(_render({"kind": "torchrun"}), "torchrun")
    assert line == ("torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint \"$HEAD:29500\" "
                    "--rdzv-id golden train.py --lr 3e-4 'a b'")


def test_torchrun_args_reach_the_program(tmp_path):
    """The printed line, run by bash with a stub torchrun on PATH, hands the program exactly its arguments."""
    if not BASH:
        pytest.skip("bash not installed")
    stub = tmp_path / "torchrun"
    stub.write_text("#!/usr/bin/env python3\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    stub.chmod(0o755)
    text = _render({"kind": "torchrun"}, NASTY)
    result = subprocess.run([BASH, "-c", text], capture_output=True, text=True, timeout=30,
                            env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "HEAD": "10.0.0.1"})
    assert result.returncode == 0, result.stderr
    import json
    argv = json.loads(result.stdout)
    assert argv[argv.index("--rdzv-endpoint") + 1] == "10.0.0.1:29500"
    assert argv[-len(NASTY):] == NASTY


def test_run_local_runs_the_text_and_needs_head(tmp_path):
    if not BASH:
        pytest.skip("bash not installed")
    stub = tmp_path / "torchrun"
    stub.write_text("#!/bin/sh\nexit 7\n")
    stub.chmod(0o755)
    text = _render({"kind": "torchrun"})
    path = f"{tmp_path}:{os.environ['PATH']}"
    assert run_local(text, env={"PATH": path, "HEAD": "127.0.0.1"}) == 7
    environ = {key: value for key, value in os.environ.items() if key != "HEAD"}
    result = subprocess.run([BASH, "-c", text], env={**environ, "PATH": path}, capture_output=True, text=True)
    assert result.returncode != 0 and "HEAD" in result.stderr
    one_node = launch_text("torchrun", nnodes=1, gpus_per_node=1, command=COMMAND, rdzv_id="x")
    assert run_local(one_node, env={"PATH": path}) == 7  # one node: HEAD defaults to 127.0.0.1


KNOWN_SBATCH = set(launch.SBATCH_OPTIONS)


@pytest.mark.parametrize("filename", [name for name in sorted(CASES) if name.endswith(".sbatch")])
def test_sbatch_directives(filename):
    lines = _render(CASES[filename]).splitlines()
    assert lines[0].startswith("#!")
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    directives = [line for line in lines if line.startswith("#SBATCH")]
    assert all(lines.index(line) < first_command for line in directives), "an #SBATCH after the first command"
    seen = {}
    for line in directives:
        for option in shlex.split(line[len("#SBATCH"):]):
            name, _, value = option.partition("=")
            assert name in KNOWN_SBATCH and value, line
            seen[name] = value
    assert seen["--nodes"] == "2" and seen["--ntasks-per-node"] == "1" and seen["--gpus-per-node"] == "8"
    assert int(seen["--cpus-per-task"]) > 0 and seen["--job-name"] == "train"
    text = "\n".join(lines)
    assert "set -euo pipefail" in text
    if "validate" not in filename:
        assert 'scontrol show hostnames "$SLURM_JOB_NODELIST"' in text
        assert '--rdzv-id "$SLURM_JOB_ID"' in text and '--rdzv-endpoint "${head_addr:-$head}:29500"' in text


def test_slurm_cpus_from_facts():
    assert "#SBATCH --cpus-per-task=96" in _render(CASES["slurm-facts.sbatch"])


def test_validate_form_runs_on_every_node_with_its_hostname():
    text = _render(CASES["slurm-validate.sbatch"])
    line = _command_line(text, "srun")
    assert shlex.split(line)[:2] == ["srun", "bash"]
    inner = shlex.split(line)[-1]
    assert ("python -m gpuready validate --quick --json --out /shared/reports/\"${SLURMD_NODENAME:-$(hostname)}\".json"
            in inner)  # the Slurm NodeName, what scontrol takes back (tests/test_slurm_real.py runs it)
    other = launch_text("torchrun", nnodes=2, gpus_per_node=8, command=["validate"], reports="/mnt/my reports")
    assert "--out '/mnt/my reports'/\"$(hostname)\".json" in other


# --- NCCL variables --------------------------------------------------------------------------------------------

def test_nccl_env_without_facts_is_empty_and_says_so():
    assert nccl_env(None) == []
    assert "no facts about the target nodes" in _render({"kind": "torchrun"})


def test_nccl_env_from_bundle_facts():
    env = {name: (value, why) for name, value, why in nccl_env(_facts())}
    assert env["NCCL_SOCKET_IFNAME"][0] == "eth0"
    assert env["NCCL_IB_HCA"][0] == "=mlx5_0:1"  # the DOWN port is left out
    assert all(why for _, why in env.values())
    text = _render(CASES["slurm-facts.sbatch"])
    assert "export NCCL_SOCKET_IFNAME=eth0" in text and "export NCCL_IB_HCA==mlx5_0:1" in text


def test_nccl_env_follows_the_route():
    from gpuready.facts.net_interfaces import IfAddr
    import socket
    entries = [IfAddr("docker0", socket.AF_INET, "172.17.0.1", "255.255.0.0"),
               IfAddr("ens5", socket.AF_INET, "10.1.0.7", "255.255.255.0"),
               IfAddr("ib0", socket.AF_INET, "192.168.9.7", "255.255.255.0")]
    routes = {"10.1.0.8": "10.1.0.7", launch.ROUTE_PROBE_ADDRESS: "10.1.0.7"}
    env = nccl_env(Facts(), peers=["10.1.0.8"], entries=entries, route=lambda address, port: routes.get(address))
    [(name, value, why)] = env
    assert (name, value) == ("NCCL_SOCKET_IFNAME", "ens5")
    assert "routes to peer 10.1.0.8" in why and "ib0" in why  # NCCL alone would prefer ib0
    env = nccl_env(Facts(), entries=entries, route=lambda address, port: routes.get(address))
    assert "default route" in env[0][2]


def test_nccl_env_ambiguous_or_inactive():
    facts = _facts()
    facts.net_interfaces.append(NetInterface(name="eth1", speed_mbit_per_s=None, operstate="up",
                                             addresses=["10.9.0.5/24"]))
    facts.ib_ports = [IbPort(device="mlx5_0", port=1, state="DOWN", rate_gbit_per_s=None)]
    assert nccl_env(facts) == []
    text = launch_text("torchrun", nnodes=2, gpus_per_node=8, command=COMMAND, facts=facts, rdzv_id="x")
    assert "eth0, eth1" in text and "no RDMA port is ACTIVE" in text


# --- Kubernetes -------------------------------------------------------------------------------------------------

def _documents(text: str) -> list[dict]:
    yaml = pytest.importorskip("yaml")
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def _model(obj: dict, klass: str):
    pytest.importorskip("kubernetes")
    from kubernetes.client import ApiClient
    return ApiClient()._ApiClient__deserialize(obj, klass)


@pytest.mark.parametrize("filename", ["k8s-job.yaml", "k8s-job-facts.yaml", "k8s-job-validate.yaml",
                                      "k8s-job-bench.yaml"])
@pytest.mark.parametrize("command", [None, NASTY], ids=["plain", "nasty"])
def test_k8s_job_documents(filename, command):
    if command and CASES[filename].get("command"):
        command = [CASES[filename]["command"][0], *NASTY[1:]]
    service_doc, job_doc = _documents(_render(CASES[filename], command))
    service = _model(service_doc, "V1Service")
    job = _model(job_doc, "V1Job")
    assert (service.kind, service.spec.cluster_ip, service.spec.selector) == ("Service", "None", {"job-name": "train"})
    assert (job.spec.completion_mode, job.spec.completions, job.spec.parallelism) == ("Indexed", 2, 2)
    pod = job.spec.template.spec
    assert pod.subdomain == service.metadata.name
    [container] = pod.containers
    assert container.image == IMAGE
    assert container.resources.limits == {"nvidia.com/gpu": "8"} == container.resources.requests
    [volume] = pod.volumes
    assert volume.empty_dir.medium == "Memory" and volume.empty_dir.size_limit == "64Gi"
    assert [mount.mount_path for mount in container.volume_mounts] == ["/dev/shm"]
    env = {item.name: item for item in container.env or []}
    if "validate" in filename:
        assert container.command[:2] == ["sh", "-c"] and "gpuready validate" in container.command[2]
        assert "--json --out /shared/reports/" in container.command[2]
        return
    if "bench" in filename:  # one torchrun group over the pods, its arguments intact through sh -c
        assert container.command[:2] == ["sh", "-c"]
        inner = shlex.split(container.command[2])
        assert inner[:4] == ["mkdir", "-p", "/shared/reports", "&&"] and inner[4:10] == [
            "exec", "torchrun", "-m", "gpuready", "bench", *(command or ["bench", "--preset", "1.3B"])[1:2]]
        assert inner[-3:] == ["--json", "--out", "/shared/reports/bench.json"]
        assert inner[9:-3] == (command or ["bench", "--preset", "1.3B"])[1:]
        assert env["PET_NNODES"].value == "2" and env["MASTER_ADDR"].value == "train-0.train"
        return
    assert container.command == ["torchrun", *(command or COMMAND)]  # every argument a string, unchanged
    assert env["PET_NNODES"].value == "2" and env["PET_NPROC_PER_NODE"].value == "8"
    assert env["MASTER_ADDR"].value == env["PET_MASTER_ADDR"].value == "train-0.train"
    assert env["MASTER_PORT"].value == "29500"
    assert env["PET_NODE_RANK"].value_from.field_ref.field_path == launch._INDEX_ANNOTATION
    assert not any(name.startswith("NCCL_") for name in env)  # host facts do not apply inside a pod


def test_k8s_jobset_structure():
    [doc] = _documents(_render(CASES["k8s-jobset.yaml"]))
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]["name"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet", "train")
    [replicated] = doc["spec"]["replicatedJobs"]
    assert replicated["name"] == "node" and replicated["replicas"] == 1
    template = _model(replicated["template"], "V1JobTemplateSpec")
    assert (template.spec.completions, template.spec.parallelism, template.spec.completion_mode) == (2, 2, "Indexed")
    [container] = template.spec.template.spec.containers
    env = {item.name: item.value for item in container.env}
    assert env["PET_MASTER_ADDR"] == "train-node-0-0.train"
    assert container.command == ["torchrun", *COMMAND]


def test_k8s_trainjob_structure():
    [doc] = _documents(_render(CASES["k8s-trainjob.yaml"]))
    assert (doc["apiVersion"], doc["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert doc["spec"]["runtimeRef"]["name"] == "torch-distributed"
    trainer = doc["spec"]["trainer"]
    assert set(trainer) <= {"image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"}
    assert (trainer["numNodes"], trainer["numProcPerNode"], trainer["image"]) == (2, 8, IMAGE)
    assert trainer["command"] == ["torchrun", *COMMAND]
    resources = _model(trainer["resourcesPerNode"], "V1ResourceRequirements")
    assert resources.limits == {"nvidia.com/gpu": "8"}


def test_yaml_scalars_round_trip():
    yaml = pytest.importorskip("yaml")
    values = ["3e-4", "yes", "no", "on", "y", "null", "~", "1:20", "a: b", "#x", "- y", "", "it's \"q\"", "tab\there",
              "line\nbreak", "\x7f\x85", "ünï", "[x]", "{x}", "*a", "&a", "!t", "%p", "@a", "`b", "a #b", "0x1F",
              "ends:", "-", "?", "|", ">"]
    for value in values:
        assert yaml.safe_load(launch._yaml_dump({"key": value}))["key"] == value, value


MISREAD = ["yes", "on", "y", "0755", "1e3", "null", "- x", "key: value", "a # b", "#x", "1:20", "0x1F", ".inf"]


@pytest.mark.parametrize("k8s_kind", launch.K8S_KINDS)
def test_values_yaml_would_misread_stay_strings(k8s_kind):
    """Booleans, octal and exponent numbers, null, a list item, a mapping or a comment to YAML 1.1 or to go-yaml
    (kubectl): each reaches the manifest's command as the same string, and a trailing newline is refused."""
    yaml = pytest.importorskip("yaml")
    text = launch_text("k8s", nnodes=2, gpus_per_node=8, command=["train.py", *MISREAD], image=IMAGE,
                       k8s_kind=k8s_kind)
    documents = [doc for doc in yaml.safe_load_all(text) if doc["kind"] != "Service"]
    [command] = [doc["spec"]["trainer"]["command"] if doc["kind"] == "TrainJob" else
                 _containers_of(doc)[0]["command"] for doc in documents]
    assert command == ["torchrun", "train.py", *MISREAD]
    for value in ("1e3", "y", "0755"):  # quoted for go-yaml too, which reads a plain 1e3 as a float and y as true
        assert f'- "{value}"' in text, value
    with pytest.raises(ValueError, match="control character"):
        launch_text("k8s", nnodes=2, gpus_per_node=8, command=["train.py", "yes\n"], image=IMAGE, k8s_kind=k8s_kind)


def _containers_of(document: dict) -> list[dict]:
    spec = document["spec"]
    if document["kind"] == "JobSet":
        spec = spec["replicatedJobs"][0]["template"]["spec"]
    return spec["template"]["spec"]["containers"]


# --- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="mpi"), "unknown launch kind"),
    (dict(kind="k8s", image=None), "--image"),
    (dict(kind="k8s", k8s_kind="deployment"), "--k8s-kind"),
    (dict(kind="k8s", name="Train_1"), "--name"),
    (dict(kind="k8s", name="a" * 62), "63"),
    (dict(kind="torchrun", nnodes=0), "--nnodes"),
    (dict(kind="torchrun", command=[]), "no command"),
    (dict(kind="slurm", port=70000), "--port"),
])
def test_bad_input_is_one_sentence(kwargs, words):
    arguments = dict(nnodes=2, gpus_per_node=8, command=COMMAND, image=IMAGE) | kwargs
    kind = arguments.pop("kind")
    with pytest.raises(ValueError, match=re.escape(words)):
        launch_text(kind, **arguments)


def test_port_zero_picks_a_free_port():
    line = _command_line(launch_text("torchrun", nnodes=2, gpus_per_node=8, command=COMMAND, port=0, rdzv_id="x"),
                         "torchrun")
    port = int(re.search(r'"\$HEAD:(\d+)"', line).group(1))
    assert 0 < port < 65536


def test_bench_form_runs_one_group_and_its_rank_0_writes_the_report(tmp_path):
    """`launch torchrun --run -- bench` on CPU ranks: the printed script, run as is, measures 1 then 2 ranks and
    rank 0 writes REPORTS/bench.json."""
    if not BASH:
        pytest.skip("bash not installed")
    reports = tmp_path / "reports"
    result = subprocess.run([sys.executable, "-m", "gpuready", "launch", "torchrun", "--nnodes", "1",
                             "--nproc-per-node", "2", "--reports", str(reports), "--run", "--", "bench", "--device",
                             "cpu", "--preset", "tiny", "--strategies", "ddp"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    import json
    report = json.loads((reports / "bench.json").read_text())
    assert report["facts"]["bench"]["launcher"] == "torchrun"
    assert {(m["method"]["strategy"], m["method"]["world_size"]) for m in report["measurements"]
            if m["name"].endswith("_tokens_per_s")} == {("single", 1), ("ddp", 2)}
