"""`nvidia-smi -q` as a tree, from its XML (`-q -x`) or its plain text.

Both forms print the same tree: XML with tags, text with indented `Label : value` lines.
The mapping from tree to facts lives in nvidia_smi_q.py; this module only reads the shape.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

from gpuready.facts.bad_input import ParseFailure
from gpuready.facts.units import strip_ansi


class SmiParseError(ParseFailure):
    """The `nvidia-smi -q` tree (or a matrix of `nvidia-smi topo`) is not what that tool prints."""


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


_NOT_KEY_CHARS = re.compile(r"[^0-9a-z]+")
# ASCII that a key does not keep, as a space: str.translate and str.split do at C speed what the regex does char by char
_ASCII_TO_SPACE = {code: " " for code in range(128) if not ("0" <= chr(code) <= "9" or "a" <= chr(code) <= "z")}


def normalize_key(label: str) -> str:
    """`GPU Slowdown T.Limit Temp` → `gpu_slowdown_t_limit_temp`; XML tags map to themselves."""
    lowered = label.lower()
    if lowered.isascii():
        return "_".join(lowered.translate(_ASCII_TO_SPACE).split())
    return _NOT_KEY_CHARS.sub("_", lowered).strip("_")


def parse_xml(text: str) -> Node:
    try:
        root = ElementTree.fromstring(strip_ansi(text).lstrip())
    except ElementTree.ParseError as error:
        raise SmiParseError("parse.xml.malformed", error=str(error)) from None
    if root.tag != "nvidia_smi_log":
        raise SmiParseError("parse.xml.root", tag=root.tag)
    return _from_element(root)


def _from_element(element: ElementTree.Element) -> Node:
    node = Node(normalize_key(element.tag), (element.text or "").strip() or None)
    if element.tag == "gpu" and element.get("id"):
        node.value = element.get("id")
    node.children = [_from_element(child) for child in element]
    return node


_GPU_HEADER = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
# What str.splitlines ends a line at besides "\n" and "\r" (strip_ansi has taken every "\r"): made "\n".
_OTHER_LINE_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"
# A character that may start a node's line (a `====` rule's line starts with `=`): searched for, never a line at a time
_VISIBLE = re.compile(r"[^\s=]")
# A top-level line whose node can matter: a GPU header, or a label that may read `gpu`, `driver_version`,
# `cuda_version` or `attached_gpus` (only such keys are looked up at the top). Any other top-level line starts a
# section nothing reads: it and the lines under it are skipped in one search, whatever their number.
_NOT_IN_KEY = r"[^0-9A-Za-z\u0130\u212a:\n]"  # what normalize_key drops from a label (before its first colon)
_ROOT_WORD = re.compile(r"[GgDdCcAa](?:[Pp][Uu]|[Rr][Ii][Vv][Ee][Rr]|[Uu][Dd][Aa]|[Tt][Tt][Aa][Cc][Hh][Ee][Dd])"
                        r"(?![0-9A-Za-z\u0130\u212a])")
_ROOT_LINE_READ = re.compile(r"(?=[^\s=:])" + _NOT_IN_KEY + r"*" + _ROOT_WORD.pattern)
# GPU-level `-q` sections a paste may hold alone at the left margin (`-q` indents them 4 under `GPU …`).
_GPU_SECTIONS = frozenset({"clocks_event_reasons", "clocks_throttle_reasons", "ecc_errors", "remapped_rows",
                           "retired_pages", "temperature", "power_readings", "gpu_power_readings", "clocks",
                           "max_clocks", "pci", "fabric", "performance"})
# Where a bulk skip must stop besides: one of those sections at the left margin (a fragment whose GPU header was cut),
# its printed label being the key's words (normalize_key's inverse)
_ROOT_OR_SECTION_WORD = re.compile(_ROOT_WORD.pattern + r"|(?im:^(?:" + "|".join(
    key.replace("_", r"[^0-9a-z\n]+") for key in sorted(_GPU_SECTIONS, key=len, reverse=True)) + r")\b)")


def parse_text(text: str) -> Node:
    """Indentation gives the nesting; `GPU 00000000:3B:00.0` lines open a GPU. Only the lines that make a node are
    looked at, and of the top-level sections only those whose node can matter: blank lines, rules and foreign
    output are skipped in bulk."""
    text = _one_line_break(strip_ansi(text))
    root = Node("nvidia_smi_log")
    stack: list[tuple[int, Node]] = [(-1, root)]
    start = _next_node_line(text, 0)
    if start >= 0 and text[start].isspace() and not _has_header_rule(text, start):
        # a paste that starts inside a GPU's section: its fields belong to a GPU whose header line was cut
        headless = Node("gpu", None)
        root.children.append(headless)
        stack.append((0, headless))  # where a GPU header line sits
    while start >= 0:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start].isspace():
            _add_node(text[start:end].expandtabs(4), stack)
        elif _is_dedented_gpu_section(text, start, end):
            _open_headless_gpu(root, stack)
            _add_node(text[start:end].expandtabs(4), stack)
        elif _ROOT_LINE_READ.match(text, start):
            del stack[1:]  # a top-level line closes every section, a cut GPU's too
            _add_node(text[start:end].expandtabs(4), stack)
        else:
            del stack[1:]  # a section nothing reads: it closes the one before
            start = _next_root_line_read(text, end + 1)
            continue
        start = _next_node_line(text, end + 1)
    if not root.find_all("gpu") and not root.find("driver_version") and not _has_header_rule(text, len(text)):
        raise SmiParseError("parse.smi_q.nothing")
    return root




def _is_dedented_gpu_section(text: str, start: int, end: int) -> bool:
    """A GPU-level section at the left margin (`Clocks Throttle Reasons`, its fields indented under it): `-q` prints
    it 4 in under a `GPU …` line, so at the margin it is a fragment pasted without its GPU's header."""
    following = _next_node_line(text, end + 1)
    return (following >= 0 and text[following].isspace()
            and normalize_key(text[start:end].split(":", 1)[0]) in _GPU_SECTIONS)


