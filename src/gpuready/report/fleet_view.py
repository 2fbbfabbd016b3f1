"""The fleet document (verbs/fleet) as every view shows it: the header, each cohort's number and name, the nodes with
a problem and what is low (`80 % of the expected 791.2 TFLOP/s`) or outside its NVLink domain, the NVLink domains,
the notes about the inputs, each measurement's label and unit. The console (verbs/fleet/view.py), the HTML page (report/html.py, charts/fleet.py) and the Markdown
summary (report/fleet_markdown.py) lay this out; none of them words a figure or numbers a cohort itself.

It reads the document alone (the --json output, read back, gives the same view), each value checked for its type.
Every text is plain: host names, file names and units come from outside and are passed through `printable`; the
renderers escape them for their markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuready.i18n import message, text_in
from gpuready.report.document import mapping, number, sequence, text
from gpuready.report.figures import format_value
from gpuready.report.measurement_kinds import unit_label
from gpuready.safe_text import printable

NAMED_AT_MOST = 20
"""Unreadable files named in a view; the --json document names every one."""
PROBLEMS = ("failing", "outlier", "unknown")
VERDICTS = ("failing", "outlier", "unknown", "healthy")


@dataclass(kw_only=True)
class CohortView:
    index: int
    """1 for the first cohort (the document's index 0)."""
    name: str
    """`Cohort 1: 1 x H200 SXM, driver 580.159.04`."""
    line: str
    """The sentence: its name, its node count, and whether it is weak or judged against a baseline."""
    spreads: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    """(measurement, better, median, MAD, nodes) per measurement, figures with their unit."""


@dataclass(kw_only=True)
class NodeView:
    host: str
    verdict: str
    """failing | outlier | unknown | healthy, or `other` for a verdict no version writes."""
    verdict_label: str
    cohort: str
    """Its cohort's name, `-` where the document names none."""
    lines: list[str]
    """What is low, one sentence per figure, worst first (its own report's verdict first)."""


@dataclass(kw_only=True)
class MeasurementView:
    key: str
    """The name in the document's `measurements` (`name`, or `name (kind)`)."""
    label: str
    unit: str
    """The unit as a reader writes it (`GB/s`), '' for none."""
    spread: dict
    outliers: set[tuple[str, float]]
    """(host, value) of each figure the fleet judge named low."""


@dataclass(kw_only=True)
class FleetView:
    header: str
    alarm: bool
    """A node is failing or an outlier."""
    cohorts: list[CohortView]
    notes: list[str]
    """The inputs that were not judged: unreadable, superseded, skipped files, dropped measurements."""
    domains: list[str]
    """The NVLink domains the GB200/GB300 trays registered in (cluster, clique, node count), largest first."""
    nodes: list[NodeView]
    """Every node, problems first, as the fleet judge ordered them."""
    healthy: str
    rule: str
    saved: str | None
    measurements: list[MeasurementView]
    column: dict[str, str]
    """Column headings: node, verdict, cohort, what."""
    pairs: list[str] = field(default_factory=list)
    """validate --between-nodes: the bad nodes and links the fleet's pair tests name (verbs/fleet/pairs.py)."""

    @property
    def problems(self) -> list[NodeView]:
        return [node for node in self.nodes if node.verdict in PROBLEMS]


class Say:
    """The catalogue's text in the reader's language: `say("fleet.healthy", count=3)`."""

    def __init__(self, lang: str):
        self.lang = lang

    def __call__(self, msg_id: str, **values: Any) -> str:
        return message(msg_id, self.lang, **values)


def fleet_view(document: dict[str, Any], lang: str = "en") -> FleetView:
    say = Say(lang)
    summary = mapping(document.get("summary"))
    cohorts = [_cohort(mapping(cohort), index, document, say)
               for index, cohort in enumerate(sequence(document.get("cohorts")), 1)]
    limits = mapping(document.get("limits"))
    rows = [mapping(row) for row in sequence(document.get("nodes"))]
    counts = {key: _count(summary.get(key), sum(row.get("verdict") == key for row in rows)) for key in VERDICTS}
    return FleetView(
        header=say("fleet.header", nodes=_count(summary.get("nodes"), len(rows)), cohorts=len(cohorts), **counts),
        alarm=bool(counts["failing"] or counts["outlier"]), cohorts=cohorts,
        notes=_input_notes(document, rows, say), domains=_domains(document, say), nodes=[_node(row, cohorts, say) for row in rows],
        healthy=say("fleet.healthy", count=counts["healthy"]),
        rule=say("fleet.rule", z=number(limits.get("z_limit")) or 0, floor=number(limits.get("floor_pct")) or 0,
                 fraction=number(limits.get("expected_fraction")) or 0) + _noise_floors(limits, say),
        saved=say("fleet.baseline.saved", path=printable(document["saved_baseline"]))
        if document.get("saved_baseline") else None,
        measurements=measurement_views(document),
        column={key: say(f"fleet.column.{key}") for key in ("node", "verdict", "cohort", "what")},
        pairs=between_nodes_lines(mapping(document.get("between_nodes")), say))


def between_nodes_lines(pairs: dict, say: Say) -> list[str]:
    """One line per bad node, bad link and slow pair not narrowed: its pairs' figures and transport against the
    expected (or median) figure; one line where the pair tests name nothing."""
    if not pairs:
        return []
    basis = say(f"validate.between_nodes.basis.{'expected' if pairs.get('basis') == 'expected' else 'median'}")
    reference = format_value(number(pairs.get("reference_gb_per_s")), "gb_per_s")

    def figures(entry: dict) -> str:
        shown = []
        for row in map(mapping, sequence(entry.get("pairs"))):
            names = [text(name) for name in sequence(row.get("nodes"))] + ["?", "?"]
            value = number(row.get("gb_per_s"))
            shown.append(say("fleet.pairs.figure", a=names[0], b=names[1], transport=text(row.get("transport"), "-"),
                             value=say("fleet.pairs.failed") if value is None else format_value(value, "gb_per_s")))
        return "; ".join(shown)
    lines = [say(f"fleet.pairs.{kind}", node=text(entry.get("node")),
                 nodes=" ↔ ".join(text(name) for name in sequence(entry.get("nodes"))), figures=figures(entry),
                 reference=reference, basis=basis)
             for kind, key in (("node", "bad_nodes"), ("link", "bad_links"), ("undecided", "undecided"))
             for entry in map(mapping, sequence(pairs.get(key)))]
    return lines or [say("fleet.pairs.clean", pairs=int(number(pairs.get("pairs")) or 0),
                         runs=len(sequence(pairs.get("runs"))), reference=reference, basis=basis)]


def _noise_floors(limits: dict[str, Any], say: Say) -> str:
    """` For a latency, 70% …`: the kinds whose floor is their run-to-run noise (fleet's limits.floor_pct_by_kind)."""
    floors = [say("fleet.rule.kind_floor", kind=printable(kind), floor=number(pct) or 0)
              for kind, pct in sorted(mapping(limits.get("floor_pct_by_kind")).items())]
    return " " + say("fleet.rule.noise", floors=", ".join(floors)) if floors else ""


def measurement_views(document: dict[str, Any]) -> list[MeasurementView]:
    """Each fleet-wide measurement's label, unit and spread, and the figures named low (language-free: the charts')."""
    rows = [mapping(row) for row in sequence(document.get("nodes"))]
    return [MeasurementView(key=printable(key), label=printable(key), unit=unit_label(text(mapping(entry).get("unit"),
                                                                                           "")),
                            spread=mapping(entry), outliers=_named_low(rows, str(key)))
            for key, entry in mapping(document.get("measurements")).items()]


def _count(value: Any, otherwise: int = 0) -> int:
    """A count of the document (a document edited by hand may hold anything there)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else otherwise


def _cohort(cohort: dict, index: int, document: dict, say: Say) -> CohortView:
    key = cohort.get("key")
    nodes = _count(cohort.get("nodes"))
    if isinstance(key, dict):
        name = say("fleet.cohort.name", index=index, count=text(key.get("gpu_count"), "?"),
                   model=text(key.get("gpu_model")), driver=text(key.get("driver_version")))
        line = say("fleet.cohort", index=index, count=text(key.get("gpu_count"), "?"), model=text(key.get("gpu_model")),
                   driver=text(key.get("driver_version")), nodes=nodes)
    else:
        name = say("fleet.cohort.name.unknown", index=index)
        line = say("fleet.cohort.unknown", index=index, nodes=nodes)
    if cohort.get("basis") == "baseline":
        line = say("fleet.cohort.note", line=line, note=say("fleet.cohort.baseline", path=text(document.get("baseline"))))
    elif cohort.get("weak"):
        minimum = mapping(document.get("limits")).get("min_robust_nodes", "?")
        line = say("fleet.cohort.note", line=line, note=say("fleet.cohort.weak", nodes=nodes, minimum=text(minimum)))
    return CohortView(index=index, name=name, line=line, spreads=_spreads(cohort, say))


def _spreads(cohort: dict, say: Say) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for name, entry in mapping(cohort.get("measurements")).items():
        entry = mapping(entry)
        unit = text(entry.get("unit"), "")
        rows.append((text(name), say("fleet.sense.higher" if entry.get("higher_is_better") else "fleet.sense.lower"),
                     format_value(number(entry.get("median")), unit), format_value(number(entry.get("mad")), unit),
                     text(entry.get("n"))))
    return rows


def _input_notes(document: dict, rows: list[dict], say: Say) -> list[str]:
    notes = []
    unreadable = [mapping(item) for item in sequence(document.get("unreadable"))]
    if unreadable:
        named = [say("fleet.file_reason", file=text(item.get("file")), reason=_reason(item, say))
                 for item in unreadable[:NAMED_AT_MOST]]
        more = len(unreadable) - len(named)
        notes.append(say("fleet.unreadable", count=len(unreadable), named=say("list.separator").join(named))
                     + (" " + say("fleet.unreadable.more", count=more) if more else ""))
    for key in ("superseded", "skipped"):
        files = [text(path) for path in sequence(document.get(key))]
        if files:
            shown = ", ".join(files[:NAMED_AT_MOST]) + (" …" if len(files) > NAMED_AT_MOST else "")
            notes.append(say(f"fleet.{key}", count=len(files), files=shown))
    dropped = sum(_count(row.get("dropped_measurements")) for row in rows)
    if dropped:
        notes.append(say("fleet.dropped", count=dropped, limit=_count(mapping(document.get("limits")).get(
            "names_per_report"), 64)))
    return notes


def _reason(item: dict, say: Say) -> str:
    said = mapping(item.get("reason_text"))
    if isinstance(said.get("message_id"), str):
        translated = text_in(say.lang, said["message_id"], mapping(said.get("message_values")))
        if translated is not None:
            return printable(translated)
    return text(item.get("reason"))


def _node(row: dict, cohorts: list[CohortView], say: Say) -> NodeView:
    verdict = row.get("verdict") if row.get("verdict") in VERDICTS else "other"
    index = row.get("cohort")
    cohort = cohorts[index].name if isinstance(index, int) and not isinstance(index, bool) and \
        0 <= index < len(cohorts) else "-"
    return NodeView(host=_host(row, say), verdict=verdict,
                    verdict_label=say(f"fleet.verdict.{verdict}") if verdict != "other" else text(row.get("verdict")),
                    cohort=cohort, lines=_what(row, say))


def _host(row: dict, say: Say) -> str:
    host = row.get("host")
    if host:
        return text(host)
    files = sequence(row.get("files"))
    return say("fleet.unknown_host", file=text(files[0] if files else None))


def _what(row: dict, say: Say) -> list[str]:
    """One line per low figure, worst first; a node whose own report failed says so first."""
    lines = []
    if row.get("verdict") == "failing":
        failed = [text(report.get("file")) for report in map(mapping, sequence(row.get("reports")))
                  if report.get("verdict") == "not_ready"]
        lines.append(say("fleet.own_report.not_ready", files=", ".join(failed)))
    elif row.get("verdict") == "unknown":
        lines.append(say("fleet.own_report.unknown"))
    domain = mapping(row.get("nvlink_domain"))
    return lines + ([_domain(domain, say)] if domain else []) + \
        [_low(mapping(outlier), say) for outlier in sequence(row.get("outliers"))]


def _domains(document: dict, say: Say) -> list[str]:
    """One line per NVLink domain (the first NAMED_AT_MOST), then how many more."""
    domains = [mapping(domain) for domain in sequence(document.get("nvlink_domains"))]
    lines = [say("fleet.domain.line", **_pair(domain), nodes=_count(domain.get("nodes")))
             for domain in domains[:NAMED_AT_MOST]]
    return lines + ([say("fleet.domain.more", count=len(domains) - NAMED_AT_MOST)] if len(domains) > NAMED_AT_MOST
                    else [])


def _pair(entry: dict) -> dict[str, str]:
    return {"uuid": text(entry.get("cluster_uuid"), "-"), "clique": text(entry.get("clique_id"), "-")}


def _domain(domain: dict, say: Say) -> str:
    """The node's NVLink domain finding (verbs/fleet/nvlink_domain.py), its values beside the majority's."""
    kind = domain.get("kind")
    majority = mapping(domain.get("majority"))
    theirs = say("fleet.domain.majority", **_pair(majority), nodes=_count(majority.get("nodes"))) if majority \
        else say("fleet.domain.no_majority")
    if kind == "mixed":
        gpus = [say("fleet.domain.gpus", **_pair(mapping(entry)),
                    gpus=", ".join(text(index) for index in sequence(mapping(entry).get("gpus"))))
                for entry in map(mapping, sequence(domain.get("gpus")))]
        return say("fleet.domain.mixed", values=say("list.separator").join(gpus), majority=theirs)
    if kind == "clique_split":
        cliques = ", ".join(say("fleet.domain.split_part", clique=text(entry.get("clique_id")),
                                nodes=_count(entry.get("nodes"))) for entry in map(mapping, sequence(domain.get("cliques"))))
        return say("fleet.domain.clique_split", **_pair(domain), cliques=cliques)
    if kind in ("unregistered", "cluster", "clique"):
        return say(f"fleet.domain.{kind}", **_pair(domain), majority=theirs)
    return text(kind)


def _low(outlier: dict, say: Say) -> str:
    rules = [rule for rule in sequence(outlier.get("rules")) if isinstance(rule, str)]
    where = _subject(mapping(outlier.get("subject")), say)
    name = say("fleet.low.where", name=text(outlier.get("name")), where=where) if where else text(outlier.get("name"))
    if "out_of_range" in rules:
        return say("fleet.low.out_of_range", name=name, limit=number(outlier.get("limit")) or 0.0)
    unit = text(outlier.get("unit"), "")
    parts = []
    if "fleet" in rules or "baseline" in rules:
        parts.append(say("fleet.low.baseline" if "baseline" in rules else "fleet.low.fleet",
                         deficit=number(outlier.get("deficit_pct")) or 0.0,
                         median=format_value(number(outlier.get("median")), unit)))
    if "expected" in rules:
        parts.append(say("fleet.low.expected", share=number(outlier.get("share_of_expected")) or 0.0,
                         expected=format_value(number(outlier.get("expected")), unit)))
    return say("fleet.low", name=name, value=format_value(number(outlier.get("value")), unit),
               why=say("list.separator").join(parts))


def _subject(subject: dict, say: Say) -> str:
    gpu, peer = subject.get("gpu"), subject.get("peer")
    if gpu is None:
        return ""
    if peer is not None:
        return say("fleet.subject.pair", gpu=text(gpu), peer=text(peer))
    return say("fleet.subject.gpu", gpu=text(gpu))


def _named_low(rows: list[dict], key: str) -> set[tuple[str, float]]:
    """(host, value) of each outlier the fleet judge named for the measurement `key`."""
    named = set()
    for row in rows:
        for outlier in map(mapping, sequence(row.get("outliers"))):
            name, kind = outlier.get("name"), mapping(outlier.get("subject")).get("kind")
            value = number(outlier.get("value"))
            if value is not None and value == value and abs(value) != float("inf") and \
                    key in (name, f"{name} ({kind})"):
                named.add((printable(row.get("host") or "?"), float(value)))
    return named
