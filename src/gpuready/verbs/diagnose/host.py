"""Host-level causes in logs: the Linux OOM killer (`host.oom`) and /dev/shm too small for DataLoader workers
(`host.shm`), the ids `check` uses for the same machine facts.

Parsing is facts/host_log.py; this module only judges. NCCL's own shared-memory failures are the NCCL reader's
(`nccl.shm_too_small`); CUDA (GPU) out of memory is the PyTorch reader's (`torch.oom`).
"""

from __future__ import annotations

from gpuready.facts import host_log as parse
from gpuready.i18n import finding_text, said
from gpuready.knowledge import thresholds
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose.evidence import DiagnoseContext, Line, Reader, quote

MAX_ITEMS = 16
"""Lines kept per kind; past this they are counted."""

REFS_OOM = ["linux mm/oom_kill.c (the `Out of memory: Killed process` and `oom-kill:constraint=` lines)",
            "https://docs.kernel.org/admin-guide/cgroup-v2.html#memory (memory.max, memory.oom.group)"]


class HostLogReader(Reader):
    """Reader name "host": kernel OOM-killer reports, SIGKILLed ranks, DataLoader shared-memory errors."""

    name = "host"
    markers = parse.MARKERS

    def __init__(self) -> None:
        self.ooms: list[tuple[parse.OomKill, Line]] = []
        self.oom_lines = 0
        self.sigkills: list[tuple[parse.SigKill, Line]] = []
        self.shm: list[tuple[parse.ShmError, Line]] = []
        self.shm_lines = 0

    def feed(self, line: Line) -> None:
        text = line.text
        if (oom := parse.parse_oom_kill(text)) is not None:
            self.oom_lines += 1
            if len(self.ooms) < MAX_ITEMS:
                self.ooms.append((oom, line))
            return
        if (shm := parse.parse_shm_error(text)) is not None:
            self.shm_lines += 1
            if len(self.shm) < MAX_ITEMS:
                self.shm.append((shm, line))
            return
        if (kill := parse.parse_sigkill(text)) is not None and len(self.sigkills) < MAX_ITEMS:
            if all(kill.pid != known.pid for known, _ in self.sigkills):
                self.sigkills.append((kill, line))

    @property
    def oom_killed(self) -> bool:
        """The kernel's OOM killer shows in the inputs (the PyTorch reader ties a SIGKILLed rank to it)."""
        return bool(self.ooms)

    def findings(self, context: DiagnoseContext) -> list[Finding]:
        found = [self._oom(context.host) or self._sigkill(context.host), self._shm(context.host)]
        return [finding for finding in found if finding is not None]

    # ------------------------------------------------------------------ host.oom

    def _oom(self, host: str) -> Finding | None:
        if not self.ooms:
            return None
        killed = [(oom, line) for oom, line in self.ooms if oom.kind == "killed"]
        reaped = [(oom, line) for oom, line in self.ooms if oom.kind == "reaped"]
        named = killed or reaped or [(oom, line) for oom, line in self.ooms if oom.kind in ("selected", "constraint")
                                     and oom.pid is not None]
        invokers = list(dict.fromkeys(oom.process for oom, _ in self.ooms if oom.kind == "invoked" and oom.process))
        first = named[0][0] if named else None
        rss = next((oom.anon_rss_kb for oom, _ in killed if oom.anon_rss_kb is not None), None)
        total_vm = next((oom.total_vm_kb for oom, _ in killed if oom.total_vm_kb is not None), None)
        memcg = next((oom.memcg for oom, _ in self.ooms if oom.memcg), None)
        cgroup = any(oom.cgroup for oom, _ in self.ooms)
        victims: dict[tuple, None] = {}
        for oom, _ in named:
            victims.setdefault((oom.process, oom.pid), None)
        kill_pids = {pid for _, pid in victims if pid is not None}
        seen_by_launcher = [line for kill, line in self.sigkills if kill.pid in kill_pids]
        who = ", ".join(f"{name or '?'} (pid {pid})" if pid is not None else f"{name or '?'}"
                        for name, pid in list(victims)[:4]) + (" …" if len(victims) > 4 else "")
        # whose memory ran out picks the id (its fix: a cgroup's limit or the host's RAM); what the killer did, the
        # launcher seeing the same pid die and several victims are its parts
        what = ("killed_rss" if rss is not None else "killed") if victims else "ran"
        scope = ("memcg" if memcg else "cgroup") if cgroup else "host"
        text = said("host.oom." + ("limit" if cgroup else "host"),
                    what=said(f"host.oom.what.{what}", who=who, rss=_size(rss * 1024) if rss is not None else None,
                              invokers=", ".join(invokers[:4]) or "?"),
                    scope=said(f"host.oom.scope.{scope}", memcg=memcg),
                    launcher=said("host.oom.launcher") if seen_by_launcher else "",
                    several=said("host.oom.several", killed=len(victims)) if len(victims) > 1 else "")
        lines = _in_order([line for _, line in named] + seen_by_launcher + [line for _, line in self.ooms])
        return Finding(
            check_id="host.oom", status=Status.FAIL, subject=Subject(host=host), **finding_text(text),
            observed={"process": first.process if first else None, "pid": first.pid if first else None,
                      "anon_rss_bytes": rss * 1024 if rss is not None else None,
                      "total_vm_bytes": total_vm * 1024 if total_vm is not None else None,
                      "cgroup": cgroup, "memcg": memcg, "killed": [{"process": n, "pid": p} for n, p in victims],
                      "invoked_by": invokers[:8],
                      "oom_lines": self.oom_lines, "sigkill_pids": sorted(kill.pid for kill, _ in self.sigkills)},
            expected="no OOM kill during the job", refs=REFS_OOM, evidence=quote(lines))

    def _sigkill(self, host: str) -> Finding | None:
        """SIGKILL alone is weak evidence: the OOM killer is the usual sender; a scheduler or a user send it too."""
        if not self.sigkills:
            return None
        pids = [kill.pid for kill, _ in self.sigkills]
        sources = sorted({kill.source for kill, _ in self.sigkills})
        what = "dataloader" if sources == ["dataloader"] else "process"
        return Finding(
            check_id="host.oom", status=Status.WARN, subject=Subject(host=host),
            **finding_text(said(f"host.oom.sigkill_only.{what}", pids=", ".join(map(str, pids[:6])))),
            observed={"pids": pids, "source": sources},
            expected="no process killed by SIGKILL",
            refs=REFS_OOM, evidence=quote(_in_order([line for _, line in self.sigkills])))

    # ------------------------------------------------------------------ host.shm

    def _shm(self, host: str) -> Finding | None:
        if not self.shm:
            return None
        kinds = sorted({shm.kind for shm, _ in self.shm})
        pids = sorted({shm.pid for shm, _ in self.shm if shm.pid is not None})
        paths = sorted({shm.path for shm, _ in self.shm if shm.path})[:4]
        text = said("host.shm.too_small" + (".one_line" if self.shm_lines == 1 else ""), lines=self.shm_lines,
                    what=[said(f"host.shm.kind.{kind}") for kind in kinds])  # bus_error, no_space, write_failed
        return Finding(
            check_id="host.shm", status=Status.FAIL, subject=Subject(host=host), **finding_text(text),
            observed={"kinds": kinds, "worker_pids": pids, "files": paths, "lines": self.shm_lines},
            expected="/dev/shm large enough for num_workers × prefetch_factor batches (several GiB)",
            refs=[thresholds("host_shm")["source"],
                  "pytorch/pytorch#5040 (Bus error when /dev/shm is full)"],
            evidence=quote([line for _, line in self.shm]))


def _size(value: int) -> str:
    return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"


def _in_order(lines: list[Line]) -> list[Line]:
    """The first lines that show the cause, then the rest, in file order (quote keeps the first few)."""
    return sorted(lines[:3], key=lambda line: (line.source, line.number)) + lines[3:]
