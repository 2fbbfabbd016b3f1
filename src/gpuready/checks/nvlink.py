"""NVLink: are the links up that this board wires, and did the kernel log NVLink errors.

Which links a GPU should have up is a property of the board, not only of the GPU model:

- SXM parts on HGX/DGX baseboards (`nvlink_via = "nvswitch"` in gpus.toml) use every link, whether the links go
  to NVSwitches (8-GPU boards: `topo -m` shows the same NV# between every pair) or straight to the peers (4-GPU
  HGX A100/H100: NV4/NV6 between every pair). A GPU below the model's link count is a fault.
- PCIe cards with NVLink bridges (`nvlink_via = "bridge"`) use only the links the bridge carries: the others are
  inactive on every bridged card alike (by design), and unbridged cards have none up.
- Hybrid meshes (V100 SXM2 in DGX-1 or POWER9 AC922; `nvlink_via` left out) bond different link counts to
  different peers, and some links go to the CPU: pairs are not held to one NV#.

Inputs: each GPU's link state (`nvml.json` or `nvidia-smi nvlink -s`) and the `nvidia-smi topo -m` matrix, either
alone. A GPU known only from the matrix has no bus id.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gpuready.checks.gpu import allocation
from gpuready.checks.kernel_judge import is_nvlink_xid, judge_xid, line_severity, nvlink_xids, worst
from gpuready.checks.registry import CheckContext, check, kernel_evidence, kernel_log_missing
from gpuready.facts.types import GpuFacts, KernelEvent
from gpuready.i18n import said
from gpuready.knowledge import GpuSpec, gpu_spec, load_table, thresholds
from gpuready.model import Finding, Status

_LINK_REFS = ["nvidia-smi nvlink -s; nvidia-smi topo -m legend (NV# = a bonded set of # NVLinks)"]
_LINK_FIX = ("Look at `nvidia-smi nvlink -s -i {index}` and the error counters in `nvidia-smi nvlink -e -i {index}`; "
             "reseat or replace the NVLink bridge on bridged cards; otherwise reset the GPU when idle "
             "(`nvidia-smi -r -i {index}`) or reboot, and on NVSwitch boards check `systemctl status "
             "nvidia-fabricmanager`; if the links stay down, run `dcgmi diag -r 2` and RMA the GPU or baseboard.")


# ----------------------------------------------------------------------------------------------- link state


def _kind(spec: GpuSpec | None) -> str:
    """`sxm` (every link wired, equal pairs), `bridge`, `mesh` (every link wired, pairs differ), `none`, `unknown`."""
    if spec is None:
        return "unknown"
    via = spec.get("nvlink_via")
    if via == "nvswitch":
        return "sxm"
    if via == "bridge":
        return "bridge"
    if via == "none" or not spec.get("nvlink_links"):
        return "none" if via == "none" or spec.get("nvlink_links") == 0 else "unknown"
    return "mesh"


_UNNAMED = "unnamed"


def _model(gpu: GpuFacts) -> str:
    spec = gpu_spec(gpu.name)
    return spec.model if spec else (gpu.name or _UNNAMED)


def _pairs_of(model: str) -> str:
    return "GPU pairs (models not named)" if model == _UNNAMED else f"{model} pairs"


def _model_links(spec: GpuSpec | None) -> int | None:
    links = spec.get("nvlink_links") if spec else None
    return links if isinstance(links, int) and links > 0 else None


def _max_links_per_gpu() -> int:
    """The most NVLinks any GPU in gpus.toml has: a GPU whose NV# to its peers add up to more is switched."""
    return max(int(row.get("nvlink_links", 0)) for row in load_table("gpus")["gpu"])


def ranges(numbers: set[int]) -> str:
    """{0, 1, 2, 5} → `0-2, 5`."""
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and runs[-1][1] == number - 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def _nv(link: str) -> int:
    match = re.fullmatch(r"NV(\d+)", link)
    return int(match.group(1)) if match else 0


