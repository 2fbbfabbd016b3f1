"""Issue 20: nothing hostile reaches a shell. Every value the user gives `gpuready launch` (--reports, the words
after `--`, --name, --image, --rdzv-id) is quoted in the scripts (shlex.quote) and the manifests (PyYAML); a
newline or other control character in any of them is refused with one sentence and exit 2. The scripts are run by
bash with stub torchrun / srun / scontrol / python on PATH that record their argv: no injected command runs, and
each value reaches the stub intact, as one argument."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuready.cli import main as cli
from gpuready.verbs.launch import launch_text

yaml = pytest.importorskip("yaml")
BASH = shutil.which("bash")
SH = shutil.which("sh")
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
HOSTNAME = "node-7"
STUB = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
if os.path.basename(sys.argv[0]) == "srun":  # srun runs its command (one task here)
    os.execvp(sys.argv[1], sys.argv[1:])
if os.path.basename(sys.argv[0]) == "scontrol":
    print("head-node")
if os.path.basename(sys.argv[0]) == "hostname":
    print("%s")
""" % HOSTNAME


def _words(marker: Path) -> list[str]:
    """Shell metacharacters that would run `touch MARKER` if a value reached the shell unquoted."""
    return [f"$(touch {marker})", f"`touch {marker}`", f"; touch {marker}", f"' ; touch {marker} ; '",
            f"\" ; touch {marker} ; \"", f"&& touch {marker} #", f"| touch {marker}", f"a b\\ $HOME *"]


