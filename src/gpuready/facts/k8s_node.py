"""Kubernetes GPU nodes as tickets show them: `kubectl describe node` (and `kubectl get node -o yaml`) lines, and the
NVIDIA device plugin's log. One line in, one typed record out; parsing only, never judging.

`kubectl describe node` prints `Labels:` (one `key=value` per line), then `Capacity:` and `Allocatable:` blocks of
indented `resource:  quantity` lines; `-o yaml` prints `capacity:` / `allocatable:` maps with quoted quantities.
The device plugin logs `Failed to initialize NVML: could not load NVML library.` (before v0.15) or `Incompatible
strategy detected auto` / `No devices found. Waiting indefinitely.` (later) when its container cannot reach the
driver. Shapes quoted from tickets: tests/fixtures/diagnose/k8s/README.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKERS = (r"nvidia\.com/|Name:  |[Cc]apacity:|[Aa]llocatable:|System Info:|Allocated resources:|onditions:|"
           r"nodeInfo:|cpu: |pods: |kubernetes\.io/hostname|pci-10de\.present|could not load NVML library|"
           r"ERROR_LIBRARY_NOT_FOUND|Incompatible (?:strategy|platform) detected|"
           r"No devices found\. Waiting indefinitely|invalid device discovery strategy")
"""ASCII, literal-led: the headers, the `nvidia.com/…` lines, the `cpu:` / `pods:` lines every Capacity block has (so
a block without nvidia.com/gpu is known to have been read) and the headers that end a block."""

_NAME = re.compile(r"^Name:\s{1,40}(?P<name>[A-Za-z0-9][\w.\-]{0,252})\s{0,4}$")
_SECTION = re.compile(r"^(?P<indent>\s{0,12})(?P<section>Capacity|Allocatable|capacity|allocatable):\s{0,4}$")
_OTHER_HEADER = re.compile(r"^\s{0,12}(?:System Info|Allocated resources|Conditions|Addresses|Non-terminated Pods|"
                           r"Events|conditions|addresses|nodeInfo|daemonEndpoints|images):")
_RESOURCE = re.compile(r"^\s{1,16}(?P<key>[A-Za-z0-9][\w./\-]{0,80}):\s{1,60}\"?(?P<value>\d{1,15})"
                       r"(?P<unit>[A-Za-z]{0,3})\"?\s{0,4}$")
# `nvidia.com/gpu.present=true` (describe), `nvidia.com/gpu.present: "true"` (yaml); the same for the other labels.
_LABEL = re.compile(r"(?P<key>(?:nvidia\.com|feature\.node\.kubernetes\.io)/[\w.\-]{1,80}|kubernetes\.io/hostname)"
                    r"(?:=|: \"?)(?P<value>[\w.\-]{0,120})")
_PLUGIN = (
    ("nvml_missing", re.compile(r"(?:Failed to initialize NVML|NVML not detected|Detected non-NVML platform)"
                                r"[^\n]{0,20}?: (?P<detail>(?:could not load NVML library|ERROR_LIBRARY_NOT_FOUND)"
                                r"[^\n]{0,160})", re.IGNORECASE)),
    ("incompatible", re.compile(r"(?P<detail>Incompatible (?:strategy|platform) detected(?: auto)?)")),
    ("no_devices", re.compile(r"(?P<detail>No devices found\. Waiting indefinitely)")),
    ("invalid_strategy", re.compile(r"(?P<detail>invalid device discovery strategy)")),
)


@dataclass(frozen=True)
class NodeLine:
    kind: str
    """`name` (a node's `Name:`), `section` (a `Capacity:` / `Allocatable:` header), `other_header` (a header that
    ends those blocks), `resource` (`  nvidia.com/gpu:  8`), `label` (`nvidia.com/gpu.product=NVIDIA-A30`)."""
    key: str = ""
    """The node name, the section (`capacity` / `allocatable`), the resource or the label key."""
    value: str = ""
    number: int | None = None
    """A resource's quantity (without its unit); a section header's indentation."""


def parse_node_line(text: str) -> NodeLine | None:
    if match := _SECTION.match(text):
        return NodeLine(kind="section", key=match.group("section").lower(), number=len(match.group("indent")))
    if match := _RESOURCE.match(text):
        return NodeLine(kind="resource", key=match.group("key"), value=match.group("value") + match.group("unit"),
                        number=int(match.group("value")))
    if match := _NAME.match(text):
        return NodeLine(kind="name", key=match.group("name"))
    if _OTHER_HEADER.match(text):
        return NodeLine(kind="other_header")
    if match := _LABEL.search(text):
        return NodeLine(kind="label", key=match.group("key"), value=match.group("value"))
    return None


_GPU_RESOURCE = re.compile(r"nvidia\.com/(?:gpu|mig-[\w.\-]{1,40})")
"""The extended resources the NVIDIA device plugin advertises (`nvidia.com/gpu`, MIG's `nvidia.com/mig-1g.10gb`); the
node labels are other keys (`nvidia.com/gpu.count`, `nvidia.com/gpu.product`)."""


def is_gpu_resource(key: str) -> bool:
    """Whether a `key: quantity` line is a GPU resource the device plugin advertises, not a label."""
    return bool(_GPU_RESOURCE.fullmatch(key))


@dataclass(frozen=True)
class PluginError:
    kind: str
    """`nvml_missing` (the plugin's container has no libnvidia-ml), `incompatible` (`Incompatible strategy detected
    auto`: no NVML, no Tegra), `no_devices` (`No devices found. Waiting indefinitely.`), `invalid_strategy`."""
    detail: str


def parse_plugin_error(text: str) -> PluginError | None:
    for kind, pattern in _PLUGIN:
        if match := pattern.search(text):
            return PluginError(kind=kind, detail=match.group("detail").strip().rstrip("."))
    return None
