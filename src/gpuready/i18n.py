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

import hashlib
import json
import os
import string
from dataclasses import dataclass
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


def catalogue_paths(lang: str) -> list[Path]:
    """One PO file per domain (`gpuready.po`: the console's labels; `check_<module>.po`, `diagnose_<reader>.po`: the
    findings of one module), so that each module's messages sit beside nobody else's."""
    return sorted((LOCALE_DIR / lang / "LC_MESSAGES").glob("*.po"))


@lru_cache(maxsize=None)
def catalogue(lang: str) -> dict[str, str]:
    """{message id: text} of one language, all its domains (an unknown language: English). Parsing the PO files
    takes about 0.1 s, a tenth of a live `check --fast`; the parsed result is kept in the user's cache folder under a
    key of the files' names, sizes and times, so a later run loads it in milliseconds and an edited file is read
    again. Where the cache cannot be read or written, the files are parsed every time."""
    paths = catalogue_paths(lang if lang in LANGUAGES else DEFAULT_LANGUAGE)
    cached = _cache_file(lang, paths)
    try:
        texts = json.loads(cached.read_text(encoding="utf-8")) if cached else None
    except (OSError, ValueError):
        texts = None
    if isinstance(texts, dict):
        return texts
    texts = _parse(paths)
    if cached:
        _write_quietly(cached, json.dumps(texts, ensure_ascii=False))
    return texts


def _parse(paths: list[Path]) -> dict[str, str]:
    from babel.messages.pofile import read_po  # only where the cache cannot serve: Babel's import is 40 ms

    texts: dict[str, str] = {}
    for path in paths:
        with open(path, "rb") as po_file:
            texts.update((entry.id, entry.string) for entry in read_po(po_file) if entry.id and entry.string)
    return texts


def _cache_file(lang: str, paths: list[Path]) -> Path | None:
    """`$XDG_CACHE_HOME/gpuready/catalogue-LANG-KEY.json` (default ~/.cache), KEY a digest of the PO files' names,
    sizes and modification times; None where no cache folder can be named (no home)."""
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        stamps = [(path.name, stat.st_size, stat.st_mtime_ns) for path in paths for stat in [path.stat()]]
    except (OSError, RuntimeError):
        return None
    key = hashlib.sha256(repr((str(LOCALE_DIR), stamps)).encode()).hexdigest()[:16]
    return base / "gpuready" / f"catalogue-{lang}-{key}.json"


