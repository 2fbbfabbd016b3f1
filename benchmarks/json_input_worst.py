"""Seconds `read_json_input` (report, plan/bench --validate-report, plan --hf-config) takes on hostile inputs.

Issue 32: the nesting count stripped strings with `"(?:[^"\\]|\\.)*"` before counting brackets; an unterminated string
of `\\"` repeats made it retry from every quote (64 KB 16 s, 128 KB over a minute). `options.json_depth` now reads
the text once. Each input is written to a file and read through `read_json_input` with the report's 64 MiB cap, so
the figure includes the read, the depth count and the JSON parser (which refuses the unterminated string):
- unterminated: `["` then `\\"` repeated (the issue's input);
- strings: `[` then `"",` repeated (one string per 3 bytes);
- brackets: `[` then `[],` repeated (one bracket pair per 3 bytes: the most work for the depth count);
- deep: `[` repeated (refused at the 65th level).
With --old, the removed pattern is timed on the unterminated input of 8 and 16 KB for comparison (quadratic).
Run: python benchmarks/json_input_worst.py [--old]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpuready.options import MAX_REPORT_BYTES, InputFileError, read_json_input  # noqa: E402

SIZES = {"64 KB": 64 << 10, "1 MiB": 1 << 20, "64 MiB": MAX_REPORT_BYTES - 8}
SHAPES = {
    "unterminated": lambda n: '["' + '\\"' * ((n - 2) // 2),
    "strings": lambda n: "[" + '"",' * ((n - 4) // 3) + '""]',
    "brackets": lambda n: "[" + "[]," * ((n - 4) // 3) + "[]]",
    "deep": lambda n: "[" * n,
}
_OLD_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def timed(path: Path) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        read_json_input(path, "report", max_bytes=MAX_REPORT_BYTES)
        outcome = "parsed"
    except InputFileError as error:
        outcome = "refused: " + str(error)[:70]
    return time.perf_counter() - started, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", action="store_true", help="also time the removed pattern on 8 and 16 KB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "hostile.json"
        for label, size in SIZES.items():
            for shape, make in SHAPES.items():
                path.write_text(make(size), encoding="utf-8")
                seconds, outcome = timed(path)
                print(f"{label:>7} {shape:<13} {seconds:8.3f} s  {outcome}", flush=True)
    if args.old:
        for kib in (8, 16):
            text = SHAPES["unterminated"](kib << 10)
            started = time.perf_counter()
            _OLD_STRING.sub('""', text)
            print(f"old pattern, unterminated {kib} KB: {time.perf_counter() - started:.3f} s", flush=True)


if __name__ == "__main__":
    main()
