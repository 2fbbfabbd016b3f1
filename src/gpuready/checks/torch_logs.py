"""PyTorch-distributed errors pasted into tickets (facts.log_facts.TorchLogFacts): cause → evidence → fix.

NCCL watchdog timeouts (which rank never reached the SeqNum the others wait on), NCCL errors raised by torch, CUDA
OOM, rendezvous / TCPStore network errors, torchrun's ChildFailedError summary, and NCCL flight-recorder dumps. The
software-stack mismatches the same logs show (driver, architecture, NCCL) are judged by checks/software.py, under the
ids `check` gives the same facts.

A failure that follows from another is its consequence (`consequence_of`): a rank killed by the watchdog's abort after
its own timeout, a remote NCCL error after another rank's failure, a rank SIGKILLed where the kernel's OOM killer shows.
"""

from __future__ import annotations

from gpuready.checks.cuda_fault import application_cuda_errors
from gpuready.checks.host_logs import OOM as HOST_OOM
from gpuready.checks.log_evidence import NCCL_TROUBLESHOOTING, quote
from gpuready.checks.registry import CheckContext, log_check
from gpuready.checks.software import CHECK_OF_MISMATCH, first_of_each_kind
from gpuready.facts.log_facts import Line, RankFailure, TorchLogFacts, signal_name
from gpuready.i18n import Said, finding_text, said
from gpuready.model import Finding, Status, Subject

REFS_TIMEOUT = ["torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (watchdog messages)",
                "pytorch/tutorials flight_recorder_tutorial.rst"]
EXPLAINED_SIGNALS = ("SIGKILL", "SIGABRT", "SIGSEGV", "SIGBUS", "SIGTERM")
"""Exits by these signals are explained: what each means (`torch.rank_failed.exit.sigkill` … in the catalogue) and
what to do about it (`torch.rank_failed.exit.sigkill.advice` …)."""

OOM = "torch.oom"
P2P_UNSUPPORTED = "nccl.p2p_unsupported"
RANK_FAILED = "torch.rank_failed"
TIMEOUT = "nccl.timeout"
GLOO_TIMEOUT = "gloo.timeout"
FIREWALL = "network.firewall"
NCCL_ERROR = "nccl.error"


def _torch(context: CheckContext) -> TorchLogFacts | None:
    return context.facts.logs.torch


# ------------------------------------------------------------------------------------------- torch.oom

@log_check(OOM)
def torch_oom(context: CheckContext) -> list[Finding]:
    """CUDA out of memory in a rank."""
    torch = _torch(context)
    if torch is None or not torch.ooms:
        return []
    rank, oom, _line, _ = torch.ooms[0]
    ranks = sorted({r for r, *_ in torch.ooms if r is not None})
    gib = lambda value: f"{value / 2**30:.2f} GiB" if value is not None else "?"  # noqa: E731
    where = said("torch.oom.where." + ("rank" if rank is not None else "process")
                 + ("_device" if oom.cuda_device is not None else ""), rank=rank, device=oom.cuda_device)
    known = oom.free_bytes is not None or oom.total_bytes is not None  # an older torch names the allocation only
    text = said("torch.oom.cuda" if known else "torch.oom.cuda.tried", where=where, tried=gib(oom.tried_bytes),
                free=gib(oom.free_bytes), total=gib(oom.total_bytes))
    return [Finding(
        check_id=OOM, status=Status.FAIL, subject=Subject(host=context.host, rank=rank), **finding_text(text),
        observed={"rank": rank, "ranks": ranks, "cuda_device": oom.cuda_device, "tried_bytes": oom.tried_bytes,
                  "free_bytes": oom.free_bytes, "total_bytes": oom.total_bytes},
        refs=["https://pytorch.org/docs/stable/notes/cuda.html#environment-variables"],
        evidence=quote([entry[2] for entry in torch.ooms]))]


# ------------------------------------------------------------------------------------------- torch.cuda_error

@log_check("torch.cuda_error")
def torch_cuda_error(context: CheckContext) -> list[Finding]:
    """The CUDA error a rank or its NCCL watchdog stopped on, where it is one the job's own kernels (or a library's)
    usually cause, or the GPU refused the context (checks/cuda_fault.py; a lost GPU and an NVLink fault are gpu.lost's
    and nvlink.errors')."""
    return application_cuda_errors(context)


