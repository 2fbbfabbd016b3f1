"""`nvidia-imex-ctl -N` (text) and `nvidia-imex-ctl -N -j` (JSON) → the IMEX domain one node sees.

The text form (NVIDIA IMEX guide, "nvidia-imex-ctl"): `Node #0 - 10.115.131.8 - READY - Version: 570.172`, a
connectivity matrix under ` Nodes From\\To  0   1` whose cells are the legend's letters, then `Domain State: UP`.
The JSON form: `{"nodes": {"0": {"status", "host", "hostName", "version", "connections": {"1": {"host", "status"}}}},
"status": "UP"}`. Both become one ImexDomain; connection states in the JSON's words (`CONNECTED`, …).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpuready.facts.bad_input import ParseFailure

# The connectivity table's legend, as `nvidia-imex-ctl -N` prints it, in the words of its JSON form.
CELL_WORDS = {"C": "CONNECTED", "N": "NEVER_CONNECTED", "I": "INVALID", "R": "RECOVERING", "D": "DISCONNECTED",
              "A": "AUTHENTICATING", "!V!": "VERSION_MISMATCH", "!M!": "NODE_MAP_MISMATCH"}
_MAX_NODES = 1024
_NODE = re.compile(r"Node #(\d{1,4})[ \t]{0,40}-[ \t]{0,40}([^ \t\n]{1,255})[ \t]{0,40}-[ \t]{0,40}([A-Z_]{1,40})"
                   r"(?:[ \t]{0,40}-[ \t]{0,40}Version:[ \t]{0,10}([^ \t\n]{1,40}))?")
_ROW = re.compile(r"[ \t]{0,40}(\d{1,4})((?:[ \t]{1,40}(?:!V!|!M!|[CNIRDA])){1,1024})[ \t]{0,40}")
_DOMAIN = re.compile(r"Domain State:[ \t]{0,10}([A-Z_]{1,40})")


@dataclass
class ImexNode:
    index: int
    host: str
    status: str
    """`READY`, `UNAVAILABLE`, …, as the tool prints it."""
    line: int | None = None
    """The line of the text form that named the node."""
    connections: dict[int, str] = field(default_factory=dict)
    """Peer node index → the state of this node's connection to it (`CONNECTED`, `NEVER_CONNECTED`, …)."""
    version: str | None = None
    host_name: str | None = None


@dataclass
class ImexDomain:
    state: str | None
    """`UP`, `DOWN`, `DEGRADED`, …; None where the output was cut before it."""
    nodes: list[ImexNode] = field(default_factory=list)
    state_line: int | None = None


def parse_imex_ctl(text: str) -> ImexDomain:
    """Either form, told apart by its first character."""
    return parse_imex_json(text) if text.lstrip()[:1] == "{" else parse_imex_text(text)


def parse_imex_json(text: str) -> ImexDomain:
    data = json.loads(text)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, dict) or len(nodes) > _MAX_NODES:
        raise ParseFailure("parse.imex.no_nodes")
    state = data.get("status")
    domain = ImexDomain(state=state if isinstance(state, str) else None)
    for key, entry in nodes.items():
        if not isinstance(entry, dict) or not str(key).isdigit():
            raise ParseFailure("parse.imex.bad_node", node=str(key)[:40])
        connections = entry.get("connections") if isinstance(entry.get("connections"), dict) else {}
        domain.nodes.append(ImexNode(
            index=int(key), host=str(entry.get("host", "")), status=str(entry.get("status", "")),
            version=_text(entry.get("version")), host_name=_text(entry.get("hostName")),
            connections={int(peer): str(link.get("status", "")) for peer, link in connections.items()
                         if str(peer).isdigit() and isinstance(link, dict)}))
    domain.nodes.sort(key=lambda node: node.index)
    return domain


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_imex_text(text: str) -> ImexDomain:
    domain = ImexDomain(state=None)
    columns: list[int] | None = None
    by_index: dict[int, ImexNode] = {}
    for number, line in enumerate(text.splitlines()[:_MAX_NODES * 3 + 200], start=1):
        line = line[:8192]
        if match := _NODE.search(line):
            node = ImexNode(index=int(match[1]), host=match[2], status=match[3], version=match[4], line=number)
            by_index[node.index] = node
        elif "Nodes From" in line:
            columns = [int(word) for word in line.split("To", 1)[-1].split() if word.isdigit()]
        elif columns is not None and (row := _ROW.fullmatch(line)) and int(row[1]) in by_index:
            cells = row[2].split()
            by_index[int(row[1])].connections = {peer: CELL_WORDS[cell] for peer, cell in zip(columns, cells)}
        elif match := _DOMAIN.search(line):
            domain.state, domain.state_line = match[1], number
    if not by_index and domain.state is None:
        raise ParseFailure("parse.imex.no_nodes")
    domain.nodes = sorted(by_index.values(), key=lambda node: node.index)
    return domain


