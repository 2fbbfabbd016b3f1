"""--html, --junit and --markdown: the report's other files, for every verb that prints a report and for `report`.

Each path is checked as soon as the option is read, before any work (as --out is): a folder that does not exist, a
path that is a folder or not a regular file, a file that cannot be written there is one sentence and exit 2. After
the work the files are written; one that cannot be written is said in one sentence (exit 2 at least), and the
others, the console and the JSON report are still complete.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from gpuready.i18n import Said, choose_language, in_language, said
from gpuready.model import ExitCode, worst_exit_code
from gpuready.options import file_kind
from gpuready.safe_text import encoded, printable, tell
from gpuready.options import UsageError
from gpuready.report.junit import junit_xml
from gpuready.report.markdown import markdown_summary

REPORT_FILES = ("html", "junit", "markdown")
"""The options (and their `args` names), in the order the files are written."""
STDOUT = "-"
"""The path that means standard output (`--markdown - >> "$GITHUB_STEP_SUMMARY"`): that file instead of the console."""


def on_stdout(args: argparse.Namespace) -> str | None:
    """The report file option whose path is `-` (`--markdown`), or None."""
    return next((f"--{name}" for name in REPORT_FILES if str(getattr(args, name, None)) == STDOUT), None)


class WritableFile(argparse.Action):
    """Stores the path (a `Path`, as `type=Path` made it) once it is known to take a new file."""
    stdout_allowed = False

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        refusal = refusal_of(values, option_string or self.option_strings[0], self.stdout_allowed)
        if refusal is not None:
            raise UsageError(refusal)
        setattr(namespace, self.dest, values)


class ReportFile(WritableFile):
    """A report file's path, or `-` for stdout."""
    stdout_allowed = True


def refusal_of(path: Path, option: str, stdout_allowed: bool = True) -> Said | None:
    """Why `path` cannot take the report `option` writes, or None: `-` (stdout, where allowed), or a path whose
    folder exists (it is not created) that is a regular file or none yet."""
    if stdout_allowed and str(path) == STDOUT:
        return None
    named = {"option": option, "path": str(path)}
    folder = path.parent
    try:
        if path.is_dir():
            return said("report_files.is_folder", **named)
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            return said("report_files.not_regular", kind=file_kind(path.stat().st_mode), **named)
        if not folder.is_dir():
            return said("report_files.no_folder", folder=str(folder), **named)
        if path.exists() and not os.access(path, os.W_OK):
            return said("report_files.not_writable", **named)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuready-out-", suffix=".tmp"):
            pass
    except OSError as error:
        return said("report_files.cannot_write_in", folder=str(folder), reason=str(error.strerror or error), **named)
    return None


def write_report_files(documents: list[dict], args: argparse.Namespace, say_written: bool = False) -> int:
    """Write the report files `args` names (from `documents`); the exit code this adds: 0, or 2 where one could not
    be written, 3 where this gpuready has no HTML report. `say_written` (`report`, which prints nothing else): one line
    per file written, its path and size, on stdout (on stderr where a file goes to stdout)."""
    lang = choose_language(getattr(args, "lang", None))
    verbose = bool(getattr(args, "verbose", False))
    warn_fails = getattr(args, "fail_on", None) == "warn"
    code = ExitCode.READY
    for name in REPORT_FILES:
        path: Path | None = getattr(args, name, None)
        if path is not None:
            written = _write(name, path, documents, lang, verbose, warn_fails)
            code = worst_exit_code(code, written)
            if say_written and written == ExitCode.READY and str(path) != STDOUT:
                line = in_language(said("report_files.written", option=f"--{name}", path=str(path),
                                        size=f"{path.stat().st_size:,}"), lang)
                print(printable(line), file=sys.stderr if on_stdout(args) else sys.stdout)
    return int(code)


def _write(name: str, path: Path, documents: list[dict], lang: str, verbose: bool, warn_fails: bool) -> int:
    if name == "html":
        def render() -> bytes:
            from gpuready.report.html import render_html  # the chart library takes ~1 s to import
            return encoded(render_html(documents, lang))
    elif name == "junit":
        def render() -> bytes:
            return junit_xml(documents, lang, warn_fails)
    else:
        def render() -> bytes:
            return encoded(markdown_summary(documents, lang, verbose))
    return write_report_file(name, path, render, lang)


def write_report_file(name: str, path: Path, render: Callable[[], bytes], lang: str) -> int:
    """Write `render()` (UTF-8) for the option `--name` to `path` or, for `-`, to stdout; a failure is one sentence:
    exit 2 where the file cannot be written, 3 where the HTML report's module (or bokeh) is missing. fleet writes its
    own page through this too."""
    named = {"option": f"--{name}", "path": str(path)}
    try:  # a FIFO or a device put there since the check would block or never end: refused, never opened
        if str(path) == STDOUT:
            sys.stdout.flush()
            sys.stdout.buffer.write(render())
            sys.stdout.buffer.flush()
            return ExitCode.READY
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            tell(in_language(said("report_files.not_regular", kind=file_kind(path.stat().st_mode), **named), lang))
            return ExitCode.USAGE
        path.write_bytes(render())
    except ImportError:
        if name != "html":
            raise  # a module of this gpuready that does not import is its bug, not the user's
        tell(in_language(said("report_files.no_html"), lang))
        return ExitCode.TOOL_ERROR
    except OSError as error:
        tell(in_language(said("report_files.unwritten", reason=str(error.strerror or error), **named), lang))
        return ExitCode.USAGE
    return ExitCode.READY
