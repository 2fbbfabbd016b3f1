"""The compare document on the console, problems first: what got worse and what newly fails, then what got better,
changed or recovered, the versions that changed, and one line for everything unchanged.

It reads the document alone (compare's --json, read back, renders the same). Host names, file names and messages come
from outside: each reaches rich as Text (never markup) through `printable`.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.text import Text

from gpuready.i18n import message, text_in
from gpuready.report.compare import IDENTITY_FIELDS
from gpuready.report.document import Gpu, mapping, number, read_finding, sequence, text
from gpuready.report.findings_view import STATUS_STYLE, UNRECOGNISED_STYLE, status_label, verdict_label
from gpuready.report.labels import labels_for
from gpuready.report.paragraph import print_paragraph
from gpuready.safe_text import printable
from gpuready.report.figures import format_value

NAMED_AT_MOST = 8
"""Names of unmatched measurements said in the one line (--verbose lists every one)."""
BUS_IDS_NAMED = 4
"""Bus ids said where two reports hold the same GPU models on other bus ids."""


def render_compare(document: dict[str, Any], lang: str = "en", verbose: bool = False,
                   console: Console | None = None) -> None:
    console = console or Console()
    say = _Say(lang)
    _render_header(document, console, say)
    _render_figures(document, "worse", "bold red", console, say)
    _render_findings(document, "newly_failing", "bold red", console, say)
    _render_findings(document, "newly_warning", "bold yellow", console, say)
    _render_figures(document, "better", "bold green", console, say)
    _render_figures(document, "changed", "bold", console, say)
    _render_findings(document, "recovered", "bold green", console, say)
    if verbose:
        _render_figures(document, "unchanged", "bold", console, say)
    console.print()
    for key, msg_id in (("versions", "compare.versions"), ("setup_changes", "compare.setup")):
        items = [mapping(item) for item in sequence(document.get(key))]
        if items:
            print_paragraph(console, say(msg_id, changes=say("list.separator").join(
                say("compare.version", name=text(item.get("name")), base=_plain(item.get("base")),
                    new=_plain(item.get("new"))) for item in items)))
    print_paragraph(console, say("compare.unchanged", figures=len(sequence(document.get("unchanged"))),
                                 findings=_count(document.get("findings_unchanged"))))
    if tolerances := _tolerances(document):
        print_paragraph(console, say("compare.tolerances", tolerances=tolerances))
    _render_unmatched(document, console, say, verbose)
    _render_result(document, console, say)


class _Say:
    """The catalogue's text in the reader's language, and the console's labels (status, verdict)."""

    def __init__(self, lang: str):
        self.lang, self.labels = lang, labels_for(lang)

    def __call__(self, msg_id: str, **values: Any) -> str:
        return message(msg_id, self.lang, **values)


def _render_header(document: dict, console: Console, say: _Say) -> None:
    base, new = mapping(document.get("base")), mapping(document.get("new"))
    print_paragraph(console, Text(say("compare.title", base=text(base.get("file")), new=text(new.get("file"))),
                                  style="bold"))
    for role, summary in (("base", base), ("new", new)):
        print_paragraph(console, say("compare.document", role=say(f"compare.role.{role}"),
                                     host=text(summary.get("host")), started=text(summary.get("started_at")),
                                     verdict=verdict_label(summary.get("verdict"), say.labels),
                                     version=text(summary.get("tool_version"))), indent=2)
    if _started(new) and _started(base) and _started(new) < _started(base):
        print_paragraph(console, say("compare.new_is_older"))
    if document.get("same_host") is False:
        print_paragraph(console, say("compare.hosts_differ", base=text(base.get("host")), new=text(new.get("host"))))
    differences = [mapping(item) for item in sequence(document.get("differences"))]
    if differences:
        words = say("list.separator").join(_difference(item, say) for item in differences)
        comparable = document.get("comparable") is not False
        print_paragraph(console, Text(say("compare.differs" if comparable else "compare.not_comparable",
                                          differences=words), style="" if comparable else "bold magenta"))


