"""What every verb does with its report and output folder: --out and --log-dir checked before any work, the report
printed (console or --json) and written, and its exit code."""

from __future__ import annotations

import argparse
import json
import stat
import sys
import tempfile
from pathlib import Path

from gpuready.i18n import choose_language, in_language, said, sentence
from gpuready.model import ExitCode, worst_exit_code
from gpuready.pipeline import with_remediation
from gpuready.options import file_kind
from gpuready.safe_text import tell, without_surrogates
from gpuready.options import UsageError
from gpuready.cli.report_files import on_stdout, refusal_of, write_report_files
from gpuready.report.console import render_console
from gpuready.report.translate import in_language as document_in


def check_out(args: argparse.Namespace) -> None:
    """--out, before any work: `-` (the JSON report alone on stdout) or a path whose folder exists (it is not created)
    and takes a new file; and one output at most on stdout (--json, --out -, --html/--junit/--markdown -)."""
    out: Path | None = getattr(args, "out", None)
    if out is not None and str(out) == "-":  # the JSON report on stdout, alone
        args.out, args.json = None, True
    elif out is not None:
        refusal = refusal_of(out, "--out", stdout_allowed=False)
        if refusal is not None:
            raise UsageError(refusal)
    report_file = on_stdout(args)
    if report_file and getattr(args, "json", False):
        raise UsageError(said("error.stdout.twice", first="--json" if out is None else "--out -",
                              second=f"{report_file} -"))


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
        raise UsageError(said("error.log_dir.cannot_write", path=str(log_dir), reason=str(error.strerror or error))
                         ) from None


def _write_report(document: str, args: argparse.Namespace) -> str | None:
    """Write --out; the reason it failed (one sentence, its English with its catalogue text), or None."""
    if args.out:
        try:  # a FIFO or a device put there since check_out would block or never end: refused, never opened
            if args.out.exists() and not stat.S_ISREG(args.out.stat().st_mode):
                return sentence("error.report.no_longer_regular", path=str(args.out),
                                kind=file_kind(args.out.stat().st_mode))
            args.out.write_text(document)
        except OSError as error:
            return sentence("error.report.cannot_write", path=str(args.out), reason=str(error.strerror or error))
    return None


def json_document(document: dict, args: argparse.Namespace) -> dict:
    """The JSON report (--json, --out): its findings' message and fix in the --lang language where --lang is given
    (`language` says which; the message ids and values stay, so it renders again in any language), else English."""
    lang = getattr(args, "lang", None)
    return document_in(document, lang) if lang else document


def json_text(document: dict) -> str:
    """A JSON document as every verb prints and writes it: strict JSON (no NaN), each lone surrogate of its strings
    (from undecodable bytes in a file name or a file) as U+FFFD, as the console writes it: json.dumps would keep it as
    a `\\udcxx` escape, which Python reads back but strict parsers (jq, a UTF-8 decoder) refuse."""
    return json.dumps(without_surrogates(document), indent=1, allow_nan=False)


def emit(report, args: argparse.Namespace) -> int:
    """Print the report (console or --json), write --out, --html, --junit and --markdown, and return its exit code."""
    report.fail_on_warn = args.fail_on == "warn"
    with_remediation(report)  # each finding's level, whichever verb made it
    document = json_text(json_document(report.to_dict(), args))  # to_dict writes no NaN
    problem = _write_report(document, args)
    if args.json:
        print(document)
    elif not on_stdout(args):  # `--markdown -` and the like: that file is stdout
        render_console(report.to_dict(), verbose=args.verbose, lang=choose_language(args.lang))
    code = report.exit_code()
    code = worst_exit_code(code, write_report_files([report.to_dict()], args))  # --html, --junit, --markdown
    if problem:  # nothing measured is lost: the JSON goes to stdout instead, and the exit code says 2 at least
        tell(in_language(said("error.report.on_stdout", problem=problem), choose_language(args.lang)))
        if not args.json:
            print(document)
        code = worst_exit_code(code, ExitCode.USAGE)
    sys.stdout.flush()  # under torchrun rank 0 may leave through os._exit right after
    return int(code)

