"""The report's vocabulary: findings, measurements, series and the report itself.

One versioned JSON document (`Report.to_dict`) is the contract between stages, nodes and
renderers; `schema/report.schema.json` describes it and the tests hold documents to it.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import uuid as uuid_lib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

from gpuready.facts.units import normalize_bus_id
from gpuready.i18n import Said, json_values

SCHEMA_VERSION = "1.0"
UNKNOWN_HOST = "unknown host"
"""The host of evidence that names none (never the machine reading it); the console says it in the reader's language."""
INPUTS_HOST = "inputs"
"""diagnose's host where the inputs are logs of no machine read here; the console says it in the reader's language."""
# Findings about unreadable input files: status `error`, but exit code 2, not 3.
INPUT_CHECK_ID = "bundle.unreadable"
# A bundle entry not read (a link, a folder, a special file): status `warn`.
SKIPPED_CHECK_ID = "bundle.skipped"
# A bundle file read only in part (over a size limit): status `warn`.
TRUNCATED_CHECK_ID = "bundle.truncated"


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """This status's place in STATUS_ORDER: 0 for `fail`, the worst."""
        return STATUS_ORDER.index(self)


STATUS_ORDER: tuple[Status, ...] = (Status.FAIL, Status.ERROR, Status.WARN, Status.PASS, Status.SKIP)
"""The one status order, worst first: how reports and diagnose list findings, and which of several statuses wins."""


def worst_status(statuses: Iterable[Status], default: Status = Status.PASS) -> Status:
    """The worst of `statuses` by STATUS_ORDER; `default` where there are none."""
    return min(statuses, key=lambda status: status.rank, default=default)


class Verdict(str, enum.Enum):
    READY = "ready"
    READY_WITH_WARNINGS = "ready_with_warnings"
    NOT_READY = "not_ready"
    UNKNOWN = "unknown"
    """Not enough evidence: no input names a GPU, so readiness cannot be judged (exit code 2)."""
    NO_VERDICT = "no_verdict"
    """The run judged no machine (`Report.no_verdict_reason` says why: `cpu_run`, CPU ranks test the software stack,
    not a machine's GPUs); the exit code still follows the findings."""


class Remediation(str, enum.Enum):
    """What it takes to clear a finding, least to most (knowledge/remediation.toml, checks/remediation.py): the level
    `fleet --actions` turns into a drain or a cordon (reset_gpu and above)."""

    NONE = "none"
    RESTART_JOB = "restart_job"
    RESET_GPU = "reset_gpu"
    REBOOT_NODE = "reboot_node"
    DRAIN_REPLACE = "drain_replace"

    @property
    def rank(self) -> int:
        """0 for `none` … 4 for `drain_replace`."""
        return list(Remediation).index(self)


CPU_RUN = "cpu_run"
"""`no_verdict_reason` of a run on CPU ranks only (validate, bench, burn with --device cpu)."""


class ExitCode(enum.IntEnum):
    """DESIGN.md §2; where several apply the highest by `severity` wins."""

    READY = 0
    NOT_READY = 1
    USAGE = 2
    TOOL_ERROR = 3
    TIMEOUT = 4
    HANGUP = 129
    """SIGHUP (the terminal or the ssh session went away): partial report kept."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT): partial report kept."""
    TERMINATED = 143
    """SIGTERM (a scheduler's stop, `kill`, torchrun stopping the group): partial report kept."""


# Order in which exit codes win over each other (4 > 3 > 2 > 1 > 0; a signal above all).
_EXIT_PRECEDENCE = [ExitCode.READY, ExitCode.NOT_READY, ExitCode.USAGE, ExitCode.TOOL_ERROR,
                    ExitCode.TIMEOUT, ExitCode.HANGUP, ExitCode.INTERRUPTED, ExitCode.TERMINATED]
_SIGNAL_EXIT = {"SIGINT": ExitCode.INTERRUPTED, "SIGTERM": ExitCode.TERMINATED, "SIGHUP": ExitCode.HANGUP}


def worst_exit_code(*codes: int) -> int:
    return max(codes, key=lambda code: _EXIT_PRECEDENCE.index(ExitCode(code)), default=0)


