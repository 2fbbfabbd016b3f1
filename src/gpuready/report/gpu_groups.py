"""The same finding on several GPUs as one row: `power.brake` on GPU0 … GPU7 is one row naming "GPU 0–7".

Two findings are the same when they have the same host, check id and status, and their message and fix read the same
once each GPU's own name (`GPU3`, its bus id, its UUID, `nvidia-smi -i 3`) is set aside. A figure that differs (7 ECC
errors here, 4 there) keeps them apart: a row never hides a fact. The row's text names the whole group where each
finding named its GPU ("GPU 0–7's clocks are cut …"), and lists every bus id.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from gpuready.report.document import Finding, Gpu

# Where a finding's text named its own GPU; a NUL never survives `printable`, so these cannot occur in the text.
_GPU_SLOT, _BUS_SLOT, _UUID_SLOT, _INDEX_SLOT = "\0gpu\0", "\0bus\0", "\0uuid\0", "\0index\0"
_CODE_SPAN = re.compile(r"`([^`\n]*)`")
_TAKES_AN_INDEX_LIST = re.compile(r"(?:sudo )?(?:nvidia-smi -|dcgmi diag )")
"""Commands whose `-i` takes a comma-separated list (`nvidia-smi -q -i 0,1`, `dcgmi diag -r 3 -i 0,1`); another
command that names a GPU (`lspci -s`, `nvidia-smi nvlink -i`) runs once per GPU."""
_RUN_SHOWN_AS_RANGE = 3
"""Consecutive indices from this many on are written as a range (`0–5`); fewer are listed (`0, 1`)."""


@dataclass(kw_only=True)
class Row:
    """One line of the problem list: a finding, or the same finding on several GPUs (`members`, index order)."""
    members: list[Finding]

    @property
    def first(self) -> Finding:
        return self.members[0]

    @property
    def gpus(self) -> list[Gpu]:
        return [member.gpu for member in self.members if member.gpu is not None]

    def gpu_label(self) -> str:
        """`GPU3`, `GPU 0–5`, `GPU 0, 2, 4–7`; bus ids where indices are unknown."""
        gpus = self.gpus
        if len(self.members) == 1:
            return gpus[0].label() if gpus else ""
        return gpu_list_label(gpus)

    def message(self) -> str:
        return self._fill(_shape(self.first.message, self.first.gpu)) if len(self.members) > 1 else self.first.message

    def fix(self) -> str | None:
        if self.first.fix is None or len(self.members) == 1:
            return self.first.fix
        return self._fill(_shape(self.first.fix, self.first.gpu))

    def evidence(self) -> list[str]:
        return [line for member in self.members for line in member.evidence]

    def _fill(self, shaped: str) -> str:
        gpus = self.gpus
        shaped = _CODE_SPAN.sub(lambda span: f"`{_command_for_each(span.group(1), gpus)}`", shaped)
        indices = ",".join(str(gpu.index) for gpu in gpus if gpu.index is not None)
        return (shaped.replace(_GPU_SLOT, self.gpu_label())
                .replace(_BUS_SLOT, ", ".join(gpu.bus_id or "?" for gpu in gpus))
                .replace(_UUID_SLOT, ", ".join(gpu.uuid or "?" for gpu in gpus))
                .replace(_INDEX_SLOT, indices))


def group_rows(findings: list[Finding]) -> list[Row]:
    """Rows in the order of each group's first finding; only findings about one GPU (no peer) are merged."""
    rows: list[Row] = []
    by_key: dict[tuple, Row] = {}
    for finding in findings:
        key = _key(finding)
        if key is not None and key in by_key:
            by_key[key].members.append(finding)
            continue
        row = Row(members=[finding])
        rows.append(row)
        if key is not None:
            by_key[key] = row
    for row in rows:
        row.members.sort(key=lambda member: _order(member.gpu))
    return rows


