"""The members of a large JSON object that a caller wants, read from a file without holding the rest.

A day-long burn's report carries hundreds of megabytes of telemetry (`series`: ~240 bytes per GPU per second), which
`json.load` would turn into gigabytes of Python objects. Here the file is read in chunks; the top-level object's
members are walked one by one: a wanted member is cut out and decoded on its own, an array member may be decoded
element by element, and anything else is skipped by counting brackets outside strings (regular expressions in C,
linear in the file), so memory holds one chunk and the largest wanted value.

Skipped values are not validated: what is not read cannot mislead the caller.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, TextIO

CHUNK_CHARS = 1 << 20
MAX_VALUE_CHARS = 64 << 20
"""The largest single value decoded (a wanted member, or one element of an element-wise array): beyond it the file is
refused rather than held."""

_STRUCTURE = re.compile(r'["\[\]{}]')
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
"""From just after an opening quote: everything up to the closing quote (or the buffer's end); never backtracks."""
_SPACE = re.compile(r"[ \t\r\n]*")
_SCALAR = re.compile(r"[^,\]}\s]+")


class NotJson(ValueError):
    """The file is not one JSON object (the message says what was found where)."""


class _Chars:
    """A file's text through a sliding buffer; `mark` keeps the text from a position while a value is cut out."""

    def __init__(self, handle: TextIO, chunk_chars: int):
        self.handle, self.chunk_chars = handle, chunk_chars
        self.buffer, self.pos, self.offset = "", 0, 0
        self.mark: int | None = None

    def more(self) -> bool:
        """Read the next chunk; False at the end of the file. Text before the mark (or the position) is dropped."""
        chunk = self.handle.read(self.chunk_chars)
        if not chunk:
            return False
        keep = self.pos if self.mark is None else self.mark
        if self.mark is not None and len(self.buffer) - keep > MAX_VALUE_CHARS:
            raise NotJson(f"a value longer than {MAX_VALUE_CHARS >> 20} Mi characters at character {self.where(keep)}")
        self.offset += keep
        self.buffer, self.pos = self.buffer[keep:] + chunk, self.pos - keep
        if self.mark is not None:
            self.mark = 0
        return True

    def where(self, pos: int | None = None) -> int:
        return self.offset + (self.pos if pos is None else pos)

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file); the position stays on it."""
        while True:
            self.pos = _SPACE.match(self.buffer, self.pos).end()
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self.more():
                return ""

    def expect(self, characters: str) -> str:
        found = self.peek()
        if not found or found not in characters:
            raise NotJson(f"expected {' or '.join(repr(c) for c in characters)} at character {self.where()}, "
                          f"found {found[:1]!r}" if found else f"the file ends at character {self.where()}")
        self.pos += 1
        return found

    def skip_string(self) -> None:
        """From the opening quote to just after the closing one, across chunks."""
        self.pos += 1
        while True:
            self.pos = _STRING_BODY.match(self.buffer, self.pos).end()
            if self.pos < len(self.buffer) and self.buffer[self.pos] == '"':
                self.pos += 1
                return
            if not self.more():  # a lone backslash at the buffer's end is read again with what follows
                raise NotJson(f"a string is not closed before the end of the file (character {self.where()})")

    def skip_value(self) -> None:
        first = self.peek()
        if first == '"':
            self.skip_string()
        elif first in ("{", "["):
            self._skip_nested()
        elif first:
            self._skip_scalar()
        else:
            raise NotJson(f"the file ends at character {self.where()} where a value was expected")

    def _skip_nested(self) -> None:
        depth = 0
        while True:
            found = _STRUCTURE.search(self.buffer, self.pos)
            if found is None:
                self.pos = len(self.buffer)
                if not self.more():
                    raise NotJson("the file ends inside an object or array")
                continue
            self.pos = found.start()
            if found.group() == '"':
                self.skip_string()
                continue
            self.pos += 1
            depth += 1 if found.group() in "{[" else -1
            if depth == 0:
                return

    def _skip_scalar(self) -> None:
        while True:
            found = _SCALAR.match(self.buffer, self.pos)
            end = found.end() if found else self.pos
            if end - self.pos > MAX_VALUE_CHARS:  # a number or word that long is no report: refused, not rescanned
                raise NotJson(f"a value longer than {MAX_VALUE_CHARS >> 20} Mi characters at character {self.where()}")
            if end < len(self.buffer) or not self.more():
                if end == self.pos:
                    raise NotJson(f"unexpected {self.buffer[self.pos:self.pos + 1]!r} at character {self.where()}")
                self.pos = end
                return

    def value(self) -> Any:
        """Decode the next value whole."""
        self.peek()
        self.mark = self.pos
        try:
            self.skip_value()
            text = self.buffer[self.mark:self.pos]
        finally:
            self.mark = None
        try:
            return json.loads(text)
        except ValueError as error:
            raise NotJson(f"a value at character {self.where() - len(text)} is not JSON ({error})") from None


def pick_members(handle: TextIO, wanted: frozenset[str], each_element: dict[str, Callable[[Any], Any]],
                 chunk_chars: int | None = None) -> dict[str, Any]:
    """The top-level object's members named in `wanted`, decoded; a member named in `each_element` (an array) as the
    list of that function's results on each element, so that only what it keeps of each element is held.

    Raises NotJson where the file is not one JSON object. A member that appears twice keeps its last value, as
    `json.load` does."""
    chars = _Chars(handle, chunk_chars or CHUNK_CHARS)
    chars.expect("{")
    picked: dict[str, Any] = {}
    if chars.peek() == "}":
        chars.pos += 1
    else:
        while True:
            if chars.peek() != '"':
                chars.expect('"')
            key = chars.value()
            chars.expect(":")
            if key in each_element and chars.peek() == "[":
                picked[key] = _elements(chars, each_element[key])
            elif key in wanted:
                picked[key] = chars.value()
            else:
                chars.skip_value()
            if chars.expect(",}") == "}":
                break
    if chars.peek():
        raise NotJson(f"more text after the object at character {chars.where()}")
    return picked


def _elements(chars: _Chars, keep: Callable[[Any], Any]) -> list[Any]:
    chars.expect("[")
    kept: list[Any] = []
    if chars.peek() == "]":
        chars.pos += 1
        return kept
    while True:
        kept.append(keep(chars.value()))
        if chars.expect(",]") == "]":
            return kept
