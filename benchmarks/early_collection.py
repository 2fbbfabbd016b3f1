"""How much a live `check --fast` gains by collecting while gpuready imports (gpuready/__main__.py).

On a machine without a GPU the tools fail at once, so this puts a stand-in `nvidia-smi` first on PATH that answers
after DELAY_S (0.3 s: what nvidia-smi -q -x took on the recorded H200, tests/fixtures/h200-collect/manifest.json) and
times `check --fast --json` started the old way (the CLI imported first, then the collection) and the new way.
Run: python benchmarks/early_collection.py [RUNS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DELAY_S = 0.3
OLD = [sys.executable, "-c", "from gpuready.cli.main import entry; entry()", "check", "--fast", "--json"]
NEW = [sys.executable, "-m", "gpuready", "check", "--fast", "--json"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    with tempfile.TemporaryDirectory() as folder:
        fake = Path(folder) / "nvidia-smi"
        fake.write_text(f"#!/bin/sh\nsleep {DELAY_S}\necho 'No devices were found'\nexit 6\n")
        fake.chmod(0o755)
        env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
        timed(NEW, env)  # compiled bytecode and the page cache, once
        for name, argv in (("CLI first, then collect", OLD), ("collect while importing", NEW)):
            times = sorted(timed(argv, env) for _ in range(runs))
            print(f"{name:26s} median {statistics.median(times):.3f} s  min {times[0]:.3f} s  max {times[-1]:.3f} s"
                  f"  ({runs} runs, nvidia-smi answering after {DELAY_S} s)")


if __name__ == "__main__":
    main()
