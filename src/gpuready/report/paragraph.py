"""A paragraph on the console: wrapped at the console's width, nothing cut, no trailing blanks.

rich wraps a `Text` at spaces only: a Chinese sentence has none, so rich moved a whole clause to the next line and
left the line before half empty. Here a line may also break between two characters where either is double-width
(Chinese, Japanese, Korean), except before closing punctuation (`，。）`) or after opening punctuation (`（「`), the
usual rule of CJK typesetting; English wraps at spaces as before. A word longer than the line (a long path) folds
onto the next line instead of being cut. Trailing blanks are dropped: piped into a file or a mail they are noise.
"""

from __future__ import annotations

import unicodedata

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

NO_BREAK_BEFORE = frozenset("，。、；：！？）」』》〉】…,.;:!?)]}%·")
"""Closing punctuation stays on the line of the character before it."""
NO_BREAK_AFTER = frozenset("（「『《〈【([{")
"""Opening punctuation stays on the line of the character after it."""


def print_paragraph(console: Console, text: Text | str, indent: int = 0) -> None:
    """`text` (a str is taken literally, never as markup) wrapped under `indent` spaces."""
    text = Text(text) if isinstance(text, str) else text
    width = max(1, console.width - indent)
    for paragraph_line in text.split("\n", allow_blank=True):
        for line in paragraph_line.divide(break_offsets(paragraph_line.plain, width)):
            line.rstrip()
            console.print(Text(" " * indent) + line, overflow="fold", crop=False)


def break_offsets(line: str, width: int) -> list[int]:
    """Where `line` (no line breaks) is cut into lines of at most `width` cells: at the last break opportunity that
    fits, else (one word longer than the line) at the width itself. Blanks may hang past the width: they are dropped."""
    offsets: list[int] = []
    start, used, last_opportunity = 0, 0, 0
    for position, character in enumerate(line):
        if position > start and may_break_before(line, position):
            last_opportunity = position
        cells = cell_len(character)
        if character.isspace() or used + cells <= width or position == start:
            used += cells
            continue
        cut = last_opportunity if last_opportunity > start else position
        offsets.append(cut)
        start, last_opportunity = cut, cut
        used = cell_len(line[cut:position + 1])
    return offsets


def may_break_before(line: str, position: int) -> bool:
    """A line may start at `position`: after a blank, or between wide characters outside the punctuation rules."""
    before, character = line[position - 1], line[position]
    if character.isspace() or character in NO_BREAK_BEFORE or before in NO_BREAK_AFTER:
        return False
    return before.isspace() or is_wide(before) or is_wide(character)


def is_wide(character: str) -> bool:
    """Double-width on a terminal (CJK ideographs, full-width forms)."""
    return unicodedata.east_asian_width(character) in ("W", "F")