# ------------------------------------------------------------------------------------------- nccl.p2p_unsupported

@log_check(P2P_UNSUPPORTED)
def nccl_p2p_unsupported(context: CheckContext) -> list[Finding]:
    """CUDA peer access between the GPUs."""
    torch = _torch(context)
    if torch is None or not torch.p2p:
        return []
    return [Finding(
        check_id=P2P_UNSUPPORTED, status=Status.FAIL,
        subject=Subject(host=context.host, rank=torch.rank_of(torch.p2p[0])),
        **finding_text(said("nccl.p2p_unsupported.cuda")), observed={"lines": len(torch.p2p)},
        refs=["NCCL troubleshooting, PCI Access Control Services (ACS): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html", "NVIDIA/nccl#199 (disable ACS or the IOMMU; NCCL_P2P_DISABLE=1 as a diagnostic)"],
        evidence=quote(torch.p2p))]


# ------------------------------------------------------------------------------------------- torch.rank_failed

def _first_failure(torch: TorchLogFacts) -> tuple[RankFailure | None, list[Line], dict] | None:
    """(torchrun's root-cause entry or its first, the lines, what it says), or None where no rank failed."""
    root = next((f for f in torch.failures if f.root), None)
    if root is None and torch.failures:
        root = torch.failures[0]
    if root is not None:
        said_of = {"exitcode": root.exitcode, "rank": root.rank, "local": root.local_rank, "host": root.host}
        return root, root.lines + [line for _, line, _ in torch.elastic_failed[:1]], said_of
    if not torch.elastic_failed:
        return None
    first, line, _ = torch.elastic_failed[0]
    return None, [line], {"exitcode": first.exitcode, "rank": None, "local": first.local_rank, "host": None}


def _who(fields: dict) -> str:
    """The catalogue's `torch.rank_failed.who.*`: a rank, a local rank, or a process."""
    return "torch.rank_failed.who." + ("rank" if fields["rank"] is not None else
                                       "local_rank" if fields["local"] is not None else "process")


@log_check(RANK_FAILED)
def torch_rank_failed(context: CheckContext) -> list[Finding]:
    """The first rank torchrun saw fail, why (its exit code or signal), and what it follows from."""
    torch = _torch(context)
    failure = _first_failure(torch) if torch is not None else None
    if failure is None:
        return []
    root, lines, fields = failure
    exitcode, rank = fields["exitcode"], fields["rank"]
    name = signal_name(exitcode)
    if name in EXPLAINED_SIGNALS:
        cause = f"torch.rank_failed.exit.{name.lower()}"
    elif exitcode is not None and exitcode > 0:
        cause = "torch.rank_failed.exit.exception"
    else:
        cause = "torch.rank_failed.exit.other"
    who = said(_who(fields) + ("_on_host" if fields["host"] else ""), rank=rank, local_rank=fields["local"],
               host=fields["host"])
    return [Finding(
        check_id=RANK_FAILED, status=Status.FAIL, subject=Subject(host=fields["host"] or context.host, rank=rank),
        **finding_text(said("torch.rank_failed.first", who=who, meaning=said(cause, code=exitcode),
                            advice=said(f"{cause}.advice"))),
        observed={"rank": rank, "local_rank": fields["local"], "exitcode": exitcode, "signal": name,
                  "host": fields["host"], "pid": root.pid if root else None,
                  "traceback": root.traceback if root else None,
                  "other_failures": max(0, len(torch.failures) - 1)},
        consequence_of=_rank_failed_cause(context, torch, rank, exitcode),
        refs=["torch/distributed/elastic/multiprocessing/errors/__init__.py (ChildFailedError)"],
        evidence=quote(lines))]


