"""Kubernetes nodes whose GPUs the scheduler cannot see (`k8s.gpu_not_advertised`): `kubectl describe node` (or
`-o yaml`) showing `nvidia.com/gpu: 0`, or no `nvidia.com/gpu` at all on a node labelled as an NVIDIA GPU node, and
the NVIDIA device plugin's own log saying why (no NVML in its container, no devices found).

Parsing is facts/k8s_node.py; this module only judges. A MIG node with the mixed strategy advertises
`nvidia.com/gpu: 0` next to `nvidia.com/mig-…` resources: that is not a fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.facts import k8s_node as parse
from gpuready.i18n import Said, finding_text, said
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose.evidence import DiagnoseContext, Line, Reader, quote

MAX_NODES = 4096
MAX_ITEMS = 16
GPU = "nvidia.com/gpu"
REFS = ["https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html",
        "NVIDIA/k8s-device-plugin#58 (maintainer: Capacity is every GPU, Allocatable the healthy ones)"]


@dataclass
class _Section:
    resources: dict[str, int] = field(default_factory=dict)
    """nvidia.com/* resources and their quantities."""
    others: int = 0
    """Other resources seen (cpu, memory, pods): the block was really read."""
    closed: bool = False
    indent: int = 0
    """The header's indentation: a line indented no deeper ends the block."""
    lines: list[Line] = field(default_factory=list)


@dataclass
class _Node:
    source: str
    name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    label_lines: list[Line] = field(default_factory=list)
    sections: dict[str, _Section] = field(default_factory=dict)
    name_line: Line | None = None


class K8sNodeReader(Reader):
    """Reader name "k8s"."""

    name = "k8s"
    markers = parse.MARKERS
    follow_lines = 8
    """A few lines after a `Capacity:` header too (the block's other resources, and the line that ends it)."""

    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.open: dict[str, tuple[_Node, str]] = {}
        """source → the node and section whose resource lines come next."""
        self.plugin: list[tuple[parse.PluginError, Line]] = []

    def _node(self, source: str) -> _Node | None:
        if self.nodes and self.nodes[-1].source == source:
            return self.nodes[-1]
        return self._new_node(source)

    def _new_node(self, source: str) -> _Node | None:
        if len(self.nodes) >= MAX_NODES:
            return None
        self.nodes.append(_Node(source=source))
        return self.nodes[-1]

    def feed(self, line: Line) -> None:
        if (error := parse.parse_plugin_error(line.text)) is not None:
            if len(self.plugin) < MAX_ITEMS and all(line is not known for _, known in self.plugin):
                self.plugin.append((error, line))
            return
        parsed = parse.parse_node_line(line.text)
        current = self.open.get(line.source)
        if current is not None and line.text.strip():
            indent = len(line.text) - len(line.text.lstrip())
            section = current[0].sections[current[1]]
            # a header, or a line no deeper than the block's own header, ends the block
            if (parsed is not None and parsed.kind in ("section", "name", "other_header")) or indent <= section.indent:
                section.closed = True
                del self.open[line.source]
                current = None
        if parsed is None:
            return
        if parsed.kind == "name":
            node = self._node(line.source)
            if node is not None and (node.name is not None or node.sections):
                node = self._new_node(line.source)
            if node is not None:
                node.name, node.name_line = parsed.key, line
        elif parsed.kind == "section":
            node = self._node(line.source)
            if node is not None:
                if parsed.key in node.sections:  # a second Capacity block: the next node (yaml lists)
                    node = self._new_node(line.source)
                if node is not None:
                    node.sections[parsed.key] = _Section(lines=[line], indent=parsed.number or 0)
                    self.open[line.source] = (node, parsed.key)
        elif parsed.kind == "resource" and line.source in self.open:
            node, key = self.open[line.source]
            section = node.sections[key]
            if parsed.key.startswith("nvidia.com/"):
                if len(section.resources) < 64:
                    section.resources[parsed.key] = parsed.number or 0
                section.lines.append(line)
            else:
                section.others += 1
        elif parsed.kind in ("label", "resource"):  # a yaml label reads like a resource: `nvidia.com/gpu.count: "8"`
            node = self._node(line.source)
            if node is None:
                return
            value = parsed.value
            if parsed.key == "kubernetes.io/hostname":
                node.name = node.name or value or None
            elif len(node.labels) < 64:
                node.labels[parsed.key] = value
                if len(node.label_lines) < 4 and parsed.key.startswith("nvidia.com/gpu"):
                    node.label_lines.append(line)

    # ------------------------------------------------------------------ judging

    def findings(self, context: DiagnoseContext) -> list[Finding]:
        found = [finding for node in self.nodes if (finding := self._node_finding(context, node)) is not None]
        if self.plugin:
            found.append(self._plugin_finding(context))
        return found

    @staticmethod
    def _gpu_label(node: _Node) -> str | Said | None:
        """The label that says the node has NVIDIA GPUs, as `key=value`; the PCI one with what it means."""
        labels = node.labels
        if labels.get("nvidia.com/gpu.present") == "true":
            product = labels.get("nvidia.com/gpu.product")
            return "nvidia.com/gpu.present=true" + (f", {product}" if product else "")
        for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.count"):
            if labels.get(key) not in (None, "", "0"):
                return f"{key}={labels[key]}"
        if labels.get("feature.node.kubernetes.io/pci-10de.present") == "true":
            return said("k8s.gpu_not_advertised.label.pci_10de")
        return None

    def _node_finding(self, context: DiagnoseContext, node: _Node) -> Finding | None:
        host = node.name or context.host
        capacity, allocatable = node.sections.get("capacity"), node.sections.get("allocatable")
        read = [section for section in (capacity, allocatable) if section is not None]
        if not read:
            return None
        mig = {key: value for section in read for key, value in section.resources.items()
               if key.startswith("nvidia.com/mig-") and value > 0}
        has_capacity = capacity is not None and GPU in capacity.resources
        has_allocatable = allocatable is not None and GPU in allocatable.resources
        cap = capacity.resources.get(GPU) if capacity is not None else None
        alloc = allocatable.resources.get(GPU) if allocatable is not None else None
        label = self._gpu_label(node)
        lines = sorted([line for section in read for line in section.lines] + node.label_lines,
                       key=lambda line: (line.source, line.number))
        observed = {"node": node.name, "capacity": cap, "allocatable": alloc,
                    "label": label.english() if isinstance(label, Said) else label,
                    "mig": mig or None}
        if mig and not cap and not alloc:
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.PASS, subject=Subject(host=host),
                           **finding_text(_said("mig", node, mig=", ".join(f"{k}: {v}" for k, v in mig.items()))),
                           observed=observed, refs=REFS, evidence=quote(lines))
        if (has_capacity and cap == 0) or (has_allocatable and alloc == 0):
            text = (_said("all_unhealthy", node, capacity=cap) if cap else
                    _said("zero_labelled", node, label=label) if label else _said("zero", node))
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=host),
                           **finding_text(text), observed=observed, expected="nvidia.com/gpu equal to the node's GPUs",
                           refs=REFS, evidence=quote(lines))
        if label and not has_capacity and not has_allocatable and not mig \
                and all(section.closed and section.others >= 2 for section in read):
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=host),
                           **finding_text(_said("not_registered", node, label=label)),
                           observed=observed, expected="nvidia.com/gpu in Capacity and Allocatable", refs=REFS, evidence=quote(lines + [line for section in read for line in section.lines[:1]]))
        if cap and alloc is not None and 0 < alloc < cap:
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=host),
                           **finding_text(_said("some_unhealthy", node, capacity=cap, allocatable=alloc,
                                                unhealthy=cap - alloc)),
                           observed=observed, expected=f"nvidia.com/gpu: {cap} allocatable", refs=REFS, evidence=quote(lines))
        if cap or alloc:
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.PASS, subject=Subject(host=host),
                           **finding_text(_said("advertised", node, gpus=alloc if alloc is not None else cap)),
                           observed=observed, refs=REFS, evidence=quote(lines))
        return None

    def _plugin_finding(self, context: DiagnoseContext) -> Finding:
        kinds = sorted({error.kind for error, _ in self.plugin})
        details = list(dict.fromkeys(error.detail for error, _ in self.plugin))[:4]
        return Finding(
            check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=context.host),
            **finding_text(said("k8s.gpu_not_advertised.plugin_no_gpu", details="; ".join(details))),
            observed={"kinds": kinds, "details": details},
            expected="the device plugin registers nvidia.com/gpu", refs=REFS,
            evidence=quote([line for _, line in self.plugin]))


def _said(variant: str, node: _Node, **values: object) -> Said:
    """`k8s.gpu_not_advertised.<variant>` of a node by its name, or `.unnamed` ("The node …") when it has none."""
    return said(f"k8s.gpu_not_advertised.{variant}" + ("" if node.name else ".unnamed"), node=node.name, **values)
