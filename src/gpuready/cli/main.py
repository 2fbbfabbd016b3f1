"""Command line: find the verb, let it register its options and run, and turn what escapes into an exit code.

Each verb's module has `add_arguments(parser)` and `run(args) -> exit code`; its summary and description are the
catalogue's `cli.verb.<verb>` (and `cli.verb.<verb>.description`); shared options come from option_groups, so one
concept has one spelling in every verb. The language (--lang anywhere before a launch's `--`, else the environment) is
known before the parser is built: its help, its errors and the notices are in that language.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from types import ModuleType

from gpuready import __version__
from gpuready.i18n import DEFAULT_LANGUAGE, LANGUAGES, catalogue, choose_language, message, said
from gpuready.model import ExitCode
from gpuready.cli.option_groups import add_old_spellings
from gpuready.safe_text import safe_streams, tell
from gpuready.signals import Stopped, exit_code_for, exit_without_teardown
from gpuready.cli.usage import Parser, unknown_verb
from gpuready.options import UsageError

VERB_MODULES = {
    "check": "gpuready.verbs.check",
    "collect": "gpuready.verbs.collect",
    "validate": "gpuready.verbs.validate.cli",
    "burn": "gpuready.verbs.burn.cli",
    "monitor": "gpuready.verbs.monitor",
    "diagnose": "gpuready.verbs.diagnose.cli",
    "plan": "gpuready.verbs.plan.cli",
    "launch": "gpuready.verbs.launch",
    "bench": "gpuready.verbs.bench.cli",
    "compare": "gpuready.verbs.compare",
    "report": "gpuready.verbs.report",
    "fleet": "gpuready.verbs.fleet.cli",
}
VERBS = tuple(VERB_MODULES)
BROKEN_PIPE_EXIT = 141
"""128 + SIGPIPE: what a shell reports for git or coreutils ended by SIGPIPE when their reader went away."""


def verb_module(verb: str) -> ModuleType:
    return importlib.import_module(VERB_MODULES[verb])


def build_parser(only: str | None = None, lang: str = DEFAULT_LANGUAGE) -> argparse.ArgumentParser:
    """The parser of every verb, or of `only` one (a run imports the modules of its own verb alone), speaking
    `lang`."""
    parser = Parser(prog="gpuready", description=said("cli.description"), lang=lang)
    parser.add_argument("--version", action="version", version=f"gpuready {__version__}",
                        help=said("cli.argparse.version"))
    verbs = parser.add_subparsers(dest="verb", parser_class=Parser)
    for verb in VERBS if only is None else (only,):
        module = verb_module(verb)
        description = f"cli.verb.{verb}.description"
        sub = verbs.add_parser(verb, help=parser.text(said(f"cli.verb.{verb}")), lang=lang, verb=verb,
                               description=said(description) if description in catalogue(DEFAULT_LANGUAGE) else None)
        module.add_arguments(sub)
        add_old_spellings(sub, verb)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, so that a reader gone away is seen now and not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except SystemExit as error:
        if isinstance(error.__context__, BrokenPipeError):  # rich's Console.on_broken_pipe exits 1: the same case
            return _reader_gone()
        raise


def entry() -> None:
    """The `gpuready` command and `python -m gpuready`: main(), then the process ends (runner.signals)."""
    exit_without_teardown(main())


def _reader_gone() -> int:
    """`gpuready check | head -1`: the reader has what it wanted. Stop quietly, as git and coreutils do when
    SIGPIPE ends them (a shell shows 141 for them too); stdout goes to /dev/null so that Python's own flush at
    exit does not complain. --out, written before anything is printed, is complete."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return BROKEN_PIPE_EXIT


def _language(argv: list[str]) -> str:
    """The language of this run: the last --lang before a launch's `--` (where it names one), else the environment."""
    words = argv[:argv.index("--")] if "--" in argv else argv
    named = None
    for word, following in zip(words, [*words[1:], None]):
        if word == "--lang" or word.startswith("--lang="):
            named = word.partition("=")[2] if "=" in word else following
    return choose_language(named if named in LANGUAGES else None)


def _split(argv: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(gpuready's arguments with the verb first, the job's command after `launch ... --`, a --lang given before the
    verb: `gpuready --lang zh plan …`)."""
    leading: list[str] = []
    while argv[:1] == ["--lang"] and len(argv) > 1 or argv[:1] and argv[0].startswith("--lang="):
        taken = 1 if "=" in argv[0] else 2
        leading, argv = [*leading, *argv[:taken]], argv[taken:]
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["check", *argv]  # check is the default verb
    elif argv[0] not in VERBS + ("-h", "--help", "--version"):
        raise unknown_verb(argv[0], VERBS)
    if argv[0] == "launch" and "--" in argv:  # what follows `--` is the job's own command line, untouched
        split = argv.index("--")
        return argv[:split], argv[split + 1:], leading
    return argv, [], leading


def _main(argv: list[str] | None) -> int:
    # torch warns on import where numpy is absent; gpuready needs no numpy (the [torch] extra brings it anyway)
    warnings.filterwarnings("ignore", message=r"Failed to initialize NumPy", category=UserWarning)
    argv = list(sys.argv[1:] if argv is None else argv)
    safe_streams()  # a lone surrogate from a JSON file is written as U+FFFD, never a crash mid-report
    lang = _language(argv)
    try:
        argv, command, leading = _split(argv)
        verb = argv[0] if argv[0] in VERBS else None
        parser = build_parser(verb, lang)
        if verb and "--lang" in parser.verb_parser(verb).visible_options():  # the verb's own option (for its report)
            argv = [verb, *leading, *argv[1:]]
        args = parser.parse_args(argv)
        args.argv, args.command = argv, command
        return verb_module(args.verb).run(args)
    except UsageError as error:
        tell(error.text(lang))
        return ExitCode.USAGE
    except BrokenPipeError:
        raise
    except KeyboardInterrupt:
        tell(message("cli.interrupted", lang))
        return ExitCode.INTERRUPTED
    except Stopped as stop:  # before any rank started: nothing measured
        tell(message("cli.stopped", lang, signal=stop.name))
        return exit_code_for(stop.name)
    except Exception as error:  # a bug of ours: one sentence, exit 3; GPUREADY_DEBUG=1 shows the traceback
        if os.environ.get("GPUREADY_DEBUG"):
            raise
        tell(message("cli.internal_error", lang, error=f"{type(error).__name__}: {error}"))
        return ExitCode.TOOL_ERROR
