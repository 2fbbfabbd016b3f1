"""Every example the README and docs/*.md print runs as printed (issue 32): a newcomer pastes them first.

Each line of a code block that calls `gpuready` (or `python -m gpuready`, or `-m gpuready` under torchrun) is one
example. Every one is parsed by the real parser, so a mistyped option fails here. The README's examples also run in a
fresh scratch folder as printed (`python -m gpuready` for `gpuready`; a line with shell operators through `bash -c`),
with the files they name made there from the recorded fixtures, and must end with the exit code the README's "Exit
codes" table gives for that input. The docs' cheap examples run in-process the same way. What needs a GPU, a cluster,
the network or minutes is in PARSE_ONLY with its reason. A new example that is in neither table fails
`test_every_example_is_classified`: say what it must do.

Each verb's `--help` ends with its examples (cli/examples.py, written into docs/options.md): every one is a README or
docs example above, so it runs as printed too, and the README's commands are among them (one list).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import FIXTURES
from gpuready.cli.examples import EXAMPLES
from gpuready.cli.main import VERBS, _split, build_parser, main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CALLS = re.compile(r"(?:^|&&|\|\|?|;|-m)\s*gpuready\b")
_COMMENT = re.compile(r"\s+#\s.*$")
_OPERATORS = {"&&", "||", "|", ";", ">", ">>", "<"}
_ENGLISH = {**os.environ, "GPUREADY_LANG": "en", "COLUMNS": "200"}


def examples(page: Path) -> list[str]:
    """The lines of `page`'s code blocks that call gpuready, each without its trailing comment."""
    found = []
    for block in _BLOCK.findall(page.read_text(encoding="utf-8")):
        for line in block.splitlines():
            command = _COMMENT.sub("", line).strip()
            if _CALLS.search(command):
                found.append(command)
    return found


def gpuready_argvs(command: str) -> list[list[str]]:
    """The argument lists the command gives gpuready: each shell segment that runs it (`gpuready ARGS`,
    `python -m gpuready ARGS`, `torchrun … -m gpuready ARGS`)."""
    segments: list[list[str]] = [[]]
    for word in shlex.split(command):
        if word in _OPERATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    argvs = []
    for words in segments:
        if words[:1] == ["gpuready"]:
            argvs.append(words[1:])
        elif "-m" in words and words[words.index("-m") + 1:][:1] == ["gpuready"]:
            argvs.append(words[words.index("-m") + 2:])
    return argvs


def parse(argv: list[str]) -> None:
    """What `gpuready ARGV` does before any work: find the verb, cut a launch's job command, parse the options."""
    words, _job, _leading = _split(list(argv))
    build_parser(words[0] if words[0] in VERBS else None).parse_args(words)


# --- the inputs an example names, made from the recorded fixtures --------------------------------------------------

H200_COLLECT = FIXTURES / "h200-collect"
"""One healthy H200 recorded by `gpuready collect` (its README): nvidia-smi shows the GPU, dmesg has no Xid."""
XID79_DMESG = FIXTURES / "diagnose" / "kernel" / "akash-209-xid79-dmesg-T.txt"
"""`dmesg -T | grep NVRM` with Xid 79, 'GPU has fallen off the bus' (akash-network/support#209)."""
WATCHDOG_LOG = FIXTURES / "diagnose" / "torch" / "watchdog_pytorch_118369.log"
"""ProcessGroupNCCL's watchdog timing out an ALLREDUCE on rank 0 and 7 (pytorch/pytorch#118369)."""
FLEET_RUNS = sorted((FIXTURES / "h200-validate-timing").glob("validate-*.json"))
"""Five `validate` reports of one H200, recorded one after another (their README)."""
LLAMA31_8B = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
              "max_position_embeddings": 131072, "tie_word_embeddings": False}
"""meta-llama/Llama-3.1-8B's config.json, the keys that matter, values as published."""


def _bundle_tar(folder: Path, name: str) -> None:
    with tarfile.open(folder / name, "w:gz") as tar:
        tar.add(H200_COLLECT, arcname=name.split(".")[0])


def _fleet(folder: Path) -> None:
    (folder / "reports").mkdir()
    for number, run in enumerate(FLEET_RUNS, start=1):
        document = json.loads(run.read_text())
        document["host"] = f"node{number}"  # as each node of `launch … -- validate` names its own file
        (folder / "reports" / f"node{number}.json").write_text(json.dumps(document))


