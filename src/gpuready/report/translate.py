"""A report document's findings in the reader's language: each finding that carries a `message_id` is rendered from
the message catalogue with its `message_values`; one that does not (or whose values do not fit, in a document edited by
hand) keeps the English it was written with."""

from __future__ import annotations

from typing import Any

from gpuready.i18n import DEFAULT_LANGUAGE, text_in


def in_language(document: dict, lang: str) -> dict:
    """`document` with its findings' message and fix, and why the evidence is not enough, in `lang` where the
    catalogue has them (a shallow copy), its `language` then `lang`. A document written in another language (`--json
    --lang zh` sets `language`) renders again in English too."""
    if lang == document.get("language", DEFAULT_LANGUAGE) or not isinstance(document.get("findings"), list):
        return document
    translated = {**document, "language": lang,
                  "findings": [finding_in(finding, lang) for finding in document["findings"]]}
    said = document.get("not_enough_evidence_text")
    if document.get("not_enough_evidence") and isinstance(said, dict) and isinstance(said.get("message_id"), str):
        values = said.get("message_values") if isinstance(said.get("message_values"), dict) else {}
        translated["not_enough_evidence"] = text_in(lang, said["message_id"], values) or document["not_enough_evidence"]
    return translated


def finding_in(finding: Any, lang: str) -> Any:
    """One finding (or compare's entry of one) with its message and fix in `lang` where its `message_id` allows."""
    if not isinstance(finding, dict) or not isinstance(finding.get("message_id"), str):
        return finding
    values = finding.get("message_values") if isinstance(finding.get("message_values"), dict) else {}
    msg_id = finding["message_id"]
    translated = dict(finding)
    for key, text_id in (("message", msg_id), ("fix", f"{msg_id}.fix")):
        if finding.get(key) is not None and (text := text_in(lang, text_id, values)) is not None:
            translated[key] = text
    return translated