def _write_quietly(path: Path, text: str) -> None:
    """Write through a temporary name, so that a reader never sees half a file; a read-only home is no error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except OSError:
        pass


MAX_SAID_DEPTH = 6
"""Levels of catalogue text inside catalogue text (a `Said` among a `Said`'s values) that are rendered; deeper ones
read `…`. A saved report is read from outside, and a template that names one placeholder twice
(`pcie.aer.device_both.fix`) doubles the text at every level: 20 levels of 2 KB made hundreds of MB (issue 32). The
catalogue's own texts nest three levels at most."""
MAX_MESSAGE_CHARS = 64 << 10
"""The longest one rendered message (64 Ki characters); a longer one ends in `text.cut` ("…(cut)")."""
_DEEPER = "…"


def message(msg_id: str, lang: str = DEFAULT_LANGUAGE, /, **values: object) -> str:
    """The text of `msg_id` in `lang` with its placeholders filled; English where `lang` lacks the id.

    A value may itself be catalogue text (a `Said`, or its JSON form `{"message_id": …, "message_values": …}`), and a
    list of such values reads as one sentence each, so that a finding built from parts (an Xid's meaning from the
    catalog, the cause a log line names) renders whole in either language. Bounded: `MAX_SAID_DEPTH` levels of such
    values, `MAX_MESSAGE_CHARS` characters in all."""
    return _message(msg_id, lang, values, 0)


def _message(msg_id: str, lang: str, values: Mapping[str, object], depth: int) -> str:
    text = catalogue(lang).get(msg_id) or catalogue(DEFAULT_LANGUAGE)[msg_id]
    if values:
        text = text.format(**{name: _in_language(value, lang, depth + 1) for name, value in values.items()})
    return cut(text, lang)


def cut(text: str, lang: str = DEFAULT_LANGUAGE, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text`, or its first `limit` characters and `text.cut` ("…(cut)") where it is longer."""
    if len(text) <= limit:
        return text
    return text[:limit] + (catalogue(lang).get("text.cut") or catalogue(DEFAULT_LANGUAGE)["text.cut"])


def _in_language(value: object, lang: str, depth: int) -> object:
    value = value.said if isinstance(value, Sentence) else value
    nested = isinstance(value, Said) or (isinstance(value, dict) and isinstance(value.get("message_id"), str))
    if (nested or isinstance(value, list)) and depth > MAX_SAID_DEPTH:
        return _DEEPER
    if isinstance(value, Said):
        return _message(value.msg_id, lang, value.values, depth)
    if nested:
        inner = value.get("message_values")
        return _message(value["message_id"], lang, inner if isinstance(inner, dict) else {}, depth)
    if isinstance(value, list) and value and all(isinstance(item, (Said, Sentence, dict)) for item in value):
        return cut(catalogue(lang).get("list.separator", "; ").join(str(_in_language(item, lang, depth))
                                                                    for item in value), lang)
    if isinstance(value, str):
        return cut(value, lang)
    return value


def text_in(lang: str, msg_id: str, values: Mapping[str, object]) -> str | None:
    """`msg_id` filled with `values` in `lang`, or None where the catalogue lacks it or the values do not fit it (a
    report document edited by hand, or written by another version)."""
    if msg_id not in catalogue(lang) and msg_id not in catalogue(DEFAULT_LANGUAGE):
        return None
    try:
        return message(msg_id, lang, **values)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError):
        return None


def json_values(values: Mapping[str, object]) -> dict[str, object]:
    """`values` as a report document keeps them: a nested `Said` as `{"message_id", "message_values"}`."""
    def as_json(value: object) -> object:
        if isinstance(value, Said):
            return {"message_id": value.msg_id, "message_values": json_values(value.values)}
        if isinstance(value, (list, tuple)):
            return [as_json(item) for item in value]
        return value
    return {name: as_json(value) for name, value in values.items()}


def said_json(text: object) -> object:
    """A `Said` (or a `Sentence`'s) as a JSON document keeps it: `{"message_id", "message_values"}`; anything else as
    it is. A rank sends its texts to the parent so (`said_from` reads them back)."""
    text = said_of(text)
    return {"message_id": text.msg_id, "message_values": json_values(text.values)} if isinstance(text, Said) else text


def said_from(value: object) -> Said | None:
    """`said_json`'s form read back as a `Said`; None for anything else (text, a document written by an older
    version)."""
    if isinstance(value, dict) and isinstance(value.get("message_id"), str):
        values = value.get("message_values")
        return Said(value["message_id"], dict(values) if isinstance(values, dict) else {})
    return None


def placeholders(text: str) -> frozenset[str]:
    """The names of `text`'s `{placeholders}` (format specs and conversions aside)."""
    return frozenset(field for _literal, field, _spec, _conversion in string.Formatter().parse(text)
                     if field is not None)


@dataclass(frozen=True)
class Said:
    """A finding's text by catalogue id: `said("network.port.in_use", port=29500)`. The finding keeps the id and the
    values, so that the report renders again in any language; its `message` and `fix` are the English."""

    msg_id: str
    values: dict[str, object]

    def english(self) -> str:
        return message(self.msg_id, DEFAULT_LANGUAGE, **self.values)

    def english_fix(self) -> str | None:
        fix_id = f"{self.msg_id}.fix"
        return message(fix_id, DEFAULT_LANGUAGE, **self.values) if fix_id in catalogue(DEFAULT_LANGUAGE) else None


def said(msg_id: str, **values: object) -> Said:
    """`values`: JSON scalars (str, int, float, bool, None), another `said(…)` or a list of them: they are kept in
    the report document. A value that is a `Sentence` is kept as its `Said`."""
    return Said(msg_id, {name: _unwrapped(value) for name, value in values.items()})


def _unwrapped(value: object) -> object:
    if isinstance(value, Sentence):
        return value.said
    if isinstance(value, list) and any(isinstance(item, Sentence) for item in value):
        return [_unwrapped(item) for item in value]
    return value


class Sentence(str):
    """Catalogue text where a plain `str` is expected (a progress line's part, a file's state in `facts.sources`, an
    exception's text): its value is the English, so that comparisons, logs and JSON documents stay as they were, and
    `.said` says it again in any language (`in_language`)."""

    said: Said

    def __new__(cls, text: Said) -> "Sentence":
        made = super().__new__(cls, text.english())
        made.said = text
        return made

    def __reduce__(self) -> tuple:
        return Sentence, (self.said,)


def sentence(msg_id: str, **values: object) -> Sentence:
    """`said(msg_id, **values)` as a `Sentence`."""
    return Sentence(said(msg_id, **values))


def said_of(text: object) -> object:
    """The catalogue text of `text`: a `Sentence`'s `Said`; an exception's (its `.said`, or a first argument that is
    a `Said` or a `Sentence`); anything else (a `Said`, a name, Python's own message) as it is."""
    if isinstance(text, Sentence):
        return text.said
    if isinstance(getattr(text, "said", None), Said):
        return text.said
    if isinstance(text, BaseException) and text.args and isinstance(text.args[0], (Said, Sentence)):
        return said_of(text.args[0])
    return text


def text_of(error: BaseException) -> str:
    """An exception's text, to raise again as another (`raise PlanError(text_of(error))`): a `Sentence` where it
    carries catalogue text (so the command line still says it in the user's language), else `str(error)`."""
    text = said_of(error)
    return Sentence(text) if isinstance(text, Said) else str(error)


def in_language(text: object, lang: str) -> str:
    """`text` in `lang`: a `Said`, a `Sentence` or an exception that carries one, from the catalogue; anything else as
    its `str()`."""
    text = said_of(text)
    return message(text.msg_id, lang, **text.values) if isinstance(text, Said) else str(text)


def said_again(finding: object) -> Said:
    """A catalogued finding's text as a `Said`, to be a part of another one."""
    return Said(finding.message_id, dict(finding.message_values or {}))


def finding_text(text: Said) -> dict[str, object]:
    """A Finding's `message`, `fix`, `message_id` and `message_values`: `Finding(check_id=…, **finding_text(said(…)))`."""
    return {"message": text.english(), "fix": text.english_fix(), "message_id": text.msg_id,
            "message_values": json_values(text.values)}