MAKERS: dict[str, Callable[[Path], None]] = {
    "node7.tar.gz": lambda folder: _bundle_tar(folder, "node7.tar.gz"),
    "node7-bundle.tar.gz": lambda folder: _bundle_tar(folder, "node7-bundle.tar.gz"),
    "rank3.err": lambda folder: shutil.copy(WATCHDOG_LOG, folder / "rank3.err"),
    "dmesg.txt": lambda folder: shutil.copy(XID79_DMESG, folder / "dmesg.txt"),
    "out.txt": lambda folder: shutil.copy(FIXTURES / "diagnose" / "recorded" / "torchrun-hang.log", folder / "out.txt"),
    "ticket-4711/": lambda folder: shutil.copytree(FIXTURES / "diagnose" / "nccl", folder / "ticket-4711",
                                                   ignore=lambda _d, names: [n for n in names if "1925" not in n]),
    "nccl_tests.txt": lambda folder: shutil.copy(FIXTURES / "diagnose" / "nccl_tests" /
                                                 "all_reduce_16x_h100_a3mega.txt", folder / "nccl_tests.txt"),
    "config.json": lambda folder: (folder / "config.json").write_text(json.dumps(LLAMA31_8B)),
    "reports/": _fleet,
    "ibstat.txt": lambda folder: shutil.copy(FIXTURES / "public" / "ib-rails" / "ibstat-nccl-tests-128.txt",
                                             folder / "ibstat.txt"),
    "nvidia-imex-ctl.txt": lambda folder: shutil.copy(FIXTURES / "mnnvl" / "imex-ctl-2-nodes-down.json",
                                                      folder / "nvidia-imex-ctl.txt"),
}
"""How each input file an example names is made in its scratch folder. Saved reports (run.json, before.json,
after.json) are `check --bundle` of the H200 collection, made once per session (`saved_reports`)."""


@dataclass(frozen=True)
class Example:
    code: int
    """The exit code the README's table gives for this input."""
    why: str
    inputs: tuple[str, ...] = ()
    shows: tuple[str, ...] = ()
    """Text the output holds (English, as GPUREADY_LANG=en)."""
    writes: dict[str, str] = field(default_factory=dict)
    """File the command writes → text it holds."""
    then: Callable[[Path], None] | None = None
    """More to check in the scratch folder afterwards."""


def _redacted_bundle(folder: Path) -> None:
    """README: `collect --out node7.tar.gz --redact` is this machine's bundle, names replaced (`host-<hash8>`)."""
    with tarfile.open(folder / "node7.tar.gz") as tar:
        manifest = next(member for member in tar.getmembers() if member.name.endswith("/manifest.json"))
        host = json.loads(tar.extractfile(manifest).read())["host"]
    assert re.fullmatch(r"host-[0-9a-f]{8}", host), host


def _highest_latency_node() -> str:
    """The node of FLEET_RUNS whose reduce-scatter latency is highest: checked from the recorded figures to be within
    the 70 % a small-message latency moves between runs of one healthy machine (knowledge/compare.toml noise_pct, from
    these same five runs), so docs/fleet.md's rule leaves it alone: five runs of one healthy H200 are five healthy
    nodes."""
    latency = {}
    for number, run in enumerate(FLEET_RUNS, start=1):
        figures = [m["value"] for m in json.loads(run.read_text())["measurements"]
                   if m["name"] == "reduce_scatter_latency_us"]
        assert len(figures) == 1
        latency[f"node{number}"] = figures[0]
    median = statistics.median(latency.values())
    worst = max(latency, key=latency.get)
    assert 1.03 * median <= latency[worst] < 1.70 * median  # above the 3 % floor, below the latency noise
    return worst


