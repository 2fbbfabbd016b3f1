"""The NIC reader: lspci's ConnectX device lines (flat or tree) in any input, NicLineFacts out (facts/nic_lines.py
parses each line; estimate/expect.py turns them into the NICs a node has, for nccl_tests.busbw_low across nodes)."""

from __future__ import annotations

from gpuready.facts import nic_lines
from gpuready.facts.log_lines import Line, Reader


class NicLinesReader(Reader):
    name = "nics"
    markers = nic_lines.MARKERS

    def __init__(self) -> None:
        self.seen = nic_lines.NicLineFacts()

    def facts(self) -> nic_lines.NicLineFacts | None:
        return self.seen if self.seen.by_source else None

    def feed(self, line: Line) -> None:
        device = nic_lines.parse_nic_line(line)
        if device is None:
            return
        listed = self.seen.by_source.get(line.source)
        if listed is None:
            if len(self.seen.by_source) >= nic_lines.MAX_SOURCES:
                return
            listed = self.seen.by_source.setdefault(line.source, [])
        if len(listed) < nic_lines.MAX_DEVICES_PER_SOURCE:
            listed.append(device)
