"""`gpuready bench` on the command line: its options and the run they ask for (local, one rank under torchrun, or
the torchrun command over --nnodes nodes)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gpuready.cli import option_groups as groups
from gpuready.cli import option_kinds as kind
from gpuready.cli.output import check_log_dir, check_out, emit
from gpuready.devices import ranks_per_node
from gpuready.estimate.measured import measured_figures
from gpuready.i18n import choose_language, in_language, said, said_of
from gpuready.measuring import usable_device
from gpuready.model import ExitCode
from gpuready.options import UsageError
from gpuready.runner.local import SpawnError
from gpuready.runner.multinode import run_under_torchrun
from gpuready.runner.torchrun import under_torchrun
from gpuready.safe_text import tell
from gpuready.signals import stop_signals_raise
from gpuready.verbs.bench import torchrun as bench_torchrun
from gpuready.verbs.bench.run import BenchError, BenchOptions, bench_shape, run_bench

SUMMARY = "does adding GPUs make a real training step faster here?"
STRATEGIES = ("ddp", "fsdp2", "fsdp2-noreshard")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups.add_model(parser, default_note=said("cli.bench.preset_note"))
    train = parser.add_argument_group(said("cli.group.training_run"))
    groups.add(train, "seq", said("cli.bench.seq"))
    groups.add(train, "micro_batch", said("cli.bench.micro_batch"), default=4)
    groups.add(train, "global_batch", said("cli.bench.global_batch"))
    groups.add(train, "precision")
    groups.add(train, "recompute", choices=("none", "full"))
    groups.add(train, "logits")
    train.add_argument("--compile", action="store_true", help=said("cli.bench.compile"))
    train.add_argument("--steps", type=kind.STEPS, default=20, metavar="N",
                       help=groups.with_range(said("cli.bench.steps"), kind.STEPS))
    train.add_argument("--warmup", type=kind.WARMUP, default=5, metavar="N",
                       help=groups.with_range(said("cli.bench.warmup"), kind.WARMUP))
    groups.add(train, "strategies", said("cli.bench.strategies", strategies=", ".join(STRATEGIES)), default="ddp,fsdp2")
    groups.add(parser, "device")
    groups.add(parser, "ranks", said("cli.bench.ranks"))
    groups.add_target_gpus(parser, gpu_list=False)
    groups.add(parser, "timeout", said("cli.bench.timeout"), default=300.0)
    groups.add(parser, "startup_timeout", said("cli.bench.startup_timeout"))
    groups.add_cluster(parser, ranks_meaning=said("cli.option.nproc_per_node.ranks"))
    groups.add(parser, "validate_report", said("cli.bench.validate_report"))
    parser.add_argument("--data", action="store_true", help=said("cli.bench.data"))
    parser.add_argument("--data-path", type=Path, metavar="DIR", help=said("cli.bench.data_path"))
    groups.add(parser, "log_dir")
    groups.add_output(parser)


def run(args: argparse.Namespace) -> int:
    with stop_signals_raise():  # SIGTERM/SIGHUP: the ranks are stopped and the partial report written
        return _bench(args)


def _bench(args: argparse.Namespace) -> int:
    lang = choose_language(args.lang)
    check_out(args)
    check_log_dir(args)
    if args.nnodes and not args.rdzv_endpoint:
        raise UsageError(said("error.nnodes_needs_endpoint"))
    strategies = groups.comma_list(args.strategies)
    unknown = [item for item in strategies if item not in STRATEGIES]
    if unknown:
        raise UsageError(said("error.strategies.unknown", unknown=", ".join(unknown), known=", ".join(STRATEGIES)))
    device = usable_device("bench", args.device, lang)
    if device is None:
        return ExitCode.TOOL_ERROR
    shape = {key: getattr(args, key) for key in ("family", *kind.SHAPE) if getattr(args, key) is not None}
    if len(shape) > 1 and not all(key in shape for key in ("layers", "hidden", "heads", "vocab")):
        raise UsageError(said("error.shape.incomplete"))
    options = BenchOptions(preset=args.preset or ("tiny" if device == "cpu" else "gpt2-small"),
                           model_config=args.model_config, shape=shape if len(shape) > 1 else {}, seq=args.seq,
                           micro_batch=args.micro_batch, global_batch=args.global_batch, precision=args.precision,
                           recompute=args.recompute, logits=args.logits, compile=args.compile, steps=args.steps,
                           warmup_steps=args.warmup, device=device, ranks=args.ranks, strategies=strategies,
                           timeout_s=args.timeout, log_dir=args.log_dir, oversubscribe=args.oversubscribe,
                           validate_report=args.validate_report, data=args.data, data_path=args.data_path,
                           startup_timeout_s=args.startup_timeout, exclusive=args.exclusive,
                           progress=not args.json, lang=lang)
    try:
        readable = args.data_path is None or (args.data_path.is_dir() and os.access(args.data_path, os.R_OK | os.X_OK))
        if not readable:
            raise UsageError(said("error.data_path", path=str(args.data_path)))
        if args.validate_report is not None:  # read before the runs: a bad file must not cost them
            measured_figures(args.validate_report, "--validate-report")
        if args.nnodes:
            bench_shape(options)  # a model that cannot be built is said here, not by every rank
            return run_under_torchrun(args, args.argv, "bench", ranks_per_node(args),
                                      bench_torchrun.store_node_report(options), emit)
        if under_torchrun():
            return bench_torchrun.run_torchrun_rank(options, lambda report: emit(report, args))
        report = run_bench(options)
    except (BenchError, ValueError) as error:
        raise UsageError(said_of(error)) from None
    except SpawnError as error:
        tell(in_language(error, lang))
        return ExitCode.TOOL_ERROR
    return emit(report, args)