README_RUNS = {
    "gpuready check --bundle node7.tar.gz": Example(
        0, "a healthy H200 recording: the driver shows the GPU, no check fails (ready, warnings allowed)",
        inputs=("node7.tar.gz",), shows=("READY",)),
    "gpuready collect --out node7.tar.gz --redact": Example(
        0, "a bundle is written whatever tools this machine has", then=_redacted_bundle),
    "gpuready validate --device cpu --ranks 2 --quick": Example(0, "gloo on CPU ranks: collectives run, no GPU judged"),
    "gpuready diagnose rank3.err dmesg.txt": Example(
        1, "dmesg.txt holds Xid 79 (GPU fallen off the bus): a finding fails", inputs=("rank3.err", "dmesg.txt"),
        shows=("NOT READY", "79")),
    "gpuready plan --preset llama2-7b --machine 8xH100-SXM": Example(
        0, "6.7 B parameters x 16 bytes of mixed-precision Adam state = 108 GB, sharded over 8 GPUs 13.5 GB < 80 GB: "
           "a strategy fits"),
    "gpuready launch slurm --nnodes 4 --nproc-per-node 8 --out job.sbatch -- train.py --config big.yaml": Example(
        0, "a script is written", writes={"job.sbatch": "train.py --config big.yaml"}),
    "gpuready report run.json --html run.html": Example(
        0, "run.json's own code (ready with warnings)", inputs=("run.json",), writes={"run.html": "<html"}),
    "gpuready compare before.json after.json": Example(
        0, "two checks of the same recorded evidence: nothing got worse", inputs=("before.json", "after.json")),
    "gpuready fleet reports/": Example(
        0, "five recorded runs of one H200: healthy; the highest reduce-scatter latency (" + _highest_latency_node() +
        ") is within a latency's run-to-run noise", inputs=("reports/",), shows=("5 healthy",)),
}

DOCS_RUNS = {
    "gpuready launch slurm --nnodes 8 --nproc-per-node 8 --reports /shared/reports --out validate.sbatch -- validate":
        Example(0, "writes the sbatch: each node validates alone, its report named by its Slurm NodeName",
                writes={"validate.sbatch": "SLURMD_NODENAME"}),
    "gpuready launch slurm --nnodes 8 --nproc-per-node 8 --reports /shared/reports --out pairs.sbatch -- validate "
    "--between-nodes": Example(0, "writes the sbatch: one torchrun group over the allocation, rank 0's report",
                               writes={"pairs.sbatch": "/shared/reports/between-nodes.json"}),
    "gpuready diagnose ibstat.txt": Example(
        1, "NVIDIA/nccl-tests#128's ibstat: mlx5_1 Down beside an Active mlx5_0 of the same model; a finding fails",
        inputs=("ibstat.txt",), shows=("network.rail_down", "mlx5_1")),
    "gpuready diagnose nvidia-imex-ctl.txt": Example(
        1, "a 2-node IMEX domain DOWN with a node UNAVAILABLE (tests/fixtures/mnnvl): a finding fails",
        inputs=("nvidia-imex-ctl.txt",), shows=("nvlink.imex_domain", "UNAVAILABLE")),
    "gpuready launch slurm --nnodes 2 --nproc-per-node 8 --reports /shared/reports --out validate.sbatch -- validate":
        Example(0, "writes the sbatch; each node's report is named by its Slurm NodeName",
                writes={"validate.sbatch": "SLURMD_NODENAME"}),
    "gpuready diagnose rank3.err out.txt dmesg.txt": Example(
        1, "dmesg.txt holds Xid 79: a finding fails", inputs=("rank3.err", "out.txt", "dmesg.txt"), shows=("79",)),
    "gpuready diagnose ticket-4711/ node7-bundle.tar.gz": Example(
        0, "the healthy H200 bundle and an NCCL log of an init over InfiniBand without a WARN: nothing fails",
        inputs=("ticket-4711/", "node7-bundle.tar.gz")),
    "gpuready diagnose nccl_tests.txt --expect 360": Example(
        2, "338.8 GB/s at 8 GiB is 94 % of 360: nothing fails, and nccl-tests output alone does not show the GPUs "
           "(verdict unknown)", inputs=("nccl_tests.txt",), shows=("0 fail",)),
    "gpuready launch slurm --nnodes 64 --reports /shared/reports --out validate.sbatch -- validate --quick": Example(
        0, "a script is written", writes={"validate.sbatch": "validate --quick"}),
    "gpuready launch torchrun --nnodes 2 --nproc-per-node 8 -- train.py --lr 3e-4": Example(
        0, "the script goes to stdout", shows=("train.py --lr 3e-4",)),
    "gpuready launch slurm --nnodes 4 --out job.sbatch -- train.py --config big.yaml": Example(
        0, "a script is written", writes={"job.sbatch": "train.py --config big.yaml"}),
    "gpuready launch k8s --nnodes 2 --image nvcr.io/nvidia/pytorch:24.05-py3 --out job.yaml -- train.py": Example(
        0, "a manifest is written", writes={"job.yaml": "nvcr.io/nvidia/pytorch:24.05-py3"}),
    "gpuready launch slurm --nnodes 4 --out validate.sbatch -- validate --quick": Example(
        0, "a script is written", writes={"validate.sbatch": "validate --quick"}),
    "gpuready launch slurm --nnodes 4 --out bench.sbatch -- bench --preset gpt3-1.3b": Example(
        0, "a script is written", writes={"bench.sbatch": "bench --preset gpt3-1.3b"}),
    "gpuready plan --preset llama2-7b --machine 8xH100-SXM --seq 4096 --micro-batch 1": Example(
        0, "108 GB of training state over 8 x 80 GB: a strategy fits"),
    "gpuready plan --model-config ./config.json --bundle node7.tar.gz --recompute full --precision bf16": Example(
        0, "Llama-3.1-8B on the bundle's H200 (141 GB) with full recompute: a strategy fits (offload at worst)",
        inputs=("config.json", "node7.tar.gz"), shows=("8.0 B parameters",)),
    "gpuready plan --layers 12 --hidden 768 --heads 12 --vocab 50257 --nproc-per-node 8 --json": Example(
        0, "GPT-2 small (124 M parameters) fits any GPU", shows=('"schema_version"',)),
    "gpuready plan --preset llama3-70b --machine 8xH200-SXM --task infer --batch 8 --context 8192": Example(
        0, "70.6 B bf16 weights = 141 GB over 8 x 141 GB: fits"),
    "gpuready plan --preset gpt2-xl --machine 8xH100-SXM --known-batch 256 --known-lr 3e-4 --known-gpus 1": Example(
        0, "1.6 B parameters x 16 bytes = 25 GB < 80 GB: fits"),
    "gpuready check --bundle node7.tar.gz --out run.json --html run.html": Example(
        0, "the healthy H200 recording: ready", inputs=("node7.tar.gz",),
        writes={"run.json": '"schema_version"', "run.html": "<html"}),
    "gpuready collect --out node7 --fast": Example(
        0, "a bundle folder is written whatever tools this machine has", writes={"node7/manifest.json": '"host"'}),
    "gpuready report run.json --junit junit.xml": Example(
        0, "run.json's own code (ready with warnings)", inputs=("run.json",), writes={"junit.xml": "<testsuite"}),
    "gpuready compare before.json after.json --tolerance busbw=3": Example(
        0, "two checks of the same recorded evidence: nothing got worse", inputs=("before.json", "after.json")),
    "gpuready fleet reports/ --save-baseline golden.json": Example(
        0, "five recorded runs of one H200: healthy, and their baseline is written", inputs=("reports/",),
        writes={"golden.json": "reports"}),
}

