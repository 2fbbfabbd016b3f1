"""The commands an engineer runs first, per verb: one list that each verb's `--help` ends with ("examples:") and
that `python -m gpuready.cli.option_table` writes into docs/options.md. The README's own short list holds one of each
verb's; tests/test_examples_run.py runs every one as printed (recorded fixtures stand for the files they name)."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "check": ("gpuready check",
              "gpuready check --bundle node7.tar.gz",
              "gpuready check --bundle node7.tar.gz --out run.json --html run.html"),
    "collect": ("gpuready collect --out node7.tar.gz --redact",
                "gpuready collect --out node7 --fast"),
    "validate": ("gpuready validate --quick",
                 "gpuready validate --only p2p,collectives --gpus 0,1",
                 "gpuready validate --device cpu --ranks 2 --quick"),
    "burn": ("gpuready burn --duration 10m",
             "gpuready burn --duration 20s --self-test",
             "gpuready burn --duration 10m --gpus 0,3 --dtype fp64"),
    "monitor": ("gpuready monitor --jsonl gpu.jsonl",
                "gpuready monitor --jsonl /var/log/gpu.jsonl --prometheus-port 9401 --quiet"),
    "diagnose": ("gpuready diagnose rank3.err dmesg.txt",
                 "gpuready diagnose ticket-4711/ node7-bundle.tar.gz",
                 "gpuready diagnose nccl_tests.txt --expect 360",
                 "gpuready diagnose net --peers node2,node3 --port 29500"),
    "plan": ("gpuready plan --preset llama2-7b --machine 8xH100-SXM",
             "gpuready plan --model-config ./config.json --bundle node7.tar.gz --recompute full --precision bf16",
             "gpuready plan --preset llama3-70b --machine 8xH200-SXM --task infer --batch 8 --context 8192"),
    "launch": ("gpuready launch slurm --nnodes 4 --nproc-per-node 8 --out job.sbatch -- train.py --config big.yaml",
               "gpuready launch torchrun --nnodes 2 --nproc-per-node 8 -- train.py --lr 3e-4",
               "gpuready launch k8s --nnodes 2 --image nvcr.io/nvidia/pytorch:24.05-py3 --out job.yaml -- train.py",
               "gpuready launch slurm --nnodes 4 --out validate.sbatch -- validate --quick"),
    "bench": ("gpuready bench --preset gpt3-760m",
              "gpuready bench --preset gpt3-1.3b --precision amp-bf16 --micro-batch 8 --compile",
              "gpuready bench --device cpu --ranks 2 --preset tiny"),
    "report": ("gpuready report run.json --html run.html",
               "gpuready report run.json --junit junit.xml"),
    "compare": ("gpuready compare before.json after.json",
                "gpuready compare before.json after.json --tolerance busbw=3"),
    "fleet": ("gpuready fleet reports/",
              "gpuready fleet reports/ --save-baseline golden.json"),
}
"""verb → its examples, each a command line as a user types it (2–4 per verb)."""


WIDTH = 80
"""Columns of a help line (tests/test_i18n_cli.py holds --help to it)."""


def _pieces(command: str) -> list[str]:
    """The command's words, an option kept with the values after it (a line breaks before an option)."""
    pieces: list[str] = []
    for word in command.split(" "):
        if word.startswith("-") or not pieces or pieces[-1] == "gpuready":
            pieces.append(word)
        else:
            pieces[-1] += " " + word
    return pieces


def examples_block(verb: str, heading: str) -> str:
    """The lines `--help` ends with: the heading, then each example indented, as written: a line too long for the
    terminal goes on under a shell continuation (` \\`) before an option, so that it still runs as pasted."""
    lines = [heading]
    for command in EXAMPLES.get(verb, ()):
        line = "  "
        for piece in _pieces(command):
            if line.strip() and len(line) + 1 + len(piece) + 2 > WIDTH:
                lines.append(line + " \\")
                line = "    "
            line += ("" if not line.strip() else " ") + piece
        lines.append(line)
    return "\n".join(lines) + "\n"
