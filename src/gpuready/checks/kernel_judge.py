"""The one judge of kernel-log events: an Xid or SXid line → status, blame, meaning and action.

Every verb that sees such an event calls this: `check` and `check --bundle` (health.xid, health.sxid, nvlink.errors),
`diagnose` (through those same checks), `burn` and `validate` (Xids NVML reported during the run) and `monitor`.
The same line gets the same status everywhere. The rule and its sources are data: knowledge/xid.toml (`[judge]`,
`[sxid]`, one row per Xid); the texts a judgement prints (an Xid's meaning and action, why this status, the cascades)
are the message catalogue's, domain knowledge_xid, so a finding built from them renders in English or Chinese.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from gpuready.facts.types import KernelEvent
from gpuready.i18n import Said, catalogue, finding_text, said
from gpuready.knowledge import load_table, xid_entry
from gpuready.model import Finding, Status, worst_status

XID_CHECK = "health.xid"
"""The check that judges Xids (checks/health.py): what a finding that follows from an Xid is the consequence of."""
XID_CATALOG_REF = "NVIDIA Xid catalog, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
SXID_REF = "NVIDIA Fabric Manager User Guide, SXid errors: https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"

# `Non-fatal`, `Nonfatal`, `non fatal`; `Fatal` that is not the tail of one of those.
_NON_FATAL = re.compile(r"\bnon[- ]?fatal\b", re.IGNORECASE)
_FATAL = re.compile(r"(?<![-\w])(?<!non )fatal\b", re.IGNORECASE)
_LOWER = {Status.FAIL: Status.WARN, Status.WARN: Status.PASS, Status.PASS: Status.PASS}


@dataclass(frozen=True)
class EventJudgement:
    """The texts are catalogue texts (domain knowledge_xid), to be parts of a finding in either language; `name`,
    `meaning`, `action` and `reasons` are their English."""

    status: Status
    title: Said
    """`Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS`, `Xid 201 (not in the catalog)`, `SXid 20034`."""
    meaning_text: Said
    """What the event means, without a closing full stop (it is a part of a sentence)."""
    action_text: Said
    blame: str
    """`application`, `GPU`, `fabric`, `driver` or `unknown`: who the catalog points at."""
    reason_texts: tuple[Said, ...]
    """Why this status (catalog severity, the line's own word, history, another container's GPU)."""
    ref: str
    nvlink: bool = False
    """An NVLink error: nvlink.errors reports it."""

    @property
    def name(self) -> str:
        return self.title.english()

    @property
    def meaning(self) -> str:
        return self.meaning_text.english()

    @property
    def action(self) -> str:
        return self.action_text.english()

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(reason.english() for reason in self.reason_texts)

    @property
    def blame_text(self) -> Said:
        return said(f"xid.blame.{self.blame.lower()}")


def xid_text(code: int, field: str) -> Said:
    """An Xid's `meaning` (without its full stop) or `action` from the catalogue (`xid.<code>.<field>`); a row added to
    xid.toml since the catalogue was written says its English text."""
    if f"xid.{code}.{field}" in catalogue("en"):
        return said(f"xid.{code}.{field}")
    entry = xid_entry(code) or {}
    return said("xid.untranslated", text=str(entry.get(field, "")).rstrip(".") if field == "meaning"
                else str(entry.get(field, "")))


def line_severity(detail: str) -> str | None:
    """`fatal`, `non-fatal` or None: what the line itself says."""
    if _NON_FATAL.search(detail):
        return "non-fatal"
    if _FATAL.search(detail):
        return "fatal"
    return None


def is_nvlink_xid(code: int | None) -> bool:
    entry = xid_entry(code) if code is not None else None
    return bool(entry and entry.get("nvlink"))


def nvlink_xids() -> list[int]:
    return sorted(row["xid"] for row in load_table("xid")["xid"] if row.get("nvlink"))


def fallen_off_bus_xid() -> int:
    """The Xid a GPU fallen off the bus without a number is judged as (xid.toml [judge] fallen_off_bus_xid)."""
    return load_table("xid")["judge"]["fallen_off_bus_xid"]


def judge_xid(code: int | None, detail: str = "", *, history: bool = False, outside: bool = False) -> EventJudgement:
    """An Xid (`code` None: a GPU fallen off the bus with no number, judged as `fallen_off_bus_xid()`).

    `history`: a later driver load or a reset of this GPU came after it; `outside`: the GPU is not this container's."""
    rule = load_table("xid")["judge"]
    code = fallen_off_bus_xid() if code is None else code
    entry = xid_entry(code)
    if entry is None:
        judged = EventJudgement(status=Status(rule["unknown_code"]), title=said("xid.name.unknown", code=code),
                                meaning_text=said("xid.unknown.meaning"),
                                action_text=said("xid.unknown.action", code=code,
                                                 url=XID_CATALOG_REF.split(", ")[1]),
                                blame="unknown", reason_texts=(said("xid.reason.unknown", code=code),),
                                ref=XID_CATALOG_REF)
        return _adjust(judged, history, outside)
    stated = line_severity(detail) if entry.get("severity_from_line") else None
    severity = said(f"xid.severity.{entry['severity']}")
    if stated == "non-fatal":
        status, reason = Status.WARN, said("xid.reason.line_non_fatal")
    elif stated == "fatal":
        status, reason = Status.FAIL, said("xid.reason.line_fatal")
    elif entry["blame"] == "application" and entry["severity"] != "critical":
        status, reason = Status.WARN, said("xid.reason.application")
    elif entry["severity"] in rule["fail_severities"]:
        status = Status.FAIL
        reason = said("xid.reason.severity_unstated" if entry.get("severity_from_line") else "xid.reason.severity",
                      severity=severity)
    else:
        status, reason = Status.WARN, said("xid.reason.severity", severity=severity)
    blame = entry["blame"]
    action = xid_text(code, "action")
    if blame == "application":
        action = said("xid.action.application_first", action=action)
    judged = EventJudgement(status=status, title=said("xid.name", code=code, mnemonic=entry["name"]),
                            meaning_text=xid_text(code, "meaning"), action_text=action, blame=blame,
                            reason_texts=(reason,), ref=entry["source"], nvlink=bool(entry.get("nvlink")))
    return _adjust(judged, history, outside)