@dataclass
class _Flag:
    gpu: GpuFacts
    texts: list[str] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    refs: list[str] = field(default_factory=list)
    peers: set[int] = field(default_factory=set)


class _Judgement:
    def __init__(self) -> None:
        self.flags: dict[int, _Flag] = {}
        self.notes: list[str] = []
        self.observed: dict[str, Any] = {}

    def flag(self, gpu: GpuFacts, source: str, text: str, observed: Any, expected: Any,
             refs: list[str] | None = None, peers: set[int] | None = None) -> None:
        entry = self.flags.setdefault(gpu.index, _Flag(gpu))
        entry.texts.append(text)
        entry.observed[source] = observed
        entry.expected[source] = expected
        entry.refs.extend(ref for ref in refs or [] if ref and ref not in entry.refs)
        entry.peers |= peers or set()


def _judge_link_state(gpus: list[GpuFacts], judgement: _Judgement) -> None:
    """Per model: fewer active links than the model wires (SXM, bridge with a known count) or than a same-model
    peer has is a fault; links inactive on every bridged GPU alike are the board's design."""
    groups: dict[str, list[GpuFacts]] = defaultdict(list)
    for gpu in gpus:
        if gpu.nvlinks:
            groups[_model(gpu)].append(gpu)
    counts: dict[str, int] = {}
    for model, members in groups.items():
        spec = gpu_spec(members[0].name)
        kind = _kind(spec)
        active = {gpu.index: {link.link for link in gpu.nvlinks if link.active} for gpu in members}
        inactive = {gpu.index: {link.link for link in gpu.nvlinks if link.active is False} for gpu in members}
        counts.update({f"GPU{index}": len(links) for index, links in active.items()})
        linked = [gpu for gpu in members if active[gpu.index]]
        unlinked = [gpu for gpu in members if not active[gpu.index]]
        # Mesh boards (V100 SXM2) may leave links idle by design where a peer is absent: the model's count is the
        # expectation only while no peer of the model reports its links.
        floor = _model_links(spec) if kind in ("sxm", "bridge") or (kind == "mesh" and len(linked) < 2) else None
        best = max(members, key=lambda gpu: len(active[gpu.index]))
        expected = max(len(active[best.index]), floor or 0)
        for gpu in unlinked:
            if kind in ("sxm", "mesh"):
                judgement.flag(
                    gpu, "nvlink_s",
                    f"GPU{gpu.index} ({model}) has no active NVLink ({len(inactive[gpu.index])} link(s) inactive), "
                    f"but the {model} has all {_model_links(spec) or expected} of its links wired on every board.",
                    {"active": 0, "inactive": sorted(inactive[gpu.index])}, _model_links(spec) or expected,
                    refs=[spec.source] if spec else [])
        for gpu in linked:
            up = len(active[gpu.index])
            if up >= expected:
                continue
            down = inactive[gpu.index] & active[best.index] or inactive[gpu.index] or set()
            versus = (f" while GPU{best.index} (same model) has {len(active[best.index])} up"
                      if len(active[best.index]) > up else "")
            wired = f"; the {model} has {floor} links" if floor and floor == expected else ""
            judgement.flag(
                gpu, "nvlink_s",
                f"GPU{gpu.index} ({model}) has {up} of {expected} NVLink links up: link(s) {ranges(down) or '?'} "
                f"down{versus}{wired}.",
                {"active": up, "down": sorted(down)}, expected,
                refs=[spec.source] if spec and floor else [], peers={best.index} if best is not gpu else set())
        flagged = any(gpu.index in judgement.flags for gpu in members)
        if len(linked) >= 2 and not flagged:
            common = set.intersection(*(inactive[gpu.index] for gpu in linked))
            if common:
                judgement.notes.append(
                    f"links {ranges(common)} are inactive on all {len(linked)} {model} GPUs alike "
                    f"({len(active[linked[0].index])} up on each): unused by design of the board or bridge, "
                    "not a fault")
        elif len(linked) == 1 and inactive[linked[0].index] and linked[0].index not in judgement.flags:
            judgement.notes.append(
                f"GPU{linked[0].index} has link(s) {ranges(inactive[linked[0].index])} inactive; no other {model} "
                "reports its links to compare with")
        if unlinked and kind not in ("sxm", "mesh"):
            judgement.notes.append(
                f"{', '.join(f'GPU{gpu.index}' for gpu in unlinked)} ({model}) have no NVLink up: not bridged")
    if counts:
        judgement.observed["active_links"] = counts


