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

from gpuready.checks.cuda_fault import nvlink_fault_in_torch_logs
from gpuready.checks.gpu import allocation
from gpuready.checks.kernel_judge import (SXID_REF, is_nvlink_xid, judge_sxid, judge_xid, line_severity,
                                          nvlink_xids, worst, xid_cascade, xid_code)
from gpuready.checks.registry import CheckContext, check, kernel_evidence, kernel_log_missing
from gpuready.facts.types import GpuFacts, KernelEvent
from gpuready.i18n import Said, said
from gpuready.knowledge import GpuSpec, gpu_spec, load_table, thresholds
from gpuready.model import Finding, Status

_LINK_REFS = ["nvidia-smi nvlink -s; nvidia-smi topo -m legend (NV# = a bonded set of # NVLinks)"]


# ----------------------------------------------------------------------------------------------- link state


def _kind(spec: GpuSpec | None) -> str:
    """`sxm` (every link wired, equal pairs), `bridge`, `mesh` (every link wired, pairs differ), `none`, `unknown`."""
    if spec is None:
        return "unknown"
    via = spec.get("nvlink_via")
    if via in ("nvswitch", "nvlink_switch_system"):  # a Grace Blackwell tray wires every link too (gpus.toml header)
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


def _named(model: str) -> str | Said:
    """The model as a message names it: its name, or `unnamed` in the reader's language."""
    return said("nvlink.model.unnamed") if model == _UNNAMED else model


def _pairs_of(model: str) -> Said:
    return said("nvlink.pairs.unnamed") if model == _UNNAMED else said("nvlink.pairs", model=model)


def _gpu_list(indices) -> str:
    return ", ".join(f"GPU{index}" for index in indices)


def _sentences(texts: list[Said]) -> Said:
    """Sentences one after the other (the same one once)."""
    unique = list({text.english(): text for text in texts}.values())
    return unique[0] if len(unique) == 1 else said("nvlink.sentences", first=unique[0], then=_sentences(unique[1:]))


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
    texts: list[Said] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    refs: list[str] = field(default_factory=list)
    peers: set[int] = field(default_factory=set)


