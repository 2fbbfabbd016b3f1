"""nccl-tests' size conventions and bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md, src/*.cu).

One formula for what we measure (workloads/collectives.py) and what we read (facts/nccl_tests.py), so it lives
beside both: facts/ never imports workloads/.

algbw = S / t with GB = 1e9 bytes. S is the per-rank buffer for all_reduce, broadcast and
send/recv, the total output for all_gather, the total input for reduce_scatter, and the
per-rank send buffer for all_to_all.
"""

from __future__ import annotations


def busbw_factor(collective: str, ranks: int) -> float:
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    if collective in ("broadcast", "reduce", "send_recv"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def algbw_gb_per_s(size_bytes: int, seconds: float) -> float:
    return size_bytes / seconds / 1e9


def busbw_gb_per_s(collective: str, ranks: int, size_bytes: int, seconds: float) -> float:
    return algbw_gb_per_s(size_bytes, seconds) * busbw_factor(collective, ranks)


def element_count(collective: str, size_bytes: int, ranks: int, element_bytes: int) -> int:
    """Elements per rank buffer as nccl-tests sizes them (per-rank chunks rounded down to 16 B)."""
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        chunk_bytes = (size_bytes // ranks) // 16 * 16 if size_bytes >= 16 * ranks else size_bytes // ranks
        return max(1, chunk_bytes // element_bytes) * ranks
    return max(1, size_bytes // element_bytes)


def size_sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes
