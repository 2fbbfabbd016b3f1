"""Command line: find the verb, let it register its options and run, and turn what escapes into an exit code.

Each verb's module has `SUMMARY`, `add_arguments(parser)` and `run(args) -> exit code` (and may have
`DESCRIPTION`); shared options come from option_groups, so one concept has one spelling in every verb.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from types import ModuleType

from gpuready import __version__
from gpuready.model import ExitCode
from gpuready.option_groups import add_old_spellings
from gpuready.report.safe_text import tell
from gpuready.runner.signals import Stopped, exit_code_for
from gpuready.usage import Parser, UsageError, unknown_verb

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
}
VERBS = tuple(VERB_MODULES)
BROKEN_PIPE_EXIT = 141
"""128 + SIGPIPE: what a shell reports for git or coreutils ended by SIGPIPE when their reader went away."""


def verb_module(verb: str) -> ModuleType:
    return importlib.import_module(VERB_MODULES[verb])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb, or of `only` one (a run imports the modules of its own verb alone)."""
    parser = Parser(prog="gpuready", description="Is this machine ready for multi-GPU PyTorch training?")
    parser.add_argument("--version", action="version", version=f"gpuready {__version__}")
    verbs = parser.add_subparsers(dest="verb", parser_class=Parser)
    for verb in VERBS if only is None else (only,):
        module = verb_module(verb)
        sub = verbs.add_parser(verb, help=module.SUMMARY, description=getattr(module, "DESCRIPTION", None))
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


def _reader_gone() -> int:
    """`gpuready check | head -1`: the reader has what it wanted. Stop quietly, as git and coreutils do when
    SIGPIPE ends them (a shell shows 141 for them too); stdout goes to /dev/null so that Python's own flush at
    exit does not complain. --out, written before anything is printed, is complete."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return BROKEN_PIPE_EXIT


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(gpuready's arguments with the verb first, the job's command after `launch ... --`)."""
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["check", *argv]  # check is the default verb
    elif argv[0] not in VERBS + ("-h", "--help", "--version"):
        raise unknown_verb(argv[0], VERBS)
    if argv[0] == "launch" and "--" in argv:  # what follows `--` is the job's own command line, untouched
        split = argv.index("--")
        return argv[:split], argv[split + 1:]
    return argv, []


def _main(argv: list[str] | None) -> int:
    # torch warns on import where numpy is absent; gpuready needs no numpy (the [torch] extra brings it anyway)
    warnings.filterwarnings("ignore", message=r"Failed to initialize NumPy", category=UserWarning)
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv, command = _split(argv)
        verb = argv[0] if argv[0] in VERBS else None
        args = build_parser(verb).parse_args(argv)
        args.argv, args.command = argv, command
        return verb_module(args.verb).run(args)
    except UsageError as error:
        tell(error)
        return ExitCode.USAGE
    except BrokenPipeError:
        raise
    except KeyboardInterrupt:
        tell("interrupted")
        return ExitCode.INTERRUPTED
    except Stopped as stop:  # before any rank started: nothing measured
        tell(f"stopped by {stop.name} before anything was measured")
        return exit_code_for(stop.name)
    except Exception as error:  # a bug of ours: one sentence, exit 3; GPUREADY_DEBUG=1 shows the traceback
        if os.environ.get("GPUREADY_DEBUG"):
            raise
        tell(f"internal error ({type(error).__name__}: {error}); rerun with GPUREADY_DEBUG=1 and "
             "report it")
        return ExitCode.TOOL_ERROR
