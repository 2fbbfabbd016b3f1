"""Every user-facing string by id, in English and Chinese: one gettext catalogue per language.

The catalogues are standard gettext PO files (`locale/<lang>/LC_MESSAGES/gpuready.po`: msgid = the message id,
msgstr = its text with `{placeholders}`), read with Babel, so translators use the usual tools (Poedit, Weblate,
`pybabel`) and a review shows text, not code. tests/test_i18n.py holds the two catalogues to the same ids and the same
placeholders.

The language: `--lang`, else `GPUREADY_LANG`, else the POSIX locale variables in their order of precedence
(`LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG`); any `zh…` value (`zh_CN.UTF-8`, `zh_TW`) is Chinese, anything else
English.
"""

from __future__ import annotations

import os
import string
from functools import lru_cache
from pathlib import Path
from typing import Mapping

LANGUAGES = ("en", "zh")
DEFAULT_LANGUAGE = "en"
LOCALE_DIR = Path(__file__).parent / "locale"
_LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def choose_language(option: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """`en` or `zh`, from the option, else GPUREADY_LANG, else the locale variables (the first one set wins)."""
    for value in (option, environ.get("GPUREADY_LANG"), *(environ.get(name) for name in _LOCALE_VARIABLES)):
        if value:
            first = value.split(":")[0].strip().lower()  # LANGUAGE is a list: zh_CN:en
            return "zh" if first.startswith("zh") else DEFAULT_LANGUAGE
    return DEFAULT_LANGUAGE


def catalogue_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / "gpuready.po"


@lru_cache(maxsize=None)
def catalogue(lang: str) -> dict[str, str]:
    """{message id: text} of one language (an unknown language: English)."""
    from babel.messages.pofile import read_po

    with open(catalogue_path(lang if lang in LANGUAGES else DEFAULT_LANGUAGE), "rb") as po_file:
        return {entry.id: entry.string for entry in read_po(po_file) if entry.id and entry.string}


def message(msg_id: str, lang: str = DEFAULT_LANGUAGE, /, **values: object) -> str:
    """The text of `msg_id` in `lang` with its placeholders filled; English where `lang` lacks the id."""
    text = catalogue(lang).get(msg_id) or catalogue(DEFAULT_LANGUAGE)[msg_id]
    return text.format(**values) if values else text


def placeholders(text: str) -> frozenset[str]:
    """The names of `text`'s `{placeholders}` (format specs and conversions aside)."""
    return frozenset(field for _literal, field, _spec, _conversion in string.Formatter().parse(text)
                     if field is not None)