def judge_sxid(code: int | None, detail: str = "", *, history: bool = False) -> EventJudgement:
    """An NVSwitch SXid line: fatal as the line says; non-fatal or unstated warn."""
    rule = load_table("xid")["sxid"]
    stated = line_severity(detail)
    if stated == "fatal":
        status, reason, action = Status.FAIL, said("xid.reason.line_fatal"), said("sxid.fatal_action")
    else:
        status = Status.WARN if stated == "non-fatal" else Status(rule["unstated"])
        reason = said("xid.reason.line_non_fatal" if stated else "xid.reason.line_unstated")
        action = said("sxid.non_fatal_action")
    judged = EventJudgement(status=status, title=said("sxid.name", code=code), meaning_text=said("sxid.meaning"),
                            action_text=action, blame="fabric", reason_texts=(reason,), ref=SXID_REF, nvlink=True)
    return _adjust(judged, history, outside=False)


def _adjust(judged: EventJudgement, history: bool, outside: bool) -> EventJudgement:
    status, reasons = judged.status, list(judged.reason_texts)
    if history and status == Status.FAIL:
        status = Status(load_table("xid")["judge"]["history"])
        reasons.append(said("xid.reason.history"))
    if outside:
        status = _LOWER[status]
        reasons.append(said("xid.reason.outside"))
    return replace(judged, status=status, reason_texts=tuple(reasons))


def worst(statuses) -> Status:
    """The worst of the judged statuses (model.STATUS_ORDER); pass where there are none."""
    return worst_status(statuses)


# --- cascades: which Xid follows from which on one GPU --------------------------------------------------------------

@dataclass(frozen=True)
class Cascade:
    causes: tuple[int, ...]
    """Xid codes that start the cascade on a GPU (the earliest present is the root); () = any earlier Xid."""
    effects: tuple[int, ...]
    """Xid codes on the same GPU that follow from it; () = any."""
    later_only: bool
    """The effect must come after the cause (False: anywhere in one driver load, as the memory chain logs Xid 63
    between the DBE and the 94)."""
    why: str
    """The catalogue id (knowledge_xid) of why the effect follows from the cause."""


def _cascade(row: dict) -> Cascade:
    causes = tuple(nvlink_xids()) if row["causes"] == "nvlink" else tuple(row["causes"])
    return Cascade(causes, tuple(row["effects"]), row["later_only"], row["why"])


CASCADES: tuple[Cascade, ...] = tuple(_cascade(row) for row in load_table("xid")["cascade"])
"""In priority order: the first rule that applies names an Xid's cause (xid.toml [[cascade]], each with its source)."""
SXID_NEVER_CAUSES: tuple[int, ...] = tuple(load_table("xid")["sxid"]["never_causes"])
"""Application faults: an NVSwitch error does not explain them (xid.toml [sxid])."""
SXID_WINDOW_S: float = load_table("xid")["sxid"]["window_s"]
"""An Xid on a GPU up to this long after an NVSwitch SXid (same clock) follows from it (xid.toml [sxid])."""


@dataclass(frozen=True)
class XidGroup:
    bus_id: str | None
    code: int
    epoch: int
    """Which driver load / reset period the events are in (a cascade never crosses one)."""
    first: int
    """Position of its first event in the log."""
    first_clock: tuple[str, float] | None


