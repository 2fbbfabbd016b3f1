"""The one sanitiser for text from outside (log lines, file names, host and GPU names) on its way to a terminal.

DESIGN.md §2: renderers escape every C0/C1 control except tab and newline. A log line may carry OSC (window title,
hyperlinks), DCS, CSI or a bare `ESC c` (terminal reset); printed raw, the reader's terminal would act on them. Each
control character is shown as a visible escape instead (`\\x1b`, `\\x9b`, `\\x7f` ...), so the reader sees what the
line held and the terminal does nothing. Applied once, where a renderer hands the text to rich or print; parsers
keep the original text (the JSON report quotes it exactly, with JSON's own escapes).
"""

from __future__ import annotations

import re
import sys

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but tab (\\x09) and newline (\\x0a), DEL, and the C1 controls U+0080-U+009F."""


def printable(text: object) -> str:
    """`text` (str() of it) with every C0 control but tab and newline, DEL and every C1 control as `\\xNN`."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", str(text))


def tell(message: object) -> None:
    """One sentence to the user on stderr (`gpuready: …`), sanitised: an error names files and values from outside."""
    print(f"gpuready: {printable(message)}", file=sys.stderr)
