"""Kubernetes nodes whose GPUs the scheduler cannot see (`k8s.gpu_not_advertised`): `kubectl describe node` (or
`-o yaml`) showing `nvidia.com/gpu: 0`, or no `nvidia.com/gpu` at all on a node labelled as an NVIDIA GPU node, and
the NVIDIA device plugin's own log saying why (no NVML in its container, no devices found).

Parsing is facts/k8s_node.py; this module only judges. A MIG node with the mixed strategy advertises
`nvidia.com/gpu: 0` next to `nvidia.com/mig-…` resources: that is not a fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuready.facts import k8s_node as parse
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose.evidence import DiagnoseContext, Line, Reader, quote

MAX_NODES = 4096
MAX_ITEMS = 16
GPU = "nvidia.com/gpu"
REFS = ["https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html",
        "NVIDIA/k8s-device-plugin#58 (maintainer: Capacity is every GPU, Allocatable the healthy ones)"]
FIX_RUNTIME = ("The device plugin's container cannot reach the driver: on the node install the NVIDIA Container "
               "Toolkit and make nvidia containerd's default runtime (`sudo nvidia-ctk runtime configure "
               "--runtime=containerd --set-as-default && sudo systemctl restart containerd`; CRI-O and Docker alike; "
               "k3s: configure k3s's own containerd config.toml.tmpl), or create a RuntimeClass `nvidia` (handler: "
               "nvidia) and run the plugin with `runtimeClassName: nvidia`; then restart the plugin (`kubectl -n "
               "kube-system rollout restart daemonset nvidia-device-plugin-daemonset`) and check `kubectl describe "
               "node <node> | grep nvidia.com/gpu`.")


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
    def _gpu_label(node: _Node) -> str | None:
        labels = node.labels
        if labels.get("nvidia.com/gpu.present") == "true":
            product = labels.get("nvidia.com/gpu.product")
            return "nvidia.com/gpu.present=true" + (f", {product}" if product else "")
        for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.count"):
            if labels.get(key) not in (None, "", "0"):
                return f"{key}={labels[key]}"
        if labels.get("feature.node.kubernetes.io/pci-10de.present") == "true":
            return "feature.node.kubernetes.io/pci-10de.present=true (an NVIDIA PCI device)"
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
        who = f"Node {node.name}" if node.name else "The node"
        observed = {"node": node.name, "capacity": cap, "allocatable": alloc, "label": label,
                    "mig": mig or None}
        if mig and not cap and not alloc:
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.PASS, subject=Subject(host=host),
                           message=(f"{who} advertises MIG devices ({', '.join(f'{k}: {v}' for k, v in mig.items())})"
                                    f"; nvidia.com/gpu: 0 is expected with the mixed MIG strategy."),
                           observed=observed, refs=REFS, evidence=quote(lines))
        if (has_capacity and cap == 0) or (has_allocatable and alloc == 0):
            if cap:
                message = (f"{who} has {cap} GPU(s) in Capacity but nvidia.com/gpu: 0 in Allocatable: the "
                           "device plugin marks every GPU unhealthy, so no pod can be scheduled on them.")
                fix = ("Read the device plugin's log on that node (`kubectl -n kube-system logs <nvidia-device-plugin "
                       "pod>`) for the health events (an Xid makes a GPU unhealthy) and the node's `dmesg -T | grep "
                       "NVRM` (`gpuready diagnose` reads both); fix or reset the GPU, then restart the device plugin.")
            else:
                message = (f"{who} advertises nvidia.com/gpu: 0"
                           + (f" although it is labelled {label}" if label else "")
                           + ": the device plugin runs but found no GPU, so pods requesting nvidia.com/gpu stay "
                             "Pending.")
                fix = FIX_RUNTIME
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=host),
                           message=message, observed=observed, expected="nvidia.com/gpu equal to the node's GPUs",
                           fix=fix, refs=REFS, evidence=quote(lines))
        if label and not has_capacity and not has_allocatable and not mig \
                and all(section.closed and section.others >= 2 for section in read):
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=host),
                           message=(f"{who} is labelled {label} but its Capacity/Allocatable list no "
                                    "nvidia.com/gpu: no device plugin registered its GPUs with the kubelet."),
                           observed=observed, expected="nvidia.com/gpu in Capacity and Allocatable",
                           fix=("Check the device plugin runs on that node (`kubectl -n kube-system get pods -o wide "
                                "| grep nvidia-device-plugin`; a missing nodeSelector / toleration keeps it off) and "
                                "read its log. " + FIX_RUNTIME),
                           refs=REFS, evidence=quote(lines + [line for section in read for line in section.lines[:1]]))
        if cap and alloc is not None and 0 < alloc < cap:
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=host),
                           message=(f"{who} has {cap} GPU(s) in Capacity but only {alloc} allocatable: the "
                                    f"device plugin marks {cap - alloc} unhealthy, so a job needing all {cap} cannot "
                                    "be placed there."),
                           observed=observed, expected=f"nvidia.com/gpu: {cap} allocatable",
                           fix=("Find the unhealthy GPU in the device plugin's log and the node's `dmesg -T | grep "
                                "NVRM` (Xid); fix or reset it, then restart the device plugin."),
                           refs=REFS, evidence=quote(lines))
        if cap or alloc:
            return Finding(check_id="k8s.gpu_not_advertised", status=Status.PASS, subject=Subject(host=host),
                           message=f"{who} advertises nvidia.com/gpu: {alloc if alloc is not None else cap}.",
                           observed=observed, refs=REFS, evidence=quote(lines))
        return None

    def _plugin_finding(self, context: DiagnoseContext) -> Finding:
        kinds = sorted({error.kind for error, _ in self.plugin})
        details = list(dict.fromkeys(error.detail for error, _ in self.plugin))[:4]
        return Finding(
            check_id="k8s.gpu_not_advertised", status=Status.FAIL, subject=Subject(host=context.host),
            message=("The NVIDIA device plugin found no GPU to advertise: " + "; ".join(details)
                     + ". Its container does not see the driver's NVML library, so the node shows no nvidia.com/gpu."),
            observed={"kinds": kinds, "details": details},
            expected="the device plugin registers nvidia.com/gpu", fix=FIX_RUNTIME, refs=REFS,
            evidence=quote([line for _, line in self.plugin]))