# ------------------------------------------------------------------------------------------------- topology


def _judge_topology(context: CheckContext, gpus: dict[int, GpuFacts], judgement: _Judgement) -> None:
    topology = context.facts.topology
    indices = sorted({i for i, _ in topology.links} | {j for _, j in topology.links})
    pairs = {(i, j): _nv(link) for (i, j), link in topology.links.items() if i < j}
    nv_pairs = {pair: count for pair, count in pairs.items() if count}
    totals = {i: sum(count for pair, count in nv_pairs.items() if i in pair) for i in indices}
    judgement.observed["topology"] = {f"GPU{i}-GPU{j}": f"NV{count}" for (i, j), count in sorted(nv_pairs.items())}
    if not nv_pairs:
        # SXM parts on HGX boards are NVLinked to every peer; a mesh GPU's partner may just not be in this run.
        sxm = [gpus[i] for i in indices if i in gpus and _kind(gpu_spec(gpus[i].name)) == "sxm"]
        for gpu in sxm:
            judgement.flag(gpu, "topology",
                           f"GPU{gpu.index} ({_model(gpu)}) has no NVLink to any peer in `nvidia-smi topo -m`, "
                           "though this model is wired to its peers by NVLink on every board.",
                           "no NV#", "NV# to its peers", refs=[gpu_spec(gpu.name).source])
        if not sxm:
            judgement.notes.append("`nvidia-smi topo -m` shows no NVLink between any GPU pair")
        return
    switched = any(total > _max_links_per_gpu() for total in totals.values())
    if switched:
        _judge_switched(gpus, indices, nv_pairs, judgement)
    else:
        _judge_direct(gpus, indices, pairs, nv_pairs, totals, judgement)


def _judge_switched(gpus: dict[int, GpuFacts], indices: list[int], nv_pairs: dict[tuple[int, int], int],
                    judgement: _Judgement) -> None:
    """NVSwitch board: a GPU's NV# to any peer is its own link count; each GPU should show its model's count."""
    reach = {i: max((count for pair, count in nv_pairs.items() if i in pair), default=0) for i in indices}
    groups: dict[str, list[int]] = defaultdict(list)
    for i in indices:
        groups[_model(gpus[i])].append(i)
    for model, members in groups.items():
        spec = gpu_spec(gpus[members[0]].name)
        floor = _model_links(spec) if _kind(spec) == "sxm" else None
        expected = max(max(reach[i] for i in members), floor or 0)
        for i in members:
            if reach[i] >= expected:
                continue
            gpu = gpus[i]
            if reach[i] == 0:
                text = f"GPU{i} has no NVLink to any peer, on an NVSwitch board where the other GPUs reach each other."
            else:
                text = (f"GPU{i} reaches its peers over NV{reach[i]}, fewer than the NV{expected} of "
                        + ("its model" if floor == expected else "the other GPUs") + " on this NVSwitch board.")
            judgement.flag(gpu, "topology", text, f"NV{reach[i]}", f"NV{expected}",
                           refs=[spec.source] if spec and floor else [])
    values = sorted(set(reach.values()))
    judgement.notes.append(f"`topo -m`: NVSwitch fabric, {', '.join(f'NV{v}' for v in values if v)} per GPU")


