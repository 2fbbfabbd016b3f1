"""validate across nodes (issue 33): the transport NCCL used for validate's own communicators, read from the NCCL INFO
lines each rank wrote to its file (runner/nccl_debug.py) with the NCCL log reader that `diagnose` uses, judged by the
same check (`nccl.transport`), and inter-node busbw judged per NIC against the floor issue 31 built for nccl-tests
(estimate/expect.py `nccl_busbw` with `nodes`)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from gpuready.checks.nccl_logs import TRANSPORT, nccl_transport
from gpuready.checks.registry import CheckContext
from gpuready.estimate import expect
from gpuready.facts.log_facts import LogFacts, NcclLogFacts
from gpuready.facts.log_lines import Line
from gpuready.facts.nccl_log_reader import NcclLogReader
from gpuready.facts.types import Facts
from gpuready.i18n import Said, said
from gpuready.knowledge import load_table
from gpuready.model import Finding, Status

SOCKET = "NET/Socket"


@dataclasses.dataclass(kw_only=True)
class RanksTransport:
    """What the ranks' NCCL lines showed, for the report's facts and beside each busbw figure."""
    transports: list[str]
    """The transports NCCL used between nodes (`NET/IB`, `NET/IB/RoCE`, `NET/Socket`, a plugin), over communicators."""
    communicators: dict[str, Any]
    """nccl.transport's table: communicator → nranks, hosts, transports, GPUDirect RDMA."""
    files: list[str]
    unread: dict[int, str]
    """Rank → why its lines were not read (NCCL_DEBUG_FILE unset, the file missing)."""
    findings: list[Finding]
    """nccl.transport's findings on these lines (the same check and text as diagnose's), or its skip with the reason."""


def ranks_nccl_lines(results: list[dict[str, Any]]) -> tuple[NcclLogFacts | None, list[str], dict[int, str]]:
    """Every rank's NCCL lines through one NcclLogReader (each line keeps its file and line number): the reader's
    facts (None where no rank sent a line), the files read, and why a rank's could not be."""
    reader, files, unread, fed = NcclLogReader(), [], {}, 0
    for result in results:
        lines = ((result.get("workloads") or {}).get("collectives") or {}).get("nccl_lines")
        if not isinstance(lines, dict):
            continue
        source = str(lines.get("file") or f"rank {result.get('rank')}")
        if lines.get("error"):
            unread[int(result.get("rank") or 0)] = str(lines["error"])
            continue
        files.append(source)
        for number, text in lines.get("lines") or []:
            reader.feed(Line(source=source, number=int(number), text=str(text)))
            fed += 1
    return (reader.facts() if fed else None), files, unread


def ranks_transport(facts: Facts | None, results: list[dict[str, Any]], host: str) -> RanksTransport:
    """nccl.transport on the ranks' NCCL lines, with this node's facts (its active IB/RoCE ports make sockets between
    nodes a failure); a skip with the reason where no rank's lines show a channel."""
    nccl, files, unread = ranks_nccl_lines(results)
    machine = facts if facts is not None else Facts()
    machine = dataclasses.replace(machine, logs=LogFacts(nccl=nccl),
                                  host=dataclasses.replace(machine.host, hostname=machine.host.hostname or host))
    context = CheckContext(facts=machine, check_id=TRANSPORT)
    findings = nccl_transport(context) if nccl is not None else []
    table = next((finding.observed["communicators"] for finding in findings
                  if isinstance(finding.observed, dict) and "communicators" in finding.observed), {})
    between = next((finding.observed["inter_node"] for finding in findings
                    if isinstance(finding.observed, dict) and "inter_node" in finding.observed), {})
    transports = list(dict.fromkeys(kind for entry in table.values() for kind in entry["transports"]
                                    if kind.startswith("NET"))) or sorted(between)
    if not findings:
        why = "; ".join(f"rank {rank}: {error}" for rank, error in sorted(unread.items())[:4])
        findings = [context.skip(said("validate.transport.unread.why" if why else "validate.transport.unread",
                                      why=why, files=len(files)))]
    return RanksTransport(transports=transports, communicators=table, files=files, unread=unread, findings=findings)


def per_node(results: list[dict[str, Any]]) -> int:
    """The most ranks any one host ran."""
    return max(Counter(result.get("host") for result in results).values(), default=0)


def judge_per_nic(facts: Facts | None, rows: list[dict[str, Any]], collective: str, *, nodes: int,
                  ranks_per_node: int, world_size: int, transports: list[str], gpu_name: str | None
                  ) -> tuple[Status, Said, expect.Expected | None]:
    """(status, text, the floor) of one collective's busbw across nodes: its best row at a size the NICs bound
    ([internode] min_bytes_per_rank × ranks) against the floor of this node's RDMA NICs; skipped over sockets (the
    transport finding judges that), without NICs in the facts, or without a size large enough."""
    floor = expect.nccl_busbw(facts, [], gpu_name, nodes=nodes, gpus_per_node=ranks_per_node, collective=collective)
    via = " + ".join(transports) or said("validate.transport.unknown")
    if transports == [SOCKET]:
        return Status.SKIP, said("validate.transport.busbw.socket", collective=collective), None
    if not isinstance(floor, expect.InternodeExpected):
        return Status.SKIP, said("validate.transport.busbw.no_nics", collective=collective, nodes=nodes, via=via), None
    need = load_table("nics")["internode"]["min_bytes_per_rank"] * world_size
    judged = [row for row in rows if row["size_bytes"] >= need]
    if not judged:
        return Status.SKIP, said("validate.transport.busbw.small", collective=collective, ranks=world_size,
                                 max_mib=max(row["size_bytes"] for row in rows) / 2**20,
                                 need_mib=need / 2**20), floor
    best = max(judged, key=lambda row: row["busbw_gb_per_s"])
    nics = floor.nics
    values = dict(collective=collective, value=best["busbw_gb_per_s"], mib=best["size_bytes"] / 2**20, via=via,
                  floor=floor.value, nodes=nodes, per_node=ranks_per_node, nics=floor.nics_used, listed=nics.count,
                  model=nics.model or "RDMA", rate=max(nics.rates_gbit_per_s), ceiling=floor.ceiling_gb_per_s,
                  fraction=floor.fraction,
                  rate_note=said("nccl_tests.note.rate_known" if nics.rate_known else "nccl_tests.note.rate_top"))
    if best["busbw_gb_per_s"] >= floor.value:
        return Status.PASS, said("validate.transport.busbw.pass", **values), floor
    return (Status.FAIL if nics.rate_known else Status.WARN), said("validate.transport.busbw.low", **values), floor
