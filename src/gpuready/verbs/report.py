"""`gpuready report REPORT.json [MORE.json …]`: saved report documents rendered again, on the console or as the files
--html, --junit and --markdown name (all the documents in each file).

A document is what any verb writes with --json or --out, of this version or an older one: the renderers read it
tolerantly. A file that cannot be read or is not a report is said in one sentence (exit 2), and the others are still
rendered. The exit code is the worst of the documents' own (`exit_code`, else their verdict's).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuready.i18n import choose_language, in_language, said
from gpuready.model import ExitCode, Verdict, document_problem, worst_exit_code
from gpuready.safe_text import printable, tell
from gpuready.cli import option_groups as groups
from gpuready.cli.report_files import REPORT_FILES, write_report_files
from gpuready.options import InputFileError, MAX_REPORT_BYTES, read_json_input
from gpuready.report.console import render_console

VERDICT_EXIT = {Verdict.READY.value: ExitCode.READY, Verdict.READY_WITH_WARNINGS.value: ExitCode.READY,
                Verdict.NOT_READY.value: ExitCode.NOT_READY}
"""A document without a known exit code (an older one, or edited by hand) exits as its verdict says; an unknown
verdict, as DESIGN.md §2 says for not enough evidence: 2."""
KNOWN_EXIT_CODES = frozenset(code.value for code in ExitCode)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="REPORT", help=said("cli.report.paths"))
    groups.add(parser, "verbose", said("cli.report.verbose"))
    groups.add(parser, "lang")
    groups.add_report_files(parser)


def run(args: argparse.Namespace) -> int:
    lang = choose_language(args.lang)
    documents: list[tuple[Path, dict]] = []
    code = ExitCode.READY
    for path in args.paths:
        document = read_document(path, lang, several=len(args.paths) > 1)
        if document is None:
            code = worst_exit_code(code, ExitCode.USAGE)
            continue
        documents.append((path, document))
        code = worst_exit_code(code, document_exit_code(document))
    if any(getattr(args, name) is not None for name in REPORT_FILES):
        if documents:
            code = worst_exit_code(code, write_report_files([document for _path, document in documents], args,
                                                            say_written=True))
    else:
        _print_documents(documents, args.verbose, lang)
    return int(code)


def read_document(path: Path, lang: str, several: bool = False) -> dict | None:
    """The report document in `path`, or None after one sentence on why it is not one."""
    try:
        document = read_json_input(path, "report", max_bytes=MAX_REPORT_BYTES)
        why = None if is_report_document(document) else said("report.not_a_report", path=str(path))
        problem = document_problem(document) if why is None else None
        why = said("report.invalid", path=str(path), why=problem) if problem is not None else why
    except InputFileError as error:
        document, why = None, error
    if why is None:
        return document
    tell(in_language(said("report.others_rendered", sentence=in_language(why, lang)) if several else why, lang))
    return None


def is_report_document(document: object) -> bool:
    """A JSON object with a list of findings or a verdict: what every version's --json has written."""
    return isinstance(document, dict) and (isinstance(document.get("findings"), list) or "verdict" in document)


def document_exit_code(document: dict) -> int:
    code = document.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code in KNOWN_EXIT_CODES:
        return code
    verdict = document.get("verdict")
    return VERDICT_EXIT.get(verdict, ExitCode.USAGE) if isinstance(verdict, str) else ExitCode.USAGE


def _print_documents(documents: list[tuple[Path, dict]], verbose: bool, lang: str) -> None:
    """Each document's console view; several are each headed by their file's name."""
    from rich.console import Console
    from rich.text import Text

    console = Console()
    for number, (path, document) in enumerate(documents):
        if len(documents) > 1:
            if number:
                console.print()
            # One line whatever the terminal's width: a path broken in two cannot be copied.
            console.print(Text(f"==> {printable(path)} <==", style="bold"), soft_wrap=True)
        render_console(document, console, verbose=verbose, lang=lang)
