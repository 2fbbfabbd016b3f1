"""Usage errors: the exception a wrong option or unreadable input raises (exit 2), and the argparse parser that
raises it in one sentence, naming the nearest verb, option or choice to a mistyped one.

The parser speaks the user's language (`lang`, known before it is built): help texts, group titles and its own
sentences come from the catalogue (domain `cli`). A help text or title may be given as a `Said`: the parser and its
groups render it when the option is added. argparse's own sentences ("the following arguments are required", "expected
one argument" …) reach `error` already formatted in English: they are recognised by argparse's message templates and
said again from the catalogue; the invalid choice and a type's refusal are said by the parser itself.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import re
import unicodedata
from typing import Any, NoReturn

from gpuready.cli.examples import examples_block
from gpuready.i18n import DEFAULT_LANGUAGE, Said, message, said
from gpuready.options import UsageError, _shown


class Refused(argparse.ArgumentTypeError):
    """An option type's refusal of a value, by catalogue id: the parser says it in the user's language; `str()` is
    the English."""

    def __init__(self, sentence: Said):
        super().__init__(sentence.english())
        self.sentence = sentence


def in_language(text: Any, lang: str) -> Any:
    """A `Said` as text in `lang`; anything else (text, None) as it is."""
    return message(text.msg_id, lang, **text.values) if isinstance(text, Said) else text


def nearest(word: str, known: list[str] | tuple[str, ...]) -> str | None:
    """The known word closest to a mistyped one, where one is close enough."""
    found = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_verb(word: str, verbs: tuple[str, ...]) -> UsageError:
    close = nearest(word, verbs)
    values = {"word": repr(word), "verbs": ", ".join(verbs)}
    return UsageError(said("cli.usage.unknown_verb.near", close=close, **values) if close
                      else said("cli.usage.unknown_verb", **values))


ARGPARSE_SENTENCES = {
    "argument %(argument_name)s: %(message)s": "cli.argparse.argument",
    "the following arguments are required: %s": "cli.argparse.required",
    "expected one argument": "cli.argparse.expected_one",
    "ambiguous option: %(option)s could match %(matches)s": "cli.argparse.ambiguous",
    "ignored explicit argument %r": "cli.argparse.ignored_explicit",
}
"""argparse's own message templates (its gettext msgids) that this command line can reach, and their catalogue ids
(the catalogue's `{name}` for argparse's `%(name)s`, `{value}` for a bare `%s` / `%r`)."""


def _template_pattern(template: str) -> re.Pattern[str]:
    pattern = re.sub(r"%\\\((\w+)\\\)[sr]", r"(?P<\1>.+?)", re.escape(template))
    return re.compile(re.sub(r"%[sr]", "(?P<value>.+?)", pattern), re.DOTALL)


_ARGPARSE_PATTERNS = [(_template_pattern(template), msg_id) for template, msg_id in ARGPARSE_SENTENCES.items()]


def argparse_sentence(text: str) -> Said | str:
    """One of argparse's English sentences as catalogue text (the message inside "argument X: …" too); any other
    text as it is."""
    for pattern, msg_id in _ARGPARSE_PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            values: dict[str, object] = match.groupdict()
            if "message" in values:
                values["message"] = argparse_sentence(match["message"])
            return said(msg_id, **values)
    return text


def _rendered(settings: dict[str, Any], lang: str) -> dict[str, Any]:
    return {**settings, "help": in_language(settings["help"], lang)} if "help" in settings else settings


class _Group(argparse._ArgumentGroup):
    """An argument group that renders a `Said` help text in its parser's language."""

    def __init__(self, container: Parser, title: Any = None, description: Any = None, **settings: Any):
        self.lang = container.lang
        super().__init__(container, in_language(title, self.lang), in_language(description, self.lang), **settings)

    def add_argument(self, *names: str, **settings: Any) -> argparse.Action:
        return super().add_argument(*names, **_rendered(settings, self.lang))


