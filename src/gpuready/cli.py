"""Command line: parse arguments, call one function per verb, pick the renderer and the exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from gpuready import __version__
from gpuready.model import ExitCode

VERBS = ("check", "collect")


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
    check.add_argument("--expect-gpus", type=int, metavar="N", help="fail unless exactly N GPUs are visible")
    check.add_argument("--psu-watts", type=float, metavar="W", help="PSU capacity, to judge the power budget")
    check.add_argument("--circuit-watts", type=float, metavar="W", help="circuit rating, to judge the power budget")
    check.add_argument("--json", action="store_true", help="print only the JSON report")
    check.add_argument("--out", type=Path, metavar="FILE", help="also write the JSON report to FILE")
    check.add_argument("--fail-on", choices=("fail", "warn"), default="fail", help="warn: warnings exit 1 too")
    check.add_argument("--verbose", "-v", action="store_true", help="list skipped checks too")
    check.add_argument("--lang", choices=("en", "zh"), default="en", help="labels in English or Chinese (zh)")

    collect = verbs.add_parser("collect", help="write a support bundle of this machine")
    collect.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder (or .tar.gz with --tar)")
    collect.add_argument("--tar", action="store_true", help="write one .tar.gz")
    collect.add_argument("--redact", action="store_true",
                         help="replace serials, UUIDs (stable hash), host names and addresses")
    collect.add_argument("--fast", action="store_true", help="do not import torch")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in VERBS + ("-h", "--help", "--version"):
        argv = ["check", *argv]
    try:
        args = build_parser().parse_args(argv)
        if args.verb == "collect":
            return _collect(args)
        return _check(args)
    except UsageError as error:
        print(f"gpuready: {error}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print("gpuready: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as error:  # a bug of ours: one sentence, exit 3; GPUREADY_DEBUG=1 shows the traceback
        if os.environ.get("GPUREADY_DEBUG"):
            raise
        print(f"gpuready: internal error ({type(error).__name__}: {error}); rerun with GPUREADY_DEBUG=1 and "
              "report it", file=sys.stderr)
        return ExitCode.TOOL_ERROR


def _check(args: argparse.Namespace) -> int:
    from gpuready.bundle.reader import BundleError
    from gpuready.checks.registry import CheckOptions
    from gpuready.run_check import check_report, gather_facts

    for name in ("expect_gpus", "psu_watts", "circuit_watts"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number, not {value:g}")
    try:
        facts = gather_facts(args.bundle, fast=args.fast)
    except BundleError as error:
        raise UsageError(str(error)) from None
    options = CheckOptions(expect_gpus=args.expect_gpus, psu_watts=args.psu_watts, circuit_watts=args.circuit_watts)
    report = check_report(facts, options, fail_on_warn=args.fail_on == "warn")
    document = report.to_dict()
    if args.out:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(document, indent=1))
        except OSError as error:
            raise UsageError(f"cannot write the report to {args.out}: {error.strerror}") from None
    if args.json:
        print(json.dumps(document, indent=1))
    else:
        from gpuready.report.console import render_console
        render_console(report, verbose=args.verbose, lang=args.lang)
    return report.exit_code()


def _collect(args: argparse.Namespace) -> int:
    from gpuready.bundle.collect import collect, write_bundle
    from gpuready.bundle.redact import redact_bundle

    files, manifest = collect(with_torch=not args.fast)
    if args.redact:
        files = redact_bundle(files)
    try:
        target = write_bundle(files, args.out, as_tar=args.tar)
    except OSError as error:
        raise UsageError(f"cannot write the bundle to {args.out}: {error.strerror}") from None
    missing = [name for name, entry in manifest["files"].items() if not entry["collected"]]
    print(f"gpuready: wrote {len(files)} files to {target}" +
          (f"; not collected: {', '.join(missing)} (manifest.json says why)" if missing else ""))
    return ExitCode.READY
