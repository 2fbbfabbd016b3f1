"""`gpuready check`: the evidence pipeline on this machine (live) or on a bundle, then the report."""

from __future__ import annotations

from gpuready.checks.registry import CheckOptions
from gpuready.cli import option_groups as groups
from gpuready.cli import option_kinds as kind
from gpuready.cli.output import check_out, emit
from gpuready.evidence.bundle import BundleError
from gpuready.i18n import said
from gpuready.options import UsageError
from gpuready.pipeline import check_files, check_report, gather_facts, read_evidence_bundle


def add_arguments(parser) -> None:
    groups.add(parser, "bundle")
    groups.add(parser, "fast")
    groups.add_power(parser)
    parser.add_argument("--expect-gpus", type=kind.EXPECTED_GPUS, metavar="N",
                        help=groups.with_range(said("cli.check.expect_gpus"), kind.EXPECTED_GPUS))
    parser.add_argument("--multi-node", action="store_true", help=said("cli.check.multi_node"))
    groups.add(parser, "nnodes", said("cli.check.nnodes"))
    groups.add_input_limits(parser, whole_run=False)
    groups.add_output(parser)


def run(args) -> int:
    check_out(args)
    options = CheckOptions(expect_gpus=args.expect_gpus, psu_watts=args.psu_watts,
                           circuit_watts=float(args.circuit) if args.circuit is not None else None)
    judged = {"fail_on_warn": args.fail_on == "warn", "multi_node": args.multi_node or (args.nnodes or 1) > 1}
    try:
        if args.bundle is not None:  # a bundle's files may come from several machines: judged one by one
            report, _facts = check_files(read_evidence_bundle(args.bundle, groups.input_limits(args)), options,
                                          **judged)
        else:
            report = check_report(gather_facts(None, fast=args.fast), options, **judged)
    except BundleError as error:
        raise UsageError(error.said) from None
    return emit(report, args)