def _rank_failed_cause(context: CheckContext, torch: TorchLogFacts, rank: int | None,
                       exitcode: int | None) -> str | None:
    """What the failed rank's exit follows from: its own CUDA OOM; the gloo timeout it waited in (torchrun calls the
    rank that waited the first failure, exit code 1); the kernel's OOM killer (SIGKILL); the watchdog's abort
    (SIGABRT) after its timeout."""
    if torch.ooms and (rank is None or rank in {r for r, *_ in torch.ooms}):
        return OOM
    if torch.gloo_timeouts and rank in {r for r, *_ in torch.gloo_timeouts} and exitcode == 1:
        return GLOO_TIMEOUT
    host = context.facts.logs.host
    if host is not None and host.ooms and exitcode == -9:
        return HOST_OOM
    if exitcode == -6 and (torch.timeouts or torch.status):
        return TIMEOUT
    return None


@log_check("torch.ranks_terminated")
def torch_ranks_terminated(context: CheckContext) -> list[Finding]:
    """The ranks torchrun stopped (SIGTERM) after the first one failed: consequences, not causes."""
    torch = _torch(context)
    failure = _first_failure(torch) if torch is not None else None
    if failure is None or not torch.closing:
        return []
    _root, _lines, fields = failure
    text = said("torch.ranks_terminated.sigterm", processes=len(torch.closing),
                who=said(_who(fields), rank=fields["rank"], local_rank=fields["local"]))
    return [Finding(
        check_id=context.check_id, status=Status.WARN, subject=Subject(host=fields["host"] or context.host),
        **finding_text(text), observed={"processes": len(torch.closing)}, consequence_of=RANK_FAILED,
        evidence=quote(torch.closing))]


# ------------------------------------------------------------------------------------------- nccl.timeout

@log_check(TIMEOUT)
def nccl_timeout(context: CheckContext) -> list[Finding]:
    """The collective the watchdog timed out, and the ranks to look at: those behind, failed or absent."""
    torch = _torch(context)
    if torch is not None and not torch.timeouts and not torch.status and torch.heartbeats:
        return _heartbeat_timeout(context, torch)
    if torch is None or not torch.timeouts and not torch.status:
        return []
    # The SeqNum the group waited on: the highest any rank timed out at (a rank stuck lower is behind).
    seqs = {rank: item[0].seq for rank, item in torch.timeouts.items()}
    for rank, (status, _) in torch.status.items():
        seqs.setdefault(rank, status.work)
    target = max(seqs.values())
    example = next((item[0] for item in torch.timeouts.values() if item[0].seq == target), None) or \
        next(iter(torch.timeouts.values()), (None,))[0]
    at_target = sorted(rank for rank, seq in seqs.items() if seq == target)
    behind = {rank for rank, seq in seqs.items() if seq < target}
    behind |= {rank for rank, (status, _) in torch.status.items() if status.last_enqueued < target}
    seen = torch.ranks_seen | set(seqs)
    absent = sorted(set(range(max(seen) + 1)) - seen) if len(seen) > 1 else []
    failed = {f.rank for f in torch.failures if f.rank is not None} | {r for r, *_ in torch.ooms if r is not None}
    suspects = sorted(behind) or sorted(r for r in failed if r not in at_target) or absent
    reason = ("behind" if behind else "failed" if set(suspects) <= failed else "absent") if suspects else None
    lines = [torch.timeouts[r][1] for r in sorted(torch.timeouts, key=lambda r: torch.timeouts[r][2])]
    lines += [line for _, line in torch.status.values()]
    lines.sort(key=lambda line: (line.source, line.number))
    oom_first = torch.ooms and torch.timeouts and torch.ooms[0][3] < min(item[2] for item in torch.timeouts.values())
    look = said("nccl.timeout.watchdog.look.rank", rank=suspects[0]) if len(suspects) == 1 else \
        said("nccl.timeout.watchdog.look.ranks", ranks=", ".join(map(str, suspects))) if suspects else \
        said("nccl.timeout.watchdog.look.every")
    timeout_ms = example.timeout_ms if example else None
    text = said("nccl.timeout.watchdog" + ("" if suspects else ".all"), op=example.op if example else "?", seq=target,
                ranks=", ".join(map(str, at_target)), suspects=", ".join(map(str, suspects)),
                after=said("nccl.timeout.watchdog.after", ms=timeout_ms) if timeout_ms else "",
                reason=said(f"nccl.timeout.watchdog.reason.{reason}") if reason else "", look=look)
    return [Finding(
        check_id=TIMEOUT, status=Status.FAIL,
        subject=Subject(host=context.host, rank=suspects[0] if len(suspects) == 1 else None), **finding_text(text),
        observed={"collective": example.op if example else "?", "seq": target,
                  "numel_in": example.numel_in if example else None,
                  "numel_out": example.numel_out if example else None, "timeout_ms": timeout_ms,
                  "timed_out": {r: s for r, s in sorted(seqs.items())}, "ranks_at_seq": at_target,
                  "suspects": suspects, "ranks_absent": absent,
                  "last_enqueued": {r: s.last_enqueued for r, (s, _) in sorted(torch.status.items())},
                  "last_completed": {r: s.last_completed for r, (s, _) in sorted(torch.status.items())}},
        expected=f"every rank enqueues SeqNum {target}",
        refs=REFS_TIMEOUT, consequence_of=OOM if oom_first else None, evidence=quote(lines))]