def root_causes(groups: list[XidGroup], first_sxid: tuple[int, tuple[str, float] | None] | None
                ) -> dict[XidGroup, tuple[Said, Said]]:
    """Group → (its root cause: `Xid 48` or `an NVSwitch SXid`, why) for the groups that follow from another."""
    direct: dict[XidGroup, tuple[XidGroup | str, str]] = {}
    by_gpu_epoch: dict[tuple[str | None, int], list[XidGroup]] = {}  # a log of many driver loads: each period apart
    for group in groups:
        by_gpu_epoch.setdefault((group.bus_id, group.epoch), []).append(group)
    for group in groups:
        peers = [other for other in by_gpu_epoch[(group.bus_id, group.epoch)] if other.code != group.code]
        for rule in CASCADES:
            if (rule.effects and group.code not in rule.effects) or group.code in rule.causes:
                continue
            candidates = [other for other in peers
                          if (other.code in rule.causes if rule.causes else other.code not in rule.effects)
                          and (other.first < group.first or not rule.later_only)]
            if candidates:
                root = min(candidates, key=lambda other: (rule.causes.index(other.code), other.first)) \
                    if rule.causes else max(candidates, key=lambda other: other.first)
                direct[group] = (root, rule.why)
                break
        if group not in direct and first_sxid is not None and group.code not in SXID_NEVER_CAUSES \
                and first_sxid[0] < group.first and _within(first_sxid[1], group.first_clock, SXID_WINDOW_S):
            direct[group] = ("sxid", "xid.cascade.sxid")
    roots: dict[XidGroup, tuple[Said, Said]] = {}
    for group, (target, why) in direct.items():
        hops = 0
        while isinstance(target, XidGroup) and target in direct and hops < 20:
            target, hops = direct[target][0], hops + 1
        roots[group] = (said("xid.cause.xid", code=target.code) if isinstance(target, XidGroup)
                        else said("xid.cause.sxid"), said(why))
    return roots


def xid_cascade(events: list[KernelEvent]) -> dict[tuple[str | None, int, int], tuple[Said, Said]]:
    """(bus id, code, id of the load/reset that ends its period) → (root cause, why), for Xids that follow from an
    earlier error on the same GPU or from an NVSwitch SXid (kernel_judge.CASCADES)."""
    groups: dict[tuple[str | None, int, int], XidGroup] = {}
    first_sxid = None
    for position, event in enumerate(events):
        if event.kind == "sxid" and first_sxid is None:
            first_sxid = (position, event.clock)
        if event.kind in ("xid", "fallen_off_bus"):
            code = xid_code(event)
            key = (event.bus_id, code, id(event.superseded_by))
            if key not in groups:
                groups[key] = XidGroup(bus_id=event.bus_id, code=code, epoch=key[2], first=position,
                                       first_clock=event.clock)
    roots = root_causes(list(groups.values()), first_sxid)
    return {key: roots[group] for key, group in groups.items() if group in roots}


def xid_code(event: KernelEvent) -> int | None:
    """An Xid event's code; a GPU fallen off the bus without a number is judged as the Xid xid.toml names."""
    return fallen_off_bus_xid() if event.kind == "fallen_off_bus" else event.code


def _within(earlier: tuple[str, float] | None, later: tuple[str, float] | None, window_s: float) -> bool:
    if earlier is None or later is None or earlier[0] != later[0]:
        return True  # no comparable clock: log order decides
    return 0 <= later[1] - earlier[1] <= window_s


def nvml_xid_findings(check_id: str, events: list[tuple[float, int | None, int]], subject_of, during: str | Said,
                      application_note: str | Said = "") -> list[Finding]:
    """One finding per Xid NVML's event API reported while a verb ran (burn, bench): judged as the same number in a
    kernel log is. `subject_of(NVML index)` names the GPU; `during` says when (`the burn`, `the DDP run`: a catalogue
    text, or a name); `application_note`, added where the catalog blames the application, likewise."""
    findings = []
    for t_s, index, code in events:
        judged = judge_xid(code)
        note = application_note.strip() if isinstance(application_note, str) else application_note
        noted = judged.blame == "application" and note
        text = said("xid.nvml.found_noted" if noted else "xid.nvml.found", name=judged.title, t_s=t_s, during=during,
                    meaning=judged.meaning_text, reasons=list(judged.reason_texts), action=judged.action_text,
                    **({"note": note} if noted else {}))
        findings.append(Finding(check_id=check_id, status=judged.status, subject=subject_of(index),
                                observed=code, expected="no Xid", refs=[judged.ref], **finding_text(text)))
    return findings