@pytest.fixture
def shell(tmp_path):
    """Runs a script with bash (or sh) in a temp dir whose PATH starts with the stubs; returns the stubs' argv."""
    if not BASH:
        pytest.skip("bash not installed")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("torchrun", "srun", "scontrol", "python", "hostname", "sbatch"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "argv.jsonl"
    marker = tmp_path / "marker" / "PWNED"
    marker.parent.mkdir()

    def run(text: str, interpreter: str = BASH) -> list[list[str]]:
        script = tmp_path / "script"
        script.write_text(text)
        env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(log), "HEAD": "10.0.0.1",
               "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "head-node,n2", "SLURM_CPUS_PER_TASK": "96"}
        result = subprocess.run([interpreter, str(script)], cwd=work, env=env, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr
        assert not marker.exists(), "an injected command ran"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.unlink(missing_ok=True)
        return calls

    run.marker = marker
    run.work = work
    return run


def _render(kind: str, command: list[str], **options) -> str:
    return launch_text(kind, nnodes=2, gpus_per_node=8, command=command, image=IMAGE, **{"rdzv_id": "golden", **options})


def _call(calls: list[list[str]], program: str) -> list[str]:
    [argv] = [call[1:] for call in calls if call[0] == program]
    return argv


# --- shell scripts ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["torchrun", "slurm"])
def test_train_args_reach_torchrun_intact(shell, kind):
    words = _words(shell.marker)
    calls = shell(_render(kind, ["train.py", *words]))
    argv = _call(calls, "torchrun")
    assert argv[-len(words) - 1:] == ["train.py", *words]
    if kind == "slurm":
        assert _call(calls, "srun")[:1] == ["torchrun"]


@pytest.mark.parametrize("kind", ["torchrun", "slurm"])
def test_validate_reports_and_args_reach_gpuready_intact(shell, kind):
    for word in _words(shell.marker):
        calls = shell(_render(kind, ["validate", "--only", word], reports=word))
        argv = _call(calls, "python")
        assert argv == ["-m", "gpuready", "validate", "--only", word, "--json", "--out", f"{word}/{HOSTNAME}.json"]
        assert (shell.work / word).is_dir()  # mkdir -p made exactly that folder


@pytest.mark.parametrize("kind", ["torchrun", "slurm"])
def test_bench_reports_reach_torchrun_intact(shell, kind):
    for word in _words(shell.marker):
        calls = shell(_render(kind, ["bench", "--preset", word], reports=word))
        argv = _call(calls, "torchrun")
        assert argv[-7:] == ["gpuready", "bench", "--preset", word, "--json", "--out", f"{word}/bench.json"]
        assert (shell.work / word).is_dir()


def test_rdzv_id_is_one_argument(shell):
    word = _words(shell.marker)[0]
    argv = _call(shell(_render("torchrun", ["train.py"], rdzv_id=word)), "torchrun")
    assert argv[argv.index("--rdzv-id") + 1] == word


# --- Kubernetes manifests -------------------------------------------------------------------------------------------

def _containers(text: str) -> list[dict]:
    found = []
    for document in yaml.safe_load_all(text):
        spec = document["spec"]
        if document["kind"] == "TrainJob":
            found.append(spec["trainer"])
        elif document["kind"] == "Job":
            found += spec["template"]["spec"]["containers"]
        elif document["kind"] == "JobSet":
            found += spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    return found


@pytest.mark.parametrize("k8s_kind", ["job", "jobset", "trainjob"])
def test_k8s_values_round_trip_through_yaml(shell, k8s_kind):
    words = _words(shell.marker) + ["yes", "3e-4", "a: b", "#x", "- y", "{x}", "[x]", "*a", "&a", "!t", "", "é µ"]
    image = "registry.example/img:1 # $(touch x)"
    [container] = _containers(launch_text("k8s", nnodes=2, gpus_per_node=8, command=["train.py", *words],
                                          image=image, k8s_kind=k8s_kind))
    assert container["command"] == ["torchrun", "train.py", *words] and container["image"] == image
    for word in _words(shell.marker):  # the sh -c forms (validate, bench): values intact through YAML, then sh
        for command in (["validate", "--only", word], ["bench", "--preset", word]):
            [container] = _containers(launch_text("k8s", nnodes=2, gpus_per_node=8, command=command, image=IMAGE,
                                                  k8s_kind=k8s_kind, reports=word))
            assert container["command"][:2] == ["sh", "-c"]
            calls = shell(container["command"][2], SH or BASH)
            if command[0] == "validate":
                assert _call(calls, "python")[-5:] == ["--only", word, "--json", "--out", f"{word}/{HOSTNAME}.json"]
            else:
                assert _call(calls, "torchrun")[-5:] == ["--preset", word, "--json", "--out", f"{word}/bench.json"]


# --- refused: newlines and other control characters, names that are not names -----------------------------------

HOSTILE_OPTIONS = [
    (["torchrun", "--reports", "r\ntouch {marker}"], ["--", "validate"]),
    (["slurm", "--reports", "r\ntouch {marker}"], ["--", "validate"]),
    (["k8s", "--image", IMAGE, "--reports", "r\ntouch {marker}"], ["--", "validate"]),
    (["torchrun", "--reports", "r\rx"], ["--", "bench"]),
    (["torchrun"], ["--", "train.py", "--msg", "a\ntouch {marker}"]),
    (["slurm"], ["--", "train.py", "x\x1b]0;pwned\x07"]),
    (["k8s", "--image", IMAGE], ["--", "train.py", "tab\there"]),
    (["k8s", "--image", IMAGE, "--name", "train\n"], ["--", "train.py"]),
    (["k8s", "--image", IMAGE + "\n"], ["--", "train.py"]),
    (["k8s", "--image", IMAGE, "--name", "train\x85"], ["--", "train.py"]),
    (["slurm", "--name", "train\n"], ["--", "train.py"]),
    (["torchrun", "--name", "train\ntouch {marker}"], ["--", "train.py"]),
    (["slurm", "--name", "x;touch {marker}"], ["--", "train.py"]),
    (["slurm", "--name", "$(touch {marker})"], ["--", "train.py"]),
    (["k8s", "--image", IMAGE, "--name", "a`b`"], ["--", "train.py"]),
]


@pytest.mark.parametrize("options, command", HOSTILE_OPTIONS)
def test_control_characters_and_bad_names_exit_2_with_one_sentence(tmp_path, capsys, monkeypatch, options,
                                                                      command):
    import gpuready.verbs.launch as check

    def no_facts(*_args, **_kwargs):
        raise RuntimeError("no GPU tools in this test")
    monkeypatch.setattr(check, "gather_facts", no_facts)
    marker = tmp_path / "PWNED"
    argv = ["launch", *options, "--nproc-per-node", "8", *command]
    argv = [word.replace("{marker}", str(marker)) for word in argv]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert err.startswith("gpuready: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "\x1b" not in err and "\x85" not in err and "\r" not in err
    assert not marker.exists()


def test_a_trailing_newline_is_not_a_kubernetes_name():
    with pytest.raises(ValueError, match="control character"):
        launch_text("k8s", nnodes=2, gpus_per_node=8, command=["train.py"], image=IMAGE, name="train\n")
    with pytest.raises(ValueError, match="control character"):
        launch_text("torchrun", nnodes=2, gpus_per_node=8, command=["train.py"], rdzv_id="x\n")


def test_facts_with_a_control_character_set_no_nccl_variable():
    """An interface name from a bundle is text from outside: with a newline it is not exported, and the comment
    that says so stays one line."""
    from gpuready.facts.types import Facts, HostFacts, NetInterface
    facts = Facts(host=HostFacts(cpu_count=8),
                  net_interfaces=[NetInterface(name="eth0\ntouch /tmp/PWNED_x", speed_mbit_per_s=None,
                                               operstate="up", addresses=["10.0.0.5/24"])])
    for kind in ("torchrun", "slurm"):
        text = _render(kind, ["train.py"], facts=facts)
        assert "NCCL_SOCKET_IFNAME=" not in text
        assert not any(line.startswith("touch") for line in text.splitlines())
    text = launch_text("k8s", nnodes=2, gpus_per_node=8, command=["train.py"], image=IMAGE, facts=facts)
    assert not any(line.lstrip().startswith("touch") for line in text.splitlines())
    list(yaml.safe_load_all(text))