def _heartbeat_timeout(context: CheckContext, torch: TorchLogFacts) -> list[Finding]:
    """ProcessGroupNCCL's heartbeat monitor fired: the watchdog thread made no progress for
    TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (a NCCL or CUDA call hung under it), and the process is terminated."""
    beats = torch.heartbeats
    ranks = sorted({beat.rank for beat, _line in beats if beat.rank is not None})
    seconds = next((beat.seconds for beat, _line in beats if beat.seconds is not None), None)
    pending = {beat.rank: beat.pending for beat, _line in beats if beat.rank is not None and beat.pending is not None}
    text = said("nccl.timeout.heartbeat" + (".ranks" if ranks else ""), ranks=", ".join(map(str, ranks)),
                after=said("nccl.timeout.heartbeat.after", seconds=seconds) if seconds else "",
                pending=said("nccl.timeout.heartbeat.pending", pending=", ".join(
                    f"{rank}: {count}" for rank, count in sorted(pending.items()))) if pending else "")
    return [Finding(
        check_id=TIMEOUT, status=Status.FAIL,
        subject=Subject(host=context.host, rank=ranks[0] if len(ranks) == 1 else None), **finding_text(text),
        observed={"watchdog_stuck_s": seconds, "ranks": ranks, "pending_work": pending},
        expected="the watchdog thread makes progress (a heartbeat within TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC)",
        refs=REFS_TIMEOUT, evidence=quote([line for _beat, line in beats]))]


# ------------------------------------------------------------------------------------------- nccl.error

def _error_roots(torch: TorchLogFacts) -> list[tuple[str, int | None]]:
    """(check id, rank) of the failures an NCCL error torch raised may follow from, in the order they are weighed:
    the CUDA OOM, the software mismatches, peer access, the first failed rank (unless the watchdog aborted it)."""
    roots: list[tuple[str, int | None]] = []
    if torch.ooms:
        roots.append((OOM, torch.ooms[0][0]))
    roots += [(CHECK_OF_MISMATCH[mismatch.kind], torch.rank_of(line))
              for mismatch, line, _same in first_of_each_kind(torch, tuple(CHECK_OF_MISMATCH))]
    if torch.p2p:
        roots.append((P2P_UNSUPPORTED, torch.rank_of(torch.p2p[0])))
    failure = _first_failure(torch)
    if failure is not None and failure[2]["exitcode"] not in (-6,):
        roots.append((RANK_FAILED, failure[2]["rank"]))
    return roots