class _Judgement:
    def __init__(self) -> None:
        self.flags: dict[int, _Flag] = {}
        self.notes: list[Said] = []
        self.observed: dict[str, Any] = {}

    def flag(self, gpu: GpuFacts, source: str, text: Said, observed: Any, expected: Any,
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
                    said("nvlink.link_down.none_active", index=gpu.index, model=_named(model),
                         inactive=len(inactive[gpu.index]), links=_model_links(spec) or expected),
                    {"active": 0, "inactive": sorted(inactive[gpu.index])}, _model_links(spec) or expected,
                    refs=[spec.source] if spec else [])
        for gpu in linked:
            up = len(active[gpu.index])
            if up >= expected:
                continue
            down = inactive[gpu.index] & active[best.index] or inactive[gpu.index] or set()
            versus = said("nvlink.link_down.versus", peer=best.index, count=len(active[best.index])) \
                if len(active[best.index]) > up else ""
            wired = said("nvlink.link_down.wired", model=_named(model), links=floor) \
                if floor and floor == expected else ""
            judgement.flag(
                gpu, "nvlink_s",
                said("nvlink.link_down.some_down", index=gpu.index, model=_named(model), up=up, expected=expected,
                     down=ranges(down) or "?", versus=versus, wired=wired),
                {"active": up, "down": sorted(down)}, expected,
                refs=[spec.source] if spec and floor else [], peers={best.index} if best is not gpu else set())
        flagged = any(gpu.index in judgement.flags for gpu in members)
        if len(linked) >= 2 and not flagged:
            common = set.intersection(*(inactive[gpu.index] for gpu in linked))
            if common:
                judgement.notes.append(said("nvlink.note.inactive_alike", links=ranges(common), count=len(linked),
                                            model=_named(model), up=len(active[linked[0].index])))
        elif len(linked) == 1 and inactive[linked[0].index] and linked[0].index not in judgement.flags:
            judgement.notes.append(said("nvlink.note.inactive_alone", index=linked[0].index,
                                        links=ranges(inactive[linked[0].index]), model=_named(model)))
        if unlinked and kind not in ("sxm", "mesh"):
            judgement.notes.append(said("nvlink.note.not_bridged", gpus=_gpu_list(gpu.index for gpu in unlinked),
                                        model=_named(model)))
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
            judgement.flag(gpu, "topology", said("nvlink.link_down.topo_none", index=gpu.index,
                                                 model=_named(_model(gpu))),
                           "no NV#", "NV# to its peers", refs=[gpu_spec(gpu.name).source])
        if not sxm:
            judgement.notes.append(said("nvlink.note.topo_none"))
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
                text = said("nvlink.link_down.switched_none", index=i)
            else:
                text = said("nvlink.link_down.switched_fewer_model" if floor == expected
                            else "nvlink.link_down.switched_fewer", index=i, nv=reach[i], expected=expected)
            judgement.flag(gpu, "topology", text, f"NV{reach[i]}", f"NV{expected}",
                           refs=[spec.source] if spec and floor else [])
    values = sorted(set(reach.values()))
    judgement.notes.append(said("nvlink.note.switched", nv=", ".join(f"NV{v}" for v in values if v)))


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
                               said("nvlink.link_down.direct_none_while", index=i, model=_named(model),
                                    peers=_gpu_list(linked)) if linked else
                               said("nvlink.link_down.direct_none", index=i, model=_named(model)),
                               "no NV#", "NV# to its peers", refs=[spec.source] if spec else [])
        if not group_pairs:
            continue
        values = sorted(set(group_pairs.values()))
        shown = ", ".join(f"GPU{i}-GPU{j} NV{count}" for (i, j), count in sorted(group_pairs.items())[:4]) + \
            (", …" if len(group_pairs) > 4 else "")
        looks_hybrid = kind == "unknown" and max(totals[i] for i in linked) <= hybrid_max
        if kind == "mesh" or looks_hybrid:
            judgement.notes.append(said(
                "nvlink.note.mesh_differ" if len(values) > 1 else "nvlink.note.mesh_free", shown=shown,
                pairs=_pairs_of(model),
                hybrid=said("nvlink.note.maybe_hybrid", links=hybrid_max) if looks_hybrid else ""))
            continue
        floor = _model_links(spec) if kind == "bridge" else None  # a bridge carries all of a card's links
        reference = max(max(values), floor or 0)
        for (i, j), count in sorted(group_pairs.items()):
            if count >= reference:
                continue
            than = said("nvlink.than.bridge", links=floor, model=_named(model)) \
                if floor == reference and count == max(values) \
                else said("nvlink.than.others", nv=reference, pairs=_pairs_of(model))
            for me, peer in ((i, j), (j, i)):
                judgement.flag(gpus[me], "topology",
                               said("nvlink.link_down.pair_fewer", first=i, second=j, nv=count, than=than),
                               {f"GPU{i}-GPU{j}": f"NV{count}"}, f"NV{reference}", peers={peer},
                               refs=[spec.source] if spec and floor == reference else [])
        if kind == "sxm":  # an HGX board without NVSwitch is a full mesh: every pair NVLinked
            for (i, j), count in sorted(pairs.items()):
                if i in linked and j in linked and not count:
                    for me, peer in ((i, j), (j, i)):
                        judgement.flag(gpus[me], "topology",
                                       said("nvlink.link_down.pair_none", first=i, second=j,
                                            pairs=_pairs_of(model), nv=reference),
                                       {f"GPU{i}-GPU{j}": "no NV#"}, f"NV{reference}", peers={peer})
        if not any(i in judgement.flags for i in members):
            full = len(group_pairs) == len(linked) * (len(linked) - 1) // 2 and len(linked) == len(members)
            if not full:
                judgement.notes.append(said("nvlink.note.equal", shown=shown, pairs=_pairs_of(model)))
            elif model != _UNNAMED:
                judgement.notes.append(said("nvlink.note.every_pair_of", model=model, nv=reference))
            else:
                judgement.notes.append(said("nvlink.note.every_pair", nv=reference))


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


@check("nvlink.link_down", needs_gpus=False)
def nvlink_link_down(context: CheckContext) -> list[Finding]:
    """NVLink links up as the board wires them."""
    gpus = _gpus_of(context)
    if not gpus:
        return [context.skip(said("nvlink.link_down.no_gpu"))]
    if len(gpus) < 2:
        return [context.passed(said("nvlink.link_down.one_gpu"))]
    topology = context.facts.topology
    if all(gpu.nvlinks is None for gpu in gpus) and topology is None:
        return [context.skip(said("nvlink.link_down.no_state"))]
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
                said("nvlink.link_down.flagged", problems=_sentences(entry.texts), index=index),
                gpu=entry.gpu, peer=peer, observed=entry.observed, expected=entry.expected,
                refs=entry.refs + _LINK_REFS))
        return findings
    no_nvlink = all(not gpu.nvlinks for gpu in gpus) and not judgement.observed.get("topology")
    if no_nvlink and topology is None and any(_kind(gpu_spec(gpu.name)) in ("sxm", "mesh") for gpu in gpus):
        return [context.skip(said("nvlink.link_down.mig"))]
    if no_nvlink:
        return [context.passed(said("nvlink.link_down.pcie"), observed=judgement.observed or None)]
    notes = list({note.english(): note for note in judgement.notes}.values())
    return [context.passed(said("nvlink.link_down.up_noted", count=len(gpus), notes=notes) if notes
                           else said("nvlink.link_down.up", count=len(gpus)),
                           observed=judgement.observed, refs=_LINK_REFS)]


# ------------------------------------------------------------------------------------------- kernel errors

_CAUSED_BY = re.compile(r"caused by previous Xid (\d{1,4})", re.IGNORECASE)


