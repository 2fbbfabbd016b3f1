"""`gpuready validate` on the command line: its options, and the run they ask for (local ranks, one rank under
torchrun, or the torchrun command over --nnodes nodes)."""

from __future__ import annotations

import argparse

from gpuready.cli import option_groups as groups
from gpuready.cli import option_kinds as kind
from gpuready.cli.output import check_log_dir, check_out, emit
from gpuready.devices import ranks_per_node
from gpuready.i18n import choose_language, said
from gpuready.measuring import run_locally, usable_device
from gpuready.model import ExitCode
from gpuready.options import UsageError
from gpuready.runner.multinode import run_under_torchrun
from gpuready.runner.torchrun import under_torchrun
from gpuready.signals import stop_signals_raise
from gpuready.verbs.validate.run import (WORKLOADS, ValidateOptions, run_local_validate, run_torchrun_rank,
                                         torchrun_report)

SUMMARY = "measure compute, transfers, P2P, collectives and a DDP run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups.add(parser, "device", said("cli.validate.device"))
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                        help=said("cli.validate.backend"))
    groups.add(parser, "ranks", said("cli.validate.ranks"))
    groups.add_target_gpus(parser)
    parser.add_argument("--only", metavar="LIST", help=said("cli.validate.only"))
    parser.add_argument("--quick", action="store_true", help=said("cli.validate.quick"))
    parser.add_argument("--between-nodes", action="store_true", help=said("cli.validate.between_nodes"))
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
    lang = choose_language(args.lang)
    only = groups.comma_list(args.only, keep_empty=True) if args.only else WORKLOADS
    unknown = [item for item in only if item not in WORKLOADS]
    if unknown:
        raise UsageError(said("error.only.unknown", unknown=", ".join(unknown), known=", ".join(WORKLOADS)))
    if args.between_nodes:  # the pair tests alone, or beside the workloads --only names
        if not (args.nnodes or under_torchrun()):
            raise UsageError(said("error.between_nodes.needs_nodes"))
        only = (*(only if args.only else ()), "between_nodes")
    check_out(args)
    check_log_dir(args)
    options = ValidateOptions(device=args.device, backend=args.backend, ranks=args.ranks, only=only,
                              quick=args.quick, timeout_s=args.timeout, startup_timeout_s=args.startup_timeout,
                              max_bytes=args.max_bytes, log_dir=args.log_dir,
                              gpus=list(groups.comma_list(args.gpus, keep_empty=True)),
                              oversubscribe=args.oversubscribe, exclusive=args.exclusive, deadline_s=args.deadline,
                              progress=not args.json, lang=lang)
    if args.nnodes and not args.rdzv_endpoint:
        raise UsageError(said("error.nnodes_needs_endpoint"))
    if usable_device("validate", args.device, lang) is None:
        return ExitCode.TOOL_ERROR
    if args.nnodes:
        return run_under_torchrun(args, args.argv, "validate", ranks_per_node(args), torchrun_report, emit)
    if under_torchrun():
        return run_torchrun_rank(options, lambda report: emit(report, args))
    return run_locally(lambda: run_local_validate(options)[0], args)