@log_check(NCCL_ERROR)
def nccl_error(context: CheckContext) -> list[Finding]:
    """Each kind of NCCL error torch raised, and what it follows from (another rank's failure, NCCL's missing
    kernels)."""
    torch = _torch(context)
    if torch is None:
        return []
    found: list[Finding] = []
    roots = _error_roots(torch)
    nccl_mismatch = any(kind in ("nccl_symbol", "nccl_arch") for kind in {m.kind for m, _ in torch.versions})
    primary = [r for r in torch.nccl_errors if r.kind != "ncclRemoteError"]
    seen_kinds: set[tuple] = set()
    for record in torch.nccl_errors:
        key = (record.kind, record.last_error)
        if key in seen_kinds:
            continue
        seen_kinds.add(key)
        kind = record.kind or "NCCL error"
        consequence = None
        if kind == "ncclRemoteError":
            other = [check_id for check_id, rank in roots if rank != record.rank or rank is None]
            if other:
                consequence = other[0]
            elif any(p.rank != record.rank for p in primary):
                consequence = NCCL_ERROR
        last = record.last_error
        if consequence is None and last and nccl_mismatch and record.last_error_lacks_kernels():
            consequence = CHECK_OF_MISMATCH["nccl_arch"]
        same = [r.line for r in torch.nccl_errors if (r.kind, r.last_error) == key]
        ranks = sorted({r.rank for r in torch.nccl_errors if (r.kind, r.last_error) == key and r.rank is not None})
        found.append(Finding(
            check_id=NCCL_ERROR, status=Status.FAIL, subject=Subject(host=context.host, rank=record.rank),
            **finding_text(said("nccl.error.torch" + (".last" if last else ""),
                                kind=record.kind or said("nccl.error.torch.unnamed"),
                                on_ranks=said("nccl.error.torch.on_ranks", ranks=", ".join(map(str, ranks)))
                                if ranks else "", last=last, advice=_nccl_advice(kind, last))),
            observed={"kind": kind, "last_error": last, "where": record.where,
                      "nccl_version": record.version, "ranks": ranks},
            consequence_of=consequence, refs=[NCCL_TROUBLESHOOTING], evidence=quote(record.lines + same)))
    return found


def _nccl_advice(kind: str, last: str | None) -> Said:
    """What to do about an NCCL error torch raised, by its kind (`nccl.error.torch.advice.*` in the catalogue)."""
    text = (last or "").lower()
    if kind == "ncclRemoteError":
        return said("nccl.error.torch.advice.remote")
    if kind == "ncclUnhandledCudaError":
        return said("nccl.error.torch.advice.cuda")
    if kind == "ncclInvalidUsage":
        return said("nccl.error.torch.advice.usage")
    if "connection" in text or "socket" in text or "net" in text or "peer" in text:
        return said("nccl.error.torch.advice.network")
    return said("nccl.error.torch.advice.other")


# ------------------------------------------------------------------------------------------- gloo.timeout

@log_check(GLOO_TIMEOUT)
def gloo_timeout(context: CheckContext) -> list[Finding]:
    """A gloo collective that timed out: a peer never joined it."""
    torch = _torch(context)
    if torch is None or not torch.gloo_timeouts:
        return []
    rank, timeout, _line = torch.gloo_timeouts[0]
    waited = sorted({r for r, *_ in torch.gloo_timeouts if r is not None})
    others = sorted(torch.ranks_seen - set(waited))
    suspects = (said("gloo.timeout.suspects.ranks", ranks=", ".join(map(str, others))) if others else
                said("gloo.timeout.suspects.unseen"))
    who = said("gloo.timeout.who.ranks", ranks=", ".join(map(str, waited))) if waited else \
        said("gloo.timeout.who.unknown")
    text = said("gloo.timeout.peer_missing", who=who, seconds=timeout.timeout_ms / 1000,
                operation=timeout.operation, suspects=suspects)
    return [Finding(
        check_id=GLOO_TIMEOUT, status=Status.FAIL, subject=Subject(host=context.host, rank=rank), **finding_text(text),
        observed={"timeout_ms": timeout.timeout_ms, "operation": timeout.operation, "timed_out_ranks": waited,
                  "other_ranks_seen": others},
        expected="every rank joins each collective within the timeout",
        evidence=quote([item[2] for item in torch.gloo_timeouts]))]


# ------------------------------------------------------------------------------------------- the rendezvous

def _targets(torch: TorchLogFacts) -> list[tuple[tuple, list, bool]]:
    """((host, port, kind), [(error, line)…], whether a firewall filters it) per rendezvous target that failed: a
    timeout to a host another line shows up (or refusing) is filtered, not down."""
    by_target: dict[tuple, list] = {}
    for error, line in torch.network:
        by_target.setdefault((error.host, error.port, error.kind), []).append((error, line))
    answering = set(torch.answering) | {e.host for e, _ in torch.network if e.kind in ("refused", "reset")}
    return [(target, items, target[2] == "timeout" and target[0] is not None and target[0] in answering)
            for target, items in by_target.items()]