@check("nvlink.errors", needs_gpus=False, logs=nvlink_fault_in_torch_logs)
def nvlink_errors(context: CheckContext) -> list[Finding]:
    """No NVLink errors in the kernel log.

    NVLink Xids per GPU (an Xid 45 "caused by previous Xid 145" counts as that error); NVSwitch SXids are
    health.sxid's, but a GPU whose Xids follow from one (kernel_judge.xid_cascade) lost its NVLink path through
    that switch: that GPU is named here. The status of each line is the one kernel judge's (checks/kernel_judge.py)."""
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
    struck = {bus_id: events for bus_id, events in _struck_by_sxid(facts.kernel_log).items() if bus_id not in per_gpu}
    if not per_gpu and not struck:
        return [context.passed(said("nvlink.errors.none", codes=", ".join(map(str, nvlink_xids()))))]
    allocated = allocation(context)
    return [_gpu_errors(context, bus_id, entries, gpu_by_bus.get(bus_id), outside=allocated.outside(bus_id))
            for bus_id, entries in sorted(per_gpu.items(), key=lambda item: str(item[0]))] + \
        [_fabric_path_lost(context, bus_id, events, gpu_by_bus.get(bus_id))
         for bus_id, events in sorted(struck.items(), key=lambda item: str(item[0]))]


def _struck_by_sxid(events: list[KernelEvent]) -> dict[str | None, list[KernelEvent]]:
    """GPU bus id → [the first NVSwitch SXid, then the GPU's Xids that follow from it] (xid.toml [sxid] window)."""
    from_sxid = {(bus_id, code, epoch) for (bus_id, code, epoch), (root, _why) in xid_cascade(events).items()
                 if root.msg_id == "xid.cause.sxid"}
    first_sxid = next((event for event in events if event.kind == "sxid"), None)
    struck: dict[str | None, list[KernelEvent]] = {}
    for event in events:
        if event.kind in ("xid", "fallen_off_bus") and \
                (event.bus_id, xid_code(event), id(event.superseded_by)) in from_sxid:
            struck.setdefault(event.bus_id, [first_sxid]).append(event)
    return struck


def _fabric_path_lost(context: CheckContext, bus_id: str | None, events: list[KernelEvent],
                      gpu: GpuFacts | None) -> Finding:
    """A GPU whose Xids follow an NVSwitch SXid: the switch error reached it, so its NVLink path is at fault."""
    sxid, xids = events[0], events[1:]
    history = all(event.superseded_by is not None for event in xids)
    status = judge_sxid(sxid.code, sxid.detail, history=history).status
    where = said("xid.where.gpu", index=gpu.index, bus_id=bus_id) if gpu else \
        said("xid.where.bus", bus_id=bus_id) if bus_id else said("xid.where.unnamed")
    codes = ", ".join(str(code) for code in dict.fromkeys(xid_code(event) for event in xids))
    text = said("nvlink.errors.sxid_path", where=where, codes=codes, sxid=sxid.code, line=sxid.line[:200])
    return context.finding(status, text, gpu=gpu, observed={"bus_id": bus_id, "sxid": sxid.code, "xids": codes,
                                                            "history": history},
                           expected="no NVSwitch error reaching a GPU", refs=[SXID_REF], evidence=kernel_evidence(events))


def _gpu_errors(context: CheckContext, bus_id: str | None, entries: list[tuple[int, KernelEvent, bool]],
                gpu: GpuFacts | None, *, outside: bool = False) -> Finding:
    where = said("xid.where.gpu", index=gpu.index, bus_id=bus_id) if gpu else \
        said("xid.where.bus", bus_id=bus_id) if bus_id else said("xid.where.unnamed")
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
        stated = "fatal" if "fatal" in words else "non_fatal" if "non-fatal" in words else None
        inferred = len(group) - len(seen)
        parts.append(said(
            "nvlink.errors.part", name=judged[0].title,
            seen=said("nvlink.errors.seen", count=len(seen),
                      links=said("nvlink.errors.on_links", links=ranges(links)) if links else "",
                      state=said(f"nvlink.errors.state.{stated}") if stated else "") if seen else "",
            inferred=said("nvlink.errors.named_also" if seen else "nvlink.errors.named_only", count=inferred,
                          code=code) if inferred else ""))
        observed["xids"][str(code)] = {"count": len(seen), "named_as_cause": len(group) - len(seen),
                                       "links": sorted(links), "fatal": code_status == Status.FAIL or (
                                           past and "non-fatal" not in words),
                                       "status": code_status.value, "why": "; ".join(judged[-1].reasons)}
        if judged[0].ref not in refs:
            refs.append(judged[0].ref)
    status = worst(statuses)
    if past:
        parts.append(said("nvlink.errors.history"))
    if outside:
        parts.append(said("nvlink.errors.outside"))
    fatal = any(entry["fatal"] for entry in observed["xids"].values())
    observed["links"] = sorted(links_all)
    text = said("nvlink.errors.found", where=where, parts=parts, line=entries[-1][1].line[:200],
                action=said("nvlink.errors.action_fatal" if fatal else "nvlink.errors.action_non_fatal"))
    return context.finding(status, text, gpu=gpu, observed=observed, expected="no NVLink Xid", refs=refs,
                           evidence=kernel_evidence([event for _code, event, _inferred in entries]))