@dataclass(frozen=True, kw_only=True)
class GpuRef:
    index: int
    """NVML index (PCI bus order)."""
    bus_id: str | None = None
    """Normalised PCI bus id, `0000:3b:00.0`."""
    uuid: str | None = None
    cuda_index: int | None = None
    """Set only where CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER make it differ from `index`."""

    def label(self) -> str:
        text = f"GPU{self.index}"
        if self.cuda_index is not None and self.cuda_index != self.index:
            text += f" (cuda:{self.cuda_index})"
        return text


@dataclass(frozen=True, kw_only=True)
class Subject:
    host: str
    gpu: GpuRef | None = None
    peer: GpuRef | None = None
    nic: str | None = None
    rank: int | None = None

    def label(self) -> str:
        parts = []
        if self.gpu is not None:
            parts.append(self.gpu.label() + (f"↔{self.peer.label()}" if self.peer is not None else ""))
        if self.nic:
            parts.append(self.nic)
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        return " ".join(parts) or self.host


@dataclass(frozen=True)
class Evidence:
    """One quoted input line: where it is (file as given, 1-based line) and what it says."""
    file: str
    line: int
    text: str


@dataclass(kw_only=True)
class Finding:
    check_id: str
    """Stable dotted id, e.g. `pcie.link_degraded`."""
    status: Status
    subject: Subject
    message: str
    """One sentence: what was found."""
    observed: Any = None
    expected: Any = None
    fix: str | None = None
    """The concrete next step; a command where one exists."""
    refs: list[str] = field(default_factory=list)
    """Sources of the rule and of the expected value."""
    evidence: list[Evidence] = field(default_factory=list)
    """The input lines the finding rests on (diagnose): file, line number, the line as quoted."""
    consequence_of: str | None = None
    """The check_id of the root cause this finding follows from (diagnose ranks it under that cause)."""
    message_id: str | None = None
    """The message catalogue's id of `message` (and, with `.fix` appended, of `fix`): another language renders it
    from there (i18n.py `finding_text`). None for a message not yet in the catalogue: shown as written."""
    message_values: dict[str, Any] | None = None
    """The placeholders' values (JSON scalars), so that a saved report renders again in any language."""
    remediation: Remediation | None = None
    """What it takes to clear it (checks/remediation.py sets it on every finding a verb writes); `none` for a pass or
    a skip."""
    about_job: bool = False
    """A finding in a machine category that is about the job, not the machine (the OOM killer ended it): it does not
    make a machine the evidence does not show `not_ready`. Set by the check that knows; not written to the report."""

    @property
    def category(self) -> str:
        return self.check_id.split(".", 1)[0]


@dataclass(kw_only=True)
class Measurement:
    name: str
    subject: Subject
    value: float
    unit: str
    expected: float | None = None
    expected_source: str | None = None
    method: dict[str, Any] = field(default_factory=dict)
    samples: list[float] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class Series:
    subject: Subject
    metric: str
    unit: str
    t_s: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


# Checks whose failure concerns several nodes working together, not one node alone.
MULTI_NODE_CATEGORIES = frozenset({"network"})
# Findings about a job's run or about the input files, not about the machine: without evidence that shows the GPUs
# (`not_enough_evidence`), a failure among these leaves the machine's verdict `unknown` (an NCCL timeout in a log
# says the job failed, not why); a failure about the machine (an Xid 79 in a kernel log) makes it `not_ready`.
JOB_CATEGORIES = frozenset({"nccl", "torch", "gloo", "nccl_tests", "diagnose", "bundle", "network"})


def verdict_of(findings: list[Finding]) -> Verdict:
    statuses = {finding.status for finding in findings}
    if Status.FAIL in statuses or Status.ERROR in statuses:
        return Verdict.NOT_READY
    if Status.WARN in statuses:
        return Verdict.READY_WITH_WARNINGS
    return Verdict.READY


def partial_verdict_of(findings: list[Finding]) -> Verdict:
    """The verdict where the evidence does not show the GPUs: `not_ready` on a failure about the machine, else
    `unknown` (a `ready` needs evidence that names GPUs and shows them healthy)."""
    if any(f.status == Status.FAIL and f.category not in JOB_CATEGORIES and not f.about_job
           for f in findings):
        return Verdict.NOT_READY
    return Verdict.UNKNOWN


