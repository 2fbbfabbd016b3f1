"""Usage errors: the exception a wrong option or unreadable input raises (exit 2), and the argparse parser that
raises it in one sentence, naming the nearest verb, option or choice to a mistyped one."""

from __future__ import annotations

import argparse
import difflib
import re


class UsageError(Exception):
    """A wrong option or unreadable input: one sentence, exit code 2."""


def nearest(word: str, known: list[str] | tuple[str, ...]) -> str | None:
    """The known word closest to a mistyped one, where one is close enough."""
    found = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_verb(word: str, verbs: tuple[str, ...]) -> UsageError:
    close = nearest(word, verbs)
    hint = f"did you mean {close}? " if close else ""
    return UsageError(f"{word!r} is not a verb; {hint}the verbs are {', '.join(verbs)}")


class Parser(argparse.ArgumentParser):
    """argparse prints usage and exits 2 itself: here one sentence (a UsageError), with a suggestion."""

    def error(self, message: str) -> None:
        raise UsageError(self._with_suggestion(message))

    def visible_options(self) -> list[str]:
        return [flag for action in self._actions if action.help != argparse.SUPPRESS
                for flag in action.option_strings if flag.startswith("--")]

    def _with_suggestion(self, message: str) -> str:
        choice = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            close = nearest(choice.group(2), re.findall(r"'([^']*)'", choice.group(3)))
            return message + (f"; did you mean {close}?" if close else "")
        return message

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(self.unrecognised(extras, getattr(parsed, "verb", None)))
        return parsed

    def unrecognised(self, extras: list[str], verb: str | None) -> str:
        """argparse's "unrecognized arguments", with the nearest option of the verb to the first unknown one."""
        sub = self._verb_parser(verb)
        message = f"unrecognized arguments: {' '.join(extras)}"
        flag = next((item.split("=", 1)[0] for item in extras if item.startswith("-")), None)
        close = nearest(flag, sub.visible_options()) if flag and isinstance(sub, Parser) else None
        where = f"gpuready {verb} --help" if verb else "gpuready --help"
        return message + (f"; did you mean {close}?" if close else "") + f" (the options: {where})"

    def _verb_parser(self, verb: str | None) -> argparse.ArgumentParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
                return action.choices[verb]
        return self
