"""Command line: parse arguments, call one function per verb, pick the renderer and the exit code."""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import signal
import stat
import socket
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready import __version__
from gpuready.model import ExitCode, worst_exit_code
from gpuready.options import (MAX_GPUS, MAX_GPUS_PER_NODE, MAX_INTERVAL_S, MAX_NODES, MAX_RANKS, MAX_RUN_S,
                              MAX_TIMEOUT_S, MAX_WATTS, file_kind, number, whole)
from gpuready.report.safe_text import tell
from gpuready.shapes import SHAPE_LIMITS
from gpuready.runner.signals import Stopped, exit_code_for, stop_signals_raise

if TYPE_CHECKING:
    from gpuready.bundle.archive import InputLimits

VERBS = ("check", "collect", "validate", "burn", "monitor", "diagnose", "plan", "launch", "bench")
BROKEN_PIPE_EXIT = 141
"""128 + SIGPIPE: what a shell reports for git or coreutils ended by SIGPIPE when their reader went away."""


NODES = whole("nodes", 1, MAX_NODES)
GPUS_PER_NODE = whole("GPUs per node", 1, MAX_GPUS_PER_NODE)
RANKS = whole("ranks", 1, MAX_RANKS)
TIMEOUT_S = number("seconds", 0, MAX_TIMEOUT_S, above_minimum=True)
INTERVAL_S = number("seconds", 0, MAX_INTERVAL_S, above_minimum=True)
WATTS = number("watts", 0, MAX_WATTS, above_minimum=True)
PORT = whole("TCP port", 1, 65_535, noun="a TCP port")
ANY_PORT = whole("TCP port", 0, 65_535, noun="a TCP port")
RUN_S = number("seconds", 0, MAX_RUN_S, above_minimum=True)
SAMPLES = whole("samples", 1, 1_000_000_000)
GB_PER_S = number("GB/s", 0, 1_000_000, above_minimum=True)
TOKENS = whole("tokens", 1, SHAPE_LIMITS["max_positions"])
MICRO_BATCH = whole("sequences", 1, 1_048_576)
GLOBAL_BATCH = whole("sequences", 1, 1 << 30)
ALL_GPUS = whole("GPUs", 1, MAX_GPUS)
LEARNING_RATE = number("learning rate", 0, 100, above_minimum=True)
ROOM_C = number("degrees Celsius", -50, 60)
PRICE_KWH = number("USD per kWh", 0, 100)
MONTHS = whole("months", 1, 600)
UTILISATION = number("the time (a share)", 0, 1, above_minimum=True)
STEPS = whole("steps", 1, 1_000_000)
WARMUP = whole("steps", 0, 1_000_000)
MEMBERS = whole("archive members", 1, 100_000_000)
MIB = whole("MiB", 1, 1 << 20)


def _shape_kind(option: str):
    """The argparse type of a model dimension option (--layers, --ffn-hidden, ...): 1 to the shape's limit."""
    field = {"kv-heads": "kv_heads", "ffn-hidden": "ffn_hidden", "ffn": "ffn_hidden"}.get(option, option)
    unit = {"layers": "layers", "hidden": "units (the model width)", "heads": "attention heads",
            "kv_heads": "key/value heads", "ffn_hidden": "units (the MLP width)", "vocab": "tokens (the vocabulary)"}
    return whole(unit[field], 1, SHAPE_LIMITS[field])
MAX_BYTES = 1 << 40
"""The largest collective size --max-bytes accepts (1 TiB)."""


def _help(text: str, kind) -> str:
    """An option's help with its type, range and unit, from the argparse type itself."""
    return f"{text}; {kind.describe}" if text else kind.describe


