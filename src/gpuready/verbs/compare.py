"""`gpuready compare BASE NEW`: two saved reports of a machine (before and after a driver update, a reboot, a repair)
→ what got worse or better beyond a tolerance per kind of figure, which findings newly fail or recovered, which
versions changed (report/compare.py). Exit code 1 where something got worse or newly fails, 2 where a file cannot be
read as a report or where the two are not one machine's runs of one verb (another verb, host or set of GPUs: named
first, and only what both hold compared), else 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gpuready.cli import option_groups as groups
from gpuready.i18n import Said, choose_language, message, said
from gpuready.options import UsageError, number
from gpuready.report.measurement_kinds import default_tolerance_pct, kind_names, kinds
from gpuready.cli.usage import Refused, nearest
from gpuready.cli.output import _write_report, check_out, json_text
from gpuready.model import ExitCode, document_problem, worst_exit_code
from gpuready.report.compare import compare_documents, compare_in_language
from gpuready.report.compare_view import render_compare
from gpuready.report.json_stream import pick_members
from gpuready.safe_text import tell

MAX_PERCENT = 1000.0
PERCENT = number("percent", 0, MAX_PERCENT)
"""A tolerance's percent: 0 (any change counts) to 1,000 (a figure ten times its base still counts as unchanged)."""
WHOLE_FILE_BYTES = 4 << 20
"""A report up to this size is decoded whole; a larger one (a long burn's telemetry) is streamed and its series
skipped (report/json_stream.py), so memory never holds the telemetry."""
WANTED = frozenset({"format", "schema_version", "tool_version", "started_at", "host", "verdict", "exit_code",
                    "findings", "measurements", "facts"})
"""What compare reads of a report: everything but the telemetry series."""
NOT_REPORTS = ("gpuready.compare", "gpuready.fleet", "gpuready.fleet-baseline")
"""Documents of gpuready's own that are not a run's report (compare's and fleet's --json, a fleet baseline)."""


def tolerance(text: str) -> tuple[str, float]:
    """--tolerance KIND=PCT: a kind of figure (knowledge/compare.toml) and the change in % within its noise."""
    kind, separator, percent = str(text).partition("=")
    kind = kind.strip().lower()
    if not separator:
        raise Refused(said("cli.value.not", value=repr(str(text)[:40]), range=tolerance.range_words))
    if kind not in kind_names():
        unknown = said("compare.tolerance.unknown_kind", kind=repr(kind[:40]), kinds=", ".join(kind_names()))
        close = nearest(kind, kind_names())
        raise Refused(said("cli.usage.did_you_mean", sentence=unknown, close=close) if close else unknown)
    try:
        return kind, PERCENT(percent)
    except argparse.ArgumentTypeError:
        raise Refused(said("cli.value.not", value=repr(percent[:40]), range=_percent_words())) from None


def _percent_words() -> Said:
    return said("compare.tolerance.percent", maximum=f"{MAX_PERCENT:,.0f}")


tolerance.range_words = said("compare.tolerance.range", kinds=", ".join(kind_names()),  # type: ignore[attr-defined]
                             percent=_percent_words())
tolerance.describe = tolerance.range_words.english()  # type: ignore[attr-defined]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", type=Path, metavar="BASE", help=said("cli.compare.base"))
    parser.add_argument("new", type=Path, metavar="NEW", help=said("cli.compare.new"))
    parser.add_argument("--tolerance", type=tolerance, action="append", metavar="KIND=PCT",
                        help=groups.with_range(said("cli.compare.tolerance", default=f"{default_tolerance_pct():g}",
                                                    noisy=", ".join(f"{kind.name} {kind.noise_pct:g}" for kind in kinds()
                                                                    if kind.noise_pct > default_tolerance_pct())),
                                               tolerance))
    groups.add(parser, "json", said("cli.compare.json"))
    groups.add(parser, "out", said("cli.compare.out"))
    groups.add(parser, "fail_on", said("cli.compare.fail_on"))
    groups.add(parser, "verbose", said("cli.compare.verbose"))
    groups.add(parser, "lang")


def run(args: argparse.Namespace) -> int:

    lang = choose_language(args.lang)
    check_out(args)
    base, new = read_report(args.base), read_report(args.new)
    document = compare_documents(base, new, dict(args.tolerance or ()), base_file=str(args.base),
                                 new_file=str(args.new), fail_on_warn=args.fail_on == "warn")
    shown = compare_in_language(document, args.lang) if args.lang else document  # as check's --json --lang
    text = json_text(shown)
    problem = _write_report(text, args)
    if args.json:
        print(text)
    else:
        render_compare(document, lang, args.verbose)
    code = document["exit_code"]
    if problem:
        tell(message("compare.out_failed", lang, problem=getattr(problem, "said", str(problem))))
        code = worst_exit_code(code, ExitCode.USAGE)
    return int(code)


def read_report(path: Path) -> dict[str, Any]:
    """A report document (a `--json` or `--out` file of any verb); UsageError (one sentence: which file, why) where
    the file cannot be read or is not a report."""
    try:
        document = _read(path)
    except FileNotFoundError:
        why: Said | str | None = said("compare.why.missing")
    except PermissionError:
        why = said("compare.why.permission")
    except _NotAFile:
        why = said("compare.why.not_file")
    except OSError as error:
        why = error.strerror or str(error)
    except (ValueError, RecursionError) as error:  # json's errors and UnicodeDecodeError are ValueErrors
        why = said("compare.why.not_json", error=str(error)[:200])
    else:
        why = _not_a_report(document)
    if why is not None:
        raise UsageError(said("compare.unreadable", path=str(path), why=why))
    return document


class _NotAFile(OSError):
    """A folder, a FIFO (its read would block) or a device (its read would never end)."""


def _read(path: Path) -> Any:
    import stat

    status = path.stat()
    if not stat.S_ISREG(status.st_mode):
        raise _NotAFile(str(path))
    if status.st_size <= WHOLE_FILE_BYTES:
        with open(path, "rb") as handle:
            return json.loads(handle.read())
    with open(path, encoding="utf-8") as handle:
        return pick_members(handle, WANTED, {})


def _not_a_report(document: Any) -> Said | None:
    """Why a decoded JSON value is not a report, or None. A report of an older version may lack keys: one list of
    findings or measurements is enough to compare by."""
    if not isinstance(document, dict):
        return said("compare.why.not_object")
    if document.get("format") in NOT_REPORTS:
        return said("compare.why.own_document", format=str(document["format"]))
    if not isinstance(document.get("findings"), list) and not isinstance(document.get("measurements"), list):
        return said("compare.why.no_findings")
    return document_problem(document)