@dataclass(kw_only=True)
class Report:
    tool_version: str
    host: str
    findings: list[Finding] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    """A summary of the facts the checks saw (inventory, versions, sources)."""
    run_id: str = field(default_factory=lambda: uuid_lib.uuid4().hex[:12])
    started_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    input_error: bool = False
    """A bundle file could not be read or parsed (exit code 2)."""
    fail_on_warn: bool = False
    hung: bool = False
    """A rank stopped advancing or died (exit code 4)."""
    interrupted: bool = False
    """Stopped by a signal (exit code 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP); what was measured is kept."""
    interrupted_by: str | None = None
    """`SIGINT`, `SIGTERM` or `SIGHUP` (None with `interrupted`: Ctrl-C)."""
    multi_node: bool = False
    """The machine is meant for multi-node work: the top-level verdict and exit code include `network.*`."""
    not_enough_evidence: Said | None = None
    """Why the evidence does not show the GPUs (verdict `unknown`, exit code 2, unless a finding fails: a failure about
    the machine makes the verdict `not_ready`, any failure makes the exit code 1). The document keeps the English and
    the catalogue id and values that render it in another language."""
    no_verdict_reason: str | None = None
    """Why this run is no verdict on a machine (`CPU_RUN`); then every verdict is `no_verdict`."""
    scheduler: dict[str, str] = field(default_factory=dict)
    """The scheduler's names of the node and job a live run ran on (node.py `scheduler_names`: `slurm_node`,
    `slurm_job`, `k8s_node`); empty for evidence read from files, or outside a scheduler."""
    sections: dict[str, Any] = field(default_factory=dict)
    """A verb's own top-level parts of the document (plan: `strategies`, `inference`, `batch`, `power`, `cost`)."""

    def verdicts(self) -> dict[str, Verdict]:
        if self.no_verdict_reason:
            return {"single_node": Verdict.NO_VERDICT, "multi_node": Verdict.NO_VERDICT}
        if self.not_enough_evidence:
            return {"single_node": partial_verdict_of(self._single_node_findings()),
                    "multi_node": partial_verdict_of(self.findings)}
        return {"single_node": verdict_of(self._single_node_findings()), "multi_node": verdict_of(self.findings)}

    def verdict(self) -> Verdict:
        """The single-node verdict unless the machine is meant for multi-node work."""
        return self.verdicts()["multi_node" if self.multi_node else "single_node"]

    def _single_node_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.category not in MULTI_NODE_CATEGORIES]

    def exit_code(self) -> int:
        # Where the evidence cannot show the GPUs (a pasted ibstat, an IMEX table), what it does show is judged
        # whole: a failing rail is a failure even for a single-node verdict that stays `unknown`.
        judged = self.findings if self.multi_node or self.not_enough_evidence else self._single_node_findings()
        statuses = {finding.status for finding in judged}
        codes = [ExitCode.READY]
        if Status.FAIL in statuses or (self.fail_on_warn and Status.WARN in statuses):
            codes.append(ExitCode.NOT_READY)
        if self.input_error or (self.not_enough_evidence and Status.FAIL not in statuses):
            codes.append(ExitCode.USAGE)
        if any(f.status == Status.ERROR and f.check_id != INPUT_CHECK_ID for f in self.findings):
            codes.append(ExitCode.TOOL_ERROR)
        if self.hung:
            codes.append(ExitCode.TIMEOUT)
        if self.interrupted:
            codes.append(_SIGNAL_EXIT.get(self.interrupted_by or "SIGINT", ExitCode.INTERRUPTED))
        return int(worst_exit_code(*codes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool_version": self.tool_version,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "host": str(self.host),
            "verdict": self.verdict().value,
            "verdicts": {name: verdict.value for name, verdict in self.verdicts().items()},
            **({"no_verdict_reason": self.no_verdict_reason} if self.no_verdict_reason else {}),
            "judged_for": "multi_node" if self.multi_node else "single_node",
            **({"scheduler": dict(self.scheduler)} if self.scheduler else {}),
            "not_enough_evidence": self.not_enough_evidence.english() if self.not_enough_evidence else None,
            **({"not_enough_evidence_text": {"message_id": self.not_enough_evidence.msg_id,
                                             "message_values": json_values(self.not_enough_evidence.values)}}
               if self.not_enough_evidence else {}),
            "exit_code": self.exit_code(),
            "findings": [_finding_to_dict(finding) for finding in self.findings],
            "measurements": [to_jsonable(m) for m in self.measurements],
            "series": [to_jsonable(s) for s in self.series],
            "facts": to_jsonable(self.facts),
            **{name: to_jsonable(value) for name, value in self.sections.items()},
        }


def _finding_to_dict(finding: Finding) -> dict[str, Any]:
    data = to_jsonable(finding)
    del data["about_job"]  # the verdict, already judged, is what a saved report keeps
    data["category"] = finding.category
    return data


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums, sets and tuples as plain JSON values that strict JSON (`allow_nan=False`) can write.

    A float that is NaN or ±inf becomes `{"value": null, "raw": "nan" | "inf" | "-inf"}` wherever it sits (the number
    is unknown, and what was there is kept); a GPU's `bus_id` is the normalised `0000:3b:00.0` or null; a subject's
    `host` is a string.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return {"value": None, "raw": str(value)}
    if isinstance(value, GpuRef):
        return {**{f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)},
                "bus_id": normalize_bus_id(value.bus_id) if isinstance(value.bus_id, str) else None}
    if isinstance(value, Subject):
        return {**{f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)},
                "host": str(value.host)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [to_jsonable(item) for item in value]
        try:
            return sorted(items)
        except TypeError:  # mixed kinds: a stable order all the same
            return sorted(items, key=repr)
    return value


