"""The README's table of every option, read from the parsers themselves: `python -m gpuready.cli.option_table`.

A test compares the README with this output, so the table cannot drift from --help. The README is English: the
table is read from the English parser whatever the user's language.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterator
from gpuready.cli.examples import EXAMPLES
from gpuready.cli.main import build_parser

BEGIN = "<!-- options table: python -m gpuready.cli.option_table -->"
END = "<!-- end of options table -->"


def verb_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def shown_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The options and arguments --help shows (no -h, no hidden old spellings)."""
    for action in parser._actions:
        if action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
            yield action


def type_words(action: argparse.Action) -> str:
    """Type, range and unit in words."""
    if getattr(action.type, "describe", None):
        return action.type.describe
    if action.choices:
        return "one of " + ", ".join(map(str, action.choices))
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "flag"
    if action.type is Path:
        return f"path ({action.metavar})" if action.metavar else "path"
    return f"text ({action.metavar})" if action.metavar else "text"


def meaning(action: argparse.Action) -> str:
    """The help without the range the type column already says."""
    text = action.help or ""
    describe = getattr(action.type, "describe", "")
    if describe:
        text = text.replace(f"; {describe}", "").replace(describe, "")
    listed = "|".join(map(str, action.choices or ()))
    if listed and listed in text:  # --preset's help lists the names the type column lists too
        text = text.replace(listed, "").strip().rstrip(":")
    return text


def default_words(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS) or action.required:
        return ""
    return f"{action.default:g}" if isinstance(action.default, float) else str(action.default)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def option_rows(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, str, str, str]]:
    """(verb, option, type/range/unit, default, meaning) of every option of every verb."""
    for verb, sub in verb_parsers(parser):
        for action in shown_actions(sub):
            name = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.metavar or action.dest}`"
            yield verb, name, type_words(action), default_words(action), meaning(action)


def example_blocks() -> list[str]:
    """Each verb's examples (cli/examples.py), the lines its --help ends with, as Markdown."""
    lines = ["", "Each verb's `--help` ends with its first commands:"]
    for verb, commands in EXAMPLES.items():
        lines += ["", f"`gpuready {verb} --help`:", "", "```", *commands, "```"]
    return lines


def option_table() -> str:
    lines = [BEGIN, "", "| verb | option | type, range, unit | default | meaning |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in option_rows(build_parser(lang="en"))]
    return "\n".join([*lines, *example_blocks(), "", END])


if __name__ == "__main__":
    print(option_table())
