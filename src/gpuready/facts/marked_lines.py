"""Lines of a tool's output found by their markers: a marker is searched for over the whole text at C speed and only
the lines it is on are read. A reader that loops over every line in Python reads blank lines at a few MB/s; one that
reads only marked lines is as fast as the regex engine (issue 20: every reader at least 50 MB/s)."""

from __future__ import annotations

import re
from typing import Callable, Iterator

# What str.splitlines ends a line at besides "\n" and "\r" (strip_ansi has taken every "\r")
_OTHER_LINE_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def one_line_break(text: str) -> str:
    """The text with "\n" for every line break str.splitlines knows but "\r" (which strip_ansi removes)."""
    for other in _OTHER_LINE_BREAKS:
        if other in text:  # a C-speed scan; most texts have none
            text = text.replace(other, "\n")
    return text


def marked_lines(text: str, marker: re.Pattern[str]) -> Iterator[str]:
    """Each line of `text` (after strip_ansi: no "\r") that holds a match of `marker`, in order, each once, cut as
    str.splitlines cuts it. `marker` must not cross a line break; it may start with "\n" to stand for a line's start.
    A reader whose every effect comes from lines with a marker reads the same from these as from all lines."""
    lined = "\n" + one_line_break(text)  # every line after a "\n": a marker may ask for a line's start
    position = 0  # a "\n": the lines before it have been read
    while found := marker.search(lined, position):
        start = lined.rfind("\n", position, found.start() + 1) + 1  # back only to where the search began
        end = lined.find("\n", start)
        if end < 0:
            yield lined[start:]
            return
        yield lined[start:end]
        position = end


def line_start(literal: str) -> str:
    """A regex for `literal` at a line's start (`^literal` with re.MULTILINE), literal first: the engine skips to the
    literal at C speed, then looks back that a "\n" or the start of the text is before it. A regex that starts with
    `^` is tried at every character."""
    escaped = re.escape(literal)
    return f"{escaped}(?<![^\\n]{escaped})"


def first_at_line_start(text: str, regex: re.Pattern[str], indent_ok: Callable[[str], bool]) -> re.Match[str] | None:
    """The first match of `regex` that starts a line after an indent `indent_ok` accepts (what is before it on its
    line; "\n" ends a line). `regex` should start with a literal the engine skips to at C speed, and not match a
    line's indent: only the lines it is found on are looked at, each once."""
    position = 0  # a line's start
    while found := regex.search(text, position):
        line_start = text.rfind("\n", position, found.start()) + 1 or position
        if indent_ok(text[line_start:found.start()]):
            return found
        # a line's first match is the only one that can start it
        position = text.find("\n", found.start()) + 1
        if not position:
            return None
    return None


def line_around(text: str, position: int) -> str:
    """The line ("\n" ends a line) that holds `position`."""
    end = text.find("\n", position)
    return text[text.rfind("\n", 0, position) + 1:len(text) if end < 0 else end]
