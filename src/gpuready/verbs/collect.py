"""`gpuready collect`: write this machine's raw evidence as a support bundle (a folder or a .tar.gz)."""

from __future__ import annotations

import socket
from pathlib import Path

from gpuready.i18n import Sentence, choose_language, in_language, said, said_of, sentence
from gpuready.cli import option_groups as groups
from gpuready.evidence.collect import OutputError, collect, plan_output, write_bundle
from gpuready.evidence.redact import redact_bundle
from gpuready.model import ExitCode
from gpuready.options import UsageError


def run_collect(out: str | Path, *, as_tar: bool, force: bool, fast: bool, redact: bool) -> Sentence:
    """Collect, optionally redact, write; the sentence to print (its str() the English). OutputError: a wrong --out
    (checked before the slow part, so a wrong --out costs nothing) or a bundle that could not be written."""

    plan_output(out, as_tar=as_tar, force=force)
    files, manifest = collect(with_torch=not fast)
    if redact:
        files = redact_bundle(files)
    try:
        target = write_bundle(files, out, as_tar=as_tar, force=force)
    except OSError as error:
        raise OutputError(sentence("error.collect.cannot_write", out=str(out), reason=str(error.strerror or error))
                          ) from None
    missing = [name for name, entry in manifest["files"].items() if not entry["collected"]]
    return sentence("collect.wrote.missing" if missing else "collect.wrote", files=len(files), target=str(target),
                    missing=", ".join(missing))


# --- the command line ----------------------------------------------------------------------------------------------

SUMMARY = "write a support bundle of this machine"


def add_arguments(parser) -> None:
    parser.add_argument("--out", metavar="DIR|FILE.tar.gz", help=said("cli.collect.out"))
    parser.add_argument("--tar", action="store_true", help=said("cli.collect.tar"))
    parser.add_argument("--force", action="store_true", help=said("cli.collect.force"))
    parser.add_argument("--redact", action="store_true", help=said("cli.collect.redact"))
    groups.add(parser, "fast", said("cli.collect.fast"))
    groups.add_language(parser)


def run(args) -> int:
    # Fixes tell users to run `gpuready collect`: bare, it writes here under the host's name.
    out = args.out if args.out is not None else f"gpuready-bundle-{_file_safe(socket.gethostname())}.tar.gz"
    try:
        print("gpuready: " + in_language(run_collect(out, as_tar=args.tar, force=args.force, fast=args.fast,
                                                     redact=args.redact), choose_language(args.lang)))
    except OutputError as error:
        raise UsageError(said_of(error)) from None
    return ExitCode.READY


def _file_safe(name: str) -> str:
    """A host name as a file name part: letters, digits, `.`, `-`, `_` (anything else becomes `-`)."""
    return "".join(character if character.isalnum() or character in ".-_" else "-" for character in name)[:64] or "host"
