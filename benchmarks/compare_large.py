"""How long `compare` takes to pair the findings of two large reports (issue 32): 2,000, 20,000 and 100,000 findings
a side, all of one check on one subject (the worst case for pairing: every finding of the group must find its own by
what its message values name), plus as many on their own subjects. Prints seconds per size; run
`python benchmarks/compare_large.py [N ...]`.

A pairing that rescans the other side for each finding grows with the square of the count (2,000 a side took 21 s,
100,000 never finished); one pass with a dict keyed by (check id, subject) and by the message values' words grows
with the count.
"""

from __future__ import annotations

import sys
import time

from gpuready.report.compare import compare_documents

SIZES = (2_000, 20_000, 100_000)


def report(n: int, status: str) -> dict:
    """A report of `n` findings: half of one check on one host, each naming its own item (message values), half on
    GPUs of their own (one per bus id)."""
    grouped = [{"check_id": "compute.low", "status": status, "subject": {"host": "node1"},
                "message": f"item {i}", "message_values": {"item": f"dtype{i}", "value": i}}
               for i in range(n // 2)]
    alone = [{"check_id": "pcie.link_degraded", "status": status,
              "subject": {"host": "node1", "gpu": {"index": i, "bus_id": f"0000:{i // 256 % 256:02x}:{i % 256:02x}.{i // 65536}"}}}
             for i in range(n - n // 2)]
    return {"host": "node1", "verdict": "ready", "findings": grouped + alone, "measurements": [],
            "facts": {"sources": {}}}


def main(sizes: tuple[int, ...]) -> None:
    for n in sizes:
        base, new = report(n, "pass"), report(n, "warn")
        new["findings"].reverse()  # another run lists them in another order
        started = time.perf_counter()
        document = compare_documents(base, new)
        seconds = time.perf_counter() - started
        print(f"{n:>7,} findings a side: {seconds:7.2f} s  (paired {document['findings_unchanged']:,} unchanged, "
              f"{len(document['newly_warning']):,} newly warning)")


if __name__ == "__main__":
    main(tuple(int(arg) for arg in sys.argv[1:]) or SIZES)
