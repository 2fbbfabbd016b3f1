"""What the evidence reader hands the check parsers: `Bundle`, {file name: text} of the tool outputs read, and for
everything else that was met, why it was not read (or read in part), so that nothing is dropped silently."""

from __future__ import annotations

from collections import Counter

from gpuready.evidence.limits import DEFAULT_LIMITS, InputLimits
from gpuready.facts.bad_input import Sentence, said_nested, sentence
from gpuready.facts.log_facts import LogFacts
from gpuready.i18n import Said

MAX_LISTED = 1000
"""Entries not read that are listed by name (beyond, counted)."""


class BundleError(Exception):
    """The bundle as a whole cannot be read (missing, not a folder or an archive, several bundles in one archive).

    `.said`: the sentence by catalogue id (the command line says it in the user's language); str() is its English."""

    def __init__(self, msg_id: str, **values: object) -> None:
        self.said = said_nested(msg_id, **values)
        super().__init__(self.said.english())


def state(kind: str, reason: object) -> Sentence:
    """An entry's state in `facts.sources`: `kind` is `skipped`, `ignored`, `rejected`, `unreadable` or `log`
    (`reader.state.<kind>`), `reason` catalogue text (a `Said` or `Sentence`)."""
    return sentence(f"reader.state.{kind}", reason=reason)


def entry_error(name: str, what: object) -> Sentence:
    """An input error about one entry: `dmesg.txt is not text: …` (`what`: catalogue text that follows the name)."""
    return sentence("reader.error.entry", name=name, sentence=what)


class Bundle(dict):
    """{file name: text} of the files read, and what happened to everything else.

    For a streamed kernel log the text holds only the lines its parser uses (`relevant_lines`), which give the same
    events as the whole log.
    """

    def __init__(self, origin: str = "", limits: InputLimits = DEFAULT_LIMITS) -> None:
        super().__init__()
        self.origin = origin
        self.limits = limits
        self.line_numbers: dict[str, list[int]] = {}
        """Streamed kernel log → each kept line's number in the whole file (its events say where they were)."""
        self.kinds: dict[str, str] = {}
        """File name → the bundle file name whose parser reads it (its own name, or what its head shows)."""
        self.not_read: dict[str, Sentence] = {}
        """Entry → its state for `facts.sources` (`state`): `skipped: …` (links, folders, special files: a warning),
        `ignored: …` (not a tool output), `rejected: …` and `unreadable: …` (input errors, in `errors` too)."""
        self.errors: list[tuple[str, Sentence]] = []
        """(entry, one sentence): input errors (`bundle.unreadable`, exit code 2)."""
        self.partial: dict[str, Sentence] = {}
        """Entry → what was read of it, where not all of it was (`bundle.truncated`)."""
        self.not_listed: Counter[str] = Counter()
        """State (`skipped`, `ignored`, `rejected`) → entries met after MAX_LISTED were listed: counted only."""
        self.logs_read: dict[str, list[str]] = {}
        """Entry that is no tool output → the log readers its lines fed (its state: `log`)."""
        self.logs: LogFacts | None = None
        """What the log readers saw in those entries; None where none fed them."""

    def note(self, name: str, kind: str, reason: Said | Sentence) -> None:
        """`name` was not read, and why (`kind`: `skipped`, `ignored`, `rejected`; see `state`); past MAX_LISTED
        entries, counted by kind instead (an archive of a million links is not a million-line report)."""
        if len(self.not_read) < MAX_LISTED or name in self.not_read:
            self.not_read[name] = state(kind, reason)
        else:
            self.not_listed[kind] += 1

    def skip(self, name: str, reason: Said) -> None:
        self.note(name, "skipped", reason)

    def unreadable(self, name: str, what: Said | Sentence) -> None:
        """`what` follows the entry's name: `is a folder, not …`, `cannot be read (…)`."""
        self.not_read[name] = state("unreadable", what)  # always listed: an input error names what it is about
        self.errors.append((name, entry_error(name, what)))