_GPU = "needs a GPU (without one it exits 3, README)"
PARSE_ONLY = {
    "gpuready check": "a live check of whatever machine runs the tests",
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && gpuready check":
        "installs the package from the network; then a live check of whatever machine runs the tests",
    "gpuready validate": _GPU,
    "gpuready validate --quick": _GPU,
    "gpuready validate --only p2p,collectives --gpus 0,1": "needs two GPUs",
    "gpuready validate --device cpu --ranks 2 --quick": "run by the README's examples",
    "torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT -m gpuready validate":
        "a multi-node torchrun: a cluster",
    "gpuready burn": _GPU + "; 30 minutes",
    "gpuready burn --duration 10m": _GPU,
    "gpuready burn --duration 10m --gpus 0,3 --dtype fp64": "needs four GPUs",
    "gpuready burn --duration 20s --self-test": _GPU,
    "gpuready bench": _GPU,
    "gpuready bench --preset gpt3-760m": _GPU,
    "gpuready bench --preset gpt3-1.3b --precision amp-bf16 --micro-batch 8 --compile": _GPU,
    "gpuready bench --model-config ./config.json --recompute full --strategies fsdp2,fsdp2-noreshard": _GPU,
    "gpuready bench --device cpu --ranks 2 --preset tiny": "117 s on the 2-core CI machine; tests/test_bench_cli.py "
                                                           "runs this path",
    "gpuready bench --nnodes 2 --rdzv-endpoint 10.0.0.1:29500 --preset gpt3-1.3b": "two nodes",
    "gpuready diagnose net --peers node2,node3 --port 29500": "live probes of other nodes: the network",
    "gpuready monitor": "NVML, and runs until Ctrl-C",
    "gpuready monitor --jsonl gpu.jsonl": "NVML, and runs until Ctrl-C",
    "gpuready monitor --jsonl /var/log/gpu.jsonl --prometheus-port 9401 --quiet": "NVML, and runs until Ctrl-C",
    "gpuready check --multi-node": "a live check of whatever machine runs the tests",
    "gpuready check --bundle /shared/bundles/gpuready-bundle-node7.tar.gz --multi-node":
        "a cluster's shared folder (an absolute path outside the scratch folder)",
    "gpuready fleet /shared/reports": "a cluster's shared folder (an absolute path outside the scratch folder)",
    "gpuready fleet /shared/reports --save-baseline golden.json": "a cluster's shared folder",
    "gpuready fleet /shared/new-racks --baseline golden.json": "a cluster's shared folder",
    "gpuready fleet /shared/reports --actions slurm": "a cluster's shared folder; tests/test_fleet_actions.py holds "
                                                      "its exact output on recorded reports",
    "gpuready fleet /shared/reports --actions slurm --apply": "changes a cluster's nodes; tests/test_fleet_actions.py "
                                                              "runs it against a fake scontrol",
    "gpuready fleet /shared/reports --actions k8s": "a cluster's shared folder; tests/test_fleet_actions.py holds its "
                                                    "exact output",
}


