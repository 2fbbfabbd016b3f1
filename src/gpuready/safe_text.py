"""The one sanitiser for text from outside (log lines, file names, host and GPU names) on its way to a terminal.

DESIGN.md §2: renderers escape every C0/C1 control except tab and newline. A log line may carry OSC (window title,
hyperlinks), DCS, CSI or a bare `ESC c` (terminal reset); printed raw, the reader's terminal would act on them. Each
control character is shown as a visible escape instead (`\\x1b`, `\\x9b`, `\\x7f` ...), so the reader sees what the
line held and the terminal does nothing. Applied once, where a renderer hands the text to rich or print; parsers
keep the original text (the JSON report quotes it exactly, with JSON's own escapes).

A lone surrogate (`"\\ud800"` in a JSON file: a string Python holds but no UTF-8 writer accepts) becomes U+FFFD
where text leaves the program: `safe_streams` makes stdout and stderr write it so, `encoded` is the bytes of a file
written, and `printable` replaces it too; `without_surrogates` cleans a value read from a JSON file.
"""

from __future__ import annotations

import codecs
import re
import sys

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but tab (\\x09) and newline (\\x0a), DEL, and the C1 controls U+0080-U+009F."""


_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
ERRORS = "gpuready.replace"
"""The codec error handler that writes U+FFFD (`?` where the encoding cannot hold it) for what cannot be encoded."""


def _replace_unencodable(error: UnicodeError) -> tuple[str | bytes, int]:
    """U+FFFD's UTF-8 bytes in UTF-8 (its encoder takes only ASCII text from a handler), `?` in other encodings."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    count = error.end - error.start
    if codecs.lookup(error.encoding).name == "utf-8":
        return REPLACEMENT.encode("utf-8") * count, error.end
    return "?" * count, error.end


codecs.register_error(ERRORS, _replace_unencodable)


def printable(text: object) -> str:
    """`text` (str() of it) with every C0 control but tab and newline, DEL and every C1 control as `\\xNN`, and each
    lone surrogate as U+FFFD."""
    return _SURROGATE.sub(REPLACEMENT, _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", str(text)))


def encoded(text: str) -> bytes:
    """`text` as UTF-8, each lone surrogate as U+FFFD: the bytes of a file gpuready writes."""
    return text.encode("utf-8", ERRORS)


def safe_streams() -> None:
    """stdout and stderr write U+FFFD (or `?`) for a character they cannot encode, instead of raising in the middle
    of a report (a lone surrogate read from a JSON file; a GPU name on a terminal that is not UTF-8)."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=ERRORS)
            except (ValueError, OSError):  # a closed or detached stream: nothing will be written there
                pass


def without_surrogates(value: object) -> object:
    """A value read from JSON with each lone surrogate in its strings (keys too) as U+FFFD; other values as they
    are."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, list):
        return [without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_surrogates(key): without_surrogates(item) for key, item in value.items()}
    return value


def tell(message: object) -> None:
    """One sentence to the user on stderr (`gpuready: …`), sanitised: an error names files and values from outside."""
    print(f"gpuready: {printable(message)}", file=sys.stderr)
