"""`gpuready fleet PATH…`: many nodes' reports → per-measurement spreads per cohort and the nodes that stand out.

Reports come from the engines people already run: `gpuready launch slurm|k8s|torchrun … -- validate` has every node
write `<reports>/<hostname>.json` into a shared folder, which is the PATH here. Exit code: 1 where a node is an
outlier or its own report failed, 2 where a file could not be read (the others still judged) or none could, else 0.
`--actions slurm|k8s` prints the scheduler commands that apply the verdicts (actions.py); with `--apply` they run, and
the exit code is 3 where one failed or its program is absent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuready.cli import option_groups as groups
from gpuready.i18n import choose_language, in_language, said, text_in
from gpuready.cli.option_kinds import worded
from gpuready.options import UsageError, number
from gpuready.cli.report_files import WritableFile, on_stdout, write_report_file
from gpuready.cli.output import _write_report, check_out, json_text
from gpuready.model import ExitCode, worst_exit_code
from gpuready.report.fleet_markdown import fleet_markdown
from gpuready.safe_text import encoded, tell
from gpuready.verbs.fleet.actions import SCHEDULERS, apply, as_rows, link_notes, plan_actions, refused_sentence, shown
from gpuready.verbs.fleet.baseline import baseline_document, read_baseline, write_baseline
from gpuready.verbs.fleet.judge import gather, judge
from gpuready.verbs.fleet.read import MAX_FILES, TooManyFiles
from gpuready.verbs.fleet.stats import Limits
from gpuready.verbs.fleet.view import render_fleet

FLOOR_PCT = worded(number("percent", 0, 100), "percent")
"""--floor-pct: the smallest deficit against the cohort's median that is flagged, in % of the median."""
NAMED_IN_ERROR = 5
"""Files named in the one sentence that says no file gave a report."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help=said("cli.fleet.paths"))
    parser.add_argument("--baseline", type=Path, metavar="FILE", help=said("cli.fleet.baseline"))
    parser.add_argument("--save-baseline", type=Path, metavar="FILE", action=WritableFile,
                        help=said("cli.fleet.save_baseline"))  # checked when read, before thousands of reports
    parser.add_argument("--floor-pct", type=FLOOR_PCT, metavar="PCT", default=Limits.from_knowledge().floor_pct,
                        help=groups.with_range(said("cli.fleet.floor_pct"), FLOOR_PCT))
    groups.add(parser, "html", said("cli.fleet.html"))  # the fleet's own page, the path checked as every verb's
    groups.add(parser, "markdown", said("cli.fleet.markdown"))
    groups.add(parser, "json")
    groups.add(parser, "out")
    groups.add(parser, "verbose", said("cli.fleet.verbose"))
    groups.add(parser, "lang")
    parser.add_argument("--actions", choices=SCHEDULERS, metavar="{slurm,k8s}", help=said("cli.fleet.actions"))
    parser.add_argument("--apply", action="store_true", help=said("cli.fleet.apply"))


def run(args: argparse.Namespace) -> int:

    lang = choose_language(args.lang)
    check_out(args)
    if args.apply and not args.actions:
        raise UsageError(said("fleet.usage.apply_without_actions"))
    baseline = read_baseline(args.baseline) if args.baseline else None
    try:
        gathered = gather(args.paths, baseline=baseline)
    except TooManyFiles as error:
        raise UsageError(said("fleet.usage.too_many_files", path=str(error), limit=MAX_FILES)) from None
    if not gathered.nodes:
        raise UsageError(_nothing_to_judge(gathered))
    document = judge(gathered, Limits.from_knowledge(args.floor_pct), baseline,
                     str(args.baseline) if args.baseline else None)
    unsaved = _save_baseline(document, gathered, args.save_baseline, lang) if args.save_baseline else None
    if unsaved:  # the judgement is still given, then the sentence
        document["exit_code"] = worst_exit_code(document["exit_code"], ExitCode.USAGE)
    planned, refused = plan_actions(gathered.nodes.values(), args.actions) if args.actions else ([], [])
    if args.actions:
        document["actions"] = as_rows(planned, args.actions)
    code = document["exit_code"]
    text = json_text(_in_language(document, args.lang) if args.lang else document)
    problem = _write_report(text, args)
    if args.html:
        code = worst_exit_code(code, _write_html(document, args.html, lang))
    if args.markdown:
        code = worst_exit_code(code, write_report_file(
            "markdown", args.markdown, lambda: encoded(fleet_markdown(document, lang)), lang))
    if args.json:
        print(text)
    elif args.actions:
        for note in link_notes(document["between_nodes"], lang):  # a bad link drains neither node: the line to check
            print(note)
        code = worst_exit_code(code, _act(document["actions"], args.apply, lang))
    elif not on_stdout(args):  # `--html -`, `--markdown -`: that file is stdout
        render_fleet(document, lang, args.verbose)
    if args.json and args.apply:
        code = worst_exit_code(code, _act(document["actions"], True, lang, quiet=True))
    if refused:
        unsaved = unsaved or in_language(refused_sentence(refused, args.actions), lang)
    for sentence in (unsaved, problem):
        if sentence:
            tell(sentence)
            code = worst_exit_code(code, ExitCode.USAGE)
    return int(code)


def _act(rows: list[dict], run: bool, lang: str, quiet: bool = False) -> int:
    """--actions: print each command, one per line (nothing runs); with --apply run them and say each one's exit
    code instead (on stderr where stdout holds the JSON). Fleet's exit code for them."""
    argvs = [argv for row in rows for argv in row["commands"]]
    if not argvs:
        tell(in_language(said("fleet.actions.none"), lang))
        return ExitCode.READY
    if not run:
        print("\n".join(shown(argv) for argv in argvs))
        return ExitCode.READY
    lines, code = apply(argvs, lang)
    for line in lines:
        print(line, file=sys.stderr if quiet else sys.stdout)
    return code


def _save_baseline(document: dict, gathered, path: Path, lang: str) -> str | None:
    """Write --save-baseline; the sentence that says why it could not be written, or None."""
    try:
        write_baseline(baseline_document(document, list(gathered.nodes.values()), gathered.pair_runs), path)
    except UsageError as error:
        return error.text(lang)
    document["saved_baseline"] = str(path)
    return None


def _in_language(document: dict, lang: str) -> dict:
    """The --json document under --lang, as check's: each unreadable file's reason in `lang` (its `reason_text` keeps
    the id and values), `language` saying which."""
    unreadable = [{**item, "reason": text_in(lang, item["reason_text"]["message_id"],
                                             item["reason_text"]["message_values"]) or item["reason"]}
                  for item in document["unreadable"]]
    return {**document, "language": lang, "unreadable": unreadable}


def _nothing_to_judge(gathered):
    """The one sentence where no file gave a report: how many were tried, the first few named with why."""
    if not gathered.unreadable:
        return said("fleet.usage.no_files", skipped=len(gathered.skipped))
    named = [said("fleet.file_reason", file=item.path, reason=item.why) for item in gathered.unreadable[:NAMED_IN_ERROR]]
    more = len(gathered.unreadable) - len(named)
    return said("fleet.usage.no_reports", count=len(gathered.unreadable), named=named,
                more=said("fleet.usage.more", count=more) if more else "")


def _write_html(document: dict, path: Path, lang: str) -> int:
    """--html: the fleet's page, written (or refused in one sentence) as every verb's report files are."""

    def render() -> bytes:
        from gpuready.report.html import render_fleet_html  # the chart library takes ~1 s to import
        return encoded(render_fleet_html(document, lang))
    return write_report_file("html", path, render, lang)
