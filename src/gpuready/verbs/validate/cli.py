"""`gpuready validate` on the command line: its options, and the run they ask for (local ranks, one rank under
torchrun, or the torchrun command over --nnodes nodes)."""

from __future__ import annotations

import argparse

from gpuready.cli import option_groups as groups
from gpuready.cli import option_kinds as kind
from gpuready.i18n import choose_language, said, said_of
from gpuready.model import ExitCode
from gpuready.signals import stop_signals_raise
from gpuready.options import UsageError
from gpuready.devices import ranks_per_node
from gpuready.measuring import run_locally, usable_device
from gpuready.cli.output import check_log_dir, check_out, emit

SUMMARY = "measure compute, transfers, P2P, collectives and a DDP run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups.add(parser, "device", said("cli.validate.device"))
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                        help=said("cli.validate.backend"))
    groups.add(parser, "ranks", said("cli.validate.ranks"))
    groups.add_target_gpus(parser)
    parser.add_argument("--only", metavar="LIST", help=said("cli.validate.only"))
    parser.add_argument("--quick", action="store_true", help=said("cli.validate.quick"))
    groups.add(parser, "timeout", said("cli.validate.timeout"), default=120.0)
    groups.add(parser, "startup_timeout")
    parser.add_argument("--deadline", type=kind.RUN_S, metavar="S",
                        help=groups.with_range(said("cli.validate.deadline"), kind.RUN_S))
    parser.add_argument("--max-bytes", type=kind.size_bytes, metavar="SIZE",
                        help=groups.with_range(said("cli.validate.max_bytes"), kind.size_bytes))
    groups.add(parser, "log_dir")
    groups.add_cluster(parser, ranks_meaning=said("cli.option.nproc_per_node.ranks"))
    groups.add_output(parser)


def run(args: argparse.Namespace) -> int:
    with stop_signals_raise():  # SIGTERM/SIGHUP: the ranks are stopped and the partial report written
        return _validate(args)


def _validate(args: argparse.Namespace) -> int:
    from gpuready.verbs import validate

    lang = choose_language(args.lang)
    only = groups.comma_list(args.only, keep_empty=True) if args.only else validate.WORKLOADS
    unknown = [item for item in only if item not in validate.WORKLOADS]
    if unknown:
        raise UsageError(said("error.only.unknown", unknown=", ".join(unknown), known=", ".join(validate.WORKLOADS)))
    check_out(args)
    check_log_dir(args)
    options = validate.ValidateOptions(device=args.device, backend=args.backend, ranks=args.ranks, only=only,
                                       quick=args.quick, timeout_s=args.timeout,
                                       startup_timeout_s=args.startup_timeout, max_bytes=args.max_bytes,
                                       log_dir=args.log_dir,
                                       gpus=list(groups.comma_list(args.gpus, keep_empty=True)),
                                       oversubscribe=args.oversubscribe, exclusive=args.exclusive,
                                       deadline_s=args.deadline)
    if args.nnodes and not args.rdzv_endpoint:
        raise UsageError(said("error.nnodes_needs_endpoint"))
    if usable_device("validate", args.device, lang) is None:
        return ExitCode.TOOL_ERROR
    if args.nnodes:
        from gpuready.runner.multinode import run_under_torchrun
        from gpuready.verbs.validate.run import torchrun_report
        return run_under_torchrun(args, args.argv, "validate", ranks_per_node(args), torchrun_report, emit)
    if validate.under_torchrun():
        return validate.run_torchrun_rank(options, lambda report: emit(report, args))
    try:
        device, ranks = validate.resolve_device(options)
    except (ValueError, RuntimeError) as error:
        raise UsageError(said_of(error)) from None
    from gpuready.report.progress_line import ProgressLine, validate_plan, validate_progress
    from gpuready.workloads.worker import GPU_ONLY
    predicted_s = validate.predicted_seconds(options, device, ranks)
    running = [name for name in options.only if device == "cuda" or name not in GPU_ONLY]
    progress = None if args.json else ProgressLine(
        "validate", validate_plan(ranks, device, running, options.quick, predicted_s),
        validate_progress(predicted_s, running), lang=lang)

    def measure():
        try:
            return validate.run_local_validate(options, progress)[0]
        finally:
            if progress is not None:
                progress.close()
    return run_locally(measure, args)