def _judge_direct(gpus: dict[int, GpuFacts], indices: list[int], pairs: dict[tuple[int, int], int],
                  nv_pairs: dict[tuple[int, int], int], totals: dict[int, int], judgement: _Judgement) -> None:
    """No NVSwitch: pairs of SXM (full mesh) and bridged GPUs should all bond the same NV#; hybrid meshes differ."""
    hybrid_max = thresholds("nvlink")["hybrid_mesh_max_links"]
    by_model: dict[str, list[int]] = defaultdict(list)
    for i in indices:
        by_model[_model(gpus[i])].append(i)
    for model, members in by_model.items():
        spec = gpu_spec(gpus[members[0]].name)
        kind = _kind(spec)
        group_pairs = {pair: count for pair, count in nv_pairs.items() if pair[0] in members and pair[1] in members}
        linked = sorted({i for pair in group_pairs for i in pair})
        for i in members:
            if i in linked:
                continue
            if kind == "sxm" and len(members) > 1:
                judgement.flag(gpus[i], "topology",
                               f"GPU{i} ({model}) has no NVLink to any peer while "
                               + (f"{', '.join(f'GPU{j}' for j in linked)} are NVLinked" if linked else
                                  "this model is NVLinked to its peers on every board") + ".",
                               "no NV#", "NV# to its peers", refs=[spec.source] if spec else [])
        if not group_pairs:
            continue
        values = sorted(set(group_pairs.values()))
        shown = ", ".join(f"GPU{i}-GPU{j} NV{count}" for (i, j), count in sorted(group_pairs.items())[:4]) + \
            (", …" if len(group_pairs) > 4 else "")
        looks_hybrid = kind == "unknown" and max(totals[i] for i in linked) <= hybrid_max
        if kind == "mesh" or looks_hybrid:
            judgement.notes.append(
                f"`topo -m`: {shown}; " + (
                    f"{_pairs_of(model)} bond different link counts, as a hybrid mesh (DGX-1, POWER9) does by design"
                    if len(values) > 1 else f"{_pairs_of(model)} are not held to one link count")
                + (" (unnamed GPUs with at most "
                   f"{hybrid_max} NVLinks each may be such a mesh)" if looks_hybrid else ""))
            continue
        floor = _model_links(spec) if kind == "bridge" else None  # a bridge carries all of a card's links
        reference = max(max(values), floor or 0)
        for (i, j), count in sorted(group_pairs.items()):
            if count >= reference:
                continue
            than = f"the {floor} links the {model} bridge carries" if floor == reference and count == max(values) \
                else f"the NV{reference} of the other {_pairs_of(model)}"
            for me, peer in ((i, j), (j, i)):
                judgement.flag(gpus[me], "topology", f"GPU{i}-GPU{j} is NV{count}, fewer links than {than}.",
                               {f"GPU{i}-GPU{j}": f"NV{count}"}, f"NV{reference}", peers={peer},
                               refs=[spec.source] if spec and floor == reference else [])
        if kind == "sxm":  # an HGX board without NVSwitch is a full mesh: every pair NVLinked
            for (i, j), count in sorted(pairs.items()):
                if i in linked and j in linked and not count:
                    for me, peer in ((i, j), (j, i)):
                        judgement.flag(gpus[me], "topology",
                                       f"GPU{i}-GPU{j} has no NVLink on a board where the other {_pairs_of(model)} "
                                       f"are NV{reference}.", {f"GPU{i}-GPU{j}": "no NV#"}, f"NV{reference}",
                                       peers={peer})
        if not any(i in judgement.flags for i in members):
            full = len(group_pairs) == len(linked) * (len(linked) - 1) // 2 and len(linked) == len(members)
            judgement.notes.append(f"`topo -m`: {'every pair' if full else shown + ':'} "
                                   f"{'of ' + model + ' ' if model != _UNNAMED and full else ''}"
                                   f"{'NV' + str(reference) if full else 'equal NV# across ' + _pairs_of(model)}")


# ---------------------------------------------------------------------------------------------------- check


def _gpus_of(context: CheckContext) -> list[GpuFacts]:
    """The GPUs, or where no source names them, the ones the matrix shows (index only, no bus id)."""
    if context.gpus:
        return context.gpus
    topology = context.facts.topology
    if topology is None:
        return []
    indices = sorted({i for i, _ in topology.links} | {int(label[3:]) for label in topology.gpu_labels
                                                        if label[3:].isdigit()})
    return [GpuFacts(index=i, bus_id=None, source="nvidia-smi-topo.txt") for i in indices]


