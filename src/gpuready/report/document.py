"""Reading the report document as the views need it, whatever it holds.

The document may come from another version or be edited by hand: a missing key or a value of the wrong type is read
as "unknown", never a traceback. Every string that leaves this module has been through `printable` (safe_text.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuready.model import STATUS_ORDER as MODEL_STATUS_ORDER
from gpuready.model import GpuRef, Subject, Verdict
from gpuready.safe_text import printable

STATUS_ORDER = [status.value for status in MODEL_STATUS_ORDER]
"""model.STATUS_ORDER as the document spells statuses (strings)."""
KNOWN_STATUSES = frozenset(STATUS_ORDER)
UNRECOGNISED_RANK = 1.5
"""A status this version does not know (or none) sorts and looks like an error: after `fail`, before `warn`."""


@dataclass(frozen=True, kw_only=True)
class Gpu:
    """A finding's GPU as shown: NVML index, CUDA index where it differs, full bus id, UUID (any may be unknown)."""
    index: int | None
    cuda_index: int | None = None
    bus_id: str | None = None
    uuid: str | None = None

    def label(self) -> str:
        """`GPU3`, `GPU3 (cuda:0)`, or the bus id where the index is unknown."""
        if self.index is None:
            return self.bus_id or "GPU ?"
        return printable(GpuRef(index=self.index, cuda_index=self.cuda_index).label())


@dataclass(kw_only=True)
class Finding:
    """One finding of the document with every field a view shows (text already printable)."""
    check_id: str
    status: str | None
    category: str
    host: str
    gpu: Gpu | None
    peer: Gpu | None
    other_subject: str
    """The subject beyond host and GPUs: NIC and rank (`mlx5_0 rank 3`), or ''."""
    message: str
    fix: str | None
    consequence_of: str | None
    evidence: list[str] = field(default_factory=list)
    remediation: str | None = None
    """What it takes to clear it (`restart_job` … `drain_replace`); None for `none` and for a document without levels."""

    def remediation_words(self, labels: dict) -> str | None:
        """The level in the labels' words (`label.remediation.<level>`), or None where there is nothing to show."""
        return labels.get(f"remediation.{self.remediation}") if self.remediation else None


def read_finding(item: Any) -> Finding:
    data = mapping(item)
    check_id = text(data.get("check_id"))
    status = data.get("status")
    subject = mapping(data.get("subject"))
    category = data.get("category")
    nic, rank = subject.get("nic"), subject.get("rank")
    other = Subject(host="", nic=str(nic) if nic else None, rank=rank if isinstance(rank, int) else None).label()
    return Finding(check_id=check_id, status=status if isinstance(status, str) else None,
                   category=text(category) if category is not None else check_id.split(".", 1)[0],
                   host=text(subject.get("host"), ""), gpu=_gpu(subject.get("gpu")), peer=_gpu(subject.get("peer")),
                   other_subject=printable(other), message=text(data.get("message")),
                   fix=text(data["fix"]) if data.get("fix") else None,
                   consequence_of=text(data["consequence_of"]) if data.get("consequence_of") else None,
                   remediation=data["remediation"] if data.get("remediation") not in (None, "none") and
                   isinstance(data["remediation"], str) else None,
                   evidence=[f"{text(e.get('file'))}:{text(e.get('line'))}: {text(e.get('text'))}"
                             for e in map(mapping, sequence(data.get("evidence")))])


def _gpu(value: Any) -> Gpu | None:
    if not isinstance(value, dict) or not value:
        return None
    index, cuda_index = value.get("index"), value.get("cuda_index")
    bus_id, uuid = value.get("bus_id"), value.get("uuid")
    return Gpu(index=index if _is_int(index) else None, cuda_index=cuda_index if _is_int(cuda_index) else None,
               bus_id=printable(bus_id) if isinstance(bus_id, str) and bus_id else None,
               uuid=printable(uuid) if isinstance(uuid, str) and uuid else None)


def subject_label(data: dict) -> str:
    """`Subject.label()` of a document's subject (what the report showed before it was saved)."""
    def gpu(ref: Any) -> GpuRef | None:
        ref = ref if isinstance(ref, dict) else {}
        return GpuRef(index=ref.get("index", "?"), cuda_index=ref.get("cuda_index")) if ref else None
    nic = data.get("nic")
    return printable(Subject(host=text(data.get("host")), gpu=gpu(data.get("gpu")), peer=gpu(data.get("peer")),
                             nic=str(nic) if nic else None, rank=data.get("rank")).label())


def judges_machine(document: dict) -> bool:
    """Whether the document's verdict is about a machine: not for `plan` (an estimate; its facts hold `plan`) nor for
    a CPU-only run (`cpu_run`)."""
    return "plan" not in mapping(document.get("facts")) and not cpu_run(document)


def cpu_run(document: dict) -> bool:
    """A run on CPU ranks only, no verdict on a machine: `"verdict": "no_verdict"`; in a document written before that
    field, a `validate` without GPU inventory or a `bench`/`burn` whose facts say `"device": "cpu"`."""
    if document.get("verdict") == Verdict.NO_VERDICT.value:
        return True
    facts = mapping(document.get("facts"))
    if "validate" in facts and "gpus" not in facts:
        return True
    return any(mapping(facts.get(verb)).get("device") == "cpu" for verb in ("bench", "burn"))


def shown_verdict(document: dict) -> Any:
    """The verdict a reader is told: `no_verdict` for a CPU-only run (documents written before that field included),
    else the document's own."""
    return Verdict.NO_VERDICT.value if cpu_run(document) else document.get("verdict")


def host_of(document: dict, unknown: str) -> str:
    """The machine the evidence came from, as the verb recorded it (`unknown` where the document names none)."""
    host = document.get("host")
    return unknown if host is None or host == "" else printable(host)


def status_rank(status: str | None) -> float:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else UNRECOGNISED_RANK


def number(value: Any) -> float | int | None:
    """A number of the document; a non-finite one (`{"value": null, "raw": "nan"}`) as the float it was; else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, dict) and value.get("raw") in ("nan", "inf", "-inf"):
        return float(value["raw"])
    return None


def text(value: Any, missing: str = "?") -> str:
    """A value of the document as it is shown: control characters escaped (`printable`), `missing` for none."""
    return missing if value is None or value == "" else printable(value)


def mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list:
    return value if isinstance(value, list) else []


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
