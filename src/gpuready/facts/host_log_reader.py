"""The host-log reader: kernel OOM-killer reports, SIGKILLed processes and DataLoader shared-memory errors in,
HostLogFacts out (facts/host_log.py parses each line; checks/host_logs.py and checks/host.py judge).

NCCL's own shared-memory failures are the NCCL reader's; CUDA (GPU) out of memory is the PyTorch reader's.
"""

from __future__ import annotations

from gpuready.facts import host_log as parse
from gpuready.facts.log_facts import HostLogFacts
from gpuready.facts.log_lines import Line, Reader

MAX_ITEMS = 16
"""Lines kept per kind; past this they are counted."""


class HostLogReader(Reader):
    """Reader name "host"."""

    name = "host"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self.seen = HostLogFacts()

    def facts(self) -> HostLogFacts:
        return self.seen

    def feed(self, line: Line) -> None:
        text, seen = line.text, self.seen
        if (oom := parse.parse_oom_kill(text)) is not None:
            seen.oom_lines += 1
            if len(seen.ooms) < MAX_ITEMS:
                seen.ooms.append((oom, line))
            return
        if (shm := parse.parse_shm_error(text)) is not None:
            seen.shm_lines += 1
            if len(seen.shm) < MAX_ITEMS:
                seen.shm.append((shm, line))
            return
        if (error := parse.parse_toolkit_init_error(text)) is not None:
            if len(seen.toolkit_errors) < MAX_ITEMS:
                seen.toolkit_errors.append((error, line))
            return
        if (required := parse.parse_container_requirement(text)) is not None:
            if len(seen.requirements) < MAX_ITEMS:
                seen.requirements.append((required, line))
            return
        if (kill := parse.parse_sigkill(text)) is not None and len(seen.sigkills) < MAX_ITEMS:
            if all(kill.pid != known.pid for known, _ in seen.sigkills):
                seen.sigkills.append((kill, line))