class Parser(argparse.ArgumentParser):
    """argparse prints usage and exits 2 itself: here one sentence (a UsageError), with a suggestion, in `lang`. A
    verb's parser (`verb`) ends its help with that verb's examples (cli/examples.py), as written."""

    def __init__(self, *args: Any, lang: str = DEFAULT_LANGUAGE, verb: str | None = None, **settings: Any):
        self.lang, self.verb = lang, verb
        settings.setdefault("formatter_class", functools.partial(
            Formatter, usage_prefix=self.text(said("cli.argparse.usage"))))
        settings["description"] = self.text(settings.get("description"))
        super().__init__(*args, **settings)
        self._positionals.title = self.text(said("cli.argparse.positionals"))
        self._optionals.title = self.text(said("cli.argparse.options"))
        for action in self._actions:
            if isinstance(action, argparse._HelpAction):
                action.help = self.text(said("cli.argparse.help"))

    def text(self, text: Any) -> Any:
        """A `Said` in this parser's language (other values as they are)."""
        return in_language(text, self.lang)

    def format_help(self) -> str:
        """argparse's help, then the verb's examples (not through the formatter, which would rewrap them)."""
        shown = super().format_help()
        return f"{shown}\n{examples_block(self.verb, self.text(said('cli.argparse.examples')))}" if self.verb else shown

    def add_argument(self, *names: str, **settings: Any) -> argparse.Action:
        return super().add_argument(*names, **_rendered(settings, self.lang))

    def add_argument_group(self, title: Any = None, description: Any = None, **settings: Any) -> _Group:
        group = _Group(self, title, description, **settings)
        self._action_groups.append(group)
        return group

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.text(argparse_sentence(message)))

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's "invalid choice", with the nearest choice to a mistyped one."""
        if action.choices is not None and value not in action.choices:
            refusal = said("cli.argparse.invalid_choice", value=repr(value),
                           choices=", ".join(map(repr, action.choices)))
            close = nearest(str(value), [str(choice) for choice in action.choices])
            if close:
                refusal = said("cli.usage.did_you_mean", sentence=refusal, close=close)
            raise argparse.ArgumentError(action, self.text(refusal))

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        """argparse's, with a type's refusal in this parser's language: a `Refused` says its own sentence, a type
        with a range in words (option_kinds) names its range."""
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as error:
            cause, range_words = error.__context__, getattr(action.type, "range_words", None)
            if isinstance(cause, Refused):
                refusal = cause.sentence
            elif isinstance(cause, argparse.ArgumentTypeError) and range_words is not None:
                refusal = said("cli.value.not", value=_shown(arg_string), range=range_words)
            else:
                raise
            raise argparse.ArgumentError(action, self.text(refusal)) from None

    def visible_options(self) -> list[str]:
        return [flag for action in self._actions if action.help != argparse.SUPPRESS
                for flag in action.option_strings if flag.startswith("--")]

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            raise UsageError(self.text(self.unrecognised(extras, getattr(parsed, "verb", None))))
        return parsed

    def unrecognised(self, extras: list[str], verb: str | None) -> Said:
        """argparse's "unrecognized arguments", with the nearest option of the verb to the first unknown one."""
        sub = self.verb_parser(verb)
        flag = next((item.split("=", 1)[0] for item in extras if item.startswith("-")), None)
        close = nearest(flag, sub.visible_options()) if flag and isinstance(sub, Parser) else None
        values = {"arguments": " ".join(extras), "help": f"gpuready {verb} --help" if verb else "gpuready --help"}
        return said("cli.usage.unrecognised.near", close=close, **values) if close \
            else said("cli.usage.unrecognised", **values)

    def verb_parser(self, verb: str | None) -> argparse.ArgumentParser:
        """The parser of `verb` (this one, where it has no such verb)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
                return action.choices[verb]
        return self


# --- help in a language of wide characters ------------------------------------------------------------------------

_WIDE_CHARACTERS = r"\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6"
_WIDE = re.compile(f"[{_WIDE_CHARACTERS}]")
_PIECE = re.compile(f"[（《「『【]*(?:[^\\s{_WIDE_CHARACTERS}]+|\\S)[，。、；：！？）》」』】]*|\\s+")
"""A Latin word or one wide character, with the opening brackets before it and the closing punctuation after it:
the pieces a line may break between."""


def cells(text: str) -> int:
    """The terminal columns `text` takes: a wide (CJK) character takes two."""
    return sum(2 if unicodedata.east_asian_width(character) in "WF" else 1 for character in text)


def wrap_cells(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns: a line breaks at a space or beside a wide character, not inside a
    Latin word nor before closing punctuation, unless the word alone is wider than a line (as textwrap cuts it)."""
    lines, line, spaced = [], "", False
    for piece in _PIECE.findall(" ".join(text.split())):
        if piece.isspace():
            spaced = bool(line)
            continue
        joined = line + (" " if spaced else "") + piece
        if line and cells(joined) > width:
            lines.append(line)
            joined = piece
        while cells(joined) > width > 1:  # a word wider than a line: cut, as textwrap cuts it
            cut = len(joined)
            while cut > 1 and cells(joined[:cut]) > width:
                cut -= 1
            lines.append(joined[:cut])
            joined = joined[cut:]
        line, spaced = joined, False
    return [*lines, line] if line else lines


class Formatter(argparse.HelpFormatter):
    """argparse's help, with the usage prefix in the parser's language and text of wide characters wrapped by the
    columns it takes (argparse counts characters, so a Chinese line would run twice as wide)."""

    def __init__(self, prog: str, *, usage_prefix: str | None = None, **settings: Any):
        super().__init__(prog, **settings)
        self._usage_prefix = usage_prefix

    def add_usage(self, usage, actions, groups, prefix=None):  # type: ignore[no-untyped-def]
        super().add_usage(usage, actions, groups, self._usage_prefix if prefix is None else prefix)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap_cells(text, width) if _WIDE.search(text) else super()._split_lines(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if not _WIDE.search(text):
            return super()._fill_text(text, width, indent)
        return "\n".join(indent + line for line in wrap_cells(text, width - len(indent)))
