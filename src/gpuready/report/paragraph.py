"""A paragraph on the console: wrapped at the console's width, nothing cut, no trailing blanks.

rich wraps a `Text` at spaces but pads each wrapped line to the width; piped into a file or a mail those blanks are
noise. A word longer than the line (a long path) folds onto the next line instead of being cut.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def print_paragraph(console: Console, text: Text | str, indent: int = 0) -> None:
    """`text` (a str is taken literally, never as markup) wrapped under `indent` spaces."""
    text = Text(text) if isinstance(text, str) else text
    for line in text.wrap(console, max(1, console.width - indent), overflow="fold"):
        line.rstrip()
        console.print(Text(" " * indent) + line, overflow="fold")
