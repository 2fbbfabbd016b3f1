"""`validate --between-nodes`: pair tests between nodes, run by every rank of the world.

One rank per node (its local rank 0) takes part. Rank 0 plans each round with estimate/pair_tests.py (the ring's two
rounds, then retests) and broadcasts it; every rank creates each pair's 2-rank group (`dist.new_group` is collective);
each pair times a large send/recv each way (nccl-tests' send/recv: bytes / time, bus factor 1) and a small-message
ping-pong. Pairs of one round run at once, except pairs that share a host (simulated nodes on one machine share its
CPUs and loopback), which run one after another, in the plan's order (a confirm round's references right before and
after the pair they frame; a node's pairs share its host, so they never run at once). A pair's own group has a
bounded timeout: a pair that fails or hangs is a result with its error, never a hang of the run.
"""

from __future__ import annotations

import socket
import time
from datetime import timedelta
from typing import Any

from gpuready.estimate.pair_tests import PairResult, plan
from gpuready.i18n import said
from gpuready.node import node_name
from gpuready.workloads.context import RankContext

LATENCY_ITERATIONS = 20
"""Round trips of the small-message ping-pong (after 3 warm-up trips); one-way latency = round trip / 2."""
LATENCY_BYTES = 4
SAMPLES = 3
"""Timed samples per direction; the pair's figure is their median (one sample can fall on another process's burst)."""


def message_bytes(ctx: RankContext) -> int:
    """The large message: 256 MiB on GPUs (64 MiB with --quick), 32 MiB on CPUs (8 MiB), at most --max-bytes."""
    size = (64 if ctx.options.quick else 256) * 2**20 if ctx.is_cuda else (8 if ctx.options.quick else 32) * 2**20
    return min(size, ctx.options.max_bytes) if ctx.options.max_bytes else size


def pair_timeout_s(ctx: RankContext) -> float:
    """Each operation of a pair's group: a third of the operation timeout (at least 10 s), so a stuck pair ends well
    before the world's own collectives would."""
    return max(10.0, ctx.options.timeout_s / 3)


def run_between_nodes(ctx: RankContext) -> dict[str, Any]:
    import torch.distributed as dist

    everyone: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(everyone, {"rank": ctx.rank, "local_rank": ctx.local_rank, "node": node_name(),
                                      "host": socket.gethostname()})
    members = _one_rank_per_node(everyone)
    rank_of = {member["node"]: member["rank"] for member in members}
    host_of = {member["node"]: member["host"] for member in members}
    nodes = [member["node"] for member in members]
    rounds: list[dict[str, Any]] = []
    measured: list[PairResult] = []
    while True:
        planned: list[Any] = [None]
        if ctx.rank == 0:
            planned[0] = plan(nodes, len(rounds), measured)
        dist.broadcast_object_list(planned, src=0)
        kind, pairs = planned[0]
        if not pairs:
            break
        done = _run_round(ctx, len(rounds) + 1, kind, pairs, rank_of, host_of)
        rounds.append({"round": len(rounds) + 1, "kind": kind, "pairs": done})
        measured += [PairResult(nodes=tuple(pair["nodes"]), gb_per_s=pair["gb_per_s"], kind=kind,
                                round_id=str(len(rounds))) for pair in done]
    return {"nodes": [{"node": m["node"], "host": m["host"], "rank": m["rank"]} for m in members],
            "rounds": rounds, "method": _method(ctx)}


