"""The Kubernetes node reader: `kubectl describe node` (or `-o yaml`) and the NVIDIA device plugin's log in,
K8sNodeFacts out (facts/k8s_node.py parses each line; checks/k8s_node.py judges)."""

from __future__ import annotations

from gpuready.facts import k8s_node as parse
from gpuready.facts.log_facts import K8sNode, K8sNodeFacts, ResourceSection
from gpuready.facts.log_lines import Line, Reader

MAX_NODES = 4096
MAX_ITEMS = 16


class K8sNodeReader(Reader):
    """Reader name "k8s"."""

    name = "k8s"
    markers = parse.MARKERS
    follow_lines = 8
    """A few lines after a `Capacity:` header too (the block's other resources, and the line that ends it)."""

    def __init__(self) -> None:
        self.seen = K8sNodeFacts()
        self.open: dict[str, tuple[K8sNode, str]] = {}
        """source → the node and section whose resource lines come next."""

    def facts(self) -> K8sNodeFacts:
        return self.seen

    def _node(self, source: str) -> K8sNode | None:
        nodes = self.seen.nodes
        if nodes and nodes[-1].source == source:
            return nodes[-1]
        return self._new_node(source)

    def _new_node(self, source: str) -> K8sNode | None:
        if len(self.seen.nodes) >= MAX_NODES:
            return None
        self.seen.nodes.append(K8sNode(source=source))
        return self.seen.nodes[-1]

    def feed(self, line: Line) -> None:
        if (error := parse.parse_plugin_error(line.text)) is not None:
            plugin = self.seen.plugin
            if len(plugin) < MAX_ITEMS and all(line is not known for _, known in plugin):
                plugin.append((error, line))
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
        if parsed is None:
            return
        if parsed.kind == "name":
            self._name(line, parsed)
        elif parsed.kind == "section":
            self._section(line, parsed)
        elif parsed.kind == "resource" and line.source in self.open:
            node, key = self.open[line.source]
            section = node.sections[key]
            if parsed.key.startswith("nvidia.com/"):
                if len(section.resources) < 64:
                    section.resources[parsed.key] = parsed.number or 0
                section.lines.append(line)
            else:
                section.others += 1
        elif parsed.kind == "resource" and parse.is_gpu_resource(parsed.key):
            self._unheaded(line, parsed)
        elif parsed.kind in ("label", "resource"):  # a yaml label reads like a resource: `nvidia.com/gpu.count: "8"`
            self._label(line, parsed)

    def _name(self, line: Line, parsed: parse.NodeLine) -> None:
        node = self._node(line.source)
        if node is not None and (node.name is not None or node.sections):
            node = self._new_node(line.source)
        if node is not None:
            node.name, node.name_line = parsed.key, line

    def _section(self, line: Line, parsed: parse.NodeLine) -> None:
        node = self._node(line.source)
        if node is not None and parsed.key in node.sections:  # a second Capacity block: the next node (yaml lists)
            node = self._new_node(line.source)
        if node is not None:
            node.sections[parsed.key] = ResourceSection(lines=[line], indent=parsed.number or 0)
            self.open[line.source] = (node, parsed.key)

    def _unheaded(self, line: Line, parsed: parse.NodeLine) -> None:
        """A GPU resource line whose block header is not in the input (`kubectl describe node | grep gpu` keeps only
        the `nvidia.com/gpu:  0` lines): describe prints Capacity, then Allocatable, once per node, so the first such
        line of a node is its capacity, the second its allocatable, and a third starts the next node."""
        node = self._node(line.source)
        if node is not None and parsed.key in node.sections.get("allocatable", ResourceSection()).resources:
            node = self._new_node(line.source)
        if node is None:
            return
        key = "capacity" if parsed.key not in node.sections.get("capacity", ResourceSection()).resources \
            else "allocatable"
        section = node.sections.setdefault(key, ResourceSection(indent=-1))
        if len(section.resources) < 64:
            section.resources[parsed.key] = parsed.number or 0
        section.lines.append(line)

    def _label(self, line: Line, parsed: parse.NodeLine) -> None:
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