class UsageError(Exception):
    """A wrong option or unreadable input: one sentence, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints usage and exits 2 itself; keep it to one sentence
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpuready", description="Is this machine ready for multi-GPU PyTorch training?")
    parser.add_argument("--version", action="version", version=f"gpuready {__version__}")
    verbs = parser.add_subparsers(dest="verb", parser_class=_Parser)

    check = verbs.add_parser("check", help="inventory and static checks (default verb)")
    check.add_argument("--bundle", type=Path, help="read a support bundle (folder or .tar.gz) instead of this machine")
    check.add_argument("--fast", action="store_true", help="do not import torch (versions from package metadata)")
    check.add_argument("--expect-gpus", type=GPUS_PER_NODE, metavar="N",
                       help=_help("fail unless exactly N GPUs are visible", GPUS_PER_NODE))
    check.add_argument("--psu-watts", type=WATTS, metavar="W", help=_help("PSU capacity, to judge the power budget", WATTS))
    check.add_argument("--circuit-watts", type=WATTS, metavar="W",
                       help=_help("circuit rating, to judge the power budget", WATTS))
    check.add_argument("--multi-node", action="store_true",
                       help="the machine is for multi-node jobs: network findings decide the verdict and exit code")
    check.add_argument("--nnodes", type=NODES, metavar="N",
                       help=_help("nodes the job will span; N > 1 implies --multi-node", NODES))
    _add_input_limit_options(check, whole_run=False)
    _add_output_options(check)

    validate = verbs.add_parser("validate", help="measure compute, transfers, P2P, collectives and a DDP run")
    validate.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                          help="cuda: one rank per GPU with NCCL; cpu: gloo ranks (collectives, ddp)")
    validate.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                          help="auto: nccl on GPUs, gloo on CPUs; gloo on GPUs lets ranks share a GPU")
    validate.add_argument("--ranks", type=RANKS, metavar="N",
                          help=_help("ranks to start (default: every GPU; 2 on cpu); at most one per GPU, "
                                     "or one per usable CPU on cpu", RANKS))
    validate.add_argument("--oversubscribe", action="store_true",
                          help="allow more CPU ranks than usable CPUs (up to 4 per CPU)")
    validate.add_argument("--gpus", metavar="LIST", help="GPUs to use: NVML indices, bus ids or UUIDs, comma-separated")
    validate.add_argument("--only", metavar="LIST", help="workloads: compute,transfer,p2p,collectives,ddp")
    validate.add_argument("--quick", action="store_true", help="a smoke pass: fewer sizes and iterations")
    validate.add_argument("--exclusive", action="store_true",
                          help="fail before anything runs when another process computes on a selected GPU")
    validate.add_argument("--timeout", type=TIMEOUT_S, default=120.0, metavar="S",
                          help=_help("seconds one operation may take before its rank counts as hung (default 120)",
                                     TIMEOUT_S))
    validate.add_argument("--startup-timeout", type=TIMEOUT_S, default=300.0, metavar="S",
                          help=_help("seconds for the ranks to start and connect (default 300)", TIMEOUT_S))
    validate.add_argument("--deadline", type=RUN_S, metavar="S",
                          help=_help("seconds the whole run may take, the end included (default: start-up timeout + "
                                     "4x the printed plan, at least 120 s, + one --timeout)", RUN_S))
    validate.add_argument("--max-bytes", type=_size, metavar="SIZE",
                          help=_help("largest collective size", _size))
    validate.add_argument("--log-dir", type=Path, metavar="DIR", help="rank logs and NCCL flight-recorder dumps")
    validate.add_argument("--nnodes", type=NODES, metavar="N",
                          help=_help("run on N nodes: builds and runs the torchrun command", NODES))
    validate.add_argument("--nproc-per-node", type=RANKS, metavar="G",
                          help=_help("ranks per node with --nnodes (default: GPUs)", RANKS))
    validate.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="torchrun rendezvous endpoint with --nnodes")
    _add_output_options(validate)

    burn = verbs.add_parser("burn", help="full load on every GPU with silent-error detection and telemetry")
    burn.add_argument("--duration", default="30m",
                      help="how long the GEMM window lasts: 30m, 90s, 1h (default 30m); above 0 s, at most 168h")
    burn.add_argument("--gpus", metavar="LIST", help="GPUs to burn: NVML indices, bus ids or UUIDs")
    burn.add_argument("--dtype", choices=("bf16", "fp16", "tf32", "fp32", "fp64"),
                      help="default bf16 where every GPU has it, else fp32")
    burn.add_argument("--self-test", action="store_true", help="corrupt one result on purpose: must end in burn.errors")
    burn.add_argument("--exclusive", action="store_true",
                      help="fail before anything runs when another process computes on a selected GPU")
    burn.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    burn.add_argument("--ranks", type=RANKS, metavar="N",
                      help=_help("CPU workers with --device cpu (default 1, at most one per usable CPU); on GPUs burn "
                                 "only the first N selected GPUs", RANKS))
    burn.add_argument("--oversubscribe", action="store_true",
                      help="allow more CPU workers than usable CPUs (up to 4 per CPU)")
    burn.add_argument("--interval", type=INTERVAL_S, default=1.0, metavar="S",
                      help=_help("telemetry interval (default 1 s)", INTERVAL_S))
    burn.add_argument("--timeout", type=TIMEOUT_S, default=60.0, metavar="S",
                      help=_help("a worker silent this long counts as lost (default 60 s)", TIMEOUT_S))
    burn.add_argument("--log-dir", type=Path, metavar="DIR", help="worker logs")
    _add_output_options(burn)

    monitor = verbs.add_parser("monitor", help="watch GPU health beside a training job")
    monitor.add_argument("--interval", type=INTERVAL_S, default=1.0, metavar="S",
                         help=_help("sampling interval (default 1 s)", INTERVAL_S))
    monitor.add_argument("--jsonl", type=Path, metavar="FILE", help="append events and samples to FILE")
    monitor.add_argument("--prometheus-port", type=PORT, metavar="N",
                         help=_help("serve metrics for Prometheus on port N", PORT))
    monitor.add_argument("--prometheus-address", default="127.0.0.1", metavar="ADDR",
                         help="address the metrics server listens on (default 127.0.0.1; 0.0.0.0: every interface)")
    monitor.add_argument("--count", type=SAMPLES, metavar="N",
                         help=_help("stop after N samples (default: until Ctrl-C)", SAMPLES))
    monitor.add_argument("--quiet", action="store_true", help="no live table; events only")

    collect = verbs.add_parser("collect", help="write a support bundle of this machine")
    collect.add_argument("--out", required=True, metavar="DIR|FILE.tar.gz",
                         help="a new or empty folder (its parent must exist), or an archive name ending in .tar.gz "
                              "or .tgz (implies --tar)")
    collect.add_argument("--tar", action="store_true",
                         help="write one .tar.gz at exactly --out (NAME becomes NAME.tar.gz; never a folder)")
    collect.add_argument("--force", action="store_true",
                         help="remove the contents of the --out folder first (refused unless it holds only bundle "
                              "files), or replace an existing archive")
    collect.add_argument("--redact", action="store_true",
                         help="replace serials, UUIDs, host names (this machine's and those named in env and logs), "
                              "IP and MAC addresses by stable placeholders")
    collect.add_argument("--fast", action="store_true", help="do not import torch")

    diagnose = verbs.add_parser("diagnose", help="read pasted logs and tool outputs: cause, evidence, fix",
                                description="gpuready diagnose PATH...: files, folders or bundles (any names; "
                                            "recognised by content). gpuready diagnose net --peers HOST[,HOST]: "
                                            "live network triage towards the other nodes.")
    diagnose.add_argument("paths", nargs="+", metavar="PATH", help="files, folders, bundles; or `net`")
    diagnose.add_argument("--expect", type=GB_PER_S, metavar="GB/S",
                          help=_help("the busbw nccl-tests should reach here (where the inputs hold no topology)",
                                     GB_PER_S))
    diagnose.add_argument("--peers", metavar="HOST[,HOST]", help="with `net`: the other nodes")
    diagnose.add_argument("--port", type=PORT, default=29500, metavar="N",
                          help=_help("with `net`: the rendezvous port", PORT))
    diagnose.add_argument("--shared-path", type=Path, metavar="DIR",
                          help="with `net`: a folder every node should see with the same content")
    _add_input_limit_options(diagnose, whole_run=True)
    _add_output_options(diagnose)

    plan = verbs.add_parser("plan", help="does the model fit, with which strategy, how fast; batch/LR, power, cost")
    model = plan.add_argument_group("model (a preset, a Hugging Face config.json, or its shape)")
    model.add_argument("--preset", metavar="NAME", help="gpt2-small|gpt2-medium|gpt2-large|gpt2-xl|llama2-7b|llama2-13b|"
                                                        "llama3-8b|llama3-70b")
    model.add_argument("--hf-config", type=Path, metavar="FILE",
                       help="a Hugging Face config.json (a regular file, at most 1 MiB)")
    model.add_argument("--family", choices=("gpt2", "llama"), default="gpt2")
    for name in ("layers", "hidden", "heads", "kv-heads", "ffn-hidden", "vocab"):
        kind = _shape_kind(name)
        model.add_argument(f"--{name}", type=kind, metavar="N", help=kind.describe)
    run = plan.add_argument_group("training run")
    run.add_argument("--seq", type=TOKENS, default=1024, metavar="S", help=_help("default 1024", TOKENS))
    run.add_argument("--micro-batch", type=MICRO_BATCH, default=1, metavar="B", help=_help("default 1", MICRO_BATCH))
    run.add_argument("--global-batch", type=GLOBAL_BATCH, metavar="B", help=GLOBAL_BATCH.describe)
    run.add_argument("--precision", choices=("amp-bf16", "bf16"), default="amp-bf16")
    run.add_argument("--optimizer", choices=("adamw", "sgd", "adafactor"), default="adamw")
    run.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    run.add_argument("--attention", choices=("flash", "eager"), default="flash")
    run.add_argument("--strategy", metavar="NAME", help="only this strategy (ddp, zero1, zero2, fsdp, tp=2, ...)")
    run.add_argument("--task", choices=("train", "infer"), default="train")
    run.add_argument("--batch", type=MICRO_BATCH, default=1, metavar="B",
                     help=_help("with --task infer: concurrent sequences", MICRO_BATCH))
    run.add_argument("--context", type=TOKENS, metavar="S",
                     help=_help("with --task infer: context length (default --seq)", TOKENS))
    where = plan.add_argument_group("machine (default: this one)")
    where.add_argument("--machine", metavar="COUNTxMODEL", help="a machine described: 8xH100-SXM, 2xRTX4090")
    where.add_argument("--bundle", type=Path, metavar="PATH", help="the machine of a support bundle")
    where.add_argument("--gpus", type=ALL_GPUS, metavar="N", help=_help("plan for N of this machine's GPUs", ALL_GPUS))
    where.add_argument("--nodes", type=NODES, default=1, metavar="N", help=_help("default 1", NODES))
    where.add_argument("--measured", type=Path, metavar="REPORT",
                       help="a validate report (--out): its TFLOP/s, busbw and host copy figures replace assumptions")
    scale = plan.add_argument_group("batch and learning rate from a known-good run")
    scale.add_argument("--known-batch", type=GLOBAL_BATCH, metavar="B", help=GLOBAL_BATCH.describe)
    scale.add_argument("--known-lr", type=LEARNING_RATE, metavar="LR", help=LEARNING_RATE.describe)
    scale.add_argument("--known-gpus", type=ALL_GPUS, metavar="N", help=ALL_GPUS.describe)
    money = plan.add_argument_group("power and cost")
    money.add_argument("--psu-watts", type=WATTS, metavar="W", help=WATTS.describe)
    money.add_argument("--circuit", metavar="230V16A|120V20A|household")
    money.add_argument("--room-c", type=ROOM_C, metavar="C", help=ROOM_C.describe)
    money.add_argument("--price-kwh", type=PRICE_KWH, metavar="PRICE", help=PRICE_KWH.describe)
    money.add_argument("--horizon-months", type=MONTHS, default=36, metavar="M", help=_help("default 36", MONTHS))
    money.add_argument("--utilisation", type=UTILISATION, default=0.6, metavar="0..1",
                       help=_help("share of the time the GPUs work (default 0.6)", UTILISATION))
    money.add_argument("--prices", type=Path, metavar="FILE",
                       help="a TOML file of prices overriding the defaults (a regular file, at most 1 MiB)")
    _add_output_options(plan)

    bench = verbs.add_parser("bench", help="does adding GPUs make a real training step faster here?")
    bench.add_argument("--preset", default=None, metavar="NAME",
                       help="tiny|125M|350M|760M|1.3B|2.7B|7B|8B-llama (default 125M; tiny with --device cpu)")
    bench.add_argument("--model-config", type=Path, metavar="FILE",
                       help="a Hugging Face config.json (no weights; a regular file, at most 1 MiB)")
    bench.add_argument("--family", choices=("gpt2", "llama"), default="gpt2")
    for name in ("layers", "hidden", "heads", "kv-heads", "ffn", "vocab"):
        kind = _shape_kind(name)
        bench.add_argument(f"--{name}", type=kind, metavar="N", help=kind.describe)
    bench.add_argument("--seq", type=TOKENS, metavar="S", help=_help("default 2048 (32 for tiny)", TOKENS))
    bench.add_argument("--micro-batch", type=MICRO_BATCH, default=4, metavar="B",
                       help=_help("per GPU, the same in every run", MICRO_BATCH))
    bench.add_argument("--global-batch", type=GLOBAL_BATCH, metavar="B",
                       help=_help("strong scaling by gradient accumulation", GLOBAL_BATCH))
    bench.add_argument("--precision", choices=("amp-bf16", "bf16"), default="amp-bf16")
    bench.add_argument("--recompute", choices=("none", "full"), default="none")
    bench.add_argument("--compile", action="store_true", help="torch.compile the model")
    bench.add_argument("--steps", type=STEPS, default=20, metavar="N", help=_help("measured steps (after --warmup)", STEPS))
    bench.add_argument("--warmup", type=WARMUP, default=5, metavar="N", help=_help("default 5", WARMUP))
    bench.add_argument("--strategies", default="ddp,fsdp2", metavar="LIST", help="multi-GPU runs: ddp, fsdp2, "
                                                                                  "fsdp2-noreshard")
    bench.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    bench.add_argument("--ranks", type=RANKS, metavar="N", help=_help("GPUs (default all) or CPU ranks (default 2)", RANKS))
    bench.add_argument("--oversubscribe", action="store_true")
    bench.add_argument("--exclusive", action="store_true",
                       help="fail before anything runs when another process computes on a selected GPU")
    bench.add_argument("--timeout", type=TIMEOUT_S, default=300.0, metavar="S",
                       help=_help("longest one step may take (default 300)", TIMEOUT_S))
    bench.add_argument("--startup-timeout", type=TIMEOUT_S, default=300.0, metavar="S",
                       help=_help("longest the ranks may take to start and form their group (default 300)", TIMEOUT_S))
    bench.add_argument("--nnodes", type=NODES, metavar="N",
                       help=_help("run on N nodes through torchrun (the same command on every node)", NODES))
    bench.add_argument("--nproc-per-node", type=RANKS, metavar="G",
                       help=_help("ranks per node with --nnodes (default: GPUs)", RANKS))
    bench.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="torchrun rendezvous endpoint with --nnodes")
    bench.add_argument("--validate-report", type=Path, metavar="FILE",
                       help="MFU against the matmul rate this validate report measured (default: the rate the "
                            "1-GPU run measures)")
    bench.add_argument("--data", action="store_true", help="also: DataLoader throughput by worker count against what "
                                                              "the GPUs consume")
    bench.add_argument("--data-path", type=Path, metavar="DIR", help="also: read this folder's files against what "
                                                                   "training needs")
    bench.add_argument("--log-dir", type=Path, metavar="DIR")
    _add_output_options(bench)

    launch = verbs.add_parser("launch", help="the torchrun command, sbatch script or Kubernetes manifest to run a job",
                              description="gpuready launch torchrun|slurm|k8s [options] -- train.py ARGS "
                                          "(or `-- validate` to run gpuready validate on every node)")
    launch.add_argument("kind", choices=("torchrun", "slurm", "k8s"))
    launch.add_argument("--nnodes", type=NODES, default=1, metavar="N", help=_help("default 1", NODES))
    launch.add_argument("--gpus-per-node", type=GPUS_PER_NODE, metavar="G",
                        help=_help("default: the GPUs of this machine", GPUS_PER_NODE))
    launch.add_argument("--image", metavar="IMG", help="container image (k8s; slurm with pyxis)")
    launch.add_argument("--k8s-kind", choices=("job", "jobset", "trainjob"), default="job")
    launch.add_argument("--port", type=ANY_PORT, default=29500, metavar="P",
                        help=_help("rendezvous port (0: a free one here)", ANY_PORT))
    launch.add_argument("--name", default="train", metavar="NAME")
    launch.add_argument("--reports", default="/shared/reports", metavar="DIR",
                        help="with `-- validate`: the shared folder each node writes its report to")
    launch.add_argument("--run", action="store_true", help="torchrun: run it here instead of printing it")
    return parser


def _add_input_limit_options(parser: argparse.ArgumentParser, *, whole_run: bool) -> None:
    """What is read of the inputs (README, "Input limits"): the defaults keep a run under 500 MB of memory."""
    from gpuready.bundle.archive import DEFAULT_LIMITS, MIB as BYTES_PER_MIB
    limits = parser.add_argument_group("input limits")
    limits.add_argument("--max-members", type=MEMBERS, metavar="N", default=DEFAULT_LIMITS.max_members,
                        help=_help(f"archive members and folder entries looked at (default {DEFAULT_LIMITS.max_members})",
                                   MEMBERS))
    for name, field, what in (
            ("--max-archive-mib", "max_archive_bytes", "inflated from one archive or compressed file"),
            ("--max-file-mib", "max_file_bytes", "read of one tool output parsed whole"),
            ("--max-held-mib", "max_held_bytes", "of all tool outputs parsed whole, together"),
            *((("--max-input-mib", "max_input_bytes", "read from all inputs in one run"),) if whole_run else ())):
        default_mib = getattr(DEFAULT_LIMITS, field) // BYTES_PER_MIB
        limits.add_argument(name, type=MIB, metavar="MIB", dest=field, default=default_mib,
                            help=_help(f"MiB {what} (default {default_mib})", MIB))


def _input_limits(args: argparse.Namespace) -> InputLimits:
    from gpuready.bundle.archive import DEFAULT_LIMITS, MIB as BYTES_PER_MIB, InputLimits
    in_bytes = {name: getattr(args, name) * BYTES_PER_MIB for name in
                ("max_archive_bytes", "max_file_bytes", "max_held_bytes", "max_input_bytes") if hasattr(args, name)}
    return InputLimits(**{**DEFAULT_LIMITS.__dict__, **in_bytes, "max_members": args.max_members})


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print only the JSON report")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="also write the JSON report to FILE, a regular file whose folder exists (checked "
                             "before any work), or - for the JSON alone on stdout")
    parser.add_argument("--fail-on", choices=("fail", "warn"), default="fail", help="warn: warnings exit 1 too")
    parser.add_argument("--verbose", "-v", action="store_true", help="list skipped checks too")
    parser.add_argument("--lang", choices=("en", "zh"), default="en", help="labels in English or Chinese (zh)")


def _size(text: str) -> int:
    """--max-bytes: 64M, 1G, 4096 ...; from 1 byte to 1 TiB."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1] if value and value[-1] in "KMGT" else ""
    digits = value[:-1] if unit else value
    if len(digits) > 20 or not re.fullmatch(r"\d+(\.\d+)?", digits.strip()):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a size like 64M or 1G (1 byte to 1T)")
    size = int(float(digits) * units[unit])
    if not 1 <= size <= MAX_BYTES:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a size from 1 byte to 1T")
    return size


