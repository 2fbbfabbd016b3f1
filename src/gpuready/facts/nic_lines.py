"""RDMA NICs (ConnectX, BlueField's integrated ConnectX) as lspci names them, in any of its shapes, from any input.

lspci prints a device as `BB:DD.F <class>: <vendor> <device>` (flat, `lspci`, `-v`, `-vv`, `-nn`; with a domain
`DDDD:BB:DD.F`) or, with `-t`/`-tv`/`-tvv`, at the end of a tree line after its function: `+-02.4-[0d]----00.0  Mellanox
Technologies MT2910 Family [ConnectX-7]` (pciutils ls-tree.c: the device's `%02x.%d` then two spaces and its name).
The names come from pci.ids (vendor 15b3): `MT2910 Family [ConnectX-7]`, `MT28908 Family [ConnectX-6]`,
`MT43244 BlueField-3 integrated ConnectX-7 network controller`, `ConnectX Family mlx5Gen Virtual Function` …

Parsing only: which model a name is and what rate it runs at is estimate/expect.py's, from knowledge/nics.toml.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuready.facts.log_lines import Line

MARKERS = r"ConnectX"
"""Lines worth offering (every ConnectX name in pci.ids, BlueField's included, holds the word)."""

MAX_SOURCES = 64
MAX_DEVICES_PER_SOURCE = 512

_FLAT = re.compile(r"^[ \t]{0,4}(?P<address>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.(?P<function>[0-7]))"
                   r"[ \t]{1,8}(?:[A-Za-z][^:\n]{0,80}:[ \t]{1,8})?(?P<name>\S[^\n]{0,300})$")
_TREE = re.compile(r"-(?P<device>[0-9a-fA-F]{2})\.(?P<function>[0-7])  (?P<name>\S[^\n]{0,300})$")


@dataclass(frozen=True)
class NicDevice:
    name: str
    """As lspci names it (vendor and device), without the `[vvvv:dddd]` ids of `-nn`."""
    address: str | None
    """`0000:17:00.0` from a flat listing; None from a tree line (the tree says the bus only where it branches)."""
    function: int
    virtual: bool
    """An SR-IOV virtual function (`… Virtual Function`), what a VM is given instead of the card."""
    line: Line


@dataclass(kw_only=True)
class NicLineFacts:
    """The ConnectX devices each input lists (one lspci capture is one node's inventory)."""
    by_source: dict[str, list[NicDevice]] = field(default_factory=dict)


def parse_nic_line(line: Line) -> NicDevice | None:
    """A ConnectX device line of lspci (flat or tree), or None for any other line that names ConnectX."""
    text = line.text.rstrip()
    flat = _FLAT.match(text)
    match = flat or _TREE.search(text)
    if match is None:
        return None
    name = re.sub(r"\s*\[[0-9a-fA-F]{4}:[0-9a-fA-F]{4}\]|\s*\(rev [0-9a-fA-F]{1,2}\)|\s*\(prog-if [^)]{0,40}\)", "",
                  match["name"]).strip()
    if "ConnectX" not in name:
        return None
    return NicDevice(name=name, address=flat["address"].lower() if flat else None, function=int(match["function"]),
                     virtual="Virtual Function" in name, line=line)
