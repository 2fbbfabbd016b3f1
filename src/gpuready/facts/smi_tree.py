"""`nvidia-smi -q` as a tree, from its XML (`-q -x`) or its plain text.

Both forms print the same tree: XML with tags, text with indented `Label : value` lines.
The mapping from tree to facts lives in nvidia_smi_q.py; this module only reads the shape.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

from gpuready.facts.units import strip_ansi


class SmiParseError(ValueError):
    pass


@dataclass
class Node:
    key: str
    value: str | None = None
    children: list["Node"] = field(default_factory=list)

    def find(self, *path: str) -> "Node | None":
        node: Node | None = self
        for key in path:
            wanted = normalize_key(key)
            node = next((child for child in node.children if child.key == wanted), None) if node else None
        return node

    def find_all(self, key: str) -> list["Node"]:
        wanted = normalize_key(key)
        return [child for child in self.children if child.key == wanted]

    def get(self, *path: str) -> str | None:
        node = self.find(*path)
        return node.value if node else None


def normalize_key(label: str) -> str:
    """`GPU Slowdown T.Limit Temp` → `gpu_slowdown_t_limit_temp`; XML tags map to themselves."""
    return re.sub(r"[^0-9a-z]+", "_", label.strip().lower()).strip("_")


def parse_xml(text: str) -> Node:
    try:
        root = ElementTree.fromstring(strip_ansi(text).lstrip())
    except ElementTree.ParseError as error:
        raise SmiParseError(f"not well-formed XML ({error})") from None
    if root.tag != "nvidia_smi_log":
        raise SmiParseError(f"the root element is <{root.tag}>, not <nvidia_smi_log>")
    return _from_element(root)


def _from_element(element: ElementTree.Element) -> Node:
    node = Node(normalize_key(element.tag), (element.text or "").strip() or None)
    if element.tag == "gpu" and element.get("id"):
        node.value = element.get("id")
    node.children = [_from_element(child) for child in element]
    return node


_GPU_HEADER = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
_LINE = re.compile(r"^(?P<indent>\s*)(?P<label>[^:]+?)\s*(?::\s?(?P<value>.*))?$")


def parse_text(text: str) -> Node:
    """Indentation gives the nesting; `GPU 00000000:3B:00.0` lines open a GPU."""
    root = Node("nvidia_smi_log")
    stack: list[tuple[int, Node]] = [(-1, root)]
    saw_header = False
    for raw_line in strip_ansi(text).expandtabs(4).splitlines():
        if not raw_line.strip() or raw_line.strip().startswith("="):
            saw_header = saw_header or "NVSMI LOG" in raw_line
            continue
        indent = len(raw_line) - len(raw_line.lstrip())
        if indent and len(stack) == 1 and not saw_header and not root.children:
            # a paste that starts inside a GPU's section: its fields belong to a GPU whose header line was cut
            headless = Node("gpu", None)
            root.children.append(headless)
            stack.append((0, headless))  # where a GPU header line sits
        gpu_header = _GPU_HEADER.fullmatch(raw_line.strip())
        if gpu_header:
            node = Node("gpu", gpu_header.group(1))
        else:
            match = _LINE.match(raw_line)
            if not match:
                continue
            label, value = match.group("label"), match.group("value")
            node = Node(normalize_key(label), value.strip() if value is not None else None)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    if not root.find_all("gpu") and not root.find("driver_version") and not saw_header:
        raise SmiParseError("no `nvidia-smi -q` header, driver version or GPU section found")
    return root