_size.describe, _size.minimum, _size.maximum, _size.above_minimum = (  # type: ignore[attr-defined]
    "a size in bytes from 1 to 1T (e.g. 64M, 1G)", 1, MAX_BYTES, False)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, so that a reader gone away is seen now and not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except SystemExit as error:
        if isinstance(error.__context__, BrokenPipeError):  # rich's Console.on_broken_pipe exits 1: the same case
            return _reader_gone()
        raise


def _reader_gone() -> int:
    """`gpuready check | head -1`: the reader has what it wanted. Stop quietly, as git and coreutils do when
    SIGPIPE ends them (a shell shows 141 for them too); stdout goes to /dev/null so that Python's own flush at
    exit does not complain. --out, written before anything is printed, is complete."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return BROKEN_PIPE_EXIT


def _main(argv: list[str] | None) -> int:
    # torch warns on import where numpy is absent; gpuready needs no numpy (the [torch] extra brings it anyway)
    warnings.filterwarnings("ignore", message=r"Failed to initialize NumPy", category=UserWarning)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in VERBS + ("-h", "--help", "--version"):
        argv = ["check", *argv]
    command: list[str] = []
    if argv[:1] == ["launch"] and "--" in argv:  # what follows `--` is the job's own command line, untouched
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    try:
        args = build_parser().parse_args(argv)
        args.command = command
        if args.verb == "collect":
            return _collect(args)
        if args.verb in ("validate", "burn", "bench"):
            with stop_signals_raise():  # SIGTERM/SIGHUP: the ranks are stopped and the partial report written
                if args.verb == "bench":
                    return _bench(args, argv)
                return _validate(args, argv) if args.verb == "validate" else _burn(args)
        if args.verb == "diagnose":
            return _diagnose(args)
        if args.verb == "plan":
            return _plan(args)
        if args.verb == "launch":
            return _launch(args)
        if args.verb == "monitor":
            from gpuready.verbs.monitor import run_monitor
            return run_monitor(interval_s=args.interval, jsonl=args.jsonl, prometheus_port=args.prometheus_port,
                               count=args.count, quiet=args.quiet, prometheus_address=args.prometheus_address)
        return _check(args)
    except UsageError as error:
        tell(error)
        return ExitCode.USAGE
    except BrokenPipeError:
        raise
    except KeyboardInterrupt:
        tell("interrupted")
        return ExitCode.INTERRUPTED
    except Stopped as stop:  # before any rank started: nothing measured
        tell(f"stopped by {stop.name} before anything was measured")
        return exit_code_for(stop.name)
    except Exception as error:  # a bug of ours: one sentence, exit 3; GPUREADY_DEBUG=1 shows the traceback
        if os.environ.get("GPUREADY_DEBUG"):
            raise
        tell(f"internal error ({type(error).__name__}: {error}); rerun with GPUREADY_DEBUG=1 and "
             "report it")
        return ExitCode.TOOL_ERROR


def _check(args: argparse.Namespace) -> int:
    from gpuready.bundle.reader import BundleError, read_bundle
    from gpuready.checks.registry import CheckOptions
    from gpuready.verbs.check import check_files, check_report, gather_facts

    for name in ("expect_gpus", "psu_watts", "circuit_watts", "nnodes"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number, not {value:g}")
    _check_out(args)
    options = CheckOptions(expect_gpus=args.expect_gpus, psu_watts=args.psu_watts, circuit_watts=args.circuit_watts)
    judged = {"fail_on_warn": args.fail_on == "warn", "multi_node": args.multi_node or (args.nnodes or 1) > 1}
    try:
        if args.bundle is not None:  # a bundle's files may come from several machines: judged one by one
            report, _facts = check_files(read_bundle(args.bundle, _input_limits(args)), options, **judged)
        else:
            report = check_report(gather_facts(None, fast=args.fast), options, **judged)
    except BundleError as error:
        raise UsageError(str(error)) from None
    return _emit(report, args)


def _check_out(args: argparse.Namespace) -> None:
    """--out, before any work: its folder must exist (it is not created) and take a new file."""
    out: Path | None = getattr(args, "out", None)
    if out is None:
        return
    if str(out) == "-":  # the JSON report on stdout, alone
        args.out, args.json = None, True
        return
    folder = out.parent
    try:
        if out.is_dir():
            raise UsageError(f"--out {out} is a folder; give the report's file name")
        if out.exists() and not stat.S_ISREG(out.stat().st_mode):
            raise UsageError(f"--out {out} is not a regular file ({file_kind(out.stat().st_mode)}); give a file "
                             "name or - for stdout")
        if not folder.is_dir():
            raise UsageError(f"--out {out}: the folder {folder} does not exist (gpuready does not create it)")
        if out.exists() and not os.access(out, os.W_OK):
            raise UsageError(f"--out {out} exists and is not writable")
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuready-out-", suffix=".tmp"):
            pass
    except OSError as error:
        raise UsageError(f"--out {out}: cannot write in {folder} ({error.strerror or error})") from None


def _check_log_dir(args: argparse.Namespace) -> None:
    """--log-dir, before any work: created if absent (it is the output folder), and writable."""
    log_dir: Path | None = getattr(args, "log_dir", None)
    if log_dir is None:
        return
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=log_dir, prefix=".gpuready-", suffix=".tmp"):
            pass
    except OSError as error:
        raise UsageError(f"--log-dir {log_dir}: cannot write there ({error.strerror or error})") from None


def _write_report(document: str, args: argparse.Namespace) -> str | None:
    """Write --out; the reason it failed (one sentence), or None."""
    if args.out:
        try:  # a FIFO or a device put there since _check_out would block or never end: refused, never opened
            if args.out.exists() and not stat.S_ISREG(args.out.stat().st_mode):
                return f"{args.out} is no longer a regular file ({file_kind(args.out.stat().st_mode)})"
            args.out.write_text(document)
        except OSError as error:
            return f"cannot write the report to {args.out} ({error.strerror or error})"
    return None


def _emit(report, args: argparse.Namespace) -> int:
    report.fail_on_warn = args.fail_on == "warn"
    document = json.dumps(report.to_dict(), indent=1, allow_nan=False)  # strict JSON: to_dict writes no NaN
    problem = _write_report(document, args)
    if args.json:
        print(document)
    else:
        from gpuready.report.console import render_console
        render_console(report.to_dict(), verbose=args.verbose, lang=args.lang)
    code = report.exit_code()
    if problem:  # nothing measured is lost: the JSON goes to stdout instead, and the exit code says 2 at least
        tell(f"{problem}; the JSON report is on stdout instead")
        if not args.json:
            print(document)
        code = worst_exit_code(code, ExitCode.USAGE)
    sys.stdout.flush()  # under torchrun rank 0 may leave through os._exit right after
    return int(code)


def _validate(args: argparse.Namespace, argv: list[str]) -> int:
    from gpuready.verbs import validate
    from gpuready.runner.local import SpawnError

    only = tuple(item.strip() for item in args.only.split(",")) if args.only else validate.WORKLOADS
    unknown = [item for item in only if item not in validate.WORKLOADS]
    if unknown:
        raise UsageError(f"--only: unknown workload(s) {', '.join(unknown)}; choose from {', '.join(validate.WORKLOADS)}")
    for name in ("ranks", "nnodes", "nproc_per_node"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, not {value}")
    if args.timeout <= 0 or args.startup_timeout <= 0 or (args.deadline is not None and args.deadline <= 0):
        raise UsageError("--timeout, --startup-timeout and --deadline must be positive")
    _check_out(args)
    _check_log_dir(args)
    options = validate.ValidateOptions(device=args.device, backend=args.backend, ranks=args.ranks, only=only, quick=args.quick,
                                       timeout_s=args.timeout, startup_timeout_s=args.startup_timeout,
                                       max_bytes=args.max_bytes, log_dir=args.log_dir,
                                       gpus=[item.strip() for item in args.gpus.split(",")] if args.gpus else [],
                                       oversubscribe=args.oversubscribe, exclusive=args.exclusive,
                                       deadline_s=args.deadline)
    try:
        import torch  # noqa: F401
    except ImportError:
        tell("validate needs PyTorch (pip install 'gpuready[torch]')")
        return ExitCode.TOOL_ERROR
    if args.nnodes and not args.rdzv_endpoint:
        raise UsageError("--nnodes needs --rdzv-endpoint HOST:PORT (the same on every node)")
    from gpuready.verbs.validate.run import NoGpuError, auto_device
    try:
        auto_device(args.device, "validate")  # --device auto without a GPU: exit 3, never a silent CPU run
    except NoGpuError as error:
        tell(error)
        return ExitCode.TOOL_ERROR
    if args.nnodes:
        from gpuready.verbs.validate.run import torchrun_report
        return _run_torchrun(args, argv, "validate", torchrun_report)
    if validate.under_torchrun():
        return validate.run_torchrun_rank(options, lambda report: _emit(report, args))
    try:
        device, ranks = validate.resolve_device(options)
    except (ValueError, RuntimeError) as error:
        raise UsageError(str(error)) from None
    progress = None if args.json else _progress_printer(validate.predicted_seconds(options, device, ranks),
                                                        device, ranks, options)
    try:
        report, _outcome = validate.run_local_validate(options, progress)
    except ValueError as error:
        raise UsageError(str(error)) from None
    except SpawnError as error:  # the ranks already started were stopped; nothing was measured
        tell(error)
        return ExitCode.TOOL_ERROR
    return _emit(report, args)


def _burn(args: argparse.Namespace) -> int:
    from gpuready.verbs.burn import BurnOptions, parse_duration, run_burn
    from gpuready.runner.local import SpawnError
    try:
        duration_s = parse_duration(args.duration)
    except ValueError as error:
        raise UsageError(f"--duration: {error}") from None
    if not 0 < duration_s <= MAX_RUN_S:
        raise UsageError(f"--duration {args.duration[:40]!r} is not above 0 s and at most {MAX_RUN_S / 3600:.0f}h")
    _check_out(args)
    _check_log_dir(args)
    try:
        import torch  # noqa: F401
    except ImportError:
        tell("burn needs PyTorch (pip install 'gpuready[torch]')")
        return ExitCode.TOOL_ERROR
    from gpuready.verbs.validate.run import NoGpuError, auto_device
    try:
        auto_device(args.device, "burn")  # --device auto without a GPU: exit 3, never a silent CPU run
    except NoGpuError as error:
        tell(error)
        return ExitCode.TOOL_ERROR
    options = BurnOptions(duration_s=duration_s, dtype=args.dtype, device=args.device, ranks=args.ranks,
                          gpus=[item.strip() for item in args.gpus.split(",")] if args.gpus else [],
                          self_test=args.self_test, interval_s=args.interval, timeout_s=args.timeout,
                          log_dir=args.log_dir, live=not args.json and sys.stderr.isatty(),
                          oversubscribe=args.oversubscribe, exclusive=args.exclusive)
    try:
        report = run_burn(options)
    except ValueError as error:
        raise UsageError(str(error)) from None
    except SpawnError as error:  # the workers already started were stopped; nothing was measured
        tell(error)
        return ExitCode.TOOL_ERROR
    return _emit(report, args)


def _progress_printer(predicted_s: float, device: str, ranks: int, options):
    """Print the plan, then each phase change as ranks report it (stderr; --json stays clean)."""
    import time
    started = time.monotonic()
    print(f"gpuready validate: {ranks} rank(s) on {device}, workloads {', '.join(options.only)}"
          f"{' (quick)' if options.quick else ''}; predicted about {predicted_s:.0f} s", file=sys.stderr)
    last: dict[int, str] = {}

    def show(posts) -> None:
        for rank, post in sorted(posts.items()):
            phase = post.phase
            if last.get(rank) != phase and rank == min(posts):
                try:
                    print(f"  [{time.monotonic() - started:5.1f} s] {phase}: {post.operation}", file=sys.stderr)
                except BrokenPipeError:  # nobody reads stderr any more: the run and its report go on
                    pass
            last[rank] = phase
    return show


def _run_torchrun(args: argparse.Namespace, argv: list[str], verb: str, store_node_report) -> int:
    """`gpuready validate|bench --nnodes`: torchrun runs the verb as every rank of this node; where this node hosts
    the rendezvous store it also watches the run, and `store_node_report(outcome)` writes the report if rank 0
    dies before it does."""
    import subprocess

    from gpuready.runner.torchrun import RunObserver, torchrun_command
    drop = {"--nnodes": 1, "--nproc-per-node": 1, "--rdzv-endpoint": 1}
    passed, skip = [], 0
    for item in argv[1:]:
        if skip:
            skip -= 1
            continue
        name = item.split("=", 1)[0]
        if name in drop:
            skip = 0 if "=" in item else drop[name]
            continue
        passed.append(item)
    from gpuready.verbs.validate import ValidateOptions, resolve_device
    try:
        nproc = resolve_device(ValidateOptions(device=args.device, backend=getattr(args, "backend", "auto"),
                                               ranks=args.nproc_per_node,
                                               oversubscribe=args.oversubscribe), option="--nproc-per-node")[1]
    except (ValueError, RuntimeError) as error:
        raise UsageError(str(error)) from None
    from gpuready.workloads.worker import RDZV_STORE_VARIABLE
    store, host_here, note = host_rendezvous_store(args.rdzv_endpoint, args.startup_timeout)
    tell(note)
    command = torchrun_command(args.nnodes, nproc, args.rdzv_endpoint, verb, passed,
                               rdzv_conf=None if host_here is None else f"is_host={str(host_here).lower()}")
    tell(" ".join(command))
    # The ranks build their group on the rendezvous store (RDZV_STORE_VARIABLE), so torchrun's rank-0 agent need
    # not listen with a second store on every interface (TORCH_DISABLE_SHARE_RDZV_TCP_STORE).
    env = {**os.environ, RDZV_STORE_VARIABLE: args.rdzv_endpoint, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    from gpuready.runner.local import TERMINATE_GRACE_S
    torchrun = subprocess.Popen(command, env=env)
    stopped_by: str | None = None
    observer = None
    if store is not None:  # this node hosts the store: watch the run too, in case rank 0 dies before it reports
        observer = RunObserver(verb, store, args.nnodes * nproc, args.startup_timeout)
    try:
        code = torchrun.wait()
    except (KeyboardInterrupt, Stopped) as stop:
        # torchrun passes SIGTERM on to the ranks, whose rank 0 writes the partial report; then it is waited for
        stopped_by = "SIGINT" if isinstance(stop, KeyboardInterrupt) else stop.name
        torchrun.send_signal(signal.SIGTERM)
        try:
            code = torchrun.wait(timeout=30 + TERMINATE_GRACE_S)  # torchrun's own grace before SIGKILL is 30 s
        except subprocess.TimeoutExpired:
            torchrun.kill()
            code = torchrun.wait()
    try:
        if observer is not None:  # if rank 0 died before writing the report, it is written here
            report = observer.report_if_rank0_died(args.log_dir, store_node_report, interrupted_by=stopped_by)
            if report is not None:
                tell("rank 0 ended without writing the report; written from the rendezvous store")
                return worst_exit_code(_emit(report, args), code if 0 <= code < 128 else 0)
            written = observer.rank0_exit_code()
            if written is not None:  # the run's verdict, not torchrun's view of this node's ranks
                return written
    finally:
        del store  # kept listening until this node's torchrun has left the rendezvous
    return exit_code_for(stopped_by) if stopped_by else code


def host_rendezvous_store(endpoint: str, timeout_s: float) -> tuple[object | None, bool | None, str]:
    """Host the c10d rendezvous store where the endpoint is this machine, listening on that address only.

    Returns (the store or None, what torchrun's `is_host` should be: False where another process hosts it,
    None to let torchrun decide, and the sentence to log). torchrun itself would listen on every interface.
    """
    from gpuready.runner.local import listening_store
    from gpuready.workloads.worker import RDZV_BIND_KEY
    host, _, port_text = endpoint.rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise UsageError(f"--rdzv-endpoint {endpoint!r} is not HOST:PORT")
    port = int(port_text)
    try:
        addresses = [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
    except (socket.gaierror, UnicodeError) as error:
        raise UsageError(f"--rdzv-endpoint {endpoint}: cannot resolve {host} "
                         f"({getattr(error, 'strerror', None) or error})") from None
    address = addresses[0]
    literal = _is_ip_literal(host)
    if not literal and host != "localhost" and all(_is_loopback(item) for item in addresses):
        # /etc/hosts often maps the machine's own name to 127.0.1.1: the other nodes could not reach that
        return None, None, (f"{host} resolves to the loopback address {address} here, so the other nodes could not "
                            "reach a store bound to it; torchrun hosts the rendezvous store on every interface "
                            "(give --rdzv-endpoint as this node's IP address to bind that interface only)")
    try:
        store = listening_store(address, port, timeout_s)
    except OSError as error:
        if error.errno == errno.EADDRNOTAVAIL:
            return None, False, f"the rendezvous store is hosted by {host} (another node); nothing listens here for it"
        if error.errno == errno.EADDRINUSE:
            return None, False, (f"{address}:{port} is already listened on by another process of this machine; "
                                 "joining it as the rendezvous store")
        raise UsageError(f"--rdzv-endpoint {endpoint}: cannot listen on {address}:{port} "
                         f"({error.strerror or error})") from None
    shown = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    where = f"{shown} only (hosted by gpuready on {socket.gethostname()})"
    store.set(RDZV_BIND_KEY, where)
    return store, False, f"hosting the rendezvous store on {where}"


def _is_ip_literal(text: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def _is_loopback(address: str) -> bool:
    import ipaddress
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _diagnose(args: argparse.Namespace) -> int:
    _check_out(args)
    if args.paths[0] == "net" and not Path("net").exists():
        if len(args.paths) > 1:
            raise UsageError("diagnose net takes no paths; give the other nodes with --peers HOST[,HOST]")
        peers = [peer.strip() for peer in (args.peers or "").split(",") if peer.strip()]
        if not peers:
            raise UsageError("diagnose net needs --peers HOST[,HOST] (the other nodes of the job)")
        if not 1 <= args.port <= 65535:
            raise UsageError(f"--port {args.port} is not a TCP port (1-65535)")
        from gpuready.verbs.diagnose.net import run_net
        return _emit(run_net(peers, port=args.port, shared_path=args.shared_path), args)
    if args.peers or args.shared_path:
        raise UsageError("--peers and --shared-path go with `gpuready diagnose net`")
    if args.expect is not None and args.expect <= 0:
        raise UsageError(f"--expect must be a positive GB/s figure, not {args.expect:g}")
    from gpuready.verbs.diagnose.run import InputError, diagnose
    try:
        report = diagnose(args.paths, expect_busbw_gb_per_s=args.expect, limits=_input_limits(args))
    except InputError as error:
        raise UsageError(str(error)) from None
    return _emit(report, args)


def _bench(args: argparse.Namespace, argv: list[str]) -> int:
    _check_out(args)
    _check_log_dir(args)
    for name in ("seq", "micro_batch", "global_batch", "steps", "ranks", "nnodes", "nproc_per_node"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, not {value}")
    if args.warmup < 0 or args.timeout <= 0 or args.startup_timeout <= 0:
        raise UsageError("--warmup must be 0 or more, --timeout and --startup-timeout positive")
    if args.nnodes and not args.rdzv_endpoint:
        raise UsageError("--nnodes needs --rdzv-endpoint HOST:PORT (the same on every node)")
    strategies = tuple(item.strip() for item in args.strategies.split(",") if item.strip())
    unknown = [item for item in strategies if item not in ("ddp", "fsdp2", "fsdp2-noreshard")]
    if unknown:
        raise UsageError(f"--strategies: unknown {', '.join(unknown)}; choose from ddp, fsdp2, fsdp2-noreshard")
    try:
        import torch  # noqa: F401
    except ImportError:
        tell("bench needs PyTorch (pip install 'gpuready[torch]')")
        return ExitCode.TOOL_ERROR
    from gpuready.runner.local import SpawnError
    from gpuready.verbs.bench.run import BenchError, BenchOptions, bench_shape, run_bench
    from gpuready.verbs.plan.run import PlanError
    from gpuready.verbs.validate.run import NoGpuError, auto_device
    try:
        device = auto_device(args.device, "bench")
    except NoGpuError as error:
        tell(error)
        return ExitCode.TOOL_ERROR
    shape = {key: value for key, value in (("family", args.family), ("layers", args.layers), ("hidden", args.hidden),
                                           ("heads", args.heads), ("kv_heads", args.kv_heads),
                                           ("ffn_hidden", args.ffn), ("vocab", args.vocab)) if value is not None}
    if len(shape) > 1 and not all(key in shape for key in ("layers", "hidden", "heads", "vocab")):
        raise UsageError("an explicit model needs --layers, --hidden, --heads and --vocab")
    options = BenchOptions(preset=args.preset or ("tiny" if device == "cpu" else "125M"),
                           model_config=args.model_config, shape=shape if len(shape) > 1 else {}, seq=args.seq,
                           micro_batch=args.micro_batch, global_batch=args.global_batch, precision=args.precision,
                           recompute=args.recompute, compile=args.compile, steps=args.steps,
                           warmup_steps=args.warmup, device=device, ranks=args.ranks, strategies=strategies,
                           timeout_s=args.timeout, log_dir=args.log_dir, oversubscribe=args.oversubscribe,
                           validate_report=args.validate_report, data=args.data, data_path=args.data_path,
                           startup_timeout_s=args.startup_timeout, exclusive=args.exclusive)
    from gpuready.runner.torchrun import under_torchrun
    from gpuready.verbs.bench import torchrun as bench_torchrun
    try:
        readable = args.data_path is None or (args.data_path.is_dir() and os.access(args.data_path, os.R_OK | os.X_OK))
        if not readable:
            raise UsageError(f"--data-path {args.data_path}: not a readable folder")
        if args.validate_report is not None:  # read before the runs: a bad file must not cost them
            from gpuready.verbs.plan.run import measured_figures
            measured_figures(args.validate_report, "--validate-report")
        if args.nnodes:
            bench_shape(options)  # a model that cannot be built is said here, not by every rank
            return _run_torchrun(args, argv, "bench", bench_torchrun.store_node_report(options))
        if under_torchrun():
            return bench_torchrun.run_torchrun_rank(options, lambda report: _emit(report, args))
        report = run_bench(options)
    except (BenchError, PlanError, ValueError) as error:
        raise UsageError(str(error)) from None
    except SpawnError as error:
        tell(error)
        return ExitCode.TOOL_ERROR
    return _emit(report, args)


def _plan(args: argparse.Namespace) -> int:
    from gpuready.verbs.plan.run import PlanError, PlanOptions, run_plan
    _check_out(args)
    for name in ("seq", "micro_batch", "global_batch", "gpus", "nodes", "batch", "context", "known_batch",
                 "known_gpus", "horizon_months"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, not {value}")
    if not 0 < args.utilisation <= 1:
        raise UsageError(f"--utilisation is a share of the time, above 0 and at most 1, not {args.utilisation:g}")
    power = {key: value for key, value in (("psu_w", args.psu_watts), ("circuit", args.circuit),
                                           ("room_c", args.room_c), ("price_per_kwh", args.price_kwh))
             if value is not None}
    options = PlanOptions(preset=args.preset, hf_config=args.hf_config, family=args.family, layers=args.layers,
                          hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads, ffn_hidden=args.ffn_hidden,
                          vocab=args.vocab, seq=args.seq, micro_batch=args.micro_batch,
                          global_batch=args.global_batch, gpus=args.gpus, nodes=args.nodes, machine=args.machine,
                          bundle=args.bundle, precision=args.precision, optimizer=args.optimizer,
                          recompute=args.recompute, attention=args.attention, strategy=args.strategy,
                          task=args.task, infer_batch=args.batch, context=args.context,
                          known_batch=args.known_batch, known_lr=args.known_lr, known_gpus=args.known_gpus,
                          power=power, cost={"horizon_months": args.horizon_months,
                                             "utilisation": args.utilisation}, prices=args.prices,
                          measured=args.measured)
    try:
        report = run_plan(options)
    except PlanError as error:
        raise UsageError(str(error)) from None
    return _emit(report, args)


def _launch(args: argparse.Namespace) -> int:
    from gpuready.verbs import launch
    command = args.command
    if not command:
        raise UsageError("give what to run after `--`: -- train.py ARGS, or -- validate")
    if args.nnodes < 1 or (args.gpus_per_node is not None and args.gpus_per_node < 1):
        raise UsageError("--nnodes and --gpus-per-node must be at least 1")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a TCP port")
    if args.run and args.kind != "torchrun":
        raise UsageError("--run runs the torchrun form here; slurm and k8s files are submitted by their tools")
    facts = None
    try:
        from gpuready.verbs.check import gather_facts
        facts = gather_facts(None, fast=True)
    except Exception:  # no GPU tools here: the file is written without this machine's NCCL settings
        facts = None
    gpus = args.gpus_per_node or (len(facts.gpus) if facts is not None and facts.gpus else None)
    if gpus is None:
        raise UsageError("no GPU here to count: give --gpus-per-node G")
    try:
        text = launch.launch_text(args.kind, nnodes=args.nnodes, gpus_per_node=gpus, command=command,
                                  image=args.image, k8s_kind=args.k8s_kind, port=args.port, name=args.name,
                                  facts=facts, reports=args.reports)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.run:
        return launch.run_local(text)
    print(text, end="" if text.endswith("\n") else "\n")
    return ExitCode.READY


def _collect(args: argparse.Namespace) -> int:
    from gpuready.bundle.collect import OutputError
    from gpuready.verbs.collect import run_collect
    try:
        print("gpuready: " + run_collect(args.out, as_tar=args.tar, force=args.force, fast=args.fast,
                                         redact=args.redact))
    except OutputError as error:
        raise UsageError(str(error)) from None
    return ExitCode.READY
