"""The Linux OOM killer in the logs (facts.log_facts.HostLogFacts): `host.oom`.

CUDA (GPU) out of memory is torch.oom (checks/torch_logs.py); DataLoader's /dev/shm errors are host.shm's
(checks/host.py), beside the size of /dev/shm itself.
"""

from __future__ import annotations

from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, log_check
from gpuready.facts.log_facts import HostLogFacts, Line
from gpuready.i18n import said
from gpuready.model import Finding

OOM = "host.oom"
REFS_OOM = ["linux mm/oom_kill.c (the `Out of memory: Killed process` and `oom-kill:constraint=` lines)",
            "https://docs.kernel.org/admin-guide/cgroup-v2.html#memory (memory.max, memory.oom.group)"]


@log_check(OOM)
def host_oom(context: CheckContext) -> list[Finding]:
    """No process killed for want of memory: the kernel's OOM killer (fail), or SIGKILLs alone (warn: the OOM killer
    is their usual sender, a scheduler or a user send them too)."""
    host = context.facts.logs.host
    if host is None:
        return []
    found = _oom_killer(context, host) or _sigkills(context, host)
    if found is None:
        return []
    found.about_job = True  # the job outgrew the memory it had: not, alone, a fault of the machine
    return [found]


def _oom_killer(context: CheckContext, host: HostLogFacts) -> Finding | None:
    if not host.ooms:
        return None
    killed = [(oom, line) for oom, line in host.ooms if oom.kind == "killed"]
    reaped = [(oom, line) for oom, line in host.ooms if oom.kind == "reaped"]
    named = killed or reaped or [(oom, line) for oom, line in host.ooms if oom.kind in ("selected", "constraint")
                                 and oom.pid is not None]
    invokers = list(dict.fromkeys(oom.process for oom, _ in host.ooms if oom.kind == "invoked" and oom.process))
    first = named[0][0] if named else None
    rss = next((oom.anon_rss_kb for oom, _ in killed if oom.anon_rss_kb is not None), None)
    total_vm = next((oom.total_vm_kb for oom, _ in killed if oom.total_vm_kb is not None), None)
    memcg = next((oom.memcg for oom, _ in host.ooms if oom.memcg), None)
    cgroup = any(oom.cgroup for oom, _ in host.ooms)
    victims: dict[tuple, None] = {}
    for oom, _ in named:
        victims.setdefault((oom.process, oom.pid), None)
    kill_pids = {pid for _, pid in victims if pid is not None}
    seen_by_launcher = [line for kill, line in host.sigkills if kill.pid in kill_pids]
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
    lines = _in_order([line for _, line in named] + seen_by_launcher + [line for _, line in host.ooms])
    return context.fail(
        text, observed={"process": first.process if first else None, "pid": first.pid if first else None,
                        "anon_rss_bytes": rss * 1024 if rss is not None else None,
                        "total_vm_bytes": total_vm * 1024 if total_vm is not None else None,
                        "cgroup": cgroup, "memcg": memcg, "killed": [{"process": n, "pid": p} for n, p in victims],
                        "invoked_by": invokers[:8],
                        "oom_lines": host.oom_lines, "sigkill_pids": sorted(kill.pid for kill, _ in host.sigkills)},
        expected="no OOM kill during the job", refs=REFS_OOM, evidence=quote(lines))


def _sigkills(context: CheckContext, host: HostLogFacts) -> Finding | None:
    if not host.sigkills:
        return None
    pids = [kill.pid for kill, _ in host.sigkills]
    sources = sorted({kill.source for kill, _ in host.sigkills})
    what = "dataloader" if sources == ["dataloader"] else "process"
    return context.warn(said(f"host.oom.sigkill_only.{what}", pids=", ".join(map(str, pids[:6]))),
                        observed={"pids": pids, "source": sources}, expected="no process killed by SIGKILL",
                        refs=REFS_OOM, evidence=quote(_in_order([line for _, line in host.sigkills])))


def _size(value: int) -> str:
    return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"


def _in_order(lines: list[Line]) -> list[Line]:
    """The first lines that show the cause, then the rest, in file order (quote keeps the first few)."""
    return sorted(lines[:3], key=lambda line: (line.source, line.number)) + lines[3:]
