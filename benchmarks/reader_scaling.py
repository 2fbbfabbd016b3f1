"""How every reader of untrusted text scales on pathological input: for each reader and each input shape (long runs of
one character, blank lines, repeated markers, one endless line, many driver loads), the time at n and at 8n bytes,
their ratio (linear: about 8; quadratic: about 64) and the throughput in MB/s at 8n.

    python benchmarks/reader_scaling.py [--size-kb 64]

The readers and shapes are the ones tests/test_linear_readers.py holds to a ratio well below quadratic.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from linear_inputs import READERS, SHAPES  # noqa: E402


def seconds(reader, text: str) -> float:
    start = time.perf_counter()
    try:
        reader(text)
    except Exception:  # a reader may refuse a shape (a ValueError): how fast it does so is what counts
        pass
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-kb", type=int, default=64)
    args = parser.parse_args(argv)
    n = args.size_kb * 1024
    worst = 0.0
    slowest = float("inf")
    for reader_name, reader in READERS.items():
        for shape_name, shape in SHAPES.items():
            small, big = shape(n), shape(8 * n)
            t_small, t_big = seconds(reader, small), seconds(reader, big)
            ratio = t_big / max(t_small, 1e-4)
            rate = len(big) / 1e6 / max(t_big, 1e-6)
            worst, slowest = max(worst, ratio), min(slowest, rate)
            print(f"{reader_name:22} {shape_name:18} {t_small * 1000:8.1f} ms {t_big * 1000:9.1f} ms  ratio {ratio:5.1f}  "
                  f"{rate:8.1f} MB/s")
    print(f"worst ratio {worst:.1f} (8 is linear), slowest {slowest:.1f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