def _open_headless_gpu(root: Node, stack: list[tuple[int, Node]]) -> None:
    """Left-margin sections one after another are one GPU's; the first after anything else opens a new GPU whose
    header the paste cut (never the GPU printed above it: its own sections are indented under it)."""
    if len(stack) > 1 and stack[1][0] == -1 and stack[1][1].key == "gpu":
        del stack[2:]
        return
    headless = Node("gpu", None)
    root.children.append(headless)
    del stack[1:]
    stack.append((-1, headless))  # below the margin: the section's own line (indent 0) goes under it


def _one_line_break(text: str) -> str:
    """The text with "\n" for every line break. Tabs expand from the start of a "\n" line (not of a line that another
    break began): where there is another, they are expanded here, over the whole text; else line by line, only on
    the lines read."""
    if not any(other in text for other in _OTHER_LINE_BREAKS):  # nine C-speed scans, no regex over every character
        return text
    text = text.expandtabs(4)
    for other in _OTHER_LINE_BREAKS:
        text = text.replace(other, "\n")
    return text


def _next_node_line(text: str, position: int) -> int:
    """Where the next line that makes a node starts (-1: none): not blank, not a `====` rule, not an unindented line
    that starts with `:` (it has no label)."""
    while found := _VISIBLE.search(text, position):
        at = found.start()
        start = text.rfind("\n", position, at) + 1 or position
        if (at == start and text[at] != ":") or (at > start and text[start:at].isspace()):
            return start
        position = text.find("\n", at) + 1  # a rule: skipped
        if position == 0:
            return -1
    return -1


def _next_root_line_read(text: str, position: int) -> int:
    """Where the next top-level line whose node can matter starts (-1: none)."""
    while found := _ROOT_OR_SECTION_WORD.search(text, position):
        start = text.rfind("\n", position, found.start()) + 1 or position
        if start == found.start() and not text[start].isspace() or _ROOT_LINE_READ.match(text, start):
            return start
        position = text.find("\n", found.end()) + 1  # the word is not the line's label: the next line
        if position == 0:
            return -1
    return -1


def _has_header_rule(text: str, end: int) -> bool:
    """A `==== NVSMI LOG ====` rule (a line whose first character other than a space is `=`) before `end`."""
    position = 0
    while (found := text.find("NVSMI LOG", position, end)) >= 0:
        start = text.rfind("\n", position, found) + 1 or position
        if text[start:found].lstrip().startswith("="):
            return True
        position = text.find("\n", found) + 1
        if position == 0:
            return False
    return False


def _add_node(line: str, stack: list[tuple[int, Node]]) -> None:
    """The node of a line that makes one (`Label : value`, `Label`, a GPU header), under the last open node less
    indented than it."""
    body = line.lstrip()
    indent = len(line) - len(body)
    if gpu_header := _GPU_HEADER.fullmatch(body.rstrip()):
        node = Node("gpu", gpu_header.group(1))
    else:
        label, colon, value = body.partition(":")
        # a colon right after the indent: the label is the indent's last character (what a lazy regex would take)
        node = Node(normalize_key(label.rstrip() or line[indent - 1]), value.strip() if colon else None)
    while stack[-1][0] >= indent:
        stack.pop()
    stack[-1][1].children.append(node)
    stack.append((indent, node))