def _target(target_host: str | None, port: int | None) -> str | Said:
    return f"{target_host}:{port}" if target_host else said("network.rendezvous.store")


@log_check("network.port_in_use")
def network_port_in_use(context: CheckContext) -> list[Finding]:
    """The rendezvous port is free on the master."""
    torch = _torch(context)
    return [Finding(
        check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host),
        **finding_text(said("network.port_in_use.rendezvous", target=_target(host, port), port=port)),
        observed={"host": host, "port": port}, evidence=quote([line for _, line in items]))
        for (host, port, kind), items, _filtered in (_targets(torch) if torch else []) if kind == "in_use"]


@log_check(FIREWALL)
def network_firewall(context: CheckContext) -> list[Finding]:
    """A rendezvous port that times out on a host that answers otherwise: a firewall drops it."""
    torch = _torch(context)
    found = []
    for (host, port, _kind), items, filtered in (_targets(torch) if torch else []):
        if not filtered:
            continue
        proof = torch.answering.get(host) or next(
            (l for e, l in torch.network if e.host == host and e.kind in ("refused", "reset")), None)
        found.append(Finding(
            check_id=FIREWALL, status=Status.WARN, subject=Subject(host=context.host),
            **finding_text(said("network.firewall.rendezvous", target=_target(host, port), host=host, port=port)),
            observed={"host": host, "port": port},
            refs=["NCCL troubleshooting, networking (the TCP ports NCCL opens: ip_local_port_range and the firewall): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"],
            evidence=quote([line for _, line in items] + ([proof] if proof else []))))
    return found


def rendezvous_unreachable(context: CheckContext) -> list[Finding]:
    """network.unreachable's findings from PyTorch's rendezvous errors (checks/nccl_logs.py adds NCCL's sockets)."""
    torch = _torch(context)
    found = []
    for (target_host, port, kind), items, filtered in (_targets(torch) if torch else []):
        if kind == "in_use":
            continue
        error, _line = items[0]
        target = _target(target_host, port)
        advice = kind if kind in ("refused", "reset", "timeout", "store_timeout") else "other"
        # the sentence starts with the target where the connection was reset: the store's name, capitalised
        subject_target = target if target_host or advice != "reset" else said("network.rendezvous.store.first")
        text = said("network.unreachable.rendezvous", target=target, reason=_network_reason(error.reason),
                    advice=said(f"network.unreachable.rendezvous.{advice}", target=subject_target,
                                nc_host=target_host or "$MASTER_ADDR", nc_port=port or "$MASTER_PORT"),
                    peer=target_host or "HOST", port_option=f" --port {port}" if port else "")
        found.append(Finding(
            check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host),
            **finding_text(text),
            observed={"host": target_host, "port": port, "kind": kind, "reason": error.reason,
                      "attempts": len(items)},
            consequence_of=FIREWALL if filtered else None, evidence=quote([line for _, line in items]),
            refs=["https://pytorch.org/docs/stable/distributed.html#environment-variable-initialization"]))
    return found


def peer_connection_lost(context: CheckContext) -> list[Finding]:
    """network.unreachable's finding from an NCCL error torch raised whose `Last error:` is a socket to another rank
    that broke (reset, closed, refused), where nothing else in the logs (a failed rank, an OOM, a version mismatch)
    explains it: the network between the nodes, or the peer process, went away mid-job."""
    torch = _torch(context)
    if torch is None or _error_roots(torch):
        return []
    for record in torch.nccl_errors:
        broken = record.broken_socket()
        if broken is None:
            continue
        peer = broken[0]
        return [Finding(
            check_id=context.check_id, status=Status.WARN, subject=Subject(host=context.host, rank=record.rank),
            **finding_text(said("network.unreachable.peer_socket", kind=record.kind or "NCCL error",
                                peer=peer or said("network.unreachable.peer_socket.unnamed"),
                                last=record.last_error)),
            observed={"peer": peer, "last_error": record.last_error, "kind": record.kind},
            expected="the sockets between ranks stay up for the job",
            refs=[NCCL_TROUBLESHOOTING, "NCCL src/misc/socket.cc (socketProgressOpt, connection closed by peer)"],
            evidence=quote(record.lines))]
    return []