_JSON_KINDS = ((bool, "boolean"), (str, "string"), ((int, float), "number"), (list, "array"), (dict, "object"))
_TOP_FIELDS: dict[str, tuple[type, ...]] = {
    "findings": (list,), "measurements": (list,), "series": (list,), "verdict": (str,), "exit_code": (int, float),
    "started_at": (str,), "host": (str,), "run_id": (str,), "tool_version": (str,), "verdicts": (dict,),
    "facts": (dict,), "scheduler": (dict,)}
_FINDING_FIELDS: dict[str, tuple[type, ...]] = {
    "check_id": (str,), "status": (str,), "message": (str,), "fix": (str,), "message_id": (str,),
    "message_values": (dict,), "subject": (dict,), "refs": (list,), "evidence": (list,), "consequence_of": (str,),
    "category": (str,), "remediation": (str,)}
"""`observed` and `expected` are any JSON value (a list of processes, a table of figures)."""
_MEASUREMENT_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,), "unit": (str,), "value": (int, float, dict), "expected": (int, float, dict), "subject": (dict,),
    "method": (dict,), "samples": (list,), "versions": (dict,)}


def json_kind(value: object) -> str:
    """The JSON name of a value's type: `string`, `number`, `array`, `object`, `boolean` or `null`."""
    return next((name for kinds, name in _JSON_KINDS if isinstance(value, kinds)), "null")


def document_problem(document: object) -> Said | None:
    """Why a JSON value read as a saved report is not one (`report.invalid.field`: which field holds which JSON type
    instead of which), or None. Types only, so that a document of an older version (fewer keys, other statuses)
    still renders; null stands for any absent value. The renderers then meet only the types they expect: a finding
    whose `status` was a list, or a `verdicts` that was a string, had crashed them."""
    if not isinstance(document, dict):
        return Said("report.invalid.field", {"field": "(document)", "kind": json_kind(document), "expected": "object"})
    problem = _field_problem(document, _TOP_FIELDS, "")
    for name, fields in (("findings", _FINDING_FIELDS), ("measurements", _MEASUREMENT_FIELDS)):
        for index, item in enumerate(document.get(name) or []):
            where = f"{name}[{index}]"
            if problem is None and not isinstance(item, dict):
                problem = Said("report.invalid.field", {"field": where, "kind": json_kind(item),
                                                        "expected": "object"})
            problem = problem or _field_problem(item, fields, where + ".")
    return problem


def _field_problem(entry: dict, fields: dict[str, tuple[type, ...]], prefix: str) -> Said | None:
    for name, kinds in fields.items():
        value = entry.get(name)
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if value is not None and (wrong_bool or not isinstance(value, kinds)):
            expected = "/".join(dict.fromkeys(json_kind(kind()) for kind in kinds))
            return Said("report.invalid.field", {"field": prefix + name, "kind": json_kind(value),
                                                 "expected": expected})
    return None
