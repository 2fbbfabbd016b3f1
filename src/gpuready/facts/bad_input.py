"""What gpuready says about input it cannot use, by catalogue id: English that knows its id.

The sentences about a file that was not read or not parsed (the reader's `skipped: a symbolic link …`, a parser's
`no MemTotal line`) sit where English strings always did: `facts.sources` and `Facts.input_errors` (a `Sentence`, a
str whose value is the English), a ValueError's text (a `ParseFailure`, whose str() is the English). So every
comparison, JSON document and `except ValueError` works as before, while the findings built from them take the `Said`
(`said_of`) and render in the reader's language.
"""

from __future__ import annotations

from gpuready.i18n import Said, Sentence, said, said_of, sentence

__all__ = ["ParseFailure", "Sentence", "said_nested", "said_of", "sentence"]
"""`Sentence`, `sentence` and `said_of` are gpuready.i18n's (one definition for every str that knows its catalogue
text), named here too for the readers and parsers that import them from this module."""


class ParseFailure(ValueError):
    """A parser's sentence about its input (`no MemTotal line`): str() is the English, `.said` the catalogue text."""

    def __init__(self, msg_id: str | Said, **values: object) -> None:
        self.said = msg_id if isinstance(msg_id, Said) else said_nested(msg_id, **values)
        super().__init__(self.said.english())

    def __reduce__(self) -> tuple:
        return type(self), (self.said,)


def said_nested(msg_id: str, **values: object) -> Said:
    """`said(msg_id, **values)`, where a value that is a `Sentence` or a `ParseFailure` is kept as its `Said`
    (`said_of`)."""
    return said(msg_id, **{name: said_of(value) for name, value in values.items()})