def _difference(item: dict, say: _Say) -> str:
    """`report of check → bench`, `GPUs 8 × H100 SXM → 1 × H200`: one thing that differs, each side in its words."""
    name = text(item.get("name"))
    base, new = item.get("base"), item.get("new")
    if name == "gpus":
        base_words, new_words = _gpu_words(base, new), _gpu_words(new, base)
    else:
        base_words, new_words = text(base), text(new)
    label = say(f"compare.identity.{name}") if name in IDENTITY_FIELDS else name
    return say("compare.difference", name=label, base=base_words, new=new_words)


def _gpu_words(gpus: Any, other: Any) -> str:
    """`8 × H100 SXM`; where both sides count the same models, the bus ids this side has and the other lacks."""
    mine = [text(gpu) for gpu in sequence(gpus)]
    theirs = {text(gpu) for gpu in sequence(other)}
    models = Counter(gpu.partition(" ")[2] or "?" for gpu in mine)
    words = ", ".join(f"{count} × {model}" for model, count in sorted(models.items()))
    if models == Counter(gpu.partition(" ")[2] or "?" for gpu in theirs):
        missing = [gpu.partition(" ")[0] for gpu in mine if gpu not in theirs]
        words += f" ({', '.join(missing[:BUS_IDS_NAMED])}{' …' if len(missing) > BUS_IDS_NAMED else ''})"
    return words


def _section(document: dict, section: str, style: str, console: Console, say: _Say) -> list[dict]:
    """The section's entries, under its heading (`Worse (3)`); no heading where it has none."""
    entries = [mapping(entry) for entry in sequence(document.get(section))]
    if entries:
        console.print()
        print_paragraph(console, Text(say(f"compare.section.{section}", count=len(entries)), style=style))
    return entries


def _render_figures(document: dict, section: str, style: str, console: Console, say: _Say) -> None:
    """One line per figure, `name subject: base → new (change)`: a table of five columns cut or folded the name at
    80 columns."""
    for entry in _section(document, section, style, console, say):
        unit = text(entry.get("unit"), "")
        line = Text(text(entry.get("name")), style="bold")
        line.append(" " + say("compare.figure", subject=_subject(entry, say),
                              base=format_value(number(entry.get("base")), unit),
                              new=format_value(number(entry.get("new")), unit), change=_change(entry, say)))
        print_paragraph(console, line, indent=2)


def _render_findings(document: dict, section: str, style: str, console: Console, say: _Say) -> None:
    """`check subject: base → new`, and the new report's message under it."""
    for entry in _section(document, section, style, console, say):
        new = entry.get("new")
        line = Text(text(entry.get("check_id")), style="bold")
        line.append(" " + say("compare.finding", subject=_subject(entry, say), base=_status(entry.get("base"), say),
                              new=""))
        line.append(_status(new, say), style=STATUS_STYLE.get(new, UNRECOGNISED_STYLE) if isinstance(new, str)
                    else UNRECOGNISED_STYLE)
        print_paragraph(console, line, indent=2)
        message_text = _message(entry, say)
        if message_text:
            print_paragraph(console, message_text, indent=4)


def _render_unmatched(document: dict, console: Console, say: _Say, verbose: bool) -> None:
    unmatched = mapping(document.get("unmatched"))
    for side in ("base_only", "new_only"):
        entries = [mapping(entry) for entry in sequence(unmatched.get(side))]
        if entries:
            names = sorted({text(entry.get("name")) for entry in entries})
            shown = names if verbose else names[:NAMED_AT_MOST]
            more = len(names) - len(shown)
            print_paragraph(console, say(f"compare.{side}", count=len(entries),
                                         names=", ".join(shown) + (" …" if more else "")))
    findings = mapping(document.get("findings_unmatched"))
    base_only, new_only = len(sequence(findings.get("base_only"))), len(sequence(findings.get("new_only")))
    if base_only or new_only:
        print_paragraph(console, say("compare.findings_only", base=base_only, new=new_only))
    matched = sum(len(sequence(document.get(key))) for key in ("worse", "better", "changed", "unchanged"))
    if not matched and unmatched.get("base_only") and unmatched.get("new_only"):
        print_paragraph(console, say("compare.nothing_matched"))


