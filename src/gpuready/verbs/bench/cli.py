"""`gpuready bench` on the command line: its options and the run they ask for (local, one rank under torchrun, or
the torchrun command over --nnodes nodes)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gpuready import option_groups as groups
from gpuready import option_kinds as kind
from gpuready.model import ExitCode
from gpuready.report.safe_text import tell
from gpuready.runner.signals import stop_signals_raise
from gpuready.usage import UsageError
from gpuready.verbs.measuring import usable_device
from gpuready.verbs.output import check_log_dir, check_out, emit

SUMMARY = "does adding GPUs make a real training step faster here?"
STRATEGIES = ("ddp", "fsdp2", "fsdp2-noreshard")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups.add_model(parser, default_note="default gpt2-small; tiny with --device cpu")
    train = parser.add_argument_group("training run")
    groups.add(train, "seq", "sequence length (default 2048; 32 for tiny)")
    groups.add(train, "micro_batch", "per GPU, the same in every run (default 4)", default=4)
    groups.add(train, "global_batch", "strong scaling by gradient accumulation")
    groups.add(train, "precision")
    groups.add(train, "recompute", choices=("none", "full"))
    train.add_argument("--compile", action="store_true", help="torch.compile the model")
    train.add_argument("--steps", type=kind.STEPS, default=20, metavar="N",
                       help=groups.with_range("measured steps (after --warmup; default 20)", kind.STEPS))
    train.add_argument("--warmup", type=kind.WARMUP, default=5, metavar="N",
                       help=groups.with_range("steps run before the measured ones (default 5)", kind.WARMUP))
    groups.add(train, "strategies", f"multi-GPU runs: {', '.join(STRATEGIES)}", default="ddp,fsdp2")
    groups.add(parser, "device")
    groups.add(parser, "ranks", "GPUs (default all) or CPU ranks (default 2)")
    groups.add_target_gpus(parser, gpu_list=False)
    groups.add(parser, "timeout", "longest one step may take (default 300)", default=300.0)
    groups.add(parser, "startup_timeout", "longest the ranks may take to start and form their group (default 300)")
    groups.add_cluster(parser, ranks_meaning="ranks per node with --nnodes (default: GPUs)")
    groups.add(parser, "validate_report", "MFU against the matmul rate this validate report measured (default: the "
                                          "rate the 1-GPU run measures)")
    parser.add_argument("--data", action="store_true",
                        help="also: DataLoader throughput by worker count against what the GPUs consume")
    parser.add_argument("--data-path", type=Path, metavar="DIR",
                        help="also: read this folder's files against what training needs")
    groups.add(parser, "log_dir")
    groups.add_output(parser)


def run(args: argparse.Namespace) -> int:
    with stop_signals_raise():  # SIGTERM/SIGHUP: the ranks are stopped and the partial report written
        return _bench(args)


def _bench(args: argparse.Namespace) -> int:
    check_out(args)
    check_log_dir(args)
    if args.nnodes and not args.rdzv_endpoint:
        raise UsageError("--nnodes needs --rdzv-endpoint HOST:PORT (the same on every node)")
    strategies = groups.comma_list(args.strategies)
    unknown = [item for item in strategies if item not in STRATEGIES]
    if unknown:
        raise UsageError(f"--strategies: unknown {', '.join(unknown)}; choose from {', '.join(STRATEGIES)}")
    device = usable_device("bench", args.device)
    if device is None:
        return ExitCode.TOOL_ERROR
    from gpuready.runner.local import SpawnError
    from gpuready.verbs.bench.run import BenchError, BenchOptions, bench_shape, run_bench
    from gpuready.verbs.plan.run import PlanError
    shape = {key: getattr(args, key) for key in ("family", *kind.SHAPE) if getattr(args, key) is not None}
    if len(shape) > 1 and not all(key in shape for key in ("layers", "hidden", "heads", "vocab")):
        raise UsageError("an explicit model needs --layers, --hidden, --heads and --vocab")
    options = BenchOptions(preset=args.preset or ("tiny" if device == "cpu" else "gpt2-small"),
                           model_config=args.model_config, shape=shape if len(shape) > 1 else {}, seq=args.seq,
                           micro_batch=args.micro_batch, global_batch=args.global_batch, precision=args.precision,
                           recompute=args.recompute, compile=args.compile, steps=args.steps,
                           warmup_steps=args.warmup, device=device, ranks=args.ranks, strategies=strategies,
                           timeout_s=args.timeout, log_dir=args.log_dir, oversubscribe=args.oversubscribe,
                           validate_report=args.validate_report, data=args.data, data_path=args.data_path,
                           startup_timeout_s=args.startup_timeout, exclusive=args.exclusive,
                           progress=not args.json)
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
            from gpuready.runner.multinode import run_under_torchrun
            from gpuready.verbs.validate.cli import ranks_per_node
            bench_shape(options)  # a model that cannot be built is said here, not by every rank
            return run_under_torchrun(args, args.argv, "bench", ranks_per_node(args),
                                      bench_torchrun.store_node_report(options), emit)
        if under_torchrun():
            return bench_torchrun.run_torchrun_rank(options, lambda report: emit(report, args))
        report = run_bench(options)
    except (BenchError, PlanError, ValueError) as error:
        raise UsageError(str(error)) from None
    except SpawnError as error:
        tell(error)
        return ExitCode.TOOL_ERROR
    return emit(report, args)
