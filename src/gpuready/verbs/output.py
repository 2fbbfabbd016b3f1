"""What every verb does with its report and output folder: --out and --log-dir checked before any work, the report
printed (console or --json) and written, and its exit code."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import tempfile
from pathlib import Path

from gpuready.i18n import choose_language
from gpuready.model import ExitCode, worst_exit_code
from gpuready.options import file_kind
from gpuready.report.safe_text import tell
from gpuready.usage import UsageError


def check_out(args: argparse.Namespace) -> None:
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


def check_log_dir(args: argparse.Namespace) -> None:
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
        try:  # a FIFO or a device put there since check_out would block or never end: refused, never opened
            if args.out.exists() and not stat.S_ISREG(args.out.stat().st_mode):
                return f"{args.out} is no longer a regular file ({file_kind(args.out.stat().st_mode)})"
            args.out.write_text(document)
        except OSError as error:
            return f"cannot write the report to {args.out} ({error.strerror or error})"
    return None


def emit(report, args: argparse.Namespace) -> int:
    """Print the report (console or --json), write --out, and return its exit code."""
    report.fail_on_warn = args.fail_on == "warn"
    document = json.dumps(report.to_dict(), indent=1, allow_nan=False)  # strict JSON: to_dict writes no NaN
    problem = _write_report(document, args)
    if args.json:
        print(document)
    else:
        from gpuready.report.console import render_console
        render_console(report.to_dict(), verbose=args.verbose, lang=choose_language(args.lang))
    code = report.exit_code()
    if problem:  # nothing measured is lost: the JSON goes to stdout instead, and the exit code says 2 at least
        tell(f"{problem}; the JSON report is on stdout instead")
        if not args.json:
            print(document)
        code = worst_exit_code(code, ExitCode.USAGE)
    sys.stdout.flush()  # under torchrun rank 0 may leave through os._exit right after
    return int(code)