def _all_examples() -> list[tuple[str, str]]:
    return [(page.relative_to(ROOT).as_posix(), command) for page in (README, *DOCS) for command in examples(page)]


ALL = _all_examples()


def test_examples_were_found():
    readme = [command for page, command in ALL if page == "README.md"]
    assert "gpuready fleet reports/" in readme and len(readme) >= 12
    assert {page for page, _command in ALL} >= {"docs/launch.md", "docs/plan.md", "docs/diagnose.md"}


@pytest.mark.parametrize("page, command", ALL, ids=[f"{page}: {command}" for page, command in ALL])
def test_every_example_is_classified(page, command):
    table = "README_RUNS" if page == "README.md" else "DOCS_RUNS"
    assert command in globals()[table] or command in PARSE_ONLY or command in README_RUNS, \
        f"{page}: `{command}` is in no table: add what it must do to {table}, or its reason to PARSE_ONLY"


@pytest.mark.parametrize("page, command", ALL, ids=[f"{page}: {command}" for page, command in ALL])
def test_every_example_parses(page, command):
    argvs = gpuready_argvs(command)
    assert argvs, command
    for argv in argvs:
        parse(argv)


@pytest.mark.parametrize("lang, heading", [("en", "examples:"), ("zh", "示例：")])
@pytest.mark.parametrize("verb", VERBS)
def test_every_help_ends_with_its_examples_as_written(verb, lang, heading, capsys):
    with pytest.raises(SystemExit) as ended:
        main([verb, "--help", "--lang", lang])
    assert ended.value.code == 0
    heading_line, _, block = capsys.readouterr().out.rstrip("\n").split("\n\n")[-1].partition("\n")
    assert heading_line == heading
    pasted = block.replace(" \\\n", " ").splitlines()  # a long one goes on under a shell continuation
    assert 2 <= len(pasted) <= 4 and all(f"{line} ".startswith(f"  gpuready {verb} ") for line in pasted), block
    assert [shlex.split(line) for line in pasted] == [shlex.split(command) for command in EXAMPLES[verb]]
    assert max(len(line) for line in block.splitlines()) <= 80


@pytest.mark.parametrize("command", [command for commands in EXAMPLES.values() for command in commands])
def test_every_help_example_runs_or_has_a_reason(command):
    """Each is in docs/options.md (test_cli_grammar holds the page to cli/examples.py), so it is classified and run
    as the docs' examples are; this says so of the list itself."""
    assert command in [command for page, command in ALL if page == "docs/options.md"]
    assert command in README_RUNS or command in DOCS_RUNS or command in PARSE_ONLY, command


def test_the_readme_commands_are_their_verbs_help_examples():
    readme = [command for page, command in ALL if page == "README.md" and command.startswith("gpuready ")]
    assert len(readme) >= 12
    for command in readme:
        assert command in EXAMPLES[command.split()[1]], f"README's `{command}` is not in cli/examples.py"


