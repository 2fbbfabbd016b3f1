"""What reading the RDMA port error counters costs each monitor interval (target: well under 1 % of a 1 s interval).

Builds /sys/class/infiniband trees in the kernel's layout (8 HCAs × 1 port: an HGX H100/H200 node's rails; 18 × 2: a
large dual-port box) in a temporary folder and times `read_counters` and a window's `step` (read + compare), median
and 99th percentile over N calls; with a real /sys/class/infiniband it times that too. A tmpfs or disk tree is not
sysfs (sysfs reads call the driver, which for mlx5 asks the firmware for some counters), so the real figure is the
one to quote where a machine with HCAs is at hand.
Run: python benchmarks/ib_counters_read.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpuready.facts.ib_counters_live import IB_ROOT, CounterWindow, read_counters  # noqa: E402
from gpuready.facts.network_files import IB_ERROR_COUNTERS  # noqa: E402


def build(root: Path, devices: int, ports: int) -> Path:
    for device in range(devices):
        for port in range(1, ports + 1):
            counters = root / f"mlx5_{device}" / "ports" / str(port) / "counters"
            counters.mkdir(parents=True)
            for name in IB_ERROR_COUNTERS + ("port_xmit_data", "port_rcv_data"):
                (counters / name).write_text("0\n")
    return root


def timed(call, calls: int) -> tuple[float, float]:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    calls = parser.parse_args().calls
    trees = []
    with tempfile.TemporaryDirectory() as folder:
        for devices, ports in ((8, 1), (18, 2)):
            trees.append((f"built {devices}x{ports} ports", build(Path(folder) / f"t{devices}x{ports}", devices, ports)))
        if IB_ROOT.is_dir():
            trees.append((f"this machine's {IB_ROOT}", IB_ROOT))
        print(f"{'tree':<34} {'ports':>5} {'read median':>12} {'read p99':>10} {'step median':>12} {'share of 1 s':>12}")
        for label, root in trees:
            window = CounterWindow.start(root)
            read_median, read_p99 = timed(lambda: read_counters(root), calls)
            step_median, _ = timed(window.step, calls)
            print(f"{label:<34} {len(window.last):>5} {read_median * 1e6:>9.0f} µs {read_p99 * 1e6:>7.0f} µs "
                  f"{step_median * 1e6:>9.0f} µs {step_median / 1.0:>11.4%}")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {calls} calls each")


if __name__ == "__main__":
    main()