def _network_reason(reason: str) -> str | Said:
    """The reason a rendezvous connection failed: quoted from the log, except the two that facts/torch_errors.py
    words itself (a timeout's duration, no reason given), which come from the catalogue."""
    if reason.startswith("connect timed out after "):
        return said("network.unreachable.rendezvous.reason.timed_out", after=reason[len("connect timed out after "):])
    if reason == "connection failed":
        return said("network.unreachable.rendezvous.reason.failed")
    return reason.rstrip(".")  # the sentence ends with its own full stop


# ------------------------------------------------------------------------------------------- flight recorder

@log_check("nccl.flight_recorder_unread")
def nccl_flight_recorder_unread(context: CheckContext) -> list[Finding]:
    """Flight-recorder dumps in pickle form: named, never unpickled."""
    torch = _torch(context)
    return [Finding(
        check_id=context.check_id, status=Status.WARN, subject=Subject(host=context.host),
        **finding_text(said("nccl.flight_recorder_unread.pickle", source=source)),
        observed={"file": source, "format": "pickle"}, evidence=quote([line]) if line else [])
        for source, line in (torch.pickles if torch else [])]


def _process_groups(torch: TorchLogFacts) -> list[tuple[str, dict, int, dict]]:
    """(process group, rank → progress, the highest collective enqueued, the table a finding shows) per process
    group of the dumps that any rank reports progress in."""
    groups: dict[str, dict] = {}
    for dump in torch.dumps:
        for name, progress in dump.groups.items():
            groups.setdefault(name, {})[dump.rank] = progress
    found = []
    for name, per_rank in sorted(groups.items()):
        known = {r: p for r, p in per_rank.items() if p.last_enqueued is not None}
        if not known:
            continue
        table = {str(r): {"last_enqueued": p.last_enqueued, "last_started": p.last_started,
                          "last_completed": p.last_completed, "last_op": p.last_op}
                 for r, p in sorted(known.items(), key=lambda item: (item[0] is None, item[0]))}
        found.append((name, known, max(p.last_enqueued for p in known.values()), table))
    return found


def _ranks_sorted(ranks) -> list:
    return sorted(ranks, key=lambda r: (r is None, r))


@log_check("nccl.rank_behind")
def nccl_rank_behind(context: CheckContext) -> list[Finding]:
    """A rank whose flight recorder stops before the others': the one the group waited for."""
    torch = _torch(context)
    found = []
    for name, known, top, table in (_process_groups(torch) if torch else []):
        behind = _ranks_sorted(r for r, p in known.items() if p.last_enqueued < top)
        if not behind:
            continue
        lagging = behind[0]
        progress = known[lagging]
        found.append(Finding(
            check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host, rank=lagging),
            **finding_text(said(
                "nccl.rank_behind.flight_recorder", group=name, behind=", ".join(map(str, behind)),
                next=progress.last_enqueued + 1, top=top, rank=lagging, last=progress.last_enqueued,
                next_op=known[max(known, key=lambda r: known[r].last_enqueued)].last_op,
                last_op=progress.last_op)),
            observed={"process_group": name, "ranks": table, "behind": behind,
                      "files": [d.source for d in torch.dumps]},
            expected=f"every rank at collective {top}", refs=REFS_TIMEOUT))
    return found


@log_check("nccl.flight_recorder")
def nccl_flight_recorder(context: CheckContext) -> list[Finding]:
    """Every rank of a process group at the same collective: completed, or stuck in it together."""
    torch = _torch(context)
    found = []
    for name, known, top, table in (_process_groups(torch) if torch else []):
        if any(p.last_enqueued < top for p in known.values()):
            continue  # nccl.rank_behind's
        stuck = _ranks_sorted(r for r, p in known.items() if p.stuck_seq is not None)
        found.append(Finding(
            check_id=context.check_id, status=Status.FAIL if stuck else Status.PASS, subject=Subject(host=context.host),
            **finding_text(said("nccl.flight_recorder." + ("stuck" if stuck else "completed"), group=name,
                                top=top, stuck=", ".join(map(str, stuck)))),
            observed={"process_group": name, "ranks": table, "stuck": stuck,
                      "files": [d.source for d in torch.dumps]},
            refs=REFS_TIMEOUT))
    return found