def _one_rank_per_node(everyone: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Local rank 0 of each node, by rank; a node name seen twice (nodes not told apart) gets its rank added."""
    members = [dict(entry) for entry in everyone if entry["local_rank"] == 0]
    names = [member["node"] for member in members]
    for member in members:
        if names.count(member["node"]) > 1:
            member["node"] = f"{member['node']}#rank{member['rank']}"
    return members


def _waves(pairs: list[tuple[str, str]], host_of: dict[str, str]) -> list[list[tuple[str, str]]]:
    """The round's pairs in waves that run at once: no two pairs of a wave on one host (they would share its CPUs and
    loopback, and each measure the other)."""
    waves: list[tuple[set[str], list[tuple[str, str]]]] = []
    for pair in pairs:
        hosts = {host_of[pair[0]], host_of[pair[1]]}
        wave = next((wave for wave in waves if not wave[0] & hosts), None)
        if wave is None:
            wave = (set(), [])
            waves.append(wave)
        wave[0].update(hosts)
        wave[1].append(pair)
    return [wave[1] for wave in waves]


def _run_round(ctx: RankContext, number: int, kind: str, pairs: list[tuple[str, str]], rank_of: dict[str, int],
               host_of: dict[str, str]) -> list[dict[str, Any]]:
    import torch.distributed as dist

    timeout = timedelta(seconds=pair_timeout_s(ctx))
    groups = {pair: dist.new_group([rank_of[pair[0]], rank_of[pair[1]]], timeout=timeout) for pair in pairs}
    mine: dict[str, Any] | None = None
    for wave in _waves(pairs, host_of):
        ctx.step("between_nodes", said("op.between_nodes", round=number, kind=kind,
                                       pairs=", ".join(f"{a}-{b}" for a, b in wave)),
                 timeout_s=8 * pair_timeout_s(ctx))
        for pair in wave:
            if ctx.rank in (rank_of[pair[0]], rank_of[pair[1]]):
                result = _pair(ctx, groups[pair], rank_of[pair[0]], rank_of[pair[1]])
                if ctx.rank == rank_of[pair[0]]:
                    mine = {"nodes": list(pair), **result}
        dist.barrier()
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, mine)
    by_pair = {tuple(entry["nodes"]): entry for entry in gathered if entry}
    return [by_pair.get(pair, {"nodes": list(pair), "gb_per_s": None, "latency_us": None, "transport": None,
                               "error": "no result"}) for pair in pairs]


def _pair(ctx: RankContext, group: Any, first: int, second: int) -> dict[str, Any]:
    """This rank's side of one pair's tests; an error (a timeout included) is the pair's result."""
    transport = "TCP (gloo)" if ctx.backend == "gloo" else None
    try:
        per_direction = [_bandwidth(ctx, group, sender, receiver) for sender, receiver in
                         ((first, second), (second, first))]
        latency_us = _latency_us(ctx, group, first, second)
    except Exception as error:  # a failed or stuck pair: its result, the run goes on
        return {"gb_per_s": None, "latency_us": None, "transport": transport,
                "error": f"{type(error).__name__}: {str(error)[:300]}"}
    return {"gb_per_s": round(min(per_direction), 4), "per_direction_gb_per_s": [round(v, 4) for v in per_direction],
            "latency_us": round(latency_us, 2), "transport": transport, "error": None}


def _bandwidth(ctx: RankContext, group: Any, sender: int, receiver: int) -> float:
    """GB/s of one direction: the median of SAMPLES samples, each `iterations` messages back to back (after one
    warm-up message) timed up to the last one received (the slower side's clock); the data checked after the timing.
    A sample lasts about 0.1 s on the CPU's loopback: longer than a CFS period (100 ms), so a node held to a CPU quota
    cannot hide its throttling inside one sample."""
    import torch
    import torch.distributed as dist

    size = message_bytes(ctx)
    iterations = _iterations(ctx)
    buffer = torch.full((size // 4,), float(sender + 1), dtype=torch.float32, device=ctx.device)
    if ctx.rank == receiver:
        buffer.zero_()

    def move() -> None:
        if ctx.rank == sender:
            dist.send(buffer, dst=receiver, group=group)
        else:
            dist.recv(buffer, src=sender, group=group)
    move()
    samples = []
    for _ in range(SAMPLES):
        _sync(ctx)
        dist.barrier(group=group)
        started = time.perf_counter()
        for _ in range(iterations):
            move()
        _sync(ctx)
        elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64, device=ctx.device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
        samples.append(size * iterations / float(elapsed.item()) / 1e9)
    if ctx.rank == receiver and int((buffer != float(sender + 1)).sum().item()):
        raise RuntimeError(f"the data received from rank {sender} is wrong")
    return sorted(samples)[len(samples) // 2]


def _iterations(ctx: RankContext) -> int:
    return 3 if ctx.options.quick else 5


def _latency_us(ctx: RankContext, group: Any, first: int, second: int) -> float:
    import torch
    import torch.distributed as dist

    token = torch.zeros(LATENCY_BYTES // 4, dtype=torch.float32, device=ctx.device)
    peer = second if ctx.rank == first else first

    def trip() -> None:
        if ctx.rank == first:
            dist.send(token, dst=peer, group=group)
            dist.recv(token, src=peer, group=group)
        else:
            dist.recv(token, src=peer, group=group)
            dist.send(token, dst=peer, group=group)
    for _ in range(3):
        trip()
    _sync(ctx)
    started = time.perf_counter()
    for _ in range(LATENCY_ITERATIONS):
        trip()
    _sync(ctx)
    return (time.perf_counter() - started) / LATENCY_ITERATIONS / 2 * 1e6


def _sync(ctx: RankContext) -> None:
    if ctx.is_cuda:
        import torch
        torch.cuda.synchronize(ctx.device)


def _method(ctx: RankContext) -> dict[str, Any]:
    return {"backend": ctx.backend, "message_bytes": message_bytes(ctx), "iterations": _iterations(ctx),
            "samples": SAMPLES, "warmup": 1,
            "figure": "min of the two directions, each the median of its samples: bytes x iterations / slower side's "
                      "time (GB = 1e9 B)",
            "latency": f"ping-pong of {LATENCY_BYTES} B, {LATENCY_ITERATIONS} round trips after 3, half a round trip",
            "pair_timeout_s": pair_timeout_s(ctx),
            "same_host_pairs": "one after another (they share the host's CPUs and loopback)"}