@check("nvlink.link_down", "NVLink links up as the board wires them", needs_gpus=False)
def nvlink_link_down(context: CheckContext) -> list[Finding]:
    gpus = _gpus_of(context)
    if not gpus:
        return [context.skip("No NVIDIA GPU is visible, so there is no NVLink to judge (see gpu.present).")]
    if len(gpus) < 2:
        return [context.passed("One GPU visible: no NVLink to judge.")]
    topology = context.facts.topology
    if all(gpu.nvlinks is None for gpu in gpus) and topology is None:
        return [context.skip("No NVLink state in this run (nvml.json, nvidia-smi-nvlink-s.txt or "
                             "nvidia-smi-topo.txt holds it).")]
    judgement = _Judgement()
    _judge_link_state(gpus, judgement)
    by_index = {gpu.index: gpu for gpu in gpus}
    if topology is not None:
        for i in {i for pair in topology.links for i in pair} - set(by_index):
            by_index[i] = GpuFacts(index=i, bus_id=None, source="nvidia-smi-topo.txt")
        _judge_topology(context, by_index, judgement)
    if judgement.flags:
        findings = []
        for index, entry in sorted(judgement.flags.items()):
            peer = by_index.get(next(iter(entry.peers))) if len(entry.peers) == 1 else None
            findings.append(context.fail(
                " ".join(dict.fromkeys(entry.texts)) + " Bandwidth to its peers drops and NCCL may route around it.",
                gpu=entry.gpu, peer=peer, observed=entry.observed, expected=entry.expected,
                fix=_LINK_FIX.format(index=index), refs=entry.refs + _LINK_REFS))
        return findings
    no_nvlink = all(not gpu.nvlinks for gpu in gpus) and not judgement.observed.get("topology")
    if no_nvlink and topology is None and any(_kind(gpu_spec(gpu.name)) in ("sxm", "mesh") for gpu in gpus):
        return [context.skip("No NVLink state reported for these NVLink GPUs (`nvidia-smi nvlink -s` answers nothing "
                             "in MIG mode) and no nvidia-smi-topo.txt: not judged.")]
    if no_nvlink:
        return [context.passed("No NVLink reported: these are PCIe-connected GPUs (NVLink unused by design unless "
                               "bridged).", observed=judgement.observed or None)]
    notes = "; ".join(dict.fromkeys(judgement.notes))
    return [context.passed(f"NVLink is up as the board wires it on all {len(gpus)} GPUs" + (f": {notes}." if notes
                           else "."), observed=judgement.observed, refs=_LINK_REFS)]


# ------------------------------------------------------------------------------------------- kernel errors

_CAUSED_BY = re.compile(r"caused by previous Xid (\d{1,4})", re.IGNORECASE)


@check("nvlink.errors", "No NVLink errors in the kernel log", needs_gpus=False)
def nvlink_errors(context: CheckContext) -> list[Finding]:
    """NVLink Xids per GPU (an Xid 45 "caused by previous Xid 145" counts as that error); NVSwitch SXids are
    health.sxid's. The status of each line is the one kernel judge's (checks/kernel_judge.py)."""
    facts = context.facts
    if missing := kernel_log_missing(context, said("nvlink.errors.what")):
        return [missing]
    gpu_by_bus = {gpu.bus_id: gpu for gpu in context.gpus if gpu.bus_id}
    per_gpu: dict[str | None, list[tuple[int, KernelEvent, bool]]] = defaultdict(list)
    for event in facts.kernel_log:
        if event.kind != "xid":
            continue
        if is_nvlink_xid(event.code):
            per_gpu[event.bus_id].append((event.code, event, False))
        elif (cause := _CAUSED_BY.search(event.detail)) and is_nvlink_xid(int(cause.group(1))):
            per_gpu[event.bus_id].append((int(cause.group(1)), event, True))
    if not per_gpu:
        return [context.passed("No NVLink Xid (" + ", ".join(map(str, nvlink_xids())) + ") in the kernel log.")]
    allocated = allocation(context)
    return [_gpu_errors(context, bus_id, entries, gpu_by_bus.get(bus_id), outside=allocated.outside(bus_id))
            for bus_id, entries in sorted(per_gpu.items(), key=lambda item: str(item[0]))]