# NVIDIA IMEX guide, "IMEX channels": the channels are character devices under this folder, of the major the driver
# lists for `nvidia-caps-imex-channels` in /proc/devices.
CHANNEL_FOLDER = "/dev/nvidia-caps-imex-channels"
CHANNEL_DEVICE = "nvidia-caps-imex-channels"
_CHANNEL = re.compile(r"\bchannel(\d{1,7})\b(?:[ \t]{1,10}([bcdlps-])(?![^ \t]))?")
_MAJOR = re.compile(r"[ \t]{0,40}(\d{1,7})[ \t]{1,40}nvidia-caps-imex-channels[ \t]{0,40}")
_SERVICE_WORDS = frozenset({"active", "inactive", "failed", "activating", "deactivating", "reloading", "refreshing",
                            "maintenance", "unknown"})
_SERVICE = re.compile(r"Active:[ \t]{1,40}([a-z]{1,20})")


@dataclass
class ImexChannels:
    """The IMEX channels this process (or container) sees: `imex-channels.txt` as `collect` writes it, `==> path <==`
    sections of `/proc/devices` (its `nvidia-caps-imex-channels` line) and of the channel folder (an `ls` of it, or
    collect's `channel0 c 234:0` lines)."""
    channels: list[int] = field(default_factory=list)
    """The channel numbers of the devices visible (`channel0` → 0); a listed entry that is not a character device
    is left out."""
    folder: bool = False
    """Whether /dev/nvidia-caps-imex-channels exists here."""
    major: int | None = None
    """The driver's `nvidia-caps-imex-channels` major in /proc/devices; None where the driver lists none (or the
    section was not recorded)."""


def parse_imex_channels(sections: dict[str, str]) -> ImexChannels:
    """`sections`: {path: content} of the `==> path <==` sections (host_files.split_sections)."""
    folder = next((text for path, text in sections.items() if path.rstrip("/").endswith(CHANNEL_DEVICE)), None)
    devices = sections.get("/proc/devices")
    if folder is None and devices is None:
        raise ParseFailure("parse.imex.no_channel_sections")
    found = [_MAJOR.fullmatch(line[:200]) for line in (devices or "").splitlines()[:1000]]
    channels = sorted({int(match[1]) for line in (folder or "").splitlines()[:4096]
                       if (match := _CHANNEL.search(line[:400])) and match[2] in (None, "c")})
    return ImexChannels(channels=channels, folder=folder is not None,
                        major=next((int(match[1]) for match in found if match), None))


def parse_imex_service(text: str) -> str:
    """`systemctl is-active nvidia-imex` (one word) or `systemctl status nvidia-imex` (its `Active:` line) → the
    unit's state (`active`, `inactive`, `failed`, …)."""
    for line in text.splitlines()[:200]:
        word = line.strip()[:40]
        if word in _SERVICE_WORDS:
            return word
        if match := _SERVICE.search(line[:400]):
            return match[1]
    raise ParseFailure("parse.imex.no_service_state")