def gpu_list_label(gpus: list[Gpu]) -> str:
    """`GPU 0–5`, `GPU 0, 1, 3`; `GPU 2 (cuda:0), 3 (cuda:1)` where CUDA numbers them apart; bus ids without indices."""
    if any(gpu.index is None for gpu in gpus):
        return "GPU " + ", ".join(gpu.label() for gpu in gpus)
    if any(gpu.cuda_index is not None and gpu.cuda_index != gpu.index for gpu in gpus):
        return "GPU " + ", ".join(gpu.label().removeprefix("GPU") for gpu in gpus)
    return "GPU " + ", ".join(_runs(sorted({gpu.index for gpu in gpus if gpu.index is not None})))


def _command_for_each(command: str, gpus: list[Gpu]) -> str:
    """A command (a code span) that names one GPU, for every GPU of the group, as it runs when pasted: the
    tool's own list where it has one (`nvidia-smi -i 0,1`), else a loop over the GPUs' names
    (`for d in 0000:19:00.0 0000:3b:00.0; do sudo lspci -vv -s $d; done`), or one command per GPU joined by `; `
    where it names a GPU in two ways."""
    slots = [slot for slot in (_GPU_SLOT, _BUS_SLOT, _UUID_SLOT, _INDEX_SLOT) if slot in command]
    one_index = slots == [_INDEX_SLOT] and command.count(_INDEX_SLOT) == 1
    if not slots or one_index and _TAKES_AN_INDEX_LIST.match(command):
        return command
    if len(slots) == 1:
        names = " ".join(shlex.quote(_own_name(slots[0], gpu)) for gpu in gpus)
        return f"for d in {names}; do {command.replace(slots[0], '$d')}; done"
    return "; ".join(_own_names(command, gpu) for gpu in gpus)


def _own_name(slot: str, gpu: Gpu) -> str:
    return {_GPU_SLOT: gpu.label(), _BUS_SLOT: gpu.bus_id or "?", _UUID_SLOT: gpu.uuid or "?",
            _INDEX_SLOT: str(gpu.index)}[slot]


def _own_names(command: str, gpu: Gpu) -> str:
    for slot in (_GPU_SLOT, _BUS_SLOT, _UUID_SLOT, _INDEX_SLOT):
        command = command.replace(slot, shlex.quote(_own_name(slot, gpu)))
    return command


def _runs(indices: list[int]) -> list[str]:
    parts: list[str] = []
    start = 0
    for end in range(1, len(indices) + 1):
        if end == len(indices) or indices[end] != indices[end - 1] + 1:
            run = indices[start:end]
            parts += [f"{run[0]}–{run[-1]}"] if len(run) >= _RUN_SHOWN_AS_RANGE else [str(i) for i in run]
            start = end
    return parts


def _key(finding: Finding) -> tuple | None:
    if finding.gpu is None or finding.peer is not None:
        return None
    return (finding.host, finding.check_id, finding.status, finding.other_subject, finding.consequence_of,
            _shape(finding.message, finding.gpu), _shape(finding.fix or "", finding.gpu))


def _shape(text: str, gpu: Gpu | None) -> str:
    """`text` with `gpu`'s own names replaced by slots: what the sentence says apart from which GPU it is about."""
    if gpu is None:
        return text
    if gpu.bus_id:  # the normalised id, and nvidia-smi's 8-digit domain spelling of it, in either case
        text = re.sub(r"(?i)\b(?:0000)?" + re.escape(gpu.bus_id) + r"\b", _BUS_SLOT, text)
    if gpu.uuid:
        text = text.replace(gpu.uuid, _UUID_SLOT)
    if gpu.index is not None:
        text = re.sub(rf"(?<=-i )(?:{gpu.index})(?![\d,])", _INDEX_SLOT, text)  # nvidia-smi -i 3 → -i 0,1,2
        text = re.sub(rf"\bGPU{gpu.index}(?!\d)", _GPU_SLOT, text)
    return text


def _order(gpu: Gpu | None) -> tuple:
    if gpu is None:
        return (1, 0, "")
    return (0, gpu.index if gpu.index is not None else 1 << 30, gpu.bus_id or "")