def _gpu_errors(context: CheckContext, bus_id: str | None, entries: list[tuple[int, KernelEvent, bool]],
                gpu: GpuFacts | None, *, outside: bool = False) -> Finding:
    where = f"GPU{gpu.index} ({bus_id})" if gpu else f"the GPU at {bus_id}" if bus_id else "an unnamed GPU"
    by_code: dict[int, list[tuple[KernelEvent, bool]]] = defaultdict(list)
    for code, event, inferred in entries:
        by_code[code].append((event, inferred))
    past = all(event.superseded_by is not None for _code, event, _inferred in entries)
    parts, statuses, refs, links_all = [], [], [], set()
    observed: dict[str, Any] = {"bus_id": bus_id, "xids": {}}
    for code, group in sorted(by_code.items()):
        seen = [event for event, inferred in group if not inferred]
        # a line that only names the error as its cause does not say whether it was fatal
        judged = [judge_xid(code, event.detail if not inferred else "", history=past, outside=outside)
                  for event, inferred in group]
        code_status = worst(judgement.status for judgement in judged)
        statuses.append(code_status)
        words = {line_severity(event.detail) for event in seen}
        links = {link for event in seen for link in event.links}
        links_all |= links
        text = judged[0].name
        if seen:
            said = "fatal" if "fatal" in words else "non-fatal" if "non-fatal" in words else None
            text += f" ×{len(seen)}" + (f" on link(s) {ranges(links)}" if links else "") + \
                (f" ({said})" if said else "")
        if len(seen) < len(group):
            text += (f"{',' if seen else ''} named as the cause by {len(group) - len(seen)} later Xid line(s) "
                     f"(`caused by previous Xid {code}`, the GPU's work torn down)"
                     + ("" if seen else f"; the Xid {code} line itself is not in this log"))
        parts.append(text)
        observed["xids"][str(code)] = {"count": len(seen), "named_as_cause": len(group) - len(seen),
                                       "links": sorted(links), "fatal": code_status == Status.FAIL or (
                                           past and "non-fatal" not in words),
                                       "status": code_status.value, "why": "; ".join(judged[-1].reasons)}
        if judged[0].ref not in refs:
            refs.append(judged[0].ref)
    status = worst(statuses)
    if past:
        parts.append("all before a later driver load or reset of this GPU: history, watch whether it returns")
    if outside:
        parts.append("this GPU is not allocated to this container: the node has a faulty GPU outside it")
    fatal = any(entry["fatal"] for entry in observed["xids"].values())
    fix = ("Drain the node; reset the GPU when idle (`nvidia-smi -r -i N`) or reboot; read the link state and error "
           "counters (`nvidia-smi nvlink -s -i N`, `nvidia-smi nvlink -e -i N`) and, on NVSwitch systems, "
           "`journalctl -u nvidia-fabricmanager`; if errors return on the same link, run `dcgmi diag -r 2` and open "
           "an RMA with the vendor.") if fatal else (
        "No immediate action for a non-fatal NVLink error; watch `nvidia-smi nvlink -e -i N`; if it repeats on the "
        "same link, drain the node, run `dcgmi diag -r 2` and open a vendor case.")
    observed["links"] = sorted(links_all)
    last = entries[-1][1].line[:200]
    return context.finding(status, f"NVLink errors on {where}: {'; '.join(parts)}. Last: {last}", gpu=gpu,
                           observed=observed, expected="no NVLink Xid", fix=fix, refs=refs,
                           evidence=kernel_evidence([event for _code, event, _inferred in entries]))
