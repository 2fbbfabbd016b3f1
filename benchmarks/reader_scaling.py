"""How every reader of untrusted text scales on pathological input: for each reader and each input shape (long runs of
one character, blank lines, repeated markers, one endless line, many driver loads), the time at n and at 8n bytes,
their ratio (linear: about 8; quadratic: about 64) and the throughput in MB/s at 8n; then the readers below
TARGET_MB_PER_S on some shape (issue 20: every reader of untrusted text reads at least that fast), each with its
slowest shape.

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

TARGET_MB_PER_S = 50.0


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
    slowest_by_reader: dict[str, tuple[float, str]] = {}  # reader → (MB/s, shape) of its slowest shape
    for reader_name, reader in READERS.items():
        for shape_name, shape in SHAPES.items():
            small, big = shape(n), shape(8 * n)
            t_small, t_big = seconds(reader, small), seconds(reader, big)
            ratio = t_big / max(t_small, 1e-4)
            rate = len(big) / 1e6 / max(t_big, 1e-6)
            worst = max(worst, ratio)
            slowest_by_reader[reader_name] = min(slowest_by_reader.get(reader_name, (rate, shape_name)),
                                                 (rate, shape_name))
            print(f"{reader_name:22} {shape_name:18} {t_small * 1000:8.1f} ms {t_big * 1000:9.1f} ms  ratio {ratio:5.1f}  "
                  f"{rate:8.1f} MB/s")
    slowest = min(rate for rate, _shape in slowest_by_reader.values())
    print(f"worst ratio {worst:.1f} (8 is linear), slowest {slowest:.1f} MB/s")
    below = [f"{name} ({rate:.1f} MB/s on {shape})" for name, (rate, shape) in slowest_by_reader.items()
             if rate < TARGET_MB_PER_S]
    print(f"below {TARGET_MB_PER_S:.0f} MB/s at {8 * args.size_kb} KiB: {', '.join(below) if below else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
