"""Which verb wrote a saved report document. The document has no field for it; each verb keeps its own part of the
facts (`facts.burn`, `facts.plan`, …), `check` its inventory's sources, `diagnose net` its peers."""

from __future__ import annotations

from gpuready.report.document import mapping

VERB_FACTS = ("plan", "bench", "burn", "validate", "diagnose")
"""A verb whose own part of the facts is named after it (validate's sits beside the inventory: it comes first)."""
UNKNOWN_VERB = "report"
"""A document whose facts name no verb (older, or edited by hand)."""


def verb_of(document: dict) -> str:
    facts = mapping(document.get("facts"))
    named = next((verb for verb in VERB_FACTS if verb in facts), None)
    if named:
        return named
    if "peers" in facts and "nccl_settings" in facts:
        return "diagnose"
    return "check" if "sources" in facts else UNKNOWN_VERB