def _render_result(document: dict, console: Console, say: _Say) -> None:
    counts = {"worse": len(sequence(document.get("worse"))), "failing": len(sequence(document.get("newly_failing"))),
              "warning": len(sequence(document.get("newly_warning")))}
    code = document.get("exit_code")
    if document.get("comparable") is False:
        line = Text(say("compare.result.not_comparable", code=text(code), **counts), style="bold magenta")
    elif counts["worse"] or counts["failing"]:
        line = Text(say("compare.result.worse", code=text(code), **counts), style="bold red")
    elif counts["warning"]:
        line = Text(say("compare.result.worse", code=text(code), **counts), style="bold yellow")
    else:
        line = Text(say("compare.result.same", code=text(code)), style="bold green")
    print_paragraph(console, line)


def _started(summary: dict) -> datetime | None:
    """When a run started (aware), or None where its document does not say in ISO 8601."""
    try:
        started = datetime.fromisoformat(str(summary.get("started_at")))
    except ValueError:
        return None
    return started if started.tzinfo is not None else None


def _subject(entry: dict, say: _Say) -> str:
    """`GPU1 0000:3b:00.0 (GPU0 in the base)`, `GPU0↔GPU1 …`, the host for a host-level figure; bench's run as
    `ddp×8`."""
    subject = mapping(entry.get("subject"))
    label = _gpus(subject) or text(subject.get("host"))
    base_label = _gpus(mapping(entry.get("base_subject")), bus_ids=False) if entry.get("base_subject") else ""
    if base_label:
        label = say("compare.subject.was", now=label, base=base_label)
    run = mapping(entry.get("run"))
    if run.get("strategy") is not None and run.get("world_size") is not None:
        label += printable(f" {run['strategy']}×{run['world_size']}")
    if run.get("workers") is not None:
        label += " " + say("compare.subject.workers", workers=text(run["workers"]))
    return label


def _gpus(subject: dict, bus_ids: bool = True) -> str:
    """`GPU0 0000:3b:00.0`, a pair `GPU0↔GPU1 0000:3b:00.0↔0000:5e:00.0`; '' where the subject names no GPU."""
    finding = read_finding({"subject": subject})
    gpus = [gpu for gpu in (finding.gpu, finding.peer) if isinstance(gpu, Gpu)]
    names = "↔".join(gpu.label() for gpu in gpus)
    if not bus_ids:
        return names
    return f"{names} {'↔'.join(gpu.bus_id for gpu in gpus if gpu.bus_id and gpu.index is not None)}".strip()


def _change(entry: dict, say: _Say) -> str:
    change = number(entry.get("change_pct"))
    return say("compare.change.from_zero") if change is None else f"{change:+,.1f} %"


def _tolerances(document: dict) -> str:
    """`compute 5 %, bandwidth 3 %`: the tolerance of each kind among the matched figures, in their order."""
    found: dict[str, str] = {}
    for key in ("worse", "better", "changed", "unchanged"):
        for entry in map(mapping, sequence(document.get(key))):
            tolerance = number(entry.get("tolerance_pct"))
            found.setdefault(text(entry.get("kind")), f"{tolerance:g} %" if tolerance is not None else "?")
    return ", ".join(f"{kind} {tolerance}" for kind, tolerance in found.items())


def _status(status: Any, say: _Say) -> str:
    return say("compare.status.absent") if status is None else status_label(status, say.labels)


def _message(entry: dict, say: _Say) -> str:
    if isinstance(entry.get("message_id"), str):
        translated = text_in(say.lang, entry["message_id"], mapping(entry.get("message_values")))
        if translated is not None:
            return printable(translated)
    return text(entry.get("message"), "")


def _plain(value: Any) -> str:
    """A version or a method's value as written: `580.159.04`, `4`, `bf16`, `8192×8192×8192` for a shape."""
    if isinstance(value, list):
        return "×".join(text(item) for item in value)
    return text(value)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
