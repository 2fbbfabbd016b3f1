"""`gpuready diagnose` on the command line: its options, and which reading they ask for (files, or `net`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuready.cli import option_groups as groups
from gpuready.cli import option_kinds as kind
from gpuready.cli.output import check_out, emit
from gpuready.evidence.walk import InputError
from gpuready.i18n import said
from gpuready.options import UsageError
from gpuready.verbs.diagnose.net import run_net
from gpuready.verbs.diagnose.run import diagnose

SUMMARY = "read pasted logs and tool outputs: cause, evidence, fix"
DESCRIPTION = ("gpuready diagnose PATH...: files, folders or bundles (any names; recognised by content). gpuready "
               "diagnose net --peers HOST[,HOST]: live network triage towards the other nodes.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help=said("cli.diagnose.paths"))
    parser.add_argument("--expect", type=kind.GB_PER_S, metavar="GB/S",
                        help=groups.with_range(said("cli.diagnose.expect"), kind.GB_PER_S))
    parser.add_argument("--peers", metavar="HOST[,HOST]", help=said("cli.diagnose.peers"))
    parser.add_argument("--port", type=kind.PORT, default=29500, metavar="N",
                        help=groups.with_range(said("cli.diagnose.port"), kind.PORT))
    parser.add_argument("--shared-path", type=Path, metavar="DIR", help=said("cli.diagnose.shared_path"))
    groups.add_input_limits(parser, whole_run=True)
    groups.add_output(parser)


def run(args: argparse.Namespace) -> int:
    check_out(args)
    if args.paths[0] == "net" and not Path("net").exists():
        if len(args.paths) > 1:
            raise UsageError(said("diagnose.usage.net_takes_no_paths"))
        peers = list(groups.comma_list(args.peers))
        if not peers:
            raise UsageError(said("diagnose.usage.net_needs_peers"))
        return emit(run_net(peers, port=args.port, shared_path=args.shared_path), args)
    if args.peers or args.shared_path:
        raise UsageError(said("diagnose.usage.net_options"))
    try:
        report = diagnose(args.paths, expect_busbw_gb_per_s=args.expect, limits=groups.input_limits(args))
    except InputError as error:
        raise UsageError(error.sentence) from None
    return emit(report, args)
