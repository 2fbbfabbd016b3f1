"""Every word the console prints around the document's own text, in English and Chinese: the message catalogue's
`label.*` ids (gpuready/i18n.py, `locale/<lang>/LC_MESSAGES/gpuready.po`); never inline in a view.

Readers of Chinese first (`--lang zh`): a Chinese label is followed by the English one, so a pasted console still
matches the English documentation.
"""

from __future__ import annotations

from functools import lru_cache

from gpuready.i18n import LANGUAGES, catalogue, message


def labels_for(lang: str) -> dict:
    """The console's labels in `lang` (English for a language without a catalogue): the catalogue's `label.*` ids,
    `label.NAME.N` ids joined into NAME's tuple (table columns)."""
    return _labels(lang if lang in LANGUAGES else "en")


@lru_cache(maxsize=None)
def _labels(lang: str) -> dict:
    labels: dict = {}
    columns: dict[str, dict[int, str]] = {}
    for msg_id in catalogue("en"):
        if not msg_id.startswith(_PREFIX):
            continue
        key, _, index = msg_id[len(_PREFIX):].rpartition(".")
        if key and index.isdigit():
            columns.setdefault(key, {})[int(index)] = message(msg_id, lang)
        else:
            labels[msg_id[len(_PREFIX):]] = message(msg_id, lang)
    labels.update({key: tuple(parts[i] for i in sorted(parts)) for key, parts in columns.items()})
    labels[LANGUAGE_KEY] = lang  # views that render the document's own catalogue text need the language, not words
    return labels


def category_label(category: object, labels: dict) -> object:
    """A finding's category (its check id's first part) in the labels' language: `label.category.<name>`; a category
    the catalogue does not name (a document of another version) as it is."""
    return labels.get(f"category.{category}", category) if isinstance(category, str) else category


_PREFIX = "label."
LANGUAGE_KEY = "language"
"""The key holding the labels' language code (`en`, `zh`); no catalogue id is `label.language`."""
