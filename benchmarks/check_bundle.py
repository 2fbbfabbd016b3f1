"""Time `check --bundle` work after start-up on an 8-GPU bundle (target: < 0.5 s).

Prints the median and spread of read + parse + checks + JSON over repeated runs, and the
start-up cost (interpreter + imports) measured separately.
Run: python benchmarks/check_bundle.py
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.evidence.build import build_facts
from gpuready.pipeline import check_report

PUBLIC = Path(__file__).parents[1] / "tests" / "fixtures" / "public"
FILES = {
    "nvidia-smi-q.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt",
    "nvidia-smi.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi.txt",
    "nvidia-smi-topo.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-topo.txt",
    "dmesg.txt": PUBLIC / "xid" / "xid13-43-dmesg.txt",  # 636 Xid lines, 122 KB
}


def one_run(folder: Path) -> float:
    started = time.perf_counter()
    report = check_report(build_facts(read_bundle(folder)), CheckOptions())
    json.dumps(report.to_dict())
    return time.perf_counter() - started


def main() -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, source in FILES.items():
            (folder / name).write_text(source.read_text())
        one_run(folder)  # first run loads the knowledge tables
        timings = [one_run(folder) for _ in range(20)]
        startup = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import gpuready.cli.main, gpuready.pipeline, rich"], check=True)
            startup.append(time.perf_counter() - started)
        wall = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpuready", "check", "--bundle", str(folder), "--json"],
                           capture_output=True)
            wall.append(time.perf_counter() - started)
    print(f"8-GPU bundle ({', '.join(FILES)}), 20 runs after a warm-up:")
    print(f"  work after start-up: median {statistics.median(timings) * 1000:.1f} ms, "
          f"min {min(timings) * 1000:.1f}, max {max(timings) * 1000:.1f} ms (target < 500 ms)")
    print(f"  start-up (interpreter + imports): median {statistics.median(startup) * 1000:.0f} ms")
    print(f"  whole command wall: median {statistics.median(wall) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