def test_the_inputs_hold_what_the_expected_codes_rest_on():
    """The premises of the tables' codes, read from the fixtures themselves (not from gpuready)."""
    assert "Xid" not in (H200_COLLECT / "dmesg.txt").read_text()
    assert "NVIDIA H200" in (H200_COLLECT / "nvidia-smi.txt").read_text()
    assert re.search(r"NVRM: Xid \(PCI:[0-9a-f:]+\): 79, .*fallen off the bus", XID79_DMESG.read_text())
    nccl = next((FIXTURES / "diagnose" / "nccl").glob("*1925*")).read_text()
    assert "NET/IB : Using" in nccl and "WARN" not in nccl
    rows = [line.split() for line in (FIXTURES / "diagnose" / "nccl_tests" / "all_reduce_16x_h100_a3mega.txt")
            .read_text().splitlines() if line.strip()[:1].isdigit()]
    largest = max(rows, key=lambda row: int(row[0]))
    assert int(largest[0]) == 8 << 30 and 0.9 * 360 < float(largest[7]) < 360  # out-of-place busbw, 94 % of 360


def test_a_typo_in_an_example_fails_to_parse():
    from gpuready.options import UsageError

    with pytest.raises(UsageError):
        parse(["launch", "slurm", "--nodse", "4", "--out", "job.sbatch", "--", "train.py"])
    # the job's own options after `--` are not gpuready's:
    parse(["launch", "slurm", "--nnodes", "4", "--out", "job.sbatch", "--", "train.py", "--nodse", "4"])


# --- running them --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def saved_reports(tmp_path_factory) -> dict[str, Path]:
    """before.json and after.json: two `check --bundle` runs of the H200 collection (run.json is the first)."""
    folder = tmp_path_factory.mktemp("saved")
    reports = {}
    for name in ("before.json", "after.json"):
        assert main(["check", "--bundle", str(H200_COLLECT), "--out", str(folder / name)]) == 0
        reports[name] = folder / name
    reports["run.json"] = reports["before.json"]
    return reports


def _scratch(tmp_path: Path, example: Example, saved: dict[str, Path]) -> Path:
    for name in example.inputs:
        if name in saved:
            shutil.copy(saved[name], tmp_path / name)
        else:
            MAKERS[name](tmp_path)
    return tmp_path


def _judge(command: str, example: Example, folder: Path, code: int, output: str) -> None:
    assert code == example.code, f"`{command}` exited {code}, not {example.code} ({example.why}):\n{output[-3000:]}"
    assert "Traceback" not in output
    for text in example.shows:
        assert text in output, f"`{command}`: {text!r} not in its output:\n{output[-3000:]}"
    for name, text in example.writes.items():
        assert (folder / name).is_file(), f"`{command}` wrote no {name}"
        if text:
            assert text in (folder / name).read_text(encoding="utf-8", errors="replace")
    if example.then:
        example.then(folder)


def run_as_printed(command: str, folder: Path) -> subprocess.CompletedProcess:
    """`command` in `folder` as a user runs it, `python -m gpuready` standing for `gpuready`: a simple command as its
    words, a line with shell operators through bash."""
    gpuready = [sys.executable, "-m", "gpuready"]
    words = shlex.split(command)
    if _OPERATORS.isdisjoint(words):
        argv = [*gpuready, *words[1:]] if words[0] == "gpuready" else words
    else:
        argv = ["bash", "-c", re.sub(r"(?<![\w.-])gpuready(?![\w.-])", " ".join(map(shlex.quote, gpuready)),
                                     command)]
    return subprocess.run(argv, cwd=folder, capture_output=True, text=True, env=_ENGLISH, timeout=300)


@pytest.mark.parametrize("command", README_RUNS)
def test_the_readme_example_runs_as_printed(command, tmp_path, saved_reports):
    assert command in [command for page, command in ALL if page == "README.md"]
    example = README_RUNS[command]
    folder = _scratch(tmp_path, example, saved_reports)
    result = run_as_printed(command, folder)
    _judge(command, example, folder, result.returncode, result.stdout + result.stderr)


@pytest.mark.parametrize("command", DOCS_RUNS)
def test_the_docs_example_runs(command, tmp_path, saved_reports, monkeypatch, capsys):
    """In-process (no interpreter start per example): `main` on the printed words, in the scratch folder."""
    assert command in [command for page, command in ALL if page != "README.md"]
    example = DOCS_RUNS[command]
    folder = _scratch(tmp_path, example, saved_reports)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("GPUREADY_LANG", "en")
    monkeypatch.setenv("COLUMNS", "200")
    code = main(shlex.split(command)[1:])
    captured = capsys.readouterr()
    _judge(command, example, folder, code, captured.out + captured.err)
