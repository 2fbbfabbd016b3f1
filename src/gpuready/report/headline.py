"""The first line of a report whose machine verdict is `unknown` while a finding fails (diagnose of logs alone: an NCCL
error says the job failed, not whether the machine is ready): the headline says what failed first, the first root
cause's check id and the opening clause of its message, and "not enough evidence to judge the whole machine" is the
line under it. Every view (console, HTML, Markdown, JUnit) takes both lines from here, so they say the same.

The document's `verdict` stays `unknown` (README "Exit codes"); the headline is read from its findings, so a saved
report renders it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuready.model import Status, Verdict
from gpuready.report.document import Finding, judges_machine

TITLE_CHARS = 120
"""A title longer than this is cut (with …): the message follows in full under the finding."""
_CLAUSE_ENDS = (": ", ". ", "; ", "：", "。", "；")
_OPENS, _CLOSES = "(（[", ")）]"
FAILING = (Status.FAIL.value, Status.ERROR.value)


@dataclass(frozen=True)
class Headline:
    status: str
    check_id: str
    title: str
    failing: int
    """How many findings fail (or errored) in all."""

    def first_line(self, labels: dict) -> str:
        return labels["headline_failed"].format(status=labels[self.status].upper(), check_id=self.check_id,
                                                title=self.title)


def headline(document: dict, findings: list[Finding]) -> Headline | None:
    """What failed first, where the machine's verdict is `unknown` and a finding fails; None otherwise (the verdict
    then says it: READY, NOT READY, …)."""
    if not judges_machine(document) or document.get("verdict") != Verdict.UNKNOWN.value:
        return None
    failing = [finding for finding in findings if finding.status in FAILING]
    if not failing:
        return None
    first = next((finding for finding in failing if not finding.consequence_of), failing[0])
    return Headline(status=first.status or Status.FAIL.value, check_id=first.check_id, title=title_of(first.message),
                    failing=len(failing))


def title_of(message: str) -> str:
    """The message's opening clause: up to its first `: `, `. ` or `; ` outside brackets and `code spans`."""
    depth, code = 0, False
    for position, character in enumerate(message):
        if character == "`":
            code = not code
        elif code:
            continue
        elif character in _OPENS:
            depth += 1
        elif character in _CLOSES:
            depth = max(0, depth - 1)
        elif depth == 0 and (character == "\n" or any(message.startswith(end, position) for end in _CLAUSE_ENDS)):
            message = message[:position]
            break
    message = message.strip()
    return message if len(message) <= TITLE_CHARS else message[:TITLE_CHARS - 1].rstrip() + "…"
