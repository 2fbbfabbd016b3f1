"""`gpuready burn` on the command line: its options and the run they ask for."""

from __future__ import annotations

import argparse

from gpuready.cli import option_groups as groups
from gpuready.i18n import choose_language, said, said_of
from gpuready.model import ExitCode
from gpuready.options import MAX_RUN_S
from gpuready.signals import stop_signals_raise
from gpuready.options import UsageError
from gpuready.measuring import run_locally, usable_device
from gpuready.cli.output import check_log_dir, check_out
from gpuready.verbs.burn.run import BurnOptions, parse_duration, run_burn

SUMMARY = "full load on every GPU with silent-error detection and telemetry"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", default="30m", help=said("cli.burn.duration"))
    groups.add(parser, "gpus", said("cli.burn.gpus"))
    parser.add_argument("--dtype", choices=("bf16", "fp16", "tf32", "fp32", "fp64"), help=said("cli.burn.dtype"))
    parser.add_argument("--self-test", action="store_true", help=said("cli.burn.self_test"))
    groups.add(parser, "exclusive")
    groups.add(parser, "device")
    groups.add(parser, "ranks", said("cli.burn.ranks"))
    groups.add(parser, "oversubscribe", said("cli.burn.oversubscribe"))
    groups.add(parser, "interval", said("cli.burn.interval"))
    groups.add(parser, "timeout", said("cli.burn.timeout"), default=60.0)
    groups.add(parser, "log_dir", said("cli.burn.log_dir"))
    groups.add_output(parser)


def run(args: argparse.Namespace) -> int:
    with stop_signals_raise():  # SIGTERM/SIGHUP: the workers are stopped and the partial report written
        return _burn(args)


def _burn(args: argparse.Namespace) -> int:
    try:
        duration_s = parse_duration(args.duration)
    except ValueError as error:
        raise UsageError(said("error.duration", error=said_of(error))) from None
    if not 0 < duration_s <= MAX_RUN_S:
        raise UsageError(said("error.duration.range", text=repr(args.duration[:40]), hours=round(MAX_RUN_S / 3600)))
    check_out(args)
    check_log_dir(args)
    if usable_device("burn", args.device, choose_language(args.lang)) is None:
        return ExitCode.TOOL_ERROR
    options = BurnOptions(duration_s=duration_s, dtype=args.dtype, device=args.device, ranks=args.ranks,
                          gpus=list(groups.comma_list(args.gpus, keep_empty=True)), self_test=args.self_test,
                          interval_s=args.interval, timeout_s=args.timeout, log_dir=args.log_dir,
                          progress=not args.json, oversubscribe=args.oversubscribe,
                          exclusive=args.exclusive, lang=choose_language(args.lang))
    return run_locally(lambda: run_burn(options), args)
